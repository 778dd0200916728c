// result_guard.p4: results and acknowledgements of NetReduce jobs never enter a switch that
// aggregates the job. Such a switch makes the job's results itself (the aggregator
// multicasts them on completion), so no port is entitled to bring one in: a packet with
// RESULT or ACK naming a job of `guarded_jobs` is forged, dropped and counted
// (DROP_FORGED_RESULT). Results of jobs this switch does not aggregate (it only carries
// them further) are forwarded as before. ATP jobs have their own rule (atp.p4: only from
// the port towards the job's PS). Programmed by controller/systems/job_region.py at admission.
#ifndef _RESULT_GUARD_P4_
#define _RESULT_GUARD_P4_

control ResultGuard(inout headers_t hdr,
                    inout inc_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    Refuse() refuse;

    action guarded() {}

    table guarded_jobs {
        key = { hdr.inc.job_id: exact; }
        actions = { guarded; @defaultonly NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    apply {
        if (guarded_jobs.apply().hit) {
            refuse.apply(meta, DROP_FORGED_RESULT);
        }
    }
}

#endif  // _RESULT_GUARD_P4_
