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

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from controller.api import metrics
from controller.api.context import ApiContext, context
from controller.api.limits import Slots

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


class HeldStream(StreamingResponse):
    """A stream that gives its slot back when it ends, however it ends."""

    def __init__(self, content: AsyncIterator[str], slots: Slots, key: str) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self.slots, self.key = slots, key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slots.give_back(self.key)


@router.get("/stats/stream", response_class=StreamingResponse)
async def stream(ctx: Ctx, request: Request) -> StreamingResponse:
    """At most a few streams per client address (the Unix socket counts as one) and in
    all; more get 503 at once (``controller/api/limits.py``)."""

    async def events() -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        async for view in ctx.feed.updates():
            yield f"data: {json.dumps(view, separators=(',', ':'))}\n\n"

    slots: Slots = request.app.state.streams
    key = request.client.host if request.client is not None else "unix socket"
    slots.take(key, f"from {key}")
    return HeldStream(events(), slots, key)


@router.get("/metrics", response_class=Response)
async def prometheus(ctx: Ctx) -> Response:
    return Response(metrics.render(await ctx.stats.sample()), media_type=metrics.CONTENT_TYPE)


@router.get("/events")
async def events(ctx: Ctx) -> dict[str, Any]:
    return {"events": [e.to_dict() for e in ctx.events.recent(200)]}
