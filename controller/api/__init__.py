"""The controller daemon's HTTP API (FastAPI), one module of routes per concern.

Example::

    app = create_app(ApiContext(manager, switches, stats, feed, reports, events))
    # served by controller/api/http_server.py on TCP (localhost) and a Unix socket

- ``jobs.py``: ``POST/GET /jobs``, ``GET/DELETE /jobs/{id}``, ``GET /jobs/{id}/workers/{w}``,
  ``POST /jobs/{id}/workers/{w}/progress``
- ``switches.py``: ``GET /switches``, ``GET /memory``
- ``schedule.py``: ``POST /jobs/{id}/workers/{w}/epoch`` (scheduled jobs), ``GET /schedule``
- ``live.py``: ``GET /`` (dashboard), ``/stats``, ``/stats/stream`` (SSE), ``/metrics``,
  ``/events``
- ``errors.py``: one error shape, ``{"error": "..."}``, for every failure
- ``limits.py``: body size and time limits; state changes only from this machine

A new concern (job modes, scheduling views, pool statistics) adds a module with an
``APIRouter`` and one line in ``create_app``; routes reach the daemon's parts through
``Depends(context)`` and mark state-changing routes ``dependencies=[Depends(local_only)]``.
"""

from __future__ import annotations

from fastapi import FastAPI

from controller.api import errors, jobs, live, schedule, switches
from controller.api.context import ApiContext
from controller.api.limits import BODY_TIMEOUT, JsonBodies, RequestLimits

__all__ = ["ApiContext", "create_app"]


def create_app(ctx: ApiContext, body_timeout: float = BODY_TIMEOUT) -> FastAPI:
    app = FastAPI(
        title="inc-switch controller",
        summary="Jobs on in-network computing switches: admission, memory, live figures",
        version="0.2",
    )
    app.state.ctx = ctx
    app.include_router(jobs.router())
    app.include_router(switches.router)
    app.include_router(schedule.router)
    app.include_router(live.router)
    errors.install(app)
    app.add_middleware(JsonBodies)
    app.add_middleware(RequestLimits, body_timeout=body_timeout)  # added last: runs first
    return app
