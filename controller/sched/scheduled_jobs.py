"""Scheduled jobs in the daemon: the scheduler decides their memory, epoch slots apply it.

Example (what the job manager does; ``python -m controller.daemon --policy edf``)::

    job = await manager.submit(parse_request({"workers": 2, "class": "md", "epochs": 50,
        "model_bytes": 400_000, "compute_ms": 20, "deadline_s": 90}))
    cfg = await manager.epoch(job.job_id, worker_id=0, epoch=0)     # region of epoch 0
    ...                                                             # every epoch, every worker
    await manager.epoch(job.job_id, worker_id=0, epoch=50)          # done: memory goes back

A job submitted with a class (``controller.jobs.job.Scheduling``) is not given a fixed region:
it joins its switch's ``Scheduler`` (``controller/sched/scheduler.py``, the same code the
simulator drives), which re-plans at every event (arrival, completion, a quantum's end,
memory released, and every ``replan_interval`` seconds of progress) and resizes regions
with the memory manager. A changed region becomes the job's *target*; its workers ask for
each epoch's configuration before starting it (``epoch``), and ``controller/sched/switchover.py``
decides when the target is written into an epoch slot and which memory the switch may
still use, so that each epoch runs entirely under one layout. Memory the job no longer
uses is cleared on the switch and released, and the scheduler re-plans with it.

All state changes run under the job manager's lock, on its event loop; the clears do not
(a clear writes every cell of a region over P4Runtime: minutes for a large one on BMv2).
Memory taken back from a job is held by a ``Clearing`` owner, which nobody can be given,
until the manager has cleared it without the lock (``take_clear``, ``cleared``); a job
being admitted keeps the region it was given (``Scheduler.admitting``) while it is cleared.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from controller.jobs.job import MAX_EPOCHS, Job, JobError, JobRequest, Scheduling
from controller.jobs.job_kinds import AGG_POOL, kind_of
from controller.jobs.memory_manager import MemoryManager, Region
from controller.jobs.sizing import Network, Profile
from controller.sched.policies import DEFAULT_QUANTUM, make_policy
from controller.sched.scheduler import Change, JobClass, SchedJob, Scheduler
from controller.sched.switchover import SlotConfig, Switchover, SwitchoverError
from controller.systems import job_region

if TYPE_CHECKING:
    from controller.jobs.events import EventLog
    from controller.jobs.store import JobStore
    from controller.p4rt.p4runtime_client import SwitchConnection

log = logging.getLogger("controller.sched.scheduled_jobs")

NO_REGION = Region(0, 0)


class JobTable(Protocol):
    """What scheduled jobs use of the job manager (``controller/job_manager.py``): its
    admitted jobs, their switches, store and event log, and its memory pools."""

    switches: dict[int, SwitchConnection]
    store: JobStore
    events: EventLog

    def jobs(self) -> list[Job]: ...

    def get(self, job_id: int) -> Job: ...

    def find(self, job_id: int) -> Job | None: ...

    def set_region(self, job: Job, region: Region) -> Job: ...

    def forget(self, job_id: int) -> None: ...

    def pool_memory(self, device_id: int, pool: str) -> MemoryManager: ...


@dataclass(frozen=True)
class Clearing:
    """Owner of memory taken back from job ``job_id`` until the switch has cleared it."""

    job_id: int
    serial: int


@dataclass(frozen=True)
class ToClear:
    """Memory of one pool of one switch, held by ``owner``, to be cleared without the
    manager's lock."""

    device_id: int
    kind: str
    owner: Clearing
    regions: tuple[Region, ...]
    key: int  # its row in the store (a restarted controller clears it)


@dataclass(frozen=True)
class Admission:
    """A scheduled job given its region under the lock, installed once it is cleared."""

    job: Job  # with the region it was given (size 0: none yet)


@dataclass(frozen=True)
class SchedulingOptions:
    """Daemon options of the scheduler (``--policy``, ``--quantum``, ``--rtt-ms``,
    ``--line-mbps``): the path model is used until a job's workers report their RTT."""

    policy: str = "edf"
    quantum: float = DEFAULT_QUANTUM
    rtt_s: float = 100e-6
    line_rate: float = 100e9 / 8  # bytes/s of one worker's link
    replan_interval: float = 5.0  # seconds between re-plans on progress alone

    def __post_init__(self) -> None:
        make_policy(self.policy, self.quantum)  # a bad name or quantum fails here
        Network(self.rtt_s, self.line_rate)
        if self.replan_interval <= 0:
            raise ValueError("replan_interval must be positive")

    @property
    def network(self) -> Network:
        return Network(self.rtt_s, self.line_rate)


class EpochError(JobError):
    """A worker's epoch request that breaks the protocol (409)."""


MAX_WAIT = 60.0  # seconds an epoch request may wait for memory or the other workers


class EpochRequest(BaseModel):
    """Body of ``POST /jobs/{id}/workers/{w}/epoch``: the epoch the worker is about to
    start (``epochs``: it is done), its measured round-trip time, how long to wait."""

    model_config = ConfigDict(extra="forbid")

    epoch: Annotated[int, Field(strict=True, ge=0, le=MAX_EPOCHS)]
    rtt_s: Annotated[float, Field(gt=0, le=60, allow_inf_nan=False)] | None = None
    wait: Annotated[float, Field(ge=0, le=MAX_WAIT, allow_inf_nan=False)] = 0.0


class ScheduledJobs:
    """The scheduled jobs of one ``JobManager`` (which calls in with its lock held)."""

    def __init__(
        self,
        manager: JobTable,
        options: SchedulingOptions,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.m = manager
        self.options = options
        self.clock = clock
        self.schedulers: dict[tuple[int, str], Scheduler] = {}  # (device, memory pool)
        self.switchovers: dict[int, Switchover] = {}
        self.done: dict[int, set[int]] = {}
        self.finished: list[dict[str, Any]] = []
        self._last_plan = clock()
        self._version = 0
        self._changed: asyncio.Event | None = None  # set (and replaced) at every change
        self._to_clear: list[ToClear] = []
        self._clearings = 0
        for job in manager.jobs():
            if job.params.get("scheduled"):
                self._adopt(job)
        for key, device, kind, job_id, regions in manager.store.clearings():
            self._resume_clearing(key, device, kind, job_id, regions)

    def scheduler(self, device_id: int, pool: str = AGG_POOL) -> Scheduler:
        """The scheduler of one memory pool of one switch (NetReduce's ``agg``, ATP's ``atp``)."""
        key = (device_id, pool)
        if key not in self.schedulers:
            memory = self.m.pool_memory(device_id, pool)
            policy = make_policy(self.options.policy, self.options.quantum)
            self.schedulers[key] = Scheduler(policy, memory)
        return self.schedulers[key]

    def _scheduler_of(self, job: Job) -> Scheduler:
        return self.scheduler(job.device_id, kind_of(job.kind).pool)

    def is_scheduled(self, job_id: int) -> bool:
        return job_id in self.switchovers

    def _sched_job(self, job: Job) -> SchedJob:
        p = job.params
        return SchedJob(
            job_id=job.job_id,
            job_class=JobClass(p["class"]),
            profile=Profile(p["epochs"], p["model_bytes"], p["compute_ms"] / 1e3),
            arrival=job.created_at,
            network=self.options.network,
            deadline=p.get("deadline"),
            throughput_target=p.get("throughput"),
            memory=job.region.size,
        )

    def _adopt(self, job: Job) -> None:
        """A stored job after a restart: scheduled again from its stored region, both slots
        set to it (``restore`` rewrites them); its progress is learnt from its workers."""
        self._scheduler_of(job).add(self._sched_job(job))
        config = SlotConfig(job.region if job.region.size else None, job.quorum)
        self.switchovers[job.job_id] = Switchover(
            [w.worker_id for w in job.workers], config, resumed=True
        )
        self.done[job.job_id] = set()

    # -- admission and removal ---------------------------------------------------------

    async def admit(self, req: JobRequest, job_id: int, device: int) -> Admission:
        """Schedule a new job (lock held): the region it is given, kept for it (no re-plan
        moves it) until ``install`` or ``abandon``; the caller clears it meanwhile."""
        assert isinstance(req, Scheduling) and req.scheduled
        kind = kind_of(req.kind)
        if not kind.schedulable:
            raise JobError(f"{req.kind} jobs cannot be scheduled (only netreduce and atp jobs)")
        sched = self.scheduler(device, kind.pool)
        stub = kind.make_job(req, job_id, device, NO_REGION, self.clock())
        sched.add(self._sched_job(stub))
        try:
            await self.reschedule(device, kind.pool)
        except BaseException:
            sched.remove(job_id)
            raise
        sched.admitting.add(job_id)
        region = sched.memory.region_of(job_id) or NO_REGION
        return Admission(replace(stub, region=region, window=region.size))

    async def clear_admitted(self, admission: Admission) -> None:
        """Clear the region given to a job being admitted (without the lock)."""
        job = admission.job
        if job.region.size:
            await kind_of(job.kind).clear_owned(self.m.switches[job.device_id], job.region)

    async def install(self, admission: Admission) -> Job:
        """Install a job whose region is cleared (lock held)."""
        job = admission.job
        kind = kind_of(job.kind)
        sched = self._scheduler_of(job)
        sched.admitting.discard(job.job_id)
        sw = self.m.switches[job.device_id]
        config = SlotConfig(job.region if job.region.size else None, job.quorum)
        try:
            await sw.insert(
                [job_region.slot_entry(job.job_id, s, config.region, job.quorum) for s in (0, 1)]
            )
            await kind.install(sw, job)
            self.m.store.add(job)
        except BaseException:
            await _quietly(kind.uninstall(sw, job))
            await _quietly(self._delete_slots(sw, job.job_id))
            await self.abandon(admission)
            raise
        self.switchovers[job.job_id] = Switchover([w.worker_id for w in job.workers], config)
        self.done[job.job_id] = set()
        self._notify()
        return job

    async def abandon(self, admission: Admission) -> None:
        """Take back a job whose admission failed (lock held)."""
        job = admission.job
        sched = self._scheduler_of(job)
        sched.admitting.discard(job.job_id)
        if job.job_id in sched.jobs:
            sched.remove(job.job_id)
        await self.reschedule(job.device_id, kind_of(job.kind).pool)

    async def remove(self, job: Job, finished: bool) -> None:
        """Take the job off the switch and out of the scheduler (cancelled or finished)."""
        kind = kind_of(job.kind)
        sched = self.scheduler(job.device_id, kind.pool)
        self.switchovers.pop(job.job_id)
        self.done.pop(job.job_id, None)
        # What it holds (its epoch slots name only that): its region and retiring memory.
        held = [r for r in [sched.memory.region_of(job.job_id)] if r]
        held += sched.memory.retiring_of(job.job_id)
        sw = self.m.switches.get(job.device_id)
        if sw is not None:
            await kind.uninstall(sw, job)
            await self._delete_slots(sw, job.job_id)
        sjob = sched.jobs[job.job_id]
        sched.remove(job.job_id)
        if sw is not None:
            self._hold_for_clearing(job, held)
        now = self.clock()
        self.finished.append(
            {
                "job_id": job.job_id,
                "name": job.name,
                "class": sjob.job_class.value,
                "state": "finished" if finished else "cancelled",
                "submitted": job.created_at,
                "ended": now,
                "jct": now - job.created_at,
                "deadline": sjob.deadline,
                "met": None if sjob.deadline is None else now <= sjob.deadline,
                "epochs": sjob.profile.epochs,
            }
        )
        await self.reschedule(job.device_id, kind.pool)
        self._notify()

    async def _delete_slots(self, sw: Any, job_id: int) -> None:
        await sw.delete([job_region.slot_key(job_id, s) for s in (0, 1)], strict=False)

    async def restore_slots(self, sw: Any, job: Job) -> None:
        so = self.switchovers[job.job_id]
        entries = [
            job_region.slot_entry(job.job_id, s, c.region, c.quorum) for s, c in enumerate(so.slots)
        ]
        await sw.upsert(entries)

    # -- re-planning -------------------------------------------------------------------

    async def reschedule(self, device: int, pool: str = AGG_POOL) -> list[Change]:
        """Re-plan the device's pool; retarget the jobs whose region changed and release
        memory that no epoch slot names any more (which may let the plan grow again)."""
        sched = self.scheduler(device, pool)
        self._last_plan = self.clock()
        changes = sched.replan(self.clock())
        for c in changes:
            await self._retarget(c)
        if changes:
            self._notify()
        return changes

    async def _retarget(self, c: Change) -> None:
        so = self.switchovers.get(c.job_id)
        job = self.m.find(c.job_id)
        if so is None or job is None:
            return  # being admitted: it starts with what it was given
        so.retarget(SlotConfig(c.new, job.quorum))
        await self._follow_window(self.m.set_region(job, c.new or NO_REGION))
        log.info("job %d: target region %s (was %s)", c.job_id, c.new, c.old)
        self.m.events.record(
            "rescheduled",
            f"job {c.job_id} ({job.name}), {self.options.policy}: {_span(c.old)} -> "
            f"{_span(c.new)} from its next epoch",
            c.job_id,
            job.device_id,
        )
        self._release(job)

    def _release(self, job: Job) -> None:
        """Take back the job's memory that neither its target nor a slot names: held for
        clearing (then free, and the pool re-planned)."""
        sched = self._scheduler_of(job)
        freed = sched.memory.release(job.job_id, keep=self.switchovers[job.job_id].regions())
        if self.m.switches.get(job.device_id) is None:
            return  # no switch to clear: the next owner's admission clears it
        self._hold_for_clearing(job, freed)

    def _hold_for_clearing(self, job: Job, regions: list[Region]) -> None:
        """Hold ``regions`` (free in the job's pool now) until the switch has cleared them;
        kept in the store too, so that a controller stopped meanwhile clears them next run."""
        if not regions:
            return
        self._clearings += 1
        owner = Clearing(job.job_id, self._clearings)
        kind = kind_of(job.kind)
        self.m.pool_memory(job.device_id, kind.pool).reserve(owner, NO_REGION, retiring=regions)
        key = self.m.store.add_clearing(job.device_id, job.kind, job.job_id, regions)
        self._to_clear.append(ToClear(job.device_id, job.kind, owner, tuple(regions), key))

    def _resume_clearing(
        self, key: int, device: int, kind: str, job_id: int, regions: list[Region]
    ) -> None:
        """A clear the previous run of the controller did not finish: held again, queued."""
        self._clearings += 1
        owner = Clearing(job_id, self._clearings)
        try:
            memory = self.m.pool_memory(device, kind_of(kind).pool)
            memory.reserve(owner, NO_REGION, retiring=regions)
        except (ValueError, KeyError, JobError) as err:  # a stored job holds it: not ours
            log.warning("not clearing %s after job %d: %s", regions, job_id, err)
            self.m.store.remove_clearing(key)
            return
        self._to_clear.append(ToClear(device, kind, owner, tuple(regions), key))

    def take_clear(self) -> ToClear | None:
        """The next memory waiting to be cleared (the caller clears it without the lock,
        then calls ``cleared``), or None."""
        return self._to_clear.pop(0) if self._to_clear else None

    def put_back(self, todo: ToClear) -> None:
        """A clear cut short (its request was cancelled): still held, the next request
        that clears memory takes it again."""
        self._to_clear.insert(0, todo)

    async def cleared(self, done: ToClear) -> None:
        """Memory held for clearing is clear (or could not be: the next owner's admission
        clears it): free now, and its pool re-planned with it (lock held)."""
        pool = kind_of(done.kind).pool
        self.m.pool_memory(done.device_id, pool).free(done.owner)
        self.m.store.remove_clearing(done.key)
        if (done.device_id, pool) in self.schedulers:
            await self.reschedule(done.device_id, pool)
        self._notify()

    async def _follow_window(self, job: Job) -> None:
        """Tell the job's kind the largest window its workers may use now: its target's or
        an epoch slot's size (a grown target before any worker is told it, a shrunk one
        once no slot names the larger region)."""
        so = self.switchovers.get(job.job_id)
        sw = self.m.switches.get(job.device_id)
        if so is None or sw is None:
            return
        window = max([r.size for r in so.regions()] + [job.region.size])
        await kind_of(job.kind).follow_window(sw, job, window)

    async def tick(self) -> None:
        for device, pool in list(self.schedulers):
            await self.reschedule(device, pool)

    def next_wakeup(self) -> float:
        """Clock time of the next re-plan the policies or the interval ask for."""
        now = self.clock()
        times = [self._last_plan + self.options.replan_interval]
        for sched in self.schedulers.values():
            t = sched.next_decision(now)
            if t is not None:
                times.append(t)
        return min(times)

    # -- the workers' epoch protocol ---------------------------------------------------

    async def epoch(
        self, job_id: int, worker_id: int, epoch: int, rtt_s: float | None
    ) -> tuple[dict[str, Any], int]:
        """One ask (lock held): the reply and the version to wait on if it says wait."""
        job = self.m.get(job_id)
        so = self.switchovers.get(job_id)
        if so is None:
            raise EpochError(f"job {job_id} is not scheduled (it was submitted without class)")
        epochs = int(job.params["epochs"])
        sched = self._scheduler_of(job)
        if worker_id not in so.asked:
            raise EpochError(f"job {job_id} has no worker {worker_id}")
        if epoch > epochs or epoch < 0:
            raise EpochError(f"job {job_id} has epochs 0..{epochs - 1}; {epoch} is none of them")
        if rtt_s is not None:
            sched.update(job_id, rtt_s=rtt_s)
        if epoch == epochs:  # the worker finished its last epoch
            if so.asked[worker_id] != epochs - 1 and worker_id not in self.done[job_id]:
                raise EpochError(
                    f"worker {worker_id} of job {job_id} reports done after epoch"
                    f" {so.asked[worker_id]}, not {epochs - 1}"
                )
            self.done[job_id].add(worker_id)
            if self.done[job_id] == set(so.asked):
                sched.update(job_id, epochs_done=epochs)
                self.m.forget(job_id)
                await self.remove(job, finished=True)
                log.info("job %d finished", job_id)
            return {"job_id": job_id, "epoch": epoch, "done": True, "wait": False}, self._version
        before = so.lo
        try:
            answer = so.ask(worker_id, epoch)
        except SwitchoverError as err:
            raise EpochError(f"job {job_id}: {err}") from None
        sw = self.m.switches[job.device_id]
        if answer.writes:
            await sw.modify(
                [job_region.slot_entry(job_id, s, c.region, c.quorum) for s, c in answer.writes]
            )
            self._notify()
        self._release(job)
        if answer.writes:
            await self._follow_window(job)
        if so.lo > before:
            sched.update(job_id, epochs_done=max(so.lo, 0))
        r = answer.config.region or NO_REGION
        reply = {
            "job_id": job_id,
            "epoch": epoch,
            "done": False,
            "wait": answer.wait,
            "region_offset": r.offset,
            "region_size": r.size,
            "window": r.size,
        }
        return reply, self._version

    def _notify(self) -> None:
        self._version += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_change(self, version: int, timeout: float) -> None:
        """Until something changed after ``version`` (or ``timeout`` seconds)."""
        if version != self._version:
            return
        if self._changed is None:
            self._changed = asyncio.Event()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    # -- what ``incctl sched show`` prints ----------------------------------------------

    def view(self) -> dict[str, Any]:
        now = self.clock()
        switches = []
        for (device, pool), sched in sorted(self.schedulers.items()):
            rows = sched.view(now)
            for row in rows:
                job = self.m.find(row["job_id"])
                so = self.switchovers.get(row["job_id"])
                row["name"] = job.name if job else ""
                if so is not None:
                    row["worker_epochs"] = dict(so.asked)
                    row["slots"] = [
                        None
                        if c.region is None
                        else {"offset": c.region.offset, "size": c.region.size}
                        for c in so.slots
                    ]
            switches.append(
                {
                    "device_id": device,
                    "pool": pool,
                    "pool_size": sched.memory.pool_size,
                    "capacity": sched.capacity(),
                    "free": sched.memory.free_total(),
                    "jobs": rows,
                }
            )
        return {
            "policy": self.options.policy,
            "now": now,
            "switches": switches,
            "finished": list(self.finished),
        }


def _span(r: Region | None) -> str:
    return "no memory" if r is None or r.size == 0 else f"[{r.offset}, {r.offset + r.size})"


async def _quietly(coro: Any) -> None:
    from controller.p4rt.p4runtime_client import SwitchError

    try:
        await coro
    except SwitchError as err:
        log.warning("rollback incomplete: %s", err)
