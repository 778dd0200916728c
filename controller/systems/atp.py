"""ATP jobs: aggregation in a pool shared by several jobs, a parameter server per job.

Example:
    >>> req = AtpRequest(workers=2, window=64)
    >>> Atp().allocate_region(req)
    Region(offset=0, size=4096)
    >>> from controller.jobs.job_kinds import parse_request
    >>> parse_request({"kind": "atp", "workers": 2, "pool_offset": 4000, "pool_size": 200})
    Traceback (most recent call last):
    ...
    controller.jobs.job.JobError: pool range [4000, 4200) is outside the ATP pool of 4096 ...

Programs ``p4src/atp.p4``. A job's region is a range ``(pool_offset, pool_size)`` of ATP's
own pool (``ATP_POOL_SIZE`` aggregators, registers separate from NetReduce's, so the two
never overlap); every job given the same range shares it, which is the point of ATP: the
default is the whole pool. Workers address psn ``p`` at ``(Hash(job) + p) % size + offset``
(``wire.header.atp_index``: consecutive psns on consecutive aggregators, so a job whose
window fits its range never collides with itself). A sum the switch completes is multicast
to the workers and, as a copy, to the job's parameter server (the aggregation address
``agg_ip``, behind switch port ``ps_port``), whose ACK releases the aggregator; a collision
falls back to the PS, which completes the sum and sends the result through the switch: that
releases the aggregator and multicasts the result to the workers. Another job's packet may
take over a complete use still waiting for its ACK (``atp_lenders``): the sum then goes to
its PS in that packet. Hashed addressing on an exclusive range is the same
job kind with a range no other job is given. A job submitted with a class (md/be) is
*scheduled*: the scheduler (``controller/sched/scheduled_jobs.py``, one per switch and pool)
gives it such a range and resizes it at epoch boundaries (the slot of ``job_region.p4`` sets
the range the switch hashes into for that epoch's packets). Shared-range jobs and scheduled
ones do not hold the ATP pool of one switch at the same time (the shared jobs own all of
it).

Admission installs the result path (multicast group with the PS's copy, ``result_dst``),
the workers, the ``atp_jobs`` entry (role, PS port), its ``atp_lenders`` entry, the job's
meter if it has one (``job_meter.py``) and the ``jobs`` entry last, after freeing any use
of the job id still held in the pool.
Removal deletes them in the reverse order, then frees every aggregator of the whole pool
that holds a use of the job (``free_held``: its ranges before re-plans too; other jobs'
aggregators are left alone). A scheduled job's ranges are its own: they are cleared whole
when the scheduler takes them back (``clear_owned``), and the job's reclaim gap follows
the largest window its workers may use (``follow_window``). Live figures: the job's admitted
packets, and the pool's statistics (``atp_events``: claims, collisions, fallbacks,
releases...) with its occupancy.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Literal

from finsy import P4TableEntry, P4TableMatch
from pydantic import Field, model_validator

from controller.jobs.figures import PROGRESS, Figure, JobStats
from controller.jobs.job import Job, JobRequest, Port, Scheduling
from controller.jobs.job_kinds import JobKind, register
from controller.jobs.memory_manager import MemoryManager, OutOfMemory, Region
from controller.p4rt.p4runtime_client import SwitchConnection, table_entry
from controller.systems import job_meter, job_region, result_guard, result_rewrite
from wire.header import (
    ATP_MARKS_PER_JOB,
    ATP_POOL_SIZE,
    ATP_PS_RID,
    MAX_WORKERS,
    SLOTS,
    AtpEvent,
    Flag,
    Op,
)

ATP_POOL = "atp"  # ATP's shared pool (p4src/atp.p4, ATP_POOL_SIZE aggregators)
SHARED = "atp-shared"  # owner of the whole ATP pool in the memory manager's view
PREFIX = "IncIngress.atp."
ATP_JOBS = PREFIX + "atp_jobs"
ATP_LENDERS = PREFIX + "atp_lenders"
ATP_EVENTS = PREFIX + "atp_events"
ATP_JOB = PREFIX + "atp_job"
ATP_PSN = PREFIX + "atp_psn"
ATP_BITMAP = PREFIX + "atp_bitmap"
ATP_COUNT = PREFIX + "atp_count"
ATP_HELD = PREFIX + "atp_held"
ATP_MARKED = PREFIX + "atp_marked"  # per job cell, ATP_MARKS_PER_JOB psns that fell back
JOB_CELLS = 1024  # atp_held's cells (JOB_TABLE_SIZE): job_id % JOB_CELLS
# A job may hold at most CAP_WINDOWS windows of aggregators at once (atp_held): its window
# of uses in flight, and as many again for uses whose result has not crossed yet.
CAP_WINDOWS = 2
# What the roles of an ATP job bring into the switch: its PS (at a leaf: the uplink) results
# and ACKs; at a spine, each leaf the pieces it sent to the PS unaggregated.
PS_FLAGS = Flag.RESULT | Flag.ACK
LEAF_FLAGS = Flag.FALLBACK | Flag.COLLISION | Flag.RETX
STATE_REGISTERS = (ATP_JOB, ATP_PSN, ATP_BITMAP, ATP_COUNT)


class AtpRequest(JobRequest, Scheduling, job_meter.Metered):
    """An ATP job: ``workers`` send ``window`` packets in flight each to the aggregators of
    ``[pool_offset, pool_offset + pool_size)`` of the ATP pool, shared with every job given
    an overlapping range; collisions and retransmissions go to the PS at ``agg_ip``.

    Roles for two-level racks (one entry set per switch): ``leaf`` sends
    completed aggregates up as member ``up_id`` of the spine; ``spine`` has the racks'
    leaves as its members (``workers`` = racks, ``worker_ports`` = the leaves' ports) and
    ``all_workers`` workers in total; a leaf's workers have the job-wide ids
    ``first_worker ..``, and it joins the spine's job: ``wire_job_id`` (the job id the
    packets carry on every switch, the spine job's id).

    With ``class`` (md/be, ``controller.jobs.job.Scheduling``) the job is scheduled: the
    scheduler gives it a range of the ATP pool of its own, sized by the seed's models and
    changed at epoch boundaries like a NetReduce job's region; its workers hash into it
    (collisions still fall back to the PS). No ``pool_offset``/``pool_size`` then.

    ``meter_pps`` (``controller.systems.job_meter.Metered``): the switch drops the job's packets
    beyond that rate (``METERED``)."""

    kind: Literal["atp"] = "atp"
    window: Annotated[int, Field(strict=True, ge=1, le=1 << 16)] = 32
    slots: Annotated[int, Field(strict=True)] = SLOTS
    pool_offset: Annotated[int, Field(strict=True, ge=0, lt=ATP_POOL_SIZE)] = 0
    pool_size: Annotated[int, Field(strict=True, ge=1, le=ATP_POOL_SIZE)] | None = None
    ps_port: Port | None = None
    role: Literal["single", "leaf", "spine"] = "single"
    up_id: Annotated[int, Field(strict=True, ge=0, lt=MAX_WORKERS)] = 0
    all_workers: Annotated[int, Field(strict=True, ge=1, le=MAX_WORKERS)] | None = None
    first_worker: Annotated[int, Field(strict=True, ge=0, lt=MAX_WORKERS)] = 0
    wire_job_id: Annotated[int, Field(strict=True, ge=1, le=0xFFFF)] | None = None

    @model_validator(mode="after")
    def _fits_the_pool(self) -> AtpRequest:
        if self.scheduled:
            given = {"pool_offset", "pool_size"} & self.model_fields_set
            if given:
                raise ValueError(
                    f"{', '.join(sorted(given))}: a scheduled job gets its range from the scheduler"
                )
            if self.role != "single":
                raise ValueError("a scheduled ATP job has role single (one switch)")
            if self.addressing is not None:
                raise ValueError("addressing: ATP jobs always hash (it is for netreduce jobs)")
        if self.slots != SLOTS:
            raise ValueError(
                f"the switch aggregates exactly {SLOTS} slots per packet, got {self.slots}"
            )
        size = self.region().size
        if self.pool_offset + size > ATP_POOL_SIZE:
            raise ValueError(
                f"pool range [{self.pool_offset}, {self.pool_offset + size}) is outside the"
                f" ATP pool of {ATP_POOL_SIZE} aggregators"
            )
        if self.role == "single" and self.all_workers is not None:
            raise ValueError("all_workers: only for roles leaf and spine")
        if self.role == "leaf" and self.wire_job_id is None:
            raise ValueError("a leaf joins a job admitted on the spine: give wire_job_id")
        if self.first_worker and self.role != "leaf":
            raise ValueError("first_worker: only for role leaf (a rack's first worker id)")
        if self.first_worker + self.workers > MAX_WORKERS:
            raise ValueError(f"worker ids beyond {MAX_WORKERS - 1}")
        return self

    def region(self) -> Region:
        size = self.pool_size if self.pool_size is not None else ATP_POOL_SIZE - self.pool_offset
        return Region(self.pool_offset, size)


class Atp(JobKind):
    name = "atp"
    request = AtpRequest
    pool = ATP_POOL
    pool_units = ATP_POOL_SIZE
    schedulable = True  # with class md/be: a range of its own, sized by the scheduler

    def region_size(self, req: JobRequest) -> int:
        assert isinstance(req, AtpRequest)
        return req.region().size

    def allocate_region(self, req: JobRequest) -> Region:
        assert isinstance(req, AtpRequest)
        return req.region()

    def allocate(self, memory: MemoryManager, job_id: int, req: JobRequest) -> Region:
        """The job's range of the shared pool; the memory manager records the whole pool as
        ATP's (owner ``atp-shared``), so that its view shows what ATP holds."""
        if memory.region_of(SHARED) is None:
            try:
                memory.reserve(SHARED, Region(0, memory.pool_size))
            except ValueError:
                raise OutOfMemory(
                    "the ATP pool holds ranges of scheduled ATP jobs; a shared-range ATP job"
                    " can be admitted once they have ended"
                ) from None
        return self.allocate_region(req)

    def reserve(self, memory: MemoryManager, job: Job) -> None:
        if job.params.get("scheduled"):  # a range of its own, from the scheduler
            memory.reserve(job.job_id, job.region)
            return
        if memory.region_of(SHARED) is None:
            memory.reserve(SHARED, Region(0, memory.pool_size))

    def free(self, memory: MemoryManager, job_id: int) -> None:
        """Nothing: the pool stays ATP's; the job's aggregators were freed by uninstall."""

    def make_job(
        self, req: JobRequest, job_id: int, device_id: int, region: Region, created_at: float
    ) -> Job:
        assert isinstance(req, AtpRequest)
        agg_ip, agg_mac = req.aggregation_address()
        ps_port = req.ps_port if req.ps_port is not None else req.workers + 1
        total = req.all_workers if req.all_workers is not None else req.workers
        return Job(
            job_id=job_id,
            name=req.name or f"job{job_id}",
            device_id=device_id,
            window=req.window,
            slots=req.slots,
            region=region,
            quorum=req.workers,
            mcast_grp=job_id,
            agg_ip=agg_ip,
            agg_mac=agg_mac,
            workers=tuple(
                replace(w, worker_id=w.worker_id + req.first_worker) for w in req.worker_specs()
            ),
            created_at=created_at,
            kind=self.name,
            params={
                **(req.scheduling_params(created_at) if req.scheduled else {}),
                **req.meter_params(),
                "addressing": "hash",
                "ps_port": ps_port,
                "role": req.role,
                "up_id": req.up_id,
                "all_workers": total,
                "wire_job_id": req.wire_job_id if req.wire_job_id is not None else job_id,
            },
        )

    async def clear(self, sw: SwitchConnection, region: Region) -> None:
        """Nothing: the range is shared; a job's own aggregators are freed at uninstall."""

    async def clear_owned(self, sw: SwitchConnection, region: Region) -> None:
        """A scheduled job's range, which nobody else may use now: every aggregator free."""
        cells = range(region.offset, region.end)
        for reg in STATE_REGISTERS:
            await sw.registers.fill(sw.register_name(reg), cells, 0)  # type: ignore[arg-type]

    async def follow_window(self, sw: SwitchConnection, job: Job, window: int) -> None:
        """The reclaim gap is the largest window the job's workers may use (A3)."""
        await sw.modify([atp_entry(on_wire(job), window)])

    def worker_config(self, job: Job, worker_id: int, switch_address: str) -> dict[str, Any]:
        """A leaf's workers carry the job-wide id and count in their packets."""
        cfg = super().worker_config(job, worker_id, switch_address)
        cfg["job_id"] = wire_id(job)
        cfg["n_workers"] = int(job.params.get("all_workers", job.n_workers))
        return cfg

    async def install(self, sw: SwitchConnection, job: Job, idempotent: bool = False) -> None:
        job = on_wire(job)
        await sw.set_multicast_group(*multicast_group(job))
        write = sw.upsert if idempotent else sw.insert
        if job.params.get("role") != "spine":
            # At a spine the members are leaves: the copies go on unchanged, and each leaf
            # addresses them to its workers.
            await write(result_rewrite.result_entries(job))
        await write(job_region.worker_entries(job))
        await write(flag_entries(job))
        await write([atp_entry(job)])
        await write(lender_entries(job))
        await write(job_meter.meter_entries(job))
        await free_held(sw, job.job_id)  # left by an earlier job with this id, if any
        await write([job_region.job_entry(job)])

    async def uninstall(self, sw: SwitchConnection, job: Job) -> None:
        job = on_wire(job)
        await sw.delete([job_region.job_key(job.job_id)], strict=False)
        await sw.delete([atp_key(job.job_id)], strict=False)
        await sw.delete([lender_key(job.job_id)], strict=False)
        await sw.delete([job_meter.meter_key(job.job_id)], strict=False)
        await sw.delete(flag_entries(job), strict=False)
        await sw.delete(job_region.worker_entries(job), strict=False)
        await sw.delete(result_rewrite.result_entries(job), strict=False)
        await sw.delete_multicast_group(job.mcast_grp, strict=False)
        await free_held(sw, job.job_id)

    async def installed(self, sw: SwitchConnection, job: Job) -> bool:
        return bool(await sw.read(job_region.job_key(wire_id(job))))

    async def live_stats(self, sw: SwitchConnection, job: Job) -> JobStats:
        job = on_wire(job)
        admitted = await job_region.read_counters(sw, job)
        packets, nbytes = admitted.job
        figures = [
            Figure("packets", packets, "aggregation packets of the job the switch admitted"),
            Figure("bytes", nbytes, "bytes of those packets"),
        ]
        events = await read_events(sw)
        for ev, n in events.items():
            figures.append(Figure(f"pool_{ev}", n, f"ATP pool (all jobs): {ev} so far"))
        for wid, (wp, _) in sorted(admitted.workers.items()):
            help_ = "packets from the worker that passed admission (retransmissions too)"
            figures.append(Figure(PROGRESS, wp, help_, worker=wid))
        r = job.region
        state = {"pool": f"ATP [{r.offset}, {r.end}), PS port {job.params.get('ps_port')}"}
        return JobStats(tuple(figures), state)


def multicast_group(job: Job) -> tuple[int, list[tuple[int, int]]]:
    """The job's group: its members (``result_rewrite``'s replicas) and, where the switch
    completes the job's aggregates (single switch, spine), its PS with ``ATP_PS_RID``: an
    aggregate completed here goes to both at once (``p4src/atp.p4``, ``AtpCopies``)."""
    group, replicas = result_rewrite.multicast_group(job)
    if job.params.get("role", "single") != "leaf":
        replicas = [*replicas, (int(job.params["ps_port"]), ATP_PS_RID)]
    return group, replicas


def wire_id(job: Job) -> int:
    """The job id the job's packets carry (a leaf's is its spine job's)."""
    return int(job.params.get("wire_job_id", job.job_id))


def on_wire(job: Job) -> Job:
    """``job`` with the id its switch entries are keyed by (its multicast group unchanged)."""
    return replace(job, job_id=wire_id(job))


def atp_entry(job: Job, window: int | None = None) -> P4TableEntry:
    """The job's ``atp_jobs`` entry; its reclaim gap is ``window`` (the largest its workers
    may use), by default the job's window, or for a shared-range job its range's size if
    smaller (the workers keep no more psns in flight than that, ``hosts/atp/worker.py``; a
    scheduled job's gap follows its ranges, ``Atp.follow_window``), and it may hold
    CAP_WINDOWS such windows of the shared pool."""
    p = job.params
    if window is None:
        window = job.window if p.get("scheduled") else min(job.window, job.region.size)
    gap = max(window, 1)
    all_workers = int(p.get("all_workers", job.n_workers))
    role = p.get("role", "single")
    members = (1 << all_workers) - 1
    if role == "leaf":
        members = sum(1 << w.worker_id for w in job.workers)
    return table_entry(
        ATP_JOBS,
        {"hdr.inc.job_id": job.job_id},
        "IncIngress.atp.set_atp",
        ps=int(p["ps_port"]),
        is_top=0 if role == "leaf" else 1,
        up=int(p.get("up_id", 0)),
        of_racks=1 if role == "spine" else 0,
        workers=members,
        reclaim_gap=gap,
        cap=CAP_WINDOWS * gap,
        mcast_grp=job.mcast_grp,
    )


def lender_entries(job: Job) -> list[P4TableEntry]:
    """``atp_lenders``: a single-switch job's complete uses may be taken over by another
    job's packet, which then carries the sum to this job's PS (its address, worker bitmap
    and quorum). Roles leaf and spine lend nothing (their sums are a rack's, or go up)."""
    if job.params.get("role", "single") != "single":
        return []
    return [
        table_entry(
            ATP_LENDERS,
            {"meta.atp_owner": job.job_id},
            "IncIngress.atp.lend_to",
            ps_ip=job.agg_ip,
            workers=(1 << job.n_workers) - 1,
            quorum=job.quorum,
        )
    ]


def lender_key(job_id: int) -> P4TableEntry:
    return P4TableEntry(ATP_LENDERS, match=P4TableMatch({"meta.atp_owner": job_id}))


def flag_entries(job: Job) -> list[P4TableEntry]:
    """``result_guard.p4``: the PS's port brings results and ACKs; at a spine, the leaves'
    ports bring their fallback pieces."""
    out = result_guard.port_entries(job.job_id, Op.AGG_SYNC, [int(job.params["ps_port"])], PS_FLAGS)
    if job.params.get("role") == "spine":
        leaves = [w.port for w in job.workers]
        out += result_guard.port_entries(job.job_id, Op.AGG_SYNC, leaves, LEAF_FLAGS)
    return out


def atp_key(job_id: int) -> P4TableEntry:
    return P4TableEntry(ATP_JOBS, match=P4TableMatch({"hdr.inc.job_id": job_id}))


async def read_tags(sw: SwitchConnection, region: Region) -> dict[int, tuple[int, int, int]]:
    """Per aggregator of ``region`` that holds a use: ``index -> (job, psn, count)``."""
    names = [sw.register_name(n) for n in (ATP_JOB, ATP_PSN, ATP_COUNT)]
    jobs, psns, counts = [await sw.registers.read_all(name) for name in names]
    return {
        i: (jobs.get(i, 0), psns.get(i, 0), counts.get(i, 0))
        for i in range(region.offset, region.end)
        if counts.get(i, 0) != 0
    }


async def free_held(sw: SwitchConnection, job_id: int) -> int:
    """Zero every aggregator of the pool that holds a use of ``job_id``, wherever the job
    hashed into (its ranges before a re-plan too), so that the job id's next owner finds
    none of it; returns how many. Called with the job's entries absent: then no packet can
    add to, release or reclaim such an aggregator, and no other job can claim a held one,
    so nothing changes between this read and the writes. Its fall-back marks are cleared
    too (a mark left would send that psn of the id's next owner to the PS, exactly but
    slower). Released aggregators (count 0)
    are claimable by every job sharing the range and are left alone: one still tagged
    with a psn of the id's next owner drops that psn's packets as ``STALE``, and its
    workers' retransmissions reach the PS (A3); a scheduled job's ranges are cleared
    whole (``Atp.clear_owned``)."""
    names = [sw.register_name(n) for n in (ATP_JOB, ATP_COUNT)]
    jobs, counts = [await sw.registers.read_all(name) for name in names]
    mine = sorted(i for i, j in jobs.items() if j == job_id and counts.get(i, 0) != 0)
    for reg in STATE_REGISTERS:
        await sw.registers.fill(sw.register_name(reg), mine, 0)  # type: ignore[arg-type]
    cell = job_id % JOB_CELLS
    await sw.fill_register(ATP_HELD, range(cell, cell + 1), 0)  # it holds none now
    marks = range(cell * ATP_MARKS_PER_JOB, (cell + 1) * ATP_MARKS_PER_JOB)
    await sw.fill_register(ATP_MARKED, marks, 0)  # the id's next owner starts unmarked
    return len(mine)


async def read_events(sw: SwitchConnection) -> dict[str, int]:
    """The pool's statistics since the switch started: ``{event name: packets}``."""
    got = await sw.read_counter(ATP_EVENTS)
    return {e.name.lower(): got.get(int(e), (0, 0))[0] for e in AtpEvent}


async def pool_stats(sw: SwitchConnection, region: Region | None = None) -> dict[str, int]:
    """Occupancy (aggregators held now) and the event counters, for ``incctl switch memory``."""
    r = region if region is not None else Region(0, ATP_POOL_SIZE)
    held = await read_tags(sw, r)
    return {"pool_size": r.size, "held": len(held), **await read_events(sw)}


register(Atp())
