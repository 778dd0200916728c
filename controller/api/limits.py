"""Limits every request lives within (who may change what: ``controller/api/tenants.py``).

- ``TrustedHosts`` (Starlette's ``TrustedHostMiddleware``, JSON errors): the ``Host``
  header must be one of the controller's names (localhost, its listen address,
  ``--allowed-host``), so a page whose name was re-bound to 127.0.0.1 (DNS rebinding)
  reaches nothing, whatever its ``Origin``.
- ``RequestLimits``: a body over ``max_body`` bytes is refused with 413 before it is read
  (by its Content-Length) or as soon as it grows past the limit (chunked); a whole body
  that has not arrived ``body_timeout`` seconds after the request's head gets 408, however
  it is trickled. Either way nothing has been changed.
- ``WriteGuard``: a request that changes state (POST, PUT, PATCH, DELETE) with a body must
  say ``Content-Type: application/json`` (415 otherwise: a page of another site can send
  text/plain or a form without asking, never JSON), and one that a browser marks as coming
  from a page of another site (``Origin`` not one of our names, ``Sec-Fetch-Site:
  cross-site``) gets 403. A cross-site request without ``Origin`` still lacks the bearer
  token every change needs (a page cannot add that header without a CORS preflight, which
  the API never grants).
- ``Slots``: caps on what holds a connection open (event streams per client and in all,
  long polls per worker and in all), so that slow or greedy clients cannot take every one
  of the server's ``MAX_CONNECTIONS`` and workers' epoch requests always find one.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Hashable, Sequence
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from starlette._utils import parse_host_header
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY = 64 * 1024  # a job request with 32 workers' addresses is a few kilobytes
BODY_TIMEOUT = 10.0
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
WRITES = ("POST", "PUT", "PATCH", "DELETE")


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
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout  # for the whole body, not each chunk

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if body_done:  # later calls wait for a disconnect: no deadline
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
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


class TrustedHosts(TrustedHostMiddleware):
    """Starlette's Host check, answering with the API's one-line JSON error."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        async def passed(scope: Scope, receive: Receive, send: Send) -> None:
            scope["inc.host_checked"] = True
            await app(scope, receive, send)

        super().__init__(passed, allowed_hosts=list(allowed_hosts), www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return

        async def json_send(message: Message) -> None:
            if scope.get("inc.host_checked"):
                await send(message)
            elif message["type"] == "http.response.start":  # Starlette refused the Host
                host = Headers(scope=scope).get("host", "")
                await _send_error(
                    send,
                    HTTPException(
                        400, f"Host {host[:80]!r} is not a name of this controller (--allowed-host)"
                    ),
                )

        await super().__call__(scope, receive, json_send)


class WriteGuard:
    """JSON bodies only for changes (415), and none from a page of another site (403)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.allowed = {h.lower() for h in allowed_hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in WRITES:
            refusal = self._refusal(Headers(scope=scope), scope["method"])
            if refusal is not None:
                await _send_error(send, refusal)
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: Headers, method: str) -> HTTPException | None:
        origin = headers.get("origin")
        if origin is not None:
            parsed = parse_host_header(urlsplit(origin).netloc) if origin != "null" else None
            if parsed is None or parsed.host.lower() not in self.allowed:
                return HTTPException(403, f"a change from a page of {origin[:80]!r} is refused")
        if headers.get("sec-fetch-site", "").lower() == "cross-site":
            return HTTPException(403, "a change from a page of another site is refused")
        has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if (has_body or method != "DELETE") and kind != "application/json":
            shown = kind or "none"
            return HTTPException(
                415, f"a change takes a JSON body (Content-Type: application/json), not {shown}"
            )
        return None


class SlotsFull(HTTPException):
    def __init__(self, message: str) -> None:
        super().__init__(503, message, headers={"Retry-After": "2"})


class Slots:
    """At most ``per_key`` held at once for one key (a client, a worker) and ``total`` in
    all; ``hold`` raises ``SlotsFull`` (503, one line) at once when either is reached."""

    def __init__(self, what: str, per_key: int, total: int) -> None:
        self.what = what
        self.per_key = per_key
        self.total = total
        self._held: Counter[Hashable] = Counter()

    @property
    def held(self) -> int:
        return sum(self._held.values())

    def take(self, key: Hashable, whose: str) -> None:
        if self._held[key] >= self.per_key:
            raise SlotsFull(f"too many {self.what} {whose} (at most {self.per_key})")
        if self.held >= self.total:
            raise SlotsFull(f"too many {self.what} open on this controller (at most {self.total})")
        self._held[key] += 1

    def give_back(self, key: Hashable) -> None:
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]

    @asynccontextmanager
    async def hold(self, key: Hashable, whose: str) -> AsyncIterator[None]:
        self.take(key, whose)
        try:
            yield
        finally:
            self.give_back(key)
