"""Serene jobs: NetReduce aggregation under a synchronisation mode that changes at run time.

Example:
    >>> req = SereneRequest(workers=4, window=16, mode="partial 3")
    >>> Serene().make_job(req, 7, 0, Region(0, 16), 0.0).params["mode"]
    'partial 3'

A Serene job is a NetReduce job (exclusive region, the switch as the PS, psn addressing)
plus an entry in ``p4src/sync_modes.p4``: the mode (``sync``, ``partial K``, ``bounded S``,
``async``), the workers' epoch clocks, and the boundary at which a new mode takes effect
(``controller/systems/sync_modes.py``). Workers carry their training iteration in ``epoch``,
starting at 0. ``params["mode"]`` is the mode at admission, then the latest one swapped
in (``incctl job mode``, ``POST /jobs/{id}/mode``), which a switch restart re-installs;
the switch holds the modes before and after the boundary.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from controller.jobs.figures import Figure, JobStats
from controller.jobs.job import Job, JobRequest
from controller.jobs.job_kinds import register
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import SwitchConnection
from controller.systems import job_meter, job_region, result_rewrite, sync_modes
from controller.systems.netreduce import NetReduce, NetReduceRequest
from wire.header import AGG_POOL_SIZE, SLOTS


class SereneRequest(NetReduceRequest):
    """A NetReduce job with a synchronisation ``mode`` (``controller.systems.sync_modes.Mode``)."""

    kind: Literal["serene"] = "serene"  # type: ignore[assignment]
    mode: str = "sync"
    # packets of one worker per epoch (a round), for the region rule of partial and async
    # modes (``sync_modes.check_region``); unknown: 1, the least any round has
    round_packets: Annotated[int, Field(strict=True, ge=1, le=AGG_POOL_SIZE)] = 1

    @model_validator(mode="after")
    def _valid_mode(self) -> SereneRequest:
        if self.scheduled:
            raise ValueError("a serene job has a fixed region (no class)")
        if self.slots != SLOTS:  # async mode's running aggregate holds one block
            raise ValueError(f"a serene job sends {SLOTS} slots per packet, got {self.slots}")
        mode = sync_modes.Mode.parse(self.mode, self.workers)  # JobError is a ValueError
        region = self.region_size if self.region_size is not None else self.window
        assert region is not None  # NetReduceRequest: a window unless scheduled
        sync_modes.check_region(mode, region, self.round_packets)
        return self


class Serene(NetReduce):
    name = "serene"
    request = SereneRequest  # type: ignore[assignment]

    def make_job(
        self, req: JobRequest, job_id: int, device_id: int, region: Region, created_at: float
    ) -> Job:
        assert isinstance(req, SereneRequest)
        job = super().make_job(req, job_id, device_id, region, created_at)
        mode = sync_modes.Mode.parse(req.mode, req.workers)
        params = {"mode": str(mode), "round_packets": req.round_packets, **req.meter_params()}
        return Job(**{**job.__dict__, "kind": self.name, "params": params})

    async def install(self, sw: SwitchConnection, job: Job, idempotent: bool = False) -> None:
        group, replicas = result_rewrite.multicast_group(job)
        await sw.set_multicast_group(group, replicas)
        write = sw.upsert if idempotent else sw.insert
        await write(result_rewrite.result_entries(job))
        await write(job_region.worker_entries(job))
        await write(job_meter.meter_entries(job))
        mode = sync_modes.Mode.parse(str(job.params.get("mode", "sync")), job.n_workers)
        await sync_modes.install(sw, job, mode, idempotent=idempotent)
        await write([job_region.job_entry(job)])

    async def uninstall(self, sw: SwitchConnection, job: Job) -> None:
        await sw.delete([job_region.job_key(job.job_id)], strict=False)
        await sync_modes.uninstall(sw, job)
        await super().uninstall(sw, job)

    async def live_stats(self, sw: SwitchConnection, job: Job) -> JobStats:
        stats = await super().live_stats(sw, job)
        state = await sync_modes.read_state(sw, job.job_id)
        if state is None:
            return stats
        clocks = await sync_modes.read_clocks(sw, job)
        waits, late = await sync_modes.read_figures(sw, job)
        figures = list(stats.figures)
        figures.append(Figure("sync_waits", waits, "packets the switch told to wait"))
        figures.append(Figure("sync_late", late, "contributions after their round completed"))
        for w, c in zip(job.workers, clocks.workers, strict=True):
            lead = clocks.lead(c)
            figures.append(
                Figure("epoch_lead", lead, "epochs past the slowest", False, w.worker_id)
            )
        text = str(state.after)
        if state.before != state.after:
            text += f" from epoch {state.boundary} (before: {state.before})"
        if state.fence:
            text += f", epochs from {state.boundary} held (swap in progress)"
        return JobStats(tuple(figures), {"sync": text, "slowest_epoch": str(clocks.slowest)})


register(Serene())
