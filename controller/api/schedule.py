"""Routes of the memory scheduler: the workers' epoch requests and the scheduler's view.

``POST /jobs/{id}/workers/{w}/epoch`` is how a worker of a scheduled job learns the region
of the epoch it is about to start (``controller/sched/scheduled_jobs.py``); the daemon holds the
request for up to ``wait`` seconds while the answer would be "wait" (no memory now, or a
new region waiting for the other workers). ``GET /schedule`` is ``incctl sched show``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from controller.api.context import ApiContext, context
from controller.api.jobs import JobId, WorkerId
from controller.api.limits import Slots
from controller.api.tenants import job_owner
from controller.sched.scheduled_jobs import EpochRequest

router = APIRouter(tags=["scheduling"])
Ctx = Annotated[ApiContext, Depends(context)]


@router.post("/jobs/{job_id}/workers/{worker_id}/epoch", dependencies=[Depends(job_owner)])
async def epoch(
    job_id: JobId, worker_id: WorkerId, req: EpochRequest, ctx: Ctx, request: Request
) -> dict[str, Any]:
    """The region of epoch ``req.epoch`` for this worker (``epoch == epochs``: it is done).
    409 when the request breaks the epoch protocol (out of order, unscheduled job); 503
    when too many requests wait already (``controller/api/limits.py``)."""
    if req.wait <= 0:
        return await ctx.manager.epoch(job_id, worker_id, req.epoch, req.rtt_s, req.wait)
    polls: Slots = request.app.state.polls
    async with polls.hold((job_id, worker_id), f"of job {job_id}, worker {worker_id}"):
        return await ctx.manager.epoch(job_id, worker_id, req.epoch, req.rtt_s, req.wait)


@router.get("/schedule")
async def schedule(ctx: Ctx) -> dict[str, Any]:
    """The policy, every scheduled job in its order (plan, region, need, predicted finish,
    deadline) per switch, and the finished jobs with their completion times."""
    return ctx.manager.schedule_view()
