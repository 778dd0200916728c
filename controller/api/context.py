"""What the API's routes work on: the daemon's parts, reached through ``request.app``."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from controller.api.live_stats import LiveFeed, LiveStats
from controller.api.worker_reports import WorkerReports
from controller.job_manager import JobManager
from controller.jobs.events import EventLog
from controller.p4rt.p4runtime_client import SwitchSet


@dataclass(frozen=True)
class ApiContext:
    manager: JobManager
    switches: SwitchSet
    stats: LiveStats
    feed: LiveFeed
    reports: WorkerReports
    events: EventLog


def context(request: Request) -> ApiContext:
    """FastAPI dependency: the daemon's parts (``Depends(context)``)."""
    ctx: ApiContext = request.app.state.ctx
    return ctx
