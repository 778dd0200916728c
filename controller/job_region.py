"""Programs ``p4src/job_region.p4``: which jobs exist, their regions, and their workers.

Example::

    entries = [job_entry(job), *worker_entries(job)]
    await sw.insert(entries)           # admission (after the result path is in place)
    await sw.delete(entries, strict=False)

``jobs``: ``job_id`` -> ``set_region(offset, size, quorum, mcast_grp)``.
``workers``: ``(job_id, worker_id, ingress_port)`` -> ``set_worker(bit_index)``; the bit is
the worker id, so the result's bitmap names the contributors by rank. Binding the ingress
port means a host cannot contribute in another worker's (or job's) name.
"""

from __future__ import annotations

from finsy import P4TableEntry, P4TableMatch

from controller.job import Job
from controller.p4runtime_client import table_entry

JOBS = "IncIngress.job_region.jobs"
WORKERS = "IncIngress.job_region.workers"


def job_entry(job: Job) -> P4TableEntry:
    return table_entry(
        JOBS,
        {"hdr.inc.job_id": job.job_id},
        "IncIngress.job_region.set_region",
        offset=job.region.offset,
        size=job.region.size,
        quorum=job.quorum,
        mcast_grp=job.mcast_grp,
    )


def job_key(job_id: int) -> P4TableEntry:
    """The ``jobs`` entry of ``job_id`` as a read or delete key."""
    return P4TableEntry(JOBS, match=P4TableMatch({"hdr.inc.job_id": job_id}))


def worker_entries(job: Job) -> list[P4TableEntry]:
    return [
        table_entry(
            WORKERS,
            {
                "hdr.inc.job_id": job.job_id,
                "hdr.inc.worker_id": w.worker_id,
                "standard_metadata.ingress_port": w.port,
            },
            "IncIngress.job_region.set_worker",
            bit_index=w.worker_id,
        )
        for w in job.workers
    ]
