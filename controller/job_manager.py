"""Job admission: allocate memory, install the job's switch state, remember it.

Example::

    manager = JobManager({0: sw}, JobStore("run/controller.db"))
    await manager.restore()                       # after a restart: re-install lost state
    job = await manager.submit(parse_request({"workers": 4, "window": 64}))
    await manager.cancel(job.job_id)              # entries gone, region cleared and free

What every kind of job shares happens here: the switch and a free job id are chosen, a
region of the kind's memory pool is allocated (one ``MemoryManager`` per switch and pool),
the region is cleared and the kind's entries installed, the job is stored; any failure
rolls all of it back. What differs by kind (``controller/jobs/job_kinds.py``) is delegated:
how much memory, which entries in which order, what hosts are told. Cancellation removes
the entries, then clears the region for the next owner.

A clear writes every cell of a region over P4Runtime (minutes for a large one), so it runs
without the manager's lock: the job's id and region stay held (``_clearing``) until it
ends, and the other jobs' requests (epochs, swaps, admissions) are served meanwhile. The
same holds for the scheduler's clears (a scheduled job's admission, memory it takes back
from a job at a re-plan, an epoch boundary or the job's end): the request that caused one
runs it after giving the lock back (``_clear_taken_back``), the memory held meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import controller.systems  # noqa: F401  (every kind, registered)
from controller.jobs.events import EventLog
from controller.jobs.job import MAX_JOB_ID, Job, JobError, JobRequest
from controller.jobs.job_kinds import AGG_POOL, TICK_S, JobKind, kind_of, kind_pools
from controller.jobs.memory_manager import AGG_POOL_SIZE, MemoryManager, OutOfMemory, Region
from controller.jobs.stamps import STAMPS
from controller.jobs.store import JobStore
from controller.p4rt.p4runtime_client import SwitchConnection, SwitchError
from controller.sched.scheduled_jobs import (
    Admission,
    Clearing,
    ScheduledJobs,
    SchedulingOptions,
    ToClear,
)

log = logging.getLogger("controller.job_manager")


class UnknownJob(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class JobManager:
    """Admitted jobs of a set of switches (all calls from one asyncio loop)."""

    def __init__(
        self,
        switches: Mapping[int, SwitchConnection],
        store: JobStore,
        pool_size: int = AGG_POOL_SIZE,
        reserved_groups: Iterable[int] = (),
        pools: Mapping[str, int] | None = None,
        events: EventLog | None = None,
        scheduling: SchedulingOptions | None = None,
    ) -> None:
        if not switches:
            raise ValueError("a JobManager needs at least one switch")
        self.switches = dict(switches)
        self.store = store
        # pool name -> units: every kind's pool, the aggregator pool as given
        self.pool_sizes = {**kind_pools(), AGG_POOL: pool_size, **(pools or {})}
        self.reserved_groups = set(reserved_groups)  # multicast groups not ours to use
        self.memory: dict[int, dict[str, MemoryManager]] = {}
        self._jobs: dict[int, Job] = {}
        self._lock = asyncio.Lock()
        # One lock per job id around every change of a job's switch state (a mode swap,
        # cancel, restore): taken after ``_lock`` when both are, never the other way round.
        self._job_locks: dict[int, asyncio.Lock] = {}
        # Ids whose region is being cleared outside ``_lock`` (a clear of a large region
        # takes minutes): held, with their memory, so that no new job takes them meanwhile.
        self._clearing: set[int] = set()
        self.events = events if events is not None else EventLog()
        STAMPS.attach(store.next_run)  # unique across this controller's restarts
        for dev in self.switches:
            self._device_memory(dev)
        for job in store.jobs():
            self._jobs[job.job_id] = job
            if job.region.size:
                kind = kind_of(job.kind)
                kind.reserve(self.pool_memory(job.device_id, kind.pool), job)
        # Jobs submitted with a class: the scheduler sizes their memory while they run.
        self.scheduled = ScheduledJobs(self, scheduling or SchedulingOptions())

    @property
    def pool_size(self) -> int:
        return self.pool_sizes[AGG_POOL]

    def _device_memory(self, device_id: int) -> dict[str, MemoryManager]:
        if device_id not in self.memory:  # also a stored job's switch not connected now
            self.memory[device_id] = {
                pool: MemoryManager(size) for pool, size in self.pool_sizes.items()
            }
        return self.memory[device_id]

    def pool_memory(self, device_id: int, pool: str) -> MemoryManager:
        pools = self._device_memory(device_id)
        if pool not in pools:
            raise JobError(f"switch {device_id} has no memory pool {pool!r}")
        return pools[pool]

    # -- queries ---------------------------------------------------------------------

    def jobs(self) -> list[Job]:
        return [self._jobs[k] for k in sorted(self._jobs)]

    def find(self, job_id: int) -> Job | None:
        """The job with ``job_id``, or None when there is none."""
        return self._jobs.get(job_id)

    def get(self, job_id: int) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise UnknownJob(f"no job {job_id}") from None

    @asynccontextmanager
    async def locked(self, job_id: int) -> AsyncIterator[Job]:
        """The job with ``job_id`` while no other change of its switch state runs: it is
        looked up after the lock is taken, so a job cancelled (and its id given to a new
        job) while the caller waited is never changed in the old job's name."""
        lock = self._job_locks.setdefault(job_id, asyncio.Lock())
        async with lock:
            yield self.get(job_id)

    def memory_view(self) -> list[dict[str, Any]]:
        """Per switch and pool: size and every segment with its owner (job id and name).
        The aggregator pool's figures also stand at the top level of each switch's entry."""
        out = []
        for dev, pools in sorted(self.memory.items()):
            views = {pool: self._pool_view(mm) for pool, mm in pools.items()}
            out.append({"device_id": dev, **views[AGG_POOL], "pools": views})
        return out

    def _pool_view(self, mm: MemoryManager) -> dict[str, Any]:
        segs = []
        for s in mm.segments():
            owner = s.owner.job_id if isinstance(s.owner, Clearing) else s.owner  # being cleared
            job = self._jobs.get(owner) if isinstance(owner, int) else None
            segs.append(
                {
                    "offset": s.offset,
                    "size": s.size,
                    "job_id": owner,
                    "name": job.name if job else None,
                    "kind": job.kind if job else None,
                    "retiring": s.retiring,
                }
            )
        return {
            "pool_size": mm.pool_size,
            "free": mm.free_total(),
            "largest_free": mm.largest_free(),
            "segments": segs,
        }

    # -- admission -------------------------------------------------------------------

    async def submit(self, req: JobRequest) -> Job:
        kind = kind_of(req.kind)
        async with self._lock:
            device = req.device_id if req.device_id is not None else min(self.switches)
            if device not in self.switches:
                raise JobError(f"no switch with device id {device} (have {sorted(self.switches)})")
            job_id = self._free_job_id()
            admission = None
            if getattr(req, "scheduled", False):
                admission = await self.scheduled.admit(req, job_id, device)
            else:
                memory = self.pool_memory(device, kind.pool)
                region = kind.allocate(memory, job_id, req)
                job = kind.make_job(req, job_id, device, region, time.time())
                sw = self.switches[device]
            self._clearing.add(job_id)
        if admission is not None:
            return await self._admit_scheduled(admission)
        try:
            try:
                await kind.clear(sw, region)  # without ``_lock``: the id and region are held
                async with self._lock:
                    await kind.install(sw, job)
                    self.store.add(job)
                    self._jobs[job_id] = job
            except BaseException:
                kind.free(memory, job_id)
                await _quietly(kind.uninstall(sw, job))
                raise
        finally:
            self._clearing.discard(job_id)
        self.events.record(
            "admitted",
            f"{job.kind} job {job_id} ({job.name}): {job.n_workers} workers,"
            f" {kind.pool} [{region.offset}, {region.offset + region.size})",
            job_id,
            device,
        )
        log.info(
            "admitted %s job %d (%s): %d workers, %s region %s on device %d",
            job.kind,
            job_id,
            job.name,
            job.n_workers,
            kind.pool,
            region,
            device,
        )
        return job

    async def _admit_scheduled(self, admission: Admission) -> Job:
        job_id = admission.job.job_id
        try:
            try:
                await self.scheduled.clear_admitted(admission)  # without ``_lock``
            except BaseException:
                async with self._lock:
                    await self.scheduled.abandon(admission)
                raise
            async with self._lock:
                job = await self.scheduled.install(admission)
                self._jobs[job_id] = job
        finally:
            self._clearing.discard(job_id)
        await self._clear_taken_back()
        log.info("admitted scheduled job %d (%s), region %s", job_id, job.name, job.region)
        return job

    async def _clear_taken_back(self) -> None:
        """Clear the memory the scheduler took back from jobs (without ``_lock``; each
        clear once, whichever request finds it first), then give it to the pool."""
        while (todo := self.scheduled.take_clear()) is not None:
            kind = kind_of(todo.kind)
            sw = self.switches.get(todo.device_id)
            try:
                if sw is not None:
                    for region in todo.regions:
                        await kind.clear_owned(sw, region)
            except SwitchError as err:  # freed all the same: a later admission clears it
                log.warning("clearing %s after job %d: %s", todo.regions, todo.owner.job_id, err)
            except asyncio.CancelledError:  # the request ended (daemon stopping): still held
                self.scheduled.put_back(todo)
                raise
            await asyncio.shield(self._cleared(todo))  # freed once, even if cancelled now

    async def _cleared(self, todo: ToClear) -> None:
        async with self._lock:
            await self.scheduled.cleared(todo)

    async def cancel(self, job_id: int) -> Job:
        async with self._lock, self.locked(job_id) as job:
            scheduled = self.scheduled.is_scheduled(job_id)
            kind = kind_of(job.kind)
            sw = self.switches.get(job.device_id)
            if scheduled:
                self.forget(job_id)
                await self.scheduled.remove(job, finished=False)  # its memory held to clear
            else:
                if sw is not None:
                    await kind.uninstall(sw, job)
                self.store.remove(job_id)
                del self._jobs[job_id]
                self._clearing.add(job_id)
        if scheduled:
            await self._clear_taken_back()
            log.info("cancelled scheduled job %d", job_id)
            return job
        memory = self.pool_memory(job.device_id, kind.pool)
        try:
            if sw is not None:  # without ``_lock``: the id and region stay held meanwhile
                await kind.clear(sw, job.region)
        finally:
            # A clear cut short leaves stale tags, which the next owner's admission clears.
            kind.free(memory, job_id)
            self._clearing.discard(job_id)
        self.events.record(
            "cancelled", f"job {job_id} ({job.name}): region freed", job_id, job.device_id
        )
        log.info("cancelled job %d; region %s is free", job_id, job.region)
        return job

    async def restore(self, device_id: int | None = None) -> list[int]:
        """Re-install the stored jobs a switch lost (restarted switch); their ids.
        Only those of ``device_id`` when given."""
        again = []
        async with self._lock:
            for job in self.jobs():
                if device_id is not None and job.device_id != device_id:
                    continue
                sw = self.switches.get(job.device_id)
                if sw is None:
                    log.warning("job %d: switch %d is not connected", job.job_id, job.device_id)
                    continue
                kind = kind_of(job.kind)
                async with self.locked(job.job_id):
                    if self.scheduled.is_scheduled(job.job_id):
                        await self.scheduled.restore_slots(sw, job)
                    if await kind.installed(sw, job):
                        continue
                    await kind.install(sw, job, idempotent=True)
                    again.append(job.job_id)
                    self.events.record(
                        "restored",
                        f"job {job.job_id}: re-installed on switch {job.device_id}",
                        job.job_id,
                        job.device_id,
                    )
        await self._clear_taken_back()  # what the previous run left uncleared too
        return again

    def set_params(self, job: Job, **params: Any) -> Job:
        """The job with ``params`` changed, kept in memory and in the store (so that a
        restart re-installs the job as it is now, not as it was admitted)."""
        new = replace(job, params={**job.params, **params})
        self._jobs[job.job_id] = new
        self.store.update_params(job.job_id, dict(new.params))
        return new

    def set_region(self, job: Job, region: Region) -> Job:
        """The job with ``region`` (and a window of its size), in memory and in the store."""
        new = replace(job, region=region, window=region.size)
        self._jobs[job.job_id] = new
        self.store.update_region(job.job_id, region, region.size)
        return new

    def forget(self, job_id: int) -> None:
        del self._jobs[job_id]
        self.store.remove(job_id)

    # -- scheduled jobs (controller/sched/scheduled_jobs.py) -------------------------------

    async def epoch(
        self,
        job_id: int,
        worker_id: int,
        epoch: int,
        rtt_s: float | None = None,
        wait: float = 0.0,
    ) -> dict[str, Any]:
        """Worker ``worker_id`` of a scheduled job is about to start ``epoch`` (or reports
        ``epoch == epochs``: done): the region to use. While the reply says ``wait`` (no
        memory yet, or a layout change waiting for the other workers) it is asked again,
        for up to ``wait`` seconds, each time something changes."""
        loop = asyncio.get_running_loop()
        end = loop.time() + max(0.0, wait)
        while True:
            async with self._lock:
                reply, version = await self.scheduled.epoch(job_id, worker_id, epoch, rtt_s)
            await self._clear_taken_back()
            left = end - loop.time()
            if not reply["wait"] or left <= 0:
                return reply
            await self.scheduled.wait_change(version, left)

    def schedule_view(self) -> dict[str, Any]:
        """The scheduler's queue, plan, regions and predictions (``incctl sched show``)."""
        return self.scheduled.view()

    async def run_scheduler(self) -> None:
        """Re-plan when a policy's quantum ends and every ``replan_interval`` (progress);
        runs until cancelled."""
        while True:
            wake = self.scheduled.next_wakeup()
            await asyncio.sleep(min(max(wake - self.scheduled.clock(), 0.01), 1.0))
            if self.scheduled.clock() >= wake:
                async with self._lock:
                    await self.scheduled.tick()
                await self._clear_taken_back()

    async def run_ticks(self) -> None:
        """Give every job's kind its ``tick`` (run-time management, e.g. the key-value
        cache's hot keys) every ``TICK_S``; runs until cancelled. A failing tick is logged
        and tried again at the next one."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TICK_S)
            async with self._lock:
                for job in self.jobs():
                    sw = self.switches.get(job.device_id)
                    if sw is None or not sw.connected:
                        continue
                    try:
                        await kind_of(job.kind).tick(sw, job, loop.time())
                    except Exception as err:  # noqa: BLE001 - one job must not stop the others
                        log.warning("job %d: %s tick failed: %s", job.job_id, job.kind, err)

    def worker_config(self, job_id: int, worker_id: int, switch_address: str) -> dict[str, Any]:
        """What host ``worker_id`` of the job needs at start (raises KeyError if unknown)."""
        job = self.get(job_id)
        return kind_of(job.kind).worker_config(job, worker_id, switch_address)

    def _free_job_id(self) -> int:
        for job_id in range(1, MAX_JOB_ID + 1):
            if job_id in self._jobs or job_id in self._clearing:
                continue
            if job_id not in self.reserved_groups:
                return job_id
        raise OutOfMemory("all job ids are in use")


async def _quietly(coro: Any) -> None:
    try:
        await coro
    except SwitchError as err:
        log.warning("rollback incomplete: %s", err)


__all__ = ["JobManager", "UnknownJob", "JobError", "JobKind", "OutOfMemory"]
