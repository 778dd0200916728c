"""Limits every request lives within, and who may change state.

- ``RequestLimits`` (ASGI middleware): a body over ``max_body`` bytes is refused with 413
  before it is read (by its Content-Length) or as soon as it grows past the limit
  (chunked); a body that does not arrive within ``body_timeout`` seconds gets 408. Either
  way nothing has been changed.
- ``JsonBodies`` (ASGI middleware): every body is read as JSON whatever its Content-Type
  says (``curl -d`` sends form-urlencoded, urllib too); the daemon always did. Browsers'
  cross-site requests are stopped by ``local_only``'s Origin check instead.
- ``local_only`` (dependency of every route that changes state): the request must come
  from this machine, over the Unix socket or from a loopback address, like ``incctl``; and
  a browser page from another origin cannot make it (its ``Origin`` must match ``Host``).
  Reading (the dashboard, ``/metrics``) is open to whoever can reach the listen address,
  which is localhost unless ``--listen`` says otherwise.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY = 64 * 1024  # a job request with 32 workers' addresses is a few kilobytes
BODY_TIMEOUT = 10.0


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


class BodyTimeout(HTTPException):
    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"the request body did not arrive within {seconds:g} s")


class RequestLimits:
    def __init__(
        self, app: ASGIApp, max_body: int = MAX_BODY, body_timeout: float = BODY_TIMEOUT
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and int(length) > self.max_body:  # h11 checked it is digits
            await _send_error(send, BodyTooLarge(self.max_body))
            return
        received = 0
        body_done = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if body_done:  # later calls wait for a disconnect: no deadline
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.body_timeout)
            except TimeoutError:
                raise BodyTimeout(self.body_timeout) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise BodyTooLarge(self.max_body)
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except (BodyTooLarge, BodyTimeout) as exc:
            if not started:
                await _send_error(send, exc)


async def _send_error(send: Send, exc: HTTPException) -> None:
    body = json.dumps({"error": exc.detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": exc.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class JsonBodies:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_only(request: Request) -> None:
    """Refuse (403) a state-changing request that does not come from this machine."""
    client: Any = request.client
    if client is not None and not _loopback(str(client.host)):
        raise HTTPException(
            403, "changes are accepted only from this machine (localhost or the Unix socket)"
        )
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        if urlsplit(origin).netloc != request.headers.get("host", ""):
            raise HTTPException(403, f"cross-origin request from {origin} refused")
    elif origin == "null":
        raise HTTPException(403, "cross-origin request refused")
