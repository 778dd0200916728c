// aggregator.p4: synchronous aggregation in a pool of aggregators, two copies each.
//
// Memory. Aggregator i has two copies (versions) v in {0, 1}; copy (i, v) lives at register
// index addr = 2*i + v, so a job's region is one contiguous index range. Per copy: K value
// registers (one register array per slot, as a pipeline allowing one access per array per
// packet needs; three more sets for blocks 1..3 of wide packets), the contributor bitmap, the contributor count, and the (job, psn) of the
// use it holds. Programmed and read by controller/systems/aggregator.py.
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

// Add slot F of the packet's value block H to copy `addr` of register R (or start from the
// packet's value when keep_mask is 0) and leave the running sum in the packet.
#define ACCUMULATE_IN(H, F, R) \
    R.read(slot_sum, addr); \
    slot_sum = (slot_sum & keep_mask) + H.F; \
    R.write(addr, slot_sum); \
    H.F = slot_sum;
#define ACCUMULATE(F, R) ACCUMULATE_IN(hdr.inc_values, F, R)
#define ACCUMULATE_B1(F, R) ACCUMULATE_IN(hdr.inc_values_b1, F, R)
#define ACCUMULATE_B2(F, R) ACCUMULATE_IN(hdr.inc_values_b2, F, R)
#define ACCUMULATE_B3(F, R) ACCUMULATE_IN(hdr.inc_values_b3, F, R)

// Copy slot F of a finished aggregation from register R into the packet's block H.
#define READ_RESULT(F, R) R.read(hdr.inc_values.F, addr);
#define READ_RESULT_B1(F, R) R.read(hdr.inc_values_b1.F, addr);
#define READ_RESULT_B2(F, R) R.read(hdr.inc_values_b2.F, addr);
#define READ_RESULT_B3(F, R) R.read(hdr.inc_values_b3.F, addr);

control Aggregator(inout headers_t hdr,
                   inout inc_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    SLOT_REGISTERS(agg_value, AGG_COPIES)
    // Value blocks 1..3 of wide packets (INC_VALUE_BLOCKS): arrays of their own, so that
    // every array is still accessed once per packet.
    SLOT_REGISTERS(agg_value_b1, AGG_COPIES)
    SLOT_REGISTERS(agg_value_b2, AGG_COPIES)
    SLOT_REGISTERS(agg_value_b3, AGG_COPIES)
    // agg_job, agg_psn: the use held by the copy (job 0: free); agg_bitmap: the workers that
    // contributed to it; agg_count: how many (compared with the job's quorum).
    USE_REGISTERS(agg, AGG_COPIES)

    bit<32> addr;
    bit<32> slot_sum;
    bit<32> keep_mask;      // all ones: add to the copy; zero: start the copy afresh
    USE_STATE

    action load_state() {
        LOAD_USE(agg, addr)
    }

    action store_state() {
        STORE_USE(agg, addr)
    }

    action accumulate() {
        PER_SLOT(ACCUMULATE, agg_value)
    }

    action accumulate_b1() {
        PER_SLOT(ACCUMULATE_B1, agg_value_b1)
    }

    action accumulate_b2() {
        PER_SLOT(ACCUMULATE_B2, agg_value_b2)
    }

    action accumulate_b3() {
        PER_SLOT(ACCUMULATE_B3, agg_value_b3)
    }

    action read_result() {
        PER_SLOT(READ_RESULT, agg_value)
    }

    action read_result_b1() {
        PER_SLOT(READ_RESULT_B1, agg_value_b1)
    }

    action read_result_b2() {
        PER_SLOT(READ_RESULT_B2, agg_value_b2)
    }

    action read_result_b3() {
        PER_SLOT(READ_RESULT_B3, agg_value_b3)
    }

    Refuse() refuse;
    // A result comes from the address the workers send to and goes back to the sender
    // (egress ResultRewrite retargets each multicast copy to its worker); its bitmap names
    // the contributors.
    TurnAround() turn_around;
    ReturnToSender() return_to_sender;

    action multicast_result() {
        standard_metadata.mcast_grp = meta.mcast_grp;
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
            refuse.apply(meta, DROP_STALE);
        } else if (same_job && delta == 0 && st_count >= meta.quorum) {
            // Finished use: the sender lost the result (or is late); serve it again.
            if ((st_bitmap & meta.worker_bit) == 0) {
                meta.late = 1;  // partial synchronisation: the round completed without it
            }
            read_result();
            if (hdr.inc_values_b1.isValid()) { read_result_b1(); }
            if (hdr.inc_values_b2.isValid()) { read_result_b2(); }
            if (hdr.inc_values_b3.isValid()) { read_result_b3(); }
            return_to_sender.apply(hdr, standard_metadata, FLAG_RESULT);
            hdr.inc.bitmap = st_bitmap;
        } else if (same_job && delta == 0 && (st_bitmap & meta.worker_bit) != 0) {
            refuse.apply(meta, DROP_DUPLICATE);
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
            if (hdr.inc_values_b1.isValid()) { accumulate_b1(); }
            if (hdr.inc_values_b2.isValid()) { accumulate_b2(); }
            if (hdr.inc_values_b3.isValid()) { accumulate_b3(); }
            st_bitmap = st_bitmap | meta.worker_bit;
            st_count = st_count + 1;
            store_state();
            if (st_count >= meta.quorum) {
                turn_around.apply(hdr, FLAG_RESULT);
                hdr.inc.bitmap = st_bitmap;
                multicast_result();
            } else {
                absorb();
            }
        }
    }
}

#endif  // _AGGREGATOR_P4_
