// ask.p4: asynchronous key-value aggregation (ASK; op AGG_KV), for ReduceByKey and GROUP BY.
//
// Packets. A mapper's packet carries up to ASK_TUPLES (key, value) tuples in its K slots:
// slot 2j is the key of tuple j, slot 2j+1 its value (int32). Key 0 marks an empty slot; a
// key is a 32-bit fingerprint of the application's key, computed by the host. agg_idx names
// one row, epoch the array generation (its parity picks the copy), psn the packet's number
// in the mapper's flow.
//
// Memory (rows are the unit of the "ask" pool of the controller's memory manager): a 2-D
// array of ASK_ROWS rows x ASK_TUPLES columns, two copies of each row (copy c of row r at
// register index 2r + c), one register array per column for keys and one for values. Slot
// j of a packet works on column j of its row only. Per row copy, ask_row_epoch holds the
// epoch that last wrote it: a row written in an older epoch counts as empty (lazy clear,
// as aggregator.p4 does). Per mapper flow, ASK_ROWS-indexed seen state: ask_seen_psn and
// ask_seen_mask (bit 16: valid, bits 0..15: the slots absorbed) at seen_base + psn % W.
//
// Key-space partition: a mapper flow may only touch the rows of its partition
// [part_base, part_base + part_size), chosen by the controller from Hash(job, flow); the
// flow entry binds (job, worker, ingress port), so no host can write another job's rows.
//
// Per new packet (its psn newer than the one its seen entry holds), per slot j with key k:
// the cell is empty (key 0, or row from an older epoch) -> claim it with k; holds k -> add
// (unless the int32 sum would overflow); holds another key -> the tuple is not absorbed.
// Absorbed slots are zeroed in the packet and recorded in the seen mask. A packet with
// nothing left goes back to the mapper as an ACK (values removed); otherwise it travels
// on to the reducer (its IPv4 destination) with the tuples not absorbed.
// A packet whose psn equals its seen entry's (a retransmission or duplicate) absorbs
// nothing: it is answered exactly as the original was (the recorded slots zeroed), so no
// tuple is ever counted twice. An older psn, or an epoch older than the row's, is stale.
// Drain (flag DRAIN, from the job's reducer only): the row's copy of the packet's epoch is
// read into the packet (keys, values; zeros if the row was not written in that epoch) and
// sent back to the reducer as a RESULT. Draining does not clear: it can be repeated after
// a loss, and the copy is reused (lazily cleared) two epochs later.
// Programmed by controller/systems/ask.py; docs/protocol.md, "Key-value aggregation (ASK)".
#ifndef _ASK_P4_
#define _ASK_P4_

// Switch-only constants (the shared ones, ASK_ROWS, ASK_TUPLES, FLAG_DRAIN, are in
// configuration.p4).
const bit<2> ASK_ROLE_MAPPER = 1;
const bit<2> ASK_ROLE_REDUCER = 2;
const bit<32> ASK_SEEN_VALID = 0x10000;  // seen entry in use (bits 0..15: absorbed slots)
const bit<32> SIGN_BIT = 0x80000000;
const bit<16> ASK_VALUES_BYTES = 128;    // INC_SLOTS * INC_VALUE_BYTES, removed from an ACK

// Slot j of a new packet against column j of its row copy.
#define ASK_ABSORB(J, KF, VF, KR, VR) \
    KR.read(cell_key, addr); \
    VR.read(cell_val, addr); \
    if (fresh) { \
        cell_key = 0; \
        cell_val = 0; \
    } \
    if (hdr.inc_values.KF != 0) { \
        kv_sum = cell_val + hdr.inc_values.VF; \
        if ((cell_key == 0 || cell_key == hdr.inc_values.KF) \
                && ((cell_val ^ kv_sum) & (hdr.inc_values.VF ^ kv_sum) & SIGN_BIT) == 0) { \
            cell_key = hdr.inc_values.KF; \
            cell_val = kv_sum; \
            absorbed = absorbed | (32w1 << J); \
            hdr.inc_values.KF = 0; \
            hdr.inc_values.VF = 0; \
        } else { \
            left = left + 1; \
        } \
    } \
    KR.write(addr, cell_key); \
    VR.write(addr, cell_val);

// Slot j of a replayed packet: zeroed if the original's was absorbed.
#define ASK_REPLAYED(J, KF, VF) \
    if ((seen_mask & (32w1 << J)) != 0) { \
        hdr.inc_values.KF = 0; \
        hdr.inc_values.VF = 0; \
    } else if (hdr.inc_values.KF != 0) { \
        left = left + 1; \
    }

// Column j of a drained row copy into slots (2j, 2j+1).
#define ASK_DRAIN(KF, VF, KR, VR) \
    KR.read(hdr.inc_values.KF, addr); \
    VR.read(hdr.inc_values.VF, addr); \
    if (fresh) { \
        hdr.inc_values.KF = 0; \
        hdr.inc_values.VF = 0; \
    }

control Ask(inout headers_t hdr,
            inout inc_metadata_t meta,
            inout standard_metadata_t standard_metadata) {
    register<bit<32>>(ASK_COPIES) ask_key_00;
    register<bit<32>>(ASK_COPIES) ask_val_00;
    register<bit<32>>(ASK_COPIES) ask_key_01;
    register<bit<32>>(ASK_COPIES) ask_val_01;
    register<bit<32>>(ASK_COPIES) ask_key_02;
    register<bit<32>>(ASK_COPIES) ask_val_02;
    register<bit<32>>(ASK_COPIES) ask_key_03;
    register<bit<32>>(ASK_COPIES) ask_val_03;
    register<bit<32>>(ASK_COPIES) ask_key_04;
    register<bit<32>>(ASK_COPIES) ask_val_04;
    register<bit<32>>(ASK_COPIES) ask_key_05;
    register<bit<32>>(ASK_COPIES) ask_val_05;
    register<bit<32>>(ASK_COPIES) ask_key_06;
    register<bit<32>>(ASK_COPIES) ask_val_06;
    register<bit<32>>(ASK_COPIES) ask_key_07;
    register<bit<32>>(ASK_COPIES) ask_val_07;
    register<bit<32>>(ASK_COPIES) ask_key_08;
    register<bit<32>>(ASK_COPIES) ask_val_08;
    register<bit<32>>(ASK_COPIES) ask_key_09;
    register<bit<32>>(ASK_COPIES) ask_val_09;
    register<bit<32>>(ASK_COPIES) ask_key_10;
    register<bit<32>>(ASK_COPIES) ask_val_10;
    register<bit<32>>(ASK_COPIES) ask_key_11;
    register<bit<32>>(ASK_COPIES) ask_val_11;
    register<bit<32>>(ASK_COPIES) ask_key_12;
    register<bit<32>>(ASK_COPIES) ask_val_12;
    register<bit<32>>(ASK_COPIES) ask_key_13;
    register<bit<32>>(ASK_COPIES) ask_val_13;
    register<bit<32>>(ASK_COPIES) ask_key_14;
    register<bit<32>>(ASK_COPIES) ask_val_14;
    register<bit<32>>(ASK_COPIES) ask_key_15;
    register<bit<32>>(ASK_COPIES) ask_val_15;
    register<bit<32>>(ASK_COPIES) ask_row_epoch;  // epoch that last wrote the row copy
    register<bit<32>>(ASK_ROWS) ask_seen_psn;      // per flow and psn % W: the psn seen
    register<bit<32>>(ASK_ROWS) ask_seen_mask;     // ASK_SEEN_VALID | slots it absorbed

    // Per job: its rows [offset, offset + size) (what its reducer may drain).
    bit<32> job_offset;
    bit<32> job_size;
    // Per flow: role, partition and seen window.
    bit<2>  role;
    bit<32> part_base;
    bit<32> part_size;
    bit<32> seen_base;
    bit<32> seen_mask_w;   // W - 1 (W a power of two)

    bit<32> addr;
    bit<32> seen_idx;
    bit<32> seen_psn;
    bit<32> seen_mask;
    bit<32> row_epoch;
    bool    fresh;
    bit<32> cell_key;
    bit<32> cell_val;
    bit<32> kv_sum;
    bit<32> absorbed;
    bit<8>  left;

    action ask_job(bit<32> offset, bit<32> size) {
        job_offset = offset;
        job_size = size;
    }

    table ask_jobs {
        key = { hdr.inc.job_id: exact; }
        actions = { ask_job; @defaultonly NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    // A mapper: its key-space partition and its seen entries [seen_base, seen_base + W).
    action ask_mapper(bit<32> p_base, bit<32> p_size, bit<32> s_base, bit<32> s_mask) {
        role = ASK_ROLE_MAPPER;
        part_base = p_base;
        part_size = p_size;
        seen_base = s_base;
        seen_mask_w = s_mask;
    }

    // The reducer: may drain the job's rows.
    action ask_reducer() {
        role = ASK_ROLE_REDUCER;
    }

    table ask_flows {
        key = {
            hdr.inc.job_id: exact;
            hdr.inc.worker_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { ask_mapper; ask_reducer; @defaultonly NoAction; }
        default_action = NoAction();
        size = WORKER_TABLE_SIZE;
    }

    Refuse() refuse;
    ReturnToSender() return_to_sender;

    // A reply (ACK to a mapper, drained row to the reducer) goes back to the sender's own
    // UDP port too (ReturnToSender turns the rest around).
    action swap_udp_ports() {
        bit<16> port = hdr.udp.dstPort;
        hdr.udp.dstPort = hdr.udp.srcPort;
        hdr.udp.srcPort = port;
    }

    // An ACK carries no tuples: the slots are removed from the packet.
    action strip_values() {
        hdr.inc_values.setInvalid();
        hdr.inc.slot_count = 0;
        hdr.ipv4.totalLen = hdr.ipv4.totalLen - ASK_VALUES_BYTES;
        hdr.udp.len = hdr.udp.len - ASK_VALUES_BYTES;
    }

    apply {
        role = 0;
        if (!hdr.inc_values.isValid()) {
            refuse.apply(meta, DROP_BAD_SLOT_COUNT);
        } else if (!ask_jobs.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_JOB);
        } else if (!ask_flows.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_WORKER);
        } else if ((hdr.inc.flags & FLAG_DRAIN) != 0) {
            // ---- drain: the reducer reads one row copy of one epoch ----
            if (role != ASK_ROLE_REDUCER) {
                refuse.apply(meta, DROP_UNKNOWN_WORKER);
            } else if (hdr.inc.agg_idx - job_offset >= job_size || hdr.inc.agg_idx >= ASK_ROWS) {
                refuse.apply(meta, DROP_OUT_OF_REGION);
            } else {
                addr = (hdr.inc.agg_idx << 1) | (bit<32>)hdr.inc.epoch[0:0];
                ask_row_epoch.read(row_epoch, addr);
                fresh = row_epoch != hdr.inc.epoch;
        ASK_DRAIN(v00, v01, ask_key_00, ask_val_00)
        ASK_DRAIN(v02, v03, ask_key_01, ask_val_01)
        ASK_DRAIN(v04, v05, ask_key_02, ask_val_02)
        ASK_DRAIN(v06, v07, ask_key_03, ask_val_03)
        ASK_DRAIN(v08, v09, ask_key_04, ask_val_04)
        ASK_DRAIN(v10, v11, ask_key_05, ask_val_05)
        ASK_DRAIN(v12, v13, ask_key_06, ask_val_06)
        ASK_DRAIN(v14, v15, ask_key_07, ask_val_07)
        ASK_DRAIN(v16, v17, ask_key_08, ask_val_08)
        ASK_DRAIN(v18, v19, ask_key_09, ask_val_09)
        ASK_DRAIN(v20, v21, ask_key_10, ask_val_10)
        ASK_DRAIN(v22, v23, ask_key_11, ask_val_11)
        ASK_DRAIN(v24, v25, ask_key_12, ask_val_12)
        ASK_DRAIN(v26, v27, ask_key_13, ask_val_13)
        ASK_DRAIN(v28, v29, ask_key_14, ask_val_14)
        ASK_DRAIN(v30, v31, ask_key_15, ask_val_15)
                return_to_sender.apply(hdr, standard_metadata, FLAG_RESULT);
                swap_udp_ports();
            }
        } else if (role != ASK_ROLE_MAPPER) {
            refuse.apply(meta, DROP_UNKNOWN_WORKER);
        } else if (hdr.inc.agg_idx - part_base >= part_size || hdr.inc.agg_idx >= ASK_ROWS) {
            refuse.apply(meta, DROP_OUT_OF_REGION);
        } else {
            // ---- a mapper's tuples ----
            seen_idx = seen_base + (hdr.inc.psn & seen_mask_w);
            if (seen_idx >= ASK_ROWS) {
                seen_idx = 0;
                refuse.apply(meta, DROP_OUT_OF_REGION);
            }
            ask_seen_psn.read(seen_psn, seen_idx);
            ask_seen_mask.read(seen_mask, seen_idx);
            addr = (hdr.inc.agg_idx << 1) | (bit<32>)hdr.inc.epoch[0:0];
            ask_row_epoch.read(row_epoch, addr);
            left = 0;
            if (meta.drop == 1) {
                // seen entry outside the pool: refused above
            } else if ((seen_mask & ASK_SEEN_VALID) != 0 && seen_psn == hdr.inc.psn) {
                // Seen before: answer as the first time, absorb nothing.
        ASK_REPLAYED(0, v00, v01)
        ASK_REPLAYED(1, v02, v03)
        ASK_REPLAYED(2, v04, v05)
        ASK_REPLAYED(3, v06, v07)
        ASK_REPLAYED(4, v08, v09)
        ASK_REPLAYED(5, v10, v11)
        ASK_REPLAYED(6, v12, v13)
        ASK_REPLAYED(7, v14, v15)
        ASK_REPLAYED(8, v16, v17)
        ASK_REPLAYED(9, v18, v19)
        ASK_REPLAYED(10, v20, v21)
        ASK_REPLAYED(11, v22, v23)
        ASK_REPLAYED(12, v24, v25)
        ASK_REPLAYED(13, v26, v27)
        ASK_REPLAYED(14, v28, v29)
        ASK_REPLAYED(15, v30, v31)
            } else if ((seen_mask & ASK_SEEN_VALID) != 0
                    && hdr.inc.psn - seen_psn >= PSN_HALF) {
                refuse.apply(meta, DROP_STALE);
            } else if (hdr.inc.epoch - row_epoch >= PSN_HALF) {
                refuse.apply(meta, DROP_STALE);  // the row already serves a newer epoch
            } else {
                fresh = row_epoch != hdr.inc.epoch;
                absorbed = 0;
        ASK_ABSORB(0, v00, v01, ask_key_00, ask_val_00)
        ASK_ABSORB(1, v02, v03, ask_key_01, ask_val_01)
        ASK_ABSORB(2, v04, v05, ask_key_02, ask_val_02)
        ASK_ABSORB(3, v06, v07, ask_key_03, ask_val_03)
        ASK_ABSORB(4, v08, v09, ask_key_04, ask_val_04)
        ASK_ABSORB(5, v10, v11, ask_key_05, ask_val_05)
        ASK_ABSORB(6, v12, v13, ask_key_06, ask_val_06)
        ASK_ABSORB(7, v14, v15, ask_key_07, ask_val_07)
        ASK_ABSORB(8, v16, v17, ask_key_08, ask_val_08)
        ASK_ABSORB(9, v18, v19, ask_key_09, ask_val_09)
        ASK_ABSORB(10, v20, v21, ask_key_10, ask_val_10)
        ASK_ABSORB(11, v22, v23, ask_key_11, ask_val_11)
        ASK_ABSORB(12, v24, v25, ask_key_12, ask_val_12)
        ASK_ABSORB(13, v26, v27, ask_key_13, ask_val_13)
        ASK_ABSORB(14, v28, v29, ask_key_14, ask_val_14)
        ASK_ABSORB(15, v30, v31, ask_key_15, ask_val_15)
                ask_row_epoch.write(addr, hdr.inc.epoch);
                ask_seen_psn.write(seen_idx, hdr.inc.psn);
                ask_seen_mask.write(seen_idx, ASK_SEEN_VALID | absorbed);
            }
            // Slots may have changed: the sender's UDP checksum no longer holds (0 = none).
            hdr.udp.checksum = 0;
            if (meta.drop == 0 && left == 0) {
                strip_values();
                return_to_sender.apply(hdr, standard_metadata, FLAG_ACK);
                swap_udp_ports();
            }
            // otherwise IncIngress forwards it to the reducer (no RESULT/ACK flag set)
        }
    }
}

#endif  // _ASK_P4_
