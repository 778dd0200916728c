"""Job admission: allocate a region, install the job's switch state, remember it.

Example::

    manager = JobManager({0: sw}, JobStore("run/controller.db"))
    await manager.restore()                       # after a restart: re-install lost state
    job = await manager.submit(JobRequest(workers=4, window=64))
    await manager.cancel(job.job_id)              # entries gone, region cleared and free

Order matters on the switch. Admission clears the region, then installs the result path
(multicast group, ``result_dst``), the workers, and the ``jobs`` entry last, so that no
packet is admitted before the job is complete. Cancellation deletes the ``jobs`` entry
first (nothing new is admitted), then the rest, then clears the region for the next owner.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from controller import aggregator, job_region, result_rewrite
from controller.job import MAX_JOB_ID, Job, JobError, JobRequest
from controller.memory_manager import AGG_POOL_SIZE, MemoryManager, OutOfMemory
from controller.p4runtime_client import SwitchConnection, SwitchError
from controller.store import JobStore

log = logging.getLogger("controller.jobs")


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
    ) -> None:
        if not switches:
            raise ValueError("a JobManager needs at least one switch")
        self.switches = dict(switches)
        self.store = store
        self.pool_size = pool_size
        self.reserved_groups = set(reserved_groups)  # multicast groups not ours to use
        self.memory = {dev: MemoryManager(pool_size) for dev in self.switches}
        self._jobs: dict[int, Job] = {}
        self._lock = asyncio.Lock()
        for job in store.jobs():
            self._jobs[job.job_id] = job
            self._memory(job.device_id).reserve(job.job_id, job.region)

    def _memory(self, device_id: int) -> MemoryManager:
        if device_id not in self.memory:  # a stored job on a switch not connected now
            self.memory[device_id] = MemoryManager(self.pool_size)
        return self.memory[device_id]

    # -- queries ---------------------------------------------------------------------

    def jobs(self) -> list[Job]:
        return [self._jobs[k] for k in sorted(self._jobs)]

    def get(self, job_id: int) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise UnknownJob(f"no job {job_id}") from None

    def memory_view(self) -> list[dict[str, Any]]:
        """Per switch: pool size and every segment with its owner (job id and name)."""
        out = []
        for dev, mm in sorted(self.memory.items()):
            segs = []
            for s in mm.segments():
                job = self._jobs.get(s.owner) if isinstance(s.owner, int) else None
                segs.append(
                    {
                        "offset": s.offset,
                        "size": s.size,
                        "job_id": s.owner,
                        "name": job.name if job else None,
                    }
                )
            out.append(
                {
                    "device_id": dev,
                    "pool_size": mm.pool_size,
                    "free": mm.free_total(),
                    "largest_free": mm.largest_free(),
                    "segments": segs,
                }
            )
        return out

    # -- admission -------------------------------------------------------------------

    async def submit(self, req: JobRequest) -> Job:
        req.validate()
        async with self._lock:
            device = req.device_id if req.device_id is not None else min(self.switches)
            if device not in self.switches:
                raise JobError(f"no switch with device id {device} (have {sorted(self.switches)})")
            job_id = self._free_job_id()
            region = self._memory(device).allocate(job_id, req.region_size_needed())
            agg_ip, agg_mac = req.aggregation_address()
            job = Job(
                job_id=job_id,
                name=req.name or f"job{job_id}",
                device_id=device,
                window=req.window,
                slots=req.slots,
                region=region,
                quorum=req.workers,
                mcast_grp=job_id,
                agg_ip=agg_ip,
                agg_mac=agg_mac,
                workers=tuple(req.worker_specs()),
                created_at=time.time(),
            )
            sw = self.switches[device]
            try:
                await aggregator.clear_region(sw, region)
                await install(sw, job)
                self.store.add(job)
            except BaseException:
                self._memory(device).free(job_id)
                await _quietly(uninstall(sw, job))
                raise
            self._jobs[job_id] = job
            log.info(
                "admitted job %d (%s): %d workers, region %s on device %d",
                job_id,
                job.name,
                job.n_workers,
                region,
                device,
            )
            return job

    async def cancel(self, job_id: int) -> Job:
        async with self._lock:
            job = self.get(job_id)
            sw = self.switches.get(job.device_id)
            if sw is not None:
                await uninstall(sw, job)
                await aggregator.clear_region(sw, job.region)
            self.store.remove(job_id)
            self._memory(job.device_id).free(job_id)
            del self._jobs[job_id]
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
                if not await sw.read(job_region.job_key(job.job_id)):
                    await install(sw, job, idempotent=True)
                    again.append(job.job_id)
        return again

    def _free_job_id(self) -> int:
        for job_id in range(1, MAX_JOB_ID + 1):
            if job_id not in self._jobs and job_id not in self.reserved_groups:
                return job_id
        raise OutOfMemory("all job ids are in use")


async def install(sw: SwitchConnection, job: Job, idempotent: bool = False) -> None:
    """Write the job's switch state (``idempotent``: entries that exist are overwritten)."""
    group, replicas = result_rewrite.multicast_group(job)
    await sw.set_multicast_group(group, replicas)
    write = sw.upsert if idempotent else sw.insert
    await write(result_rewrite.result_entries(job))
    await write(job_region.worker_entries(job))
    await write([job_region.job_entry(job)])


async def uninstall(sw: SwitchConnection, job: Job) -> None:
    """Delete the job's entries and group (those already gone are skipped)."""
    await sw.delete([job_region.job_key(job.job_id)], strict=False)
    await sw.delete(job_region.worker_entries(job), strict=False)
    await sw.delete(result_rewrite.result_entries(job), strict=False)
    await sw.delete_multicast_group(job.mcast_grp, strict=False)


async def _quietly(coro: Any) -> None:
    try:
        await coro
    except SwitchError as err:
        log.warning("rollback incomplete: %s", err)


__all__ = ["JobManager", "UnknownJob", "install", "uninstall", "JobError", "OutOfMemory"]
