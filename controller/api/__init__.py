"""The controller daemon's HTTP API (FastAPI), one module of routes per concern.

Example::

    app = create_app(ApiContext(manager, switches, stats, feed, reports, events),
                     Tenants(store, token_dir=Path("run")))
    # served by controller/api/http_server.py on TCP (localhost) and a Unix socket

- ``jobs.py``: ``POST/GET /jobs``, ``GET/DELETE /jobs/{id}``, ``GET /jobs/{id}/workers/{w}``,
  ``POST /jobs/{id}/workers/{w}/progress``
- ``switches.py``: ``GET /switches``, ``GET /memory``
- ``schedule.py``: ``POST /jobs/{id}/workers/{w}/epoch`` (scheduled jobs), ``GET /schedule``
- ``live.py``: ``GET /`` (dashboard), ``/stats``, ``/stats/stream`` (SSE), ``/metrics``,
  ``/events``
- ``errors.py``: one error shape, ``{"error": "..."}``, for every failure
- ``tenants.py``: tokens: the operator's submits, a job's own changes that job
- ``limits.py``: trusted Host names, JSON-only changes, body size and whole-body deadline,
  caps on event streams and long polls

A new concern (job modes, scheduling views, pool statistics) adds a module with an
``APIRouter`` and one line in ``create_app``; routes reach the daemon's parts through
``Depends(context)`` and mark a route that changes a job ``dependencies=[Depends(job_owner)]``
(every route is readable by clients on this machine, ``tenants.reader``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import Depends, FastAPI

from controller.api import errors, jobs, live, schedule, switches
from controller.api import tenants as tenancy
from controller.api.context import ApiContext
from controller.api.limits import (
    BODY_TIMEOUT,
    LOCAL_NAMES,
    RequestLimits,
    Slots,
    TrustedHosts,
    WriteGuard,
)
from controller.api.tenants import Tenants, reader

__all__ = ["ApiContext", "Caps", "Tenants", "create_app"]


@dataclass(frozen=True)
class Caps:
    """What may hold a connection open: event streams per client address and in all,
    long polls (epoch requests that wait) per worker and in all."""

    streams_per_client: int = 4
    streams: int = 16
    polls_per_worker: int = 2
    polls: int = 128


def create_app(
    ctx: ApiContext,
    tenants: Tenants,
    body_timeout: float = BODY_TIMEOUT,
    allowed_hosts: Sequence[str] = (),
    caps: Caps = Caps(),
) -> FastAPI:
    app = FastAPI(
        title="inc-switch controller",
        summary="Jobs on in-network computing switches: admission, memory, live figures",
        version="0.3",
        dependencies=[Depends(reader)],
    )
    app.state.ctx = ctx
    app.state.tenants = tenants
    app.state.streams = Slots("event streams", caps.streams_per_client, caps.streams)
    app.state.polls = Slots("waiting epoch requests", caps.polls_per_worker, caps.polls)
    app.include_router(jobs.router())
    app.include_router(switches.router)
    app.include_router(schedule.router)
    app.include_router(live.router)
    app.include_router(tenancy.router)
    errors.install(app)
    names = [*LOCAL_NAMES, *allowed_hosts]
    app.add_middleware(WriteGuard, allowed_hosts=names)
    app.add_middleware(RequestLimits, body_timeout=body_timeout)
    app.add_middleware(TrustedHosts, allowed_hosts=names)  # added last: runs first
    return app
