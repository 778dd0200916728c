"""Routes that watch: the dashboard page, its live stream, a JSON sample, ``/metrics``.

- ``GET /`` the dashboard (one self-contained page; it needs nothing from the Internet).
- ``GET /stats/stream`` server-sent events: the dashboard's view, once a second while
  someone watches (one sampler shared by all viewers, ``controller.api.live_stats.LiveFeed``).
- ``GET /stats`` the same view once, read now (no rates).
- ``GET /metrics`` Prometheus text format, read from the switches now.
- ``GET /events`` what the controller decided lately (admissions, cancellations, ...).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from importlib.resources import files
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from controller.api import metrics
from controller.api.context import ApiContext, context

router = APIRouter(tags=["live"])
Ctx = Annotated[ApiContext, Depends(context)]
DASHBOARD = files("controller.api").joinpath("dashboard.html")


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def dashboard() -> HTMLResponse:
    return HTMLResponse(DASHBOARD.read_text(encoding="utf-8"))


@router.get("/stats")
async def stats(ctx: Ctx) -> dict[str, Any]:
    """Switches (drops by reason), memory, jobs with their live figures, events: now."""
    return (await ctx.stats.sample()).to_json()


@router.get("/stats/stream", response_class=StreamingResponse)
async def stream(ctx: Ctx) -> StreamingResponse:
    async def events() -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        async for view in ctx.feed.updates():
            yield f"data: {json.dumps(view, separators=(',', ':'))}\n\n"

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


@router.get("/metrics", response_class=Response)
async def prometheus(ctx: Ctx) -> Response:
    return Response(metrics.render(await ctx.stats.sample()), media_type=metrics.CONTENT_TYPE)


@router.get("/events")
async def events(ctx: Ctx) -> dict[str, Any]:
    return {"events": [e.to_dict() for e in ctx.events.recent(200)]}
