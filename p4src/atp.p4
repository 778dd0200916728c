// atp.p4: ATP, multi-tenant aggregation in a shared pool with a parameter server per job.
//
// Memory: ATP_POOL_SIZE aggregators of its own (registers atp_*), separate from the
// NetReduce pool of aggregator.p4, so that NetReduce regions and ATP pools never overlap.
// Per aggregator: K value registers, the (job, psn) it holds, the contributor bitmap and
// count. An ATP job's region (offset, size) of this pool comes from its `jobs` entry
// (job_region.p4): several jobs given the same region share it. The worker addresses psn p
// of job j at agg_idx = (Hash(j) + p) mod 2^32 % size + offset, Hash = crc32 over job_id
// modulo 2^31 as v1model's hash() computes it (wire.header.atp_index is the same in
// Python); the switch computes it again and drops a packet whose agg_idx differs
// (DROP_OUT_OF_REGION). Consecutive psns take consecutive aggregators, so a job whose window
// fits its range (the worker keeps window <= size) never collides with itself; Hash(j)
// spreads the jobs sharing a range. (A hash of (j, p) made a job collide with its own
// in-flight psns: one job over two racks saw 870 collisions in 3,750 first packets per leaf.)
//
// Roles (atp_jobs, per job and switch): `top` switches multicast a completed aggregate as
// the result to the job's members and its parameter server (PS); a leaf (top = 0) sends
// it up as one contribution of its
// rack (worker id up_id) to the next level. A member is a worker (leaf, single switch) or a
// leaf (spine, racks = 1). ps_port: the port towards the PS, the only port results and
// acknowledgements of the job may enter from.
//
// Aggregation (first transmissions only; a RETX packet goes to the PS unaggregated, or at
// a top switch whose aggregator holds its use complete, with the held sum instead):
//   free aggregator (count 0)             claim: values, bitmap = bit, count 1, tag (j, p);
//                                          but when the job holds its cap of aggregators
//                                          already: to the PS unaggregated (CAPPED)
//   held by (j, p), bit not yet set       add (a sum that would overflow int32 is not
//                                          added: the packet falls back to the PS)
//   held by (j, p), bit set or complete   drop, DROP_DUPLICATE
//   released, still tagged (j, p)         drop, DROP_STALE (a late copy of a finished use)
//   held by (j, p') with p - p' in [gap, 2^31)   reclaimed (p' is finished: I_R below); if
//                                          p' was complete (its ACK not back, top switch,
//                                          quorum > 1) the values swap: the packet takes
//                                          p''s sum to the PS as a RESULT
//   held complete by another job j' that lends (atp_lenders: single switch), its ACK not
//   back                                   taken over: claimed by (j, p); the packet takes
//                                          j''s sum to j''s PS as a RESULT (LENT)
//   held by anything else                 collision: COLLISION|FALLBACK to the PS
// A psn that fell back unaggregated (collision, cap) is marked (atp_marked, per job cell and
// psn % ATP_MARKS_PER_JOB): a later first packet of that psn that would claim an aggregator
// follows it to the PS instead (FOLLOWED), so the psn's contributions are never split
// between the PS and an aggregator that no other contribution will reach (that split held
// the psn until its workers' retransmission timeout).
// When count reaches the quorum the packet carries the sum: at a top switch it becomes the
// RESULT, multicast to the members (from the aggregation address) and to the PS (AtpCopies
// below), which records it and answers with an ACK; at a leaf it goes up with worker_id =
// up_id. The aggregator stays held until the ACK (or a result) crosses the switch: until
// then the PS may lack the sum, and a retransmission or a reclaim takes it there.
// Release: a RESULT or ACK of job j entering from ps_port sets count 0 (tag kept) if the
// aggregator still holds (j, p); a RESULT is then multicast to the job's members. From any
// other port it is dropped, DROP_FORGED_RESULT. Invariants: docs/protocol.md, "ATP".
// Occupancy: atp_held counts the aggregators each job holds (count != 0), cell
// job_id % JOB_TABLE_SIZE: +1 at a claim of a free one, -1 at a release (a reclaim of the
// job's own finished use leaves it). A job at its cap claims nothing more, so no tenant,
// metered or not, holds more of the shared pool than its cap (the controller zeroes the
// cell with the job's aggregators when it removes the job).
// Programmed by controller/systems/atp.py.
#ifndef _ATP_P4_
#define _ATP_P4_

// Add slot F of the packet to aggregator `idx` of register R, leaving the sum in the packet
// and OR-ing the signed-overflow bit of the addition into `ovf`.
#define ATP_ADD(F, R) \
    R.read(old, idx); \
    sum = old + hdr.inc_values.F; \
    ovf = ovf | ((old ^ sum) & (hdr.inc_values.F ^ sum)); \
    hdr.inc_values.F = sum;

// Undo ATP_ADD on the packet (the register was not written): the packet's own value again.
#define ATP_UNDO(F, R) \
    R.read(old, idx); \
    hdr.inc_values.F = hdr.inc_values.F - old;

#define ATP_STORE(F, R) \
    R.write(idx, hdr.inc_values.F);

// The aggregator's sum into the packet.
#define ATP_LOAD(F, R) \
    R.read(hdr.inc_values.F, idx);

// The packet's values into the aggregator, the sum it held into the packet.
#define ATP_SWAP(F, R) \
    R.read(old, idx); \
    R.write(idx, hdr.inc_values.F); \
    hdr.inc_values.F = old;

control AtpPool(inout headers_t hdr,
                inout inc_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    SLOT_REGISTERS(atp_value, ATP_POOL_SIZE)
    // atp_job, atp_psn: the use held (job 0: never used); atp_bitmap: the members that
    // contributed; atp_count: how many, 0 = free (released).
    USE_REGISTERS(atp, ATP_POOL_SIZE)

    // Pool statistics, indexed by ATP_EV_* (controller/systems/atp.py reads them).
    counter(ATP_EVENTS, CounterType.packets) atp_events;

    bit<32> idx;
    bit<32> old;
    bit<32> sum;
    bit<32> ovf;
    USE_STATE

    // Aggregators held per job (count != 0), cell job_id % JOB_TABLE_SIZE.
    register<bit<32>>(JOB_TABLE_SIZE) atp_held;
    // The job's psns that fell back: cell (job_id % JOB_TABLE_SIZE) * ATP_MARKS_PER_JOB
    // + psn % ATP_MARKS_PER_JOB holds the psn's other bits, and 1 in the bits the cell
    // stands for (0: none), so that every psn has a tag other than 0.
    register<bit<32>>(ATP_MARKS) atp_marked;
    bit<32> mark_cell;
    bit<32> mark;
    bit<32> mark_tag;

    bit<32> held;
    bit<32> held_cell;
    bit<32> held_cap;
    bit<9>  ps_port;
    bit<1>  top;
    bit<8>  up_id;
    bit<1>  racks;
    bit<32> all_workers;
    bit<32> gap;

    // ps_port: towards the job's PS; top: completed aggregates go to the PS (else up, as
    // member up_id of the next level); racks: members are leaves (their packets' bitmap
    // names the workers they hold); all_workers: the job's worker bitmap; gap: the window,
    // psn distance beyond which a use of the same job is finished (reclaim); cap: the most
    // aggregators the job may hold at once.
    action set_atp(bit<9> ps, bit<1> is_top, bit<8> up, bit<1> of_racks, bit<32> workers,
                   bit<32> reclaim_gap, bit<32> cap, bit<16> mcast_grp) {
        ps_port = ps;
        top = is_top;
        up_id = up;
        racks = of_racks;
        all_workers = workers;
        gap = reclaim_gap;
        held_cap = cap;
        meta.mcast_grp = mcast_grp;
        meta.atp = 1;
    }

    table atp_jobs {
        key = { hdr.inc.job_id: exact; }
        actions = { set_atp; @defaultonly NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    // Jobs whose complete uses another job may take over (single switch): the address of
    // their PS, their worker bitmap and quorum (controller/systems/atp.py, lender_entry).
    bool lendable;
    bit<32> lend_ip;
    bit<32> lend_workers;
    bit<8> lend_quorum;

    action lend_to(bit<32> ps_ip, bit<32> workers, bit<8> quorum) {
        lendable = true;
        lend_ip = ps_ip;
        lend_workers = workers;
        lend_quorum = quorum;
    }

    table atp_lenders {
        key = { meta.atp_owner: exact; }
        actions = { lend_to; @defaultonly NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    action load_state() {
        LOAD_USE(atp, idx)
    }

    action store_state() {
        STORE_USE(atp, idx)
    }

    action add_values() {
        ovf = 0;
        PER_SLOT(ATP_ADD, atp_value)
    }

    action undo_values() {
        PER_SLOT(ATP_UNDO, atp_value)
    }

    action store_values() {
        PER_SLOT(ATP_STORE, atp_value)
    }

    action load_values() {
        PER_SLOT(ATP_LOAD, atp_value)
    }

    action swap_values() {
        PER_SLOT(ATP_SWAP, atp_value)
    }

    // The complete aggregate (values in the packet) of a top switch, to the job's PS only:
    // with RESULT the PS records it and acknowledges (the members have it), without (RETX)
    // it answers with the result through the switch.
    action aggregate_to_ps(bit<8> flags) {
        hdr.inc.flags = flags;
        hdr.inc.bitmap = all_workers;
        hdr.udp.checksum = 0;
        standard_metadata.egress_spec = ps_port;
    }

    // The packet leaves towards the PS, unaggregated. `piece`: the workers it holds.
    action fall_back(bit<8> why, bit<32> piece) {
        hdr.inc.flags = hdr.inc.flags | FLAG_FALLBACK | why;
        hdr.inc.bitmap = piece;
        hdr.udp.checksum = 0;
        standard_metadata.egress_spec = ps_port;
    }

    Refuse() refuse;

    apply {
        meta.atp = 0;
        meta.atp_direct = 0;
        meta.atp_forward = 0;
        atp_jobs.apply();
        held_cell = ((bit<32>)hdr.inc.job_id) & (JOB_TABLE_SIZE - 1);
        if (meta.atp == 1) {
            if ((hdr.inc.flags & (FLAG_RESULT | FLAG_ACK)) != 0) {
                // ---- release: results and acknowledgements from the PS side ----
                idx = hdr.inc.agg_idx;
                if (standard_metadata.ingress_port != ps_port) {
                    refuse.apply(meta, DROP_FORGED_RESULT);
                } else if (idx >= ATP_POOL_SIZE) {
                    refuse.apply(meta, DROP_OUT_OF_REGION);
                } else {
                    load_state();
                    if (st_job == hdr.inc.job_id && st_psn == hdr.inc.psn && st_count != 0) {
                        st_count = 0;
                        st_bitmap = 0;
                        store_state();
                        atp_held.read(held, held_cell);
                        if (held != 0) {
                            atp_held.write(held_cell, held - 1);
                        }
                        atp_events.count((bit<32>)ATP_EV_RELEASED);
                    } else {
                        atp_events.count((bit<32>)ATP_EV_RELEASE_MISSED);
                    }
                    if ((hdr.inc.flags & FLAG_RESULT) != 0) {
                        hdr.udp.checksum = 0;
                        standard_metadata.mcast_grp = meta.mcast_grp;
                    } else {
                        mark_to_drop(standard_metadata);  // an ACK ends here
                    }
                }
            } else {
                // ---- aggregation (JobRegion admitted the packet) ----
                bit<32> start;
                hash(start, HashAlgorithm.crc32, (bit<32>)0, { hdr.inc.job_id },
                     (bit<32>)0x80000000);
                bit<32> rotated = start + hdr.inc.psn;
                bit<32> want;
                hash(want, HashAlgorithm.identity, meta.region_offset, { rotated },
                     meta.region_size);
                idx = hdr.inc.agg_idx;
                bit<32> piece = meta.worker_bit;
                if (racks == 1) {
                    piece = hdr.inc.bitmap;
                }
                if (idx != want || idx >= ATP_POOL_SIZE) {
                    refuse.apply(meta, DROP_OUT_OF_REGION);
                } else if ((hdr.inc.flags & FLAG_RETX) != 0) {
                    load_state();
                    if (top == 1 && st_job == hdr.inc.job_id && st_psn == hdr.inc.psn
                            && st_count >= meta.quorum) {
                        // Complete here, its PS's ACK not back: the PS may not have it (its
                        // copy lost), so the sum goes to the PS, which answers with it.
                        load_values();
                        aggregate_to_ps(FLAG_RETX);
                    } else {
                        fall_back(0, piece);
                    }
                    atp_events.count((bit<32>)ATP_EV_RETX_FALLBACK);
                } else {
                    bool swapped = false;
                    load_state();
                    mark_cell = (held_cell * ATP_MARKS_PER_JOB)
                            | (hdr.inc.psn & (ATP_MARKS_PER_JOB - 1));
                    mark_tag = (hdr.inc.psn & ~((bit<32>)(ATP_MARKS_PER_JOB - 1))) | 1;
                    atp_marked.read(mark, mark_cell);
                    bool same_job = st_job == hdr.inc.job_id;
                    bool same_use = same_job && st_psn == hdr.inc.psn;
                    bit<32> delta = hdr.inc.psn - st_psn;
                    bool finished = same_job && delta >= gap && delta < PSN_HALF;
                    // Another job's complete use, its ACK not back: its members have the
                    // sum; taken over, the sum goes to that job's PS (atp_lenders).
                    lendable = false;
                    if (!same_job && st_count != 0) {
                        meta.atp_owner = st_job;
                        atp_lenders.apply();
                    }
                    bool lent = lendable && st_count >= lend_quorum;
                    atp_held.read(held, held_cell);
                    if (st_count == 0 && same_use) {
                        refuse.apply(meta, DROP_STALE);
                    } else if ((st_count == 0 || finished || lent) && mark == mark_tag) {
                        fall_back(FLAG_COLLISION, piece);  // its psn is at the PS already
                        atp_events.count((bit<32>)ATP_EV_FOLLOWED);
                    } else if (st_count == 0 || finished || lent) {
                        if ((st_count == 0 || lent) && held >= held_cap) {
                            fall_back(0, piece);  // the job holds its cap: to the PS
                            atp_marked.write(mark_cell, mark_tag);
                            atp_events.count((bit<32>)ATP_EV_CAPPED);
                        } else {
                            if (lent) {
                                atp_held.write(held_cell, held + 1);
                                bit<32> owner_cell = ((bit<32>)st_job) & (JOB_TABLE_SIZE - 1);
                                atp_held.read(held, owner_cell);
                                if (held != 0) {
                                    atp_held.write(owner_cell, held - 1);
                                }
                                atp_events.count((bit<32>)ATP_EV_LENT);
                            } else if (st_count != 0) {
                                atp_events.count((bit<32>)ATP_EV_RECLAIMED);
                            } else {
                                atp_held.write(held_cell, held + 1);
                            }
                            // A complete use whose ACK is not back: its members have the
                            // sum, its PS may not (its copy lost); the packet takes the sum
                            // to the PS and leaves its own values in the aggregator.
                            swapped = lent
                                    || (top == 1 && meta.quorum > 1 && st_count >= meta.quorum);
                            bit<16> old_job = st_job;
                            bit<32> old_psn = st_psn;
                            st_bitmap = meta.worker_bit;
                            st_count = 1;
                            if (swapped) {
                                swap_values();
                            } else {
                                store_values();
                            }
                            store_state();
                            if (lent) {
                                // to the owner's PS, routed by its address (Forwarder)
                                hdr.inc.job_id = old_job;
                                hdr.inc.psn = old_psn;
                                hdr.inc.flags = FLAG_RESULT;
                                hdr.inc.bitmap = lend_workers;
                                hdr.ipv4.dstAddr = lend_ip;
                                hdr.udp.checksum = 0;
                                meta.atp_forward = 1;
                            } else if (swapped) {
                                hdr.inc.psn = old_psn;
                                aggregate_to_ps(FLAG_RESULT);
                            }
                            atp_events.count((bit<32>)ATP_EV_CLAIMED);
                        }
                    } else if (same_use) {
                        if (st_count >= meta.quorum || (st_bitmap & meta.worker_bit) != 0) {
                            refuse.apply(meta, DROP_DUPLICATE);
                        } else {
                            add_values();
                            if ((ovf & 0x80000000) != 0) {
                                undo_values();
                                fall_back(0, piece);
                                atp_events.count((bit<32>)ATP_EV_OVERFLOW);
                            } else {
                                store_values();
                                st_bitmap = st_bitmap | meta.worker_bit;
                                st_count = st_count + 1;
                                store_state();
                                atp_events.count((bit<32>)ATP_EV_ADDED);
                            }
                        }
                    } else {
                        fall_back(FLAG_COLLISION, piece);
                        atp_marked.write(mark_cell, mark_tag);
                        atp_events.count((bit<32>)ATP_EV_COLLISION);
                    }
                    // A claim or an addition that reaches the quorum completes the use.
                    if (meta.drop == 0 && (hdr.inc.flags & FLAG_FALLBACK) == 0 && !swapped) {
                        if (st_count >= meta.quorum) {
                            hdr.udp.checksum = 0;
                            if (top == 1) {
                                // Straight to the members as the result, and to the PS
                                // (AtpCopies), which records it and acknowledges.
                                hdr.inc.flags = hdr.inc.flags | FLAG_RESULT;
                                hdr.inc.bitmap = all_workers;
                                standard_metadata.mcast_grp = meta.mcast_grp;
                                meta.atp_direct = 1;
                            } else {
                                standard_metadata.egress_spec = ps_port;
                                hdr.inc.worker_id = up_id;
                                hdr.inc.bitmap = st_bitmap;
                            }
                            atp_events.count((bit<32>)ATP_EV_COMPLETED);
                        } else {
                            mark_to_drop(standard_metadata);  // absorbed
                        }
                    }
                }
            }
        }
    }
}

// Egress: the copies of an ATP job's multicast group (members, and the PS with rid
// ATP_PS_RID). A result the switch completed (meta.atp_direct) reaches the members from the
// aggregation address (the PS's, which their packets were sent to, so it is the copy's
// destination before ResultRewrite addresses it) and the PS as it is, a RESULT with every
// worker's bit; a result that came from the PS is not sent back to it.
control AtpCopies(inout headers_t hdr,
                  inout inc_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.inc.isValid() && meta.atp == 1 && (hdr.inc.flags & FLAG_RESULT) != 0) {
            if (standard_metadata.egress_rid == ATP_PS_RID) {
                if (meta.atp_direct == 0) {
                    mark_to_drop(standard_metadata);
                }
            } else if (meta.atp_direct == 1) {
                hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
            }
        }
    }
}

#endif  // _ATP_P4_
