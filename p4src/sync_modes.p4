// sync_modes.p4: Serene's synchronisation modes, per job, changed at an epoch boundary.
//
// A job with an entry in `sync_modes` aggregates under one of four modes (SYNC_MODE_*):
//   SYNC     a round completes when all N workers contributed (the jobs entry's quorum);
//   PARTIAL  a round completes at the first k contributions (quorum k); a later
//            contribution is not added: its sender is served the finished result, whose
//            bitmap names the k contributors, and it is counted in `sync_late`;
//   BOUNDED  stale synchronous parallel with bound S: a worker may start epoch e only while
//            e - (slowest worker's epoch) <= lead = S + 1; otherwise its packet comes back
//            with FLAG_WAIT (not aggregated, counted in `sync_waits`) and it resends later;
//   ASYNC    no rounds, no bound between the workers: each contribution is added once, in
//            the worker's psn order, to the running aggregate of its chunk (`bitmap`: the
//            packet's index in its epoch; cell region offset + chunk, async_sum_*), and
//            that aggregate goes back to the sender alone (RESULT | RUNNING).
// Every mode carries its largest lead (lockstep SYNC: 1; PARTIAL: it limits how far the
// fast workers run ahead of a straggler, so that the rounds the straggler still needs
// stay in switch memory).
//
// Clocks ("efficient data structure"): per worker, the newest epoch it was admitted with
// (`sync_clock`); per job, the slowest worker's epoch (`sync_min`) and, in a ring of
// SYNC_RING cells, how many workers have reached each epoch above it (`sync_reached`).
// A worker's clock moves one epoch at a time (epoch clock + 1 starts its next epoch; a
// packet further ahead is told to wait until its earlier epoch is in), and the slowest
// epoch moves when the last worker reaches min + 1: O(1) register accesses per packet,
// no scan over the workers. The clocks are written after the aggregator (SyncClocks), so a
// packet it drops moves none. Packets of an epoch at or below the worker's clock
// (retransmissions, late contributions) pass unchanged, unless the epoch is more than the
// mode's lead below it: no round the worker can still need, dropped as DROP_OLD_EPOCH.
//
// Hot swap: the entry holds the mode before and after a boundary epoch. Packets with
// epoch < boundary use the old mode, the others the new one, so every round (all packets
// of one epoch) is aggregated under one mode. The controller moves the boundary in two
// writes: first a fence (`fence` = 1: epochs >= boundary wait), then, once the clocks show
// that no worker was admitted at or past the boundary, the new mode with the fence lifted
// (controller/systems/sync_modes.py). Programmed and read by controller/systems/sync_modes.py.
#ifndef _SYNC_MODES_P4_
#define _SYNC_MODES_P4_

// async: add slot F of the packet to the running aggregate R of cell `cell` (if add_mask
// is all ones) and leave the aggregate in the packet.
#define ASYNC_ADD(F, R) \
    R.read(running, cell); \
    running = running + (hdr.inc_values.F & add_mask); \
    R.write(cell, running); \
    hdr.inc_values.F = running;

// The job's entry in `sync_modes`: the mode of this packet's epoch (before or after the
// boundary) and what the checks need, in the metadata. Its own control, applied once per
// packet, so that SyncModes, which is applied twice, holds no table (BMv2 places a table
// at one point of the control flow only).
control SyncModeTable(inout headers_t hdr, inout inc_metadata_t meta) {
    // sync_slot: the job's index (0 .. SYNC_JOBS-1) in the clock registers; workers: N.
    action set_modes(bit<32> sync_slot, bit<8> workers, bit<32> boundary_epoch,
                     bit<8> fence_on, bit<8> mode_before, bit<8> quorum_before,
                     bit<8> lead_before, bit<8> mode_after, bit<8> quorum_after,
                     bit<8> lead_after) {
        meta.sync_on = 1;
        meta.sync_slot = sync_slot;
        meta.sync_workers = workers;
        meta.sync_boundary = boundary_epoch;
        meta.sync_mode = mode_before;
        meta.sync_max_lead = lead_before;
        bit<8> quorum = quorum_before;
        // serial arithmetic: the epoch is at or past the boundary
        if (hdr.inc.epoch - boundary_epoch < PSN_HALF) {
            meta.sync_mode = mode_after;
            meta.sync_max_lead = lead_after;
            quorum = quorum_after;
            if (fence_on == 1) {
                meta.sync_fenced = 1;
            }
        }
        if (meta.sync_mode == SYNC_MODE_PARTIAL) {
            meta.quorum = quorum;
        }
    }

    table sync_modes {
        key = { hdr.inc.job_id: exact; }
        actions = { set_modes; @defaultonly NoAction; }
        default_action = NoAction();
        size = SYNC_JOBS;
    }

    apply {
        sync_modes.apply();
    }
}

// The clocks the check reads and SyncClocks writes: top-level instances, shared by the two
// controls (each applied once: p4c's BMv2 back end mislabels the metadata of a control
// applied twice whose actions write it, and BMv2 then cannot load the program).
register<bit<32>>(SYNC_CLOCKS) sync_clock;    // (sync slot, worker): newest epoch admitted
register<bit<32>>(SYNC_JOBS) sync_min;        // sync slot: the slowest worker's epoch

// Before the aggregator, for a packet of a job with a mode (SyncModeTable found its entry):
// the checks (may say wait or drop); the clocks move later (SyncClocks), only when the
// packet starts the worker's next epoch and the aggregator did not drop it: a dropped
// packet changes no clock (docs/protocol.md).
control SyncModes(inout headers_t hdr,
                  inout inc_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(SYNC_JOBS, CounterType.packets) sync_waits;  // packets told to wait, per job
    // async: per worker, the newest psn added (ASYNC_UNSET: none yet in this async period);
    // per aggregator of the job's region (one per chunk of an epoch), the running aggregate.
    register<bit<32>>(SYNC_CLOCKS) async_last;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_00;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_01;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_02;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_03;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_04;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_05;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_06;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_07;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_08;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_09;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_10;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_11;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_12;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_13;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_14;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_15;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_16;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_17;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_18;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_19;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_20;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_21;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_22;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_23;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_24;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_25;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_26;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_27;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_28;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_29;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_30;
    register<bit<32>>(AGG_POOL_SIZE) async_sum_31;

    bit<32> running;
    bit<32> add_mask;     // async: all ones adds the packet's values, zero only reads

    // The packet goes back to its sender, unaggregated, with FLAG_WAIT (ReturnToSender).
    action wait_reply() {
        meta.sync_wait = 1;
        sync_waits.count(meta.sync_slot);
    }

    // async: add the packet's values to the running aggregate (or not: add_mask 0) and
    // leave that aggregate in the packet (async_reply sends it back to the sender).
    action async_answer() {
        bit<32> cell = meta.region_offset + hdr.inc.bitmap;
        ASYNC_ADD(v00, async_sum_00)
        ASYNC_ADD(v01, async_sum_01)
        ASYNC_ADD(v02, async_sum_02)
        ASYNC_ADD(v03, async_sum_03)
        ASYNC_ADD(v04, async_sum_04)
        ASYNC_ADD(v05, async_sum_05)
        ASYNC_ADD(v06, async_sum_06)
        ASYNC_ADD(v07, async_sum_07)
        ASYNC_ADD(v08, async_sum_08)
        ASYNC_ADD(v09, async_sum_09)
        ASYNC_ADD(v10, async_sum_10)
        ASYNC_ADD(v11, async_sum_11)
        ASYNC_ADD(v12, async_sum_12)
        ASYNC_ADD(v13, async_sum_13)
        ASYNC_ADD(v14, async_sum_14)
        ASYNC_ADD(v15, async_sum_15)
        ASYNC_ADD(v16, async_sum_16)
        ASYNC_ADD(v17, async_sum_17)
        ASYNC_ADD(v18, async_sum_18)
        ASYNC_ADD(v19, async_sum_19)
        ASYNC_ADD(v20, async_sum_20)
        ASYNC_ADD(v21, async_sum_21)
        ASYNC_ADD(v22, async_sum_22)
        ASYNC_ADD(v23, async_sum_23)
        ASYNC_ADD(v24, async_sum_24)
        ASYNC_ADD(v25, async_sum_25)
        ASYNC_ADD(v26, async_sum_26)
        ASYNC_ADD(v27, async_sum_27)
        ASYNC_ADD(v28, async_sum_28)
        ASYNC_ADD(v29, async_sum_29)
        ASYNC_ADD(v30, async_sum_30)
        ASYNC_ADD(v31, async_sum_31)
        meta.sync_async = 1;
    }

    ReturnToSender() return_to_sender;
    Refuse() refuse;

    apply {
        if (meta.sync_on == 1) {
            bit<32> e = hdr.inc.epoch;
            bit<32> max_lead = (bit<32>)meta.sync_max_lead;
            bit<32> idx = meta.sync_slot * MAX_WORKERS + (bit<32>)meta.worker_index;
            bit<32> clock;
            bit<32> slowest;
            sync_clock.read(clock, idx);
            sync_min.read(slowest, meta.sync_slot);
            bit<32> ahead = e - clock;        // 1: the worker's next epoch
            bit<32> lead = e - slowest;       // how far e is past the slowest worker
            if (meta.sync_fenced == 1) {
                wait_reply();
                return_to_sender.apply(hdr, standard_metadata, FLAG_WAIT);
            } else if (ahead >= PSN_HALF && clock - e > max_lead) {
                // Older than any round the worker can still need (it holds their results):
                // a forged or corrupted epoch, which could pick another epoch's mode.
                refuse.apply(meta, DROP_OLD_EPOCH);
            } else if (meta.sync_mode == SYNC_MODE_ASYNC) {
                // No rounds: each contribution, in the worker's psn order, is added once
                // to the running aggregate of its chunk (`bitmap`: the packet's index in
                // its epoch; aggregator region_offset + chunk); a repeat (its answer was
                // lost) gets the aggregate back unchanged; a packet whose predecessor is
                // missing, or skipping an epoch, waits. A worker's first packet of an
                // async period is chunk 0 of the boundary epoch.
                bit<32> last;
                async_last.read(last, idx);
                bit<32> newer = hdr.inc.psn - last;
                bool first = last == ASYNC_UNSET && e == meta.sync_boundary && hdr.inc.bitmap == 0;
                bool next = last != ASYNC_UNSET && newer == 1;
                bool repeat = last != ASYNC_UNSET && (newer == 0 || newer >= PSN_HALF);
                if (hdr.inc.bitmap >= meta.region_size) {
                    refuse.apply(meta, DROP_OUT_OF_REGION);  // a chunk outside the region
                } else if (ahead != 0 && ahead < PSN_HALF && ahead != 1) {
                    wait_reply();
                    return_to_sender.apply(hdr, standard_metadata, FLAG_WAIT);
                } else if (first || next || repeat && (ahead == 0 || ahead >= PSN_HALF)) {
                    add_mask = 0;  // a repeat: the aggregate as it is
                    if (first || next) {
                        add_mask = 0xFFFFFFFF;
                        async_last.write(idx, hdr.inc.psn);
                        if (ahead == 1) {
                            meta.sync_advance = 1;  // the clock only (SyncClocks)
                        }
                    }
                    async_answer();
                    return_to_sender.apply(hdr, standard_metadata, FLAG_RESULT | FLAG_RUNNING);
                    hdr.inc.bitmap = meta.worker_bit;
                } else {
                    wait_reply();
                    return_to_sender.apply(hdr, standard_metadata, FLAG_WAIT);
                }
            } else if (ahead == 0 || ahead >= PSN_HALF) {
                // An epoch the worker already started (a retransmission): nothing moves.
            } else if (ahead != 1 || lead > max_lead || lead >= SYNC_RING) {
                wait_reply();
                return_to_sender.apply(hdr, standard_metadata, FLAG_WAIT);
            } else {
                meta.sync_advance = 1;  // written after the aggregator (SyncClocks)
                meta.sync_lead = lead;
            }
        }
    }
}

// After the aggregator, for a packet that starts its worker's next epoch and was not
// dropped: the worker's clock, the ring cell of its epoch, and the slowest epoch.
control SyncClocks(inout headers_t hdr, inout inc_metadata_t meta) {
    register<bit<8>>(SYNC_REACHED) sync_reached;  // (sync slot, epoch % SYNC_RING): workers there

    // The worker meta.worker_index starts epoch hdr.inc.epoch: its clock, the ring cell.
    action advance_clocks() {
        bit<32> e = hdr.inc.epoch;
        sync_clock.write(meta.sync_slot * MAX_WORKERS + (bit<32>)meta.worker_index, e);
        if (meta.sync_mode != SYNC_MODE_ASYNC) {  // async epochs are not counted
            bit<32> cell = meta.sync_slot * SYNC_RING + (e & (SYNC_RING - 1));
            bit<8> reached;
            sync_reached.read(reached, cell);
            reached = reached + 1;
            if (reached == meta.sync_workers && meta.sync_lead == 1) {
                // The last worker left the slowest epoch: e is the new slowest, and its
                // ring cell is free for epoch e + SYNC_RING.
                sync_min.write(meta.sync_slot, e);
                reached = 0;
            }
            sync_reached.write(cell, reached);
        }
    }

    apply {
        advance_clocks();
    }
}

// After the aggregator: count contributions that came after their round was complete.
control SyncLate(inout headers_t hdr,
                 inout inc_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    counter(SYNC_JOBS, CounterType.packets) sync_late;

    apply {
        if (meta.sync_on == 1 && meta.late == 1) {
            sync_late.count(meta.sync_slot);
        }
    }
}

#endif  // _SYNC_MODES_P4_
