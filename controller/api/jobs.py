"""Routes of jobs: admit, list, show, cancel; what a worker is told; what it reports.

The body of ``POST /jobs`` is the union of every kind's request model, told apart by
``kind`` (``netreduce`` when absent, so clients older than the kinds keep working); the
OpenAPI description (``/openapi.json``, ``/docs``) lists each kind's fields.
"""

from typing import Annotated, Any, Union

from fastapi import APIRouter, Body, Depends, HTTPException, Path, Request
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from controller.api.context import ApiContext, context
from controller.api.tenants import job_owner, operator, tenants_of
from controller.api.worker_reports import ProgressReport
from controller.job_manager import UnknownJob
from controller.jobs.job import MAX_JOB_ID, JobError, JobRequest
from controller.jobs.job_kinds import kinds
from controller.systems import sync_modes
from wire.header import MAX_WORKERS

DEFAULT_KIND = "netreduce"
JobId = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="the job's id")]
WorkerId = Annotated[int, Path(ge=0, lt=MAX_WORKERS, description="the worker's rank")]


def _kind_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("kind", DEFAULT_KIND)
        return kind if isinstance(kind, str) else None
    # anything else (an array, a number) is checked against the default kind, whose model
    # then says that a request is an object
    return getattr(value, "kind", DEFAULT_KIND)


def request_type() -> Any:
    """The kinds' request models as one discriminated union (just the model if one kind)."""
    models = {name: k.request for name, k in sorted(kinds().items())}
    if len(models) == 1:
        return next(iter(models.values()))
    members = tuple(Annotated[m, Tag(name)] for name, m in models.items())
    known = ", ".join(models)
    return Annotated[
        Union[members],  # type: ignore[valid-type]  # noqa: UP007
        Discriminator(
            _kind_tag,
            custom_error_type="unknown_kind",
            custom_error_message=f"kind: unknown job kind (known: {known})",
        ),
    ]


class ModeChange(BaseModel):
    """``POST /jobs/{id}/mode``: the new synchronisation mode of a serene job."""

    model_config = ConfigDict(extra="forbid")

    mode: str = Field(max_length=64, description="sync | partial K [bound S] | bounded S | async")


def router() -> APIRouter:
    r = APIRouter(tags=["jobs"])
    Ctx = Annotated[ApiContext, Depends(context)]
    Request_ = Annotated[request_type(), Body(description="the kind's job request")]  # type: ignore[valid-type]

    @r.post("/jobs", status_code=201, dependencies=[Depends(operator)])
    async def submit(req: Request_, ctx: Ctx, request: Request) -> dict[str, Any]:  # type: ignore[valid-type]
        """Admit a job: memory, switch entries, stored. 409 when memory is short. The
        answer's ``token`` owns the job (``Authorization: Bearer``; also in the daemon's
        token directory as ``job-ID.token``)."""
        assert isinstance(req, JobRequest)
        job = await ctx.manager.submit(req)
        return {"job": job.to_dict(), "token": tenants_of(request).issue(job)}

    @r.get("/jobs")
    async def list_jobs(ctx: Ctx) -> dict[str, Any]:
        return {"jobs": [j.to_dict() for j in ctx.manager.jobs()]}

    @r.get("/jobs/{job_id}")
    async def get_job(job_id: JobId, ctx: Ctx) -> dict[str, Any]:
        return {"job": ctx.manager.get(job_id).to_dict()}

    @r.delete("/jobs/{job_id}", dependencies=[Depends(job_owner)])
    async def cancel(job_id: JobId, ctx: Ctx, request: Request) -> dict[str, Any]:
        """Cancel: entries deleted, the region cleared and freed."""
        job = await ctx.manager.cancel(job_id)
        ctx.reports.forget(job_id)
        tenants_of(request).forget(job_id)
        return {"job": job.to_dict()}

    @r.get("/jobs/{job_id}/workers/{worker_id}")
    async def worker(job_id: JobId, worker_id: WorkerId, ctx: Ctx) -> dict[str, Any]:
        """What worker agent ``worker_id`` needs at start (its kind's fields)."""
        job = ctx.manager.get(job_id)
        conn = ctx.switches.connections.get(job.device_id)
        address = conn.spec.address if conn is not None else ""
        try:
            return ctx.manager.worker_config(job_id, worker_id, address)
        except KeyError as err:
            raise UnknownJob(str(err.args[0])) from None

    @r.post(
        "/jobs/{job_id}/workers/{worker_id}/progress",
        status_code=204,
        dependencies=[Depends(job_owner)],
    )
    async def progress(
        job_id: JobId, worker_id: WorkerId, report: ProgressReport, ctx: Ctx
    ) -> None:
        """A worker's progress (counters, gauges, state) for the dashboard and /metrics."""
        job = ctx.manager.get(job_id)
        try:
            job.worker(worker_id)
        except KeyError as err:
            raise UnknownJob(str(err.args[0])) from None
        ctx.reports.put(job_id, worker_id, report)

    @r.get("/jobs/{job_id}/sync")
    async def sync_state(job_id: JobId, ctx: Ctx) -> dict[str, Any]:
        """A serene job's mode as the switch holds it, and its workers' epoch clocks."""
        job = ctx.manager.get(job_id)
        conn = ctx.switches.connections.get(job.device_id)
        state = None if conn is None else await sync_modes.read_state(conn, job_id)
        if conn is None or state is None:
            raise JobError(f"job {job_id} has no synchronisation mode on its switch")
        clocks = await sync_modes.read_clocks(conn, job)
        waits, late = await sync_modes.read_figures(conn, job)
        return {
            "job_id": job_id,
            "mode": str(state.after),
            "before": str(state.before),
            "boundary_epoch": state.boundary,
            "fence": state.fence,
            "clocks": list(clocks.workers),
            "slowest": clocks.slowest,
            "waits": waits,
            "late": late,
        }

    @r.post("/jobs/{job_id}/mode", dependencies=[Depends(job_owner)])
    async def change_mode(job_id: JobId, change: ModeChange, ctx: Ctx) -> dict[str, Any]:
        """Hot swap of a serene job's synchronisation mode at an epoch boundary that no
        worker has reached (``controller/systems/sync_modes.py``); 409 while the previous change is
        still in progress."""
        async with ctx.manager.locked(job_id) as job:  # one change of the job at a time
            if job.kind != "serene":
                raise JobError(f"job {job_id} is a {job.kind} job: only serene jobs have modes")
            mode = sync_modes.Mode.parse(change.mode, job.n_workers)
            sync_modes.check_region(mode, job.region.size, int(job.params.get("round_packets", 1)))
            conn = ctx.switches.connections.get(job.device_id)
            if conn is None:
                raise JobError(f"switch {job.device_id} of job {job_id} is not connected")
            try:
                boundary = await sync_modes.swap(conn, job, mode)
            except sync_modes.SwapRefused as err:
                raise HTTPException(409, str(err)) from None
            ctx.manager.set_params(job, mode=str(mode))
        return {"job_id": job_id, "mode": str(mode), "boundary_epoch": boundary}

    return r
