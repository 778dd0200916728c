// result_guard.p4: only the switch, and a job's bound roles, bring result-like flags in.
//
// A packet of a system op (AGG_SYNC, AGG_KV, CONSENSUS) that is not a contribution or a
// request the switch processes carries flags that only the switch sets (WAIT, COLLISION,
// RUNNING, an aggregate's RESULT, ASK's ACK and drained rows), or that one role of its job
// sends to another (an ATP PS's RESULT/ACK, a leaf's FALLBACK at the spine, an ASK mapper's
// cold keys as FALLBACK, its reducer's ACK, a replica's reply, a host sequencer's FALLBACK).
// Such a packet passes only when a binding of its job allows every flag it carries from
// its ingress port: `flag_ports` for a role's port (any worker id), `flag_workers` for a
// worker's (job, worker id, port). Everything else is forged: dropped and counted,
// DROP_FORGED_RESULT, whatever job id it names (a job this switch does not serve has no
// binding). So no host outside a job can hand the job's hosts a result, a fallback piece,
// a reply or a WAIT in the switch's or a role's name.
// Programmed by controller/systems/result_guard.py at admission, by each job kind.
#ifndef _RESULT_GUARD_P4_
#define _RESULT_GUARD_P4_

control ResultGuard(inout headers_t hdr,
                    inout inc_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    Refuse() refuse;

    bit<8> allowed;  // the flags the packet's bindings allow

    // A role of the job (PS, reducer, replica, a leaf at the spine) on this port.
    action role_port(bit<8> flags) {
        allowed = allowed | flags;
    }

    table flag_ports {
        key = {
            hdr.inc.job_id: exact;
            hdr.inc.op: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { role_port; @defaultonly NoAction; }
        default_action = NoAction();
        size = WORKER_TABLE_SIZE;
    }

    // A worker (mapper, client) of the job, by id, on its port.
    action bound_worker(bit<8> flags) {
        allowed = allowed | flags;
    }

    table flag_workers {
        key = {
            hdr.inc.job_id: exact;
            hdr.inc.op: exact;
            hdr.inc.worker_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { bound_worker; @defaultonly NoAction; }
        default_action = NoAction();
        size = WORKER_TABLE_SIZE;
    }

    apply {
        allowed = 0;
        flag_ports.apply();
        flag_workers.apply();
        if ((hdr.inc.flags & ~allowed) != 0) {
            refuse.apply(meta, DROP_FORGED_RESULT);
        }
    }
}

#endif  // _RESULT_GUARD_P4_
