"""NetReduce jobs: synchronous aggregation in an exclusive region, the switch as the PS.

Example:
    >>> kind = NetReduce()
    >>> kind.region_size(NetReduceRequest(workers=4, window=64))
    64
    >>> kind.region_size(NetReduceRequest(workers=4, window=64, region_size=100))
    100

A job owns ``region_size`` aggregators (default: the window; each has two copies, so
switch memory = 2 x window, docs/protocol.md) and a multicast group holding its workers.
Admission clears the region, then installs the result path (multicast group,
``result_dst``), the workers, and the ``jobs`` entry last, so that no packet is admitted
before the job is complete. Removal deletes ``jobs`` first (nothing new is admitted), then
the rest; the manager clears the region afterwards. Live figures: packets and bytes the
``jobs`` entry admitted, and per worker the packets its ``workers`` entry admitted
(``progress``), read from the tables' direct counters.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from controller.jobs.figures import PROGRESS, Figure, JobStats
from controller.jobs.job import Count, Job, JobRequest, Scheduling
from controller.jobs.job_kinds import AGG_POOL, JobKind, register
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import SwitchConnection
from controller.systems import aggregator, job_meter, job_region, result_rewrite
from wire.header import AGG_POOL_SIZE, AGG_SLOT_COUNTS, SLOTS


class NetReduceRequest(JobRequest, Scheduling, job_meter.Metered):
    """A synchronous aggregation job: ``workers`` send ``window`` packets in flight each, of
    ``slots`` values (32, or whole blocks of 32 up to 128: fewer and larger frames).

    With ``class`` (md/be, ``controller.jobs.job.Scheduling``) the scheduler sizes the region
    and the window follows it; no ``window`` or ``region_size`` then. ``meter_pps``
    (``controller.systems.job_meter.Metered``): the switch drops the job's packets beyond that rate
    (``METERED``)."""

    kind: Literal["netreduce"] = "netreduce"
    window: Annotated[int, Field(strict=True, ge=1, le=AGG_POOL_SIZE)] | None = None
    slots: Annotated[int, Field(strict=True)] = SLOTS
    region_size: Annotated[Count, Field(le=AGG_POOL_SIZE)] | None = None

    @model_validator(mode="after")
    def _fits_the_switch(self) -> NetReduceRequest:
        if self.slots not in AGG_SLOT_COUNTS:
            counts = ", ".join(map(str, AGG_SLOT_COUNTS))
            raise ValueError(
                f"the switch aggregates {SLOTS} slots per packet or whole blocks of them"
                f" ({counts}), got {self.slots}"
            )
        if self.scheduled:
            if self.window is not None or self.region_size is not None:
                raise ValueError("a scheduled job gets its window and region from the scheduler")
            return self
        if self.window is None:
            raise ValueError("window: Field required (or give class: md/be to be scheduled)")
        if self.region_size is not None and self.region_size < self.window:
            raise ValueError(
                f"region_size {self.region_size} is smaller than the window {self.window}:"
                " the switch keeps two copies per aggregator, so it needs size >= window"
            )
        return self


class NetReduce(JobKind):
    name = "netreduce"
    request = NetReduceRequest
    pool = AGG_POOL
    schedulable = True

    def region_size(self, req: JobRequest) -> int:
        assert isinstance(req, NetReduceRequest) and req.window is not None
        return req.region_size if req.region_size is not None else req.window

    def make_job(
        self, req: JobRequest, job_id: int, device_id: int, region: Region, created_at: float
    ) -> Job:
        assert isinstance(req, NetReduceRequest)
        agg_ip, agg_mac = req.aggregation_address()
        return Job(
            job_id=job_id,
            name=req.name or f"job{job_id}",
            device_id=device_id,
            window=region.size if req.window is None else req.window,
            slots=req.slots,
            region=region,
            quorum=req.workers,
            mcast_grp=job_id,
            agg_ip=agg_ip,
            agg_mac=agg_mac,
            workers=tuple(req.worker_specs()),
            created_at=created_at,
            kind=self.name,
            params={
                **(req.scheduling_params(created_at) if req.scheduled else {}),
                **req.meter_params(),
            },
        )

    async def clear(self, sw: SwitchConnection, region: Region) -> None:
        await aggregator.clear_region(sw, region)

    async def install(self, sw: SwitchConnection, job: Job, idempotent: bool = False) -> None:
        group, replicas = result_rewrite.multicast_group(job)
        await sw.set_multicast_group(group, replicas)
        write = sw.upsert if idempotent else sw.insert
        await write(result_rewrite.result_entries(job))
        await write(job_region.worker_entries(job))
        await write(job_meter.meter_entries(job))
        await write([job_region.job_entry(job)])

    async def uninstall(self, sw: SwitchConnection, job: Job) -> None:
        await sw.delete([job_region.job_key(job.job_id)], strict=False)
        await sw.delete([job_meter.meter_key(job.job_id)], strict=False)
        await sw.delete(job_region.worker_entries(job), strict=False)
        await sw.delete(result_rewrite.result_entries(job), strict=False)
        await sw.delete_multicast_group(job.mcast_grp, strict=False)

    async def installed(self, sw: SwitchConnection, job: Job) -> bool:
        return bool(await sw.read(job_region.job_key(job.job_id)))

    async def live_stats(self, sw: SwitchConnection, job: Job) -> JobStats:
        admitted = await job_region.read_counters(sw, job)
        packets, nbytes = admitted.job
        figures = [
            Figure("packets", packets, "aggregation packets of the job the switch admitted"),
            Figure("bytes", nbytes, "bytes of those packets"),
        ]
        for wid, (wp, _) in sorted(admitted.workers.items()):
            help_ = "packets from the worker that passed admission (retransmissions too)"
            figures.append(Figure(PROGRESS, wp, help_, worker=wid))
        mode = "synchronous" if job.quorum >= job.n_workers else "partial"
        state = {"sync": f"{mode}, quorum {job.quorum} of {job.n_workers}"}
        if job.params.get("scheduled"):
            p = job.params
            deadline = (
                f", deadline {p['deadline'] - job.created_at:.0f} s" if p.get("deadline") else ""
            )
            state["schedule"] = f"class {p['class']}{deadline}, {job.region.size} aggregators now"
        return JobStats(tuple(figures), state)


register(NetReduce())
