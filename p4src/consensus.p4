// consensus.p4: the switch as the sequencer of a replicated log (op CONSENSUS; NOPaxos-style
// ordered unreliable multicast, docs/protocol.md "Consensus"). Programmed by
// controller/systems/consensus.py; replicas and clients are hosts/consensus/replicated_log.py.
//
// A client's request (no RESULT/ACK/FALLBACK flag) gets the next sequence number of its
// group in agg_idx and the group's session number in epoch, and is multicast to the
// group's replicas. Sequence numbers start at 1 in every session; the controller gives
// the group a new session number whenever it (re)installs it, e.g. after a switch restart
// lost the counter, so replicas see a session change instead of numbers going back.
// Everything else of the protocol (gaps, replies, state transfer) is host to host traffic.
#ifndef _CONSENSUS_P4_
#define _CONSENSUS_P4_

control Sequencer(inout headers_t hdr,
                  inout inc_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(CONS_GROUPS) cons_seq;  // last sequence number given, per group

    bit<32> slot;
    bit<32> session;
    bit<16> group;

    action set_group(bit<32> seq_index, bit<32> session_number, bit<16> mcast_grp) {
        slot = seq_index;
        session = session_number;
        group = mcast_grp;
    }

    table cons_groups {
        key = { hdr.inc.job_id: exact; }
        actions = { set_group; @defaultonly NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    table cons_clients {
        key = {
            hdr.inc.job_id: exact;
            hdr.inc.worker_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { NoAction; }
        default_action = NoAction();
        size = WORKER_TABLE_SIZE;
    }

    Refuse() refuse;
    RegionGuard() region_guard;

    apply {
        if (!hdr.inc_values.isValid()) {
            refuse.apply(meta, DROP_BAD_SLOT_COUNT);
        } else if (!cons_groups.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_JOB);
        } else if (!cons_clients.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_WORKER);
        } else {
            region_guard.apply(meta, slot, 0, CONS_GROUPS, CONS_GROUPS);  // one pool cell
            if (meta.drop == 0) {
                bit<32> seq;
                cons_seq.read(seq, slot);
                seq = seq + 1;
                cons_seq.write(slot, seq);
                hdr.inc.agg_idx = seq;
                hdr.inc.epoch = session;
                hdr.udp.checksum = 0;  // the packet changed: no UDP checksum (legal in IPv4)
                standard_metadata.mcast_grp = group;
            }
        }
    }
}

#endif  // _CONSENSUS_P4_
