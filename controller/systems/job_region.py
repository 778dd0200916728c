"""Programs ``p4src/job_region.p4``: which jobs exist, their regions, and their workers.

Example::

    entries = [job_entry(job), *worker_entries(job)]
    await sw.insert(entries)           # admission (after the result path is in place)
    await sw.delete(entries, strict=False)

``jobs``: ``job_id`` -> ``set_region(offset, size, quorum, mcast_grp)``.
``epoch_slots``: ``(job_id, epoch parity)`` -> ``set_slot(offset, size, quorum)``, overriding
the region and quorum of the ``jobs`` entry for that epoch's packets; only jobs whose layout
changes while they run have them (``controller/sched/switchover.py``).
``workers``: ``(job_id, worker_id, ingress_port)`` -> ``set_worker(bit_index)``; the bit is
the worker id, so the result's bitmap names the contributors by rank. Binding the ingress
port means a host cannot contribute in another worker's (or job's) name.

Both tables carry a direct counter (packets and bytes per entry): ``read_counters`` gives
what the job's entry and each worker's entry admitted (throughput, per-worker progress).
"""

from __future__ import annotations

from dataclasses import dataclass

from finsy import P4DirectCounterEntry, P4TableEntry, P4TableMatch

from controller.jobs.job import Job
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import SwitchConnection, table_entry

JOBS = "IncIngress.job_region.jobs"
WORKERS = "IncIngress.job_region.workers"
EPOCH_SLOTS = "IncIngress.job_region.epoch_slots"


def job_entry(job: Job) -> P4TableEntry:
    return table_entry(
        JOBS,
        {"hdr.inc.job_id": job.job_id},
        "IncIngress.job_region.set_region",
        offset=job.region.offset,
        size=job.region.size,
        quorum=job.quorum,
        mcast_grp=job.mcast_grp,
        slot_count=job.slots,
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


def worker_key(job: Job, worker_id: int) -> P4TableEntry:
    w = job.worker(worker_id)
    match = {
        "hdr.inc.job_id": job.job_id,
        "hdr.inc.worker_id": w.worker_id,
        "standard_metadata.ingress_port": w.port,
    }
    return P4TableEntry(WORKERS, match=P4TableMatch(match))


@dataclass(frozen=True)
class Admitted:
    """(packets, bytes) the switch admitted: for the job, and per worker id."""

    job: tuple[int, int]
    workers: dict[int, tuple[int, int]]


async def read_counters(sw: SwitchConnection, job: Job) -> Admitted:
    """The direct counters of the job's ``jobs`` entry and of its ``workers`` entries, in
    one read. An entry the switch does not hold (it restarted) counts (0, 0)."""
    keys = [job_key(job.job_id)] + [worker_key(job, w.worker_id) for w in job.workers]
    got = await sw.read_many([P4DirectCounterEntry(table_entry=k) for k in keys])
    total = (0, 0)
    per_worker = {w.worker_id: (0, 0) for w in job.workers}
    for e in got:
        if e.table_entry is None or e.data is None:
            continue
        counts = (e.data.packet_count, e.data.byte_count)
        match = e.table_entry.match or {}
        if "worker_id" in match:
            per_worker[int(match["worker_id"])] = counts
        else:
            total = counts
    return Admitted(total, per_worker)


def slot_entry(job_id: int, slot: int, region: Region | None, quorum: int) -> P4TableEntry:
    """Epoch slot ``slot`` (0 or 1) of the job; ``region`` None admits no aggregation."""
    r = region if region is not None else Region(0, 0)
    return table_entry(
        EPOCH_SLOTS,
        {"hdr.inc.job_id": job_id, "meta.epoch_slot": slot},
        "IncIngress.job_region.set_slot",
        offset=r.offset,
        size=r.size,
        quorum=quorum,
    )


def slot_key(job_id: int, slot: int) -> P4TableEntry:
    return P4TableEntry(
        EPOCH_SLOTS, match=P4TableMatch({"hdr.inc.job_id": job_id, "meta.epoch_slot": slot})
    )
