"""Programs ``p4src/result_rewrite.p4`` and the job's multicast group: result delivery.

Example::

    await sw.set_multicast_group(*multicast_group(job))
    await sw.insert(result_entries(job))

The job's group replicates a finished aggregation to every worker's port with replication
id ``rid = worker_id + 1`` (rid 0 is a unicast packet, already addressed by the
aggregator); egress ``result_dst`` maps ``(job_id, rid)`` to the worker's MAC, IP and id.
"""

from __future__ import annotations

from finsy import P4TableEntry

from controller.jobs.job import Job
from controller.p4rt.p4runtime_client import table_entry

RESULT_DST = "IncEgress.result_rewrite.result_dst"


def replication_id(worker_id: int) -> int:
    return worker_id + 1


def multicast_group(job: Job) -> tuple[int, list[tuple[int, int]]]:
    """``(group id, [(egress port, rid), ...])`` of the job's workers."""
    return job.mcast_grp, [(w.port, replication_id(w.worker_id)) for w in job.workers]


def result_entries(job: Job) -> list[P4TableEntry]:
    return [
        table_entry(
            RESULT_DST,
            {
                "hdr.inc.job_id": job.job_id,
                "standard_metadata.egress_rid": replication_id(w.worker_id),
            },
            "IncEgress.result_rewrite.set_result_dst",
            dst_mac=w.mac,
            dst_ip=w.ip,
            worker_id=w.worker_id,
        )
        for w in job.workers
    ]
