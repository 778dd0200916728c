// aggregator.p4: synchronous aggregation in a pool of aggregators, two copies each.
//
// Memory. Aggregator i has two copies (versions) v in {0, 1}; copy (i, v) lives at register
// index addr = 2*i + v, so a job's region is one contiguous index range. Per copy: K value
// registers (one register array per slot, as a pipeline allowing one access per array per
// packet needs), the contributor bitmap, the contributor count, and the (job, psn) of the
// use it holds. Programmed and read by controller/aggregator.py.
//
// Invariants (docs/protocol.md, "Aggregator state machine"), for a job with window W and
// region size S >= W, whose workers send psn p to (offset + p % S, (p / S) % 2):
//  I1. A worker sends p only when it holds the results of every psn <= p - W.
//  I2. Copy (i, v) serves psns p, p + 2S, p + 4S ... of one job, and keeps the newest.
//  I3. When the first packet of p + 2S reaches the copy, its sender holds the result of
//      p + S (I1, as p + S <= p + 2S - W), so every worker sent p + S and therefore held
//      the result of p + S - W >= p: nobody needs p any more, and the copy is overwritten
//      in place (lazy clear, no clearing pass). Meanwhile the other copy, (i, 1 - v),
//      keeps the previous round so that a lost result can be served again.
//  I4. A packet older than the use held by its copy is stale (a delayed duplicate) and is
//      dropped as DROP_STALE; a repeated contribution to an unfinished use is dropped as
//      DROP_DUPLICATE; any packet of a finished use gets the result back by unicast.
// A copy tagged with another job (or job 0, the reset state) counts as free: the first
// packet takes it over. The controller resets agg_job to 0 over a region it frees.
#ifndef _AGGREGATOR_P4_
#define _AGGREGATOR_P4_

// Add the packet's slot F to copy `addr` of register R (or start from the packet's value
// when keep_mask is 0) and leave the running sum in the packet.
#define ACCUMULATE(F, R) \
    R.read(slot_sum, addr); \
    slot_sum = (slot_sum & keep_mask) + hdr.inc_values.F; \
    R.write(addr, slot_sum); \
    hdr.inc_values.F = slot_sum;

// Copy slot F of a finished aggregation from register R into the packet.
#define READ_RESULT(F, R) \
    R.read(hdr.inc_values.F, addr);

control Aggregator(inout headers_t hdr,
                   inout inc_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    register<bit<32>>(AGG_COPIES) agg_value_00;
    register<bit<32>>(AGG_COPIES) agg_value_01;
    register<bit<32>>(AGG_COPIES) agg_value_02;
    register<bit<32>>(AGG_COPIES) agg_value_03;
    register<bit<32>>(AGG_COPIES) agg_value_04;
    register<bit<32>>(AGG_COPIES) agg_value_05;
    register<bit<32>>(AGG_COPIES) agg_value_06;
    register<bit<32>>(AGG_COPIES) agg_value_07;
    register<bit<32>>(AGG_COPIES) agg_value_08;
    register<bit<32>>(AGG_COPIES) agg_value_09;
    register<bit<32>>(AGG_COPIES) agg_value_10;
    register<bit<32>>(AGG_COPIES) agg_value_11;
    register<bit<32>>(AGG_COPIES) agg_value_12;
    register<bit<32>>(AGG_COPIES) agg_value_13;
    register<bit<32>>(AGG_COPIES) agg_value_14;
    register<bit<32>>(AGG_COPIES) agg_value_15;
    register<bit<32>>(AGG_COPIES) agg_value_16;
    register<bit<32>>(AGG_COPIES) agg_value_17;
    register<bit<32>>(AGG_COPIES) agg_value_18;
    register<bit<32>>(AGG_COPIES) agg_value_19;
    register<bit<32>>(AGG_COPIES) agg_value_20;
    register<bit<32>>(AGG_COPIES) agg_value_21;
    register<bit<32>>(AGG_COPIES) agg_value_22;
    register<bit<32>>(AGG_COPIES) agg_value_23;
    register<bit<32>>(AGG_COPIES) agg_value_24;
    register<bit<32>>(AGG_COPIES) agg_value_25;
    register<bit<32>>(AGG_COPIES) agg_value_26;
    register<bit<32>>(AGG_COPIES) agg_value_27;
    register<bit<32>>(AGG_COPIES) agg_value_28;
    register<bit<32>>(AGG_COPIES) agg_value_29;
    register<bit<32>>(AGG_COPIES) agg_value_30;
    register<bit<32>>(AGG_COPIES) agg_value_31;
    register<bit<32>>(AGG_COPIES) agg_bitmap;   // workers that contributed to the use
    register<bit<8>>(AGG_COPIES) agg_count;     // how many (compared with the job's quorum)
    register<bit<32>>(AGG_COPIES) agg_psn;      // psn of the use held by the copy
    register<bit<16>>(AGG_COPIES) agg_job;      // job owning the use; 0 = free

    bit<32> addr;
    bit<32> slot_sum;
    bit<32> keep_mask;      // all ones: add to the copy; zero: start the copy afresh
    bit<32> st_bitmap;
    bit<8>  st_count;
    bit<32> st_psn;
    bit<16> st_job;

    action load_state() {
        agg_bitmap.read(st_bitmap, addr);
        agg_count.read(st_count, addr);
        agg_psn.read(st_psn, addr);
        agg_job.read(st_job, addr);
    }

    action store_state() {
        agg_bitmap.write(addr, st_bitmap);
        agg_count.write(addr, st_count);
        agg_psn.write(addr, hdr.inc.psn);
        agg_job.write(addr, hdr.inc.job_id);
    }

    action accumulate() {
        ACCUMULATE(v00, agg_value_00)
        ACCUMULATE(v01, agg_value_01)
        ACCUMULATE(v02, agg_value_02)
        ACCUMULATE(v03, agg_value_03)
        ACCUMULATE(v04, agg_value_04)
        ACCUMULATE(v05, agg_value_05)
        ACCUMULATE(v06, agg_value_06)
        ACCUMULATE(v07, agg_value_07)
        ACCUMULATE(v08, agg_value_08)
        ACCUMULATE(v09, agg_value_09)
        ACCUMULATE(v10, agg_value_10)
        ACCUMULATE(v11, agg_value_11)
        ACCUMULATE(v12, agg_value_12)
        ACCUMULATE(v13, agg_value_13)
        ACCUMULATE(v14, agg_value_14)
        ACCUMULATE(v15, agg_value_15)
        ACCUMULATE(v16, agg_value_16)
        ACCUMULATE(v17, agg_value_17)
        ACCUMULATE(v18, agg_value_18)
        ACCUMULATE(v19, agg_value_19)
        ACCUMULATE(v20, agg_value_20)
        ACCUMULATE(v21, agg_value_21)
        ACCUMULATE(v22, agg_value_22)
        ACCUMULATE(v23, agg_value_23)
        ACCUMULATE(v24, agg_value_24)
        ACCUMULATE(v25, agg_value_25)
        ACCUMULATE(v26, agg_value_26)
        ACCUMULATE(v27, agg_value_27)
        ACCUMULATE(v28, agg_value_28)
        ACCUMULATE(v29, agg_value_29)
        ACCUMULATE(v30, agg_value_30)
        ACCUMULATE(v31, agg_value_31)
    }

    action read_result() {
        READ_RESULT(v00, agg_value_00)
        READ_RESULT(v01, agg_value_01)
        READ_RESULT(v02, agg_value_02)
        READ_RESULT(v03, agg_value_03)
        READ_RESULT(v04, agg_value_04)
        READ_RESULT(v05, agg_value_05)
        READ_RESULT(v06, agg_value_06)
        READ_RESULT(v07, agg_value_07)
        READ_RESULT(v08, agg_value_08)
        READ_RESULT(v09, agg_value_09)
        READ_RESULT(v10, agg_value_10)
        READ_RESULT(v11, agg_value_11)
        READ_RESULT(v12, agg_value_12)
        READ_RESULT(v13, agg_value_13)
        READ_RESULT(v14, agg_value_14)
        READ_RESULT(v15, agg_value_15)
        READ_RESULT(v16, agg_value_16)
        READ_RESULT(v17, agg_value_17)
        READ_RESULT(v18, agg_value_18)
        READ_RESULT(v19, agg_value_19)
        READ_RESULT(v20, agg_value_20)
        READ_RESULT(v21, agg_value_21)
        READ_RESULT(v22, agg_value_22)
        READ_RESULT(v23, agg_value_23)
        READ_RESULT(v24, agg_value_24)
        READ_RESULT(v25, agg_value_25)
        READ_RESULT(v26, agg_value_26)
        READ_RESULT(v27, agg_value_27)
        READ_RESULT(v28, agg_value_28)
        READ_RESULT(v29, agg_value_29)
        READ_RESULT(v30, agg_value_30)
        READ_RESULT(v31, agg_value_31)
    }

    // Turn the packet into a result: it comes from the address the workers send to and goes
    // back to the sender (egress ResultRewrite retargets each multicast copy to its worker).
    action make_result() {
        bit<48> mac = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = mac;
        bit<32> ip = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = hdr.ipv4.srcAddr;
        hdr.ipv4.srcAddr = ip;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        hdr.inc.flags = hdr.inc.flags | FLAG_RESULT;
        hdr.inc.bitmap = st_bitmap;
    }

    action multicast_result() {
        standard_metadata.mcast_grp = meta.mcast_grp;
    }

    action unicast_result() {
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    // A contribution was absorbed: nothing leaves the switch.
    action absorb() {
        mark_to_drop(standard_metadata);
    }

    apply {
        addr = (hdr.inc.agg_idx << 1) | (bit<32>)hdr.inc.ver;
        load_state();
        bool same_job = st_job == hdr.inc.job_id;
        // Serial-number comparison: delta in [1, 2^31) is newer, [2^31, 2^32) older.
        bit<32> delta = hdr.inc.psn - st_psn;
        if (same_job && delta >= PSN_HALF) {
            meta.drop = 1;
            meta.drop_reason = DROP_STALE;
        } else if (same_job && delta == 0 && st_count >= meta.quorum) {
            // Finished use: the sender lost the result (or is late); serve it again.
            if ((st_bitmap & meta.worker_bit) == 0) {
                meta.late = 1;  // partial synchronisation: the round completed without it
            }
            read_result();
            make_result();
            unicast_result();
        } else if (same_job && delta == 0 && (st_bitmap & meta.worker_bit) != 0) {
            meta.drop = 1;
            meta.drop_reason = DROP_DUPLICATE;
        } else {
            if (same_job && delta == 0) {
                keep_mask = 0xFFFFFFFF;
            } else {
                // First packet of a newer use, or of a free copy: start afresh (I3).
                keep_mask = 0;
                st_bitmap = 0;
                st_count = 0;
            }
            accumulate();
            st_bitmap = st_bitmap | meta.worker_bit;
            st_count = st_count + 1;
            store_state();
            if (st_count >= meta.quorum) {
                make_result();
                multicast_result();
            } else {
                absorb();
            }
        }
    }
}

#endif  // _AGGREGATOR_P4_
