"""Serves an ASGI app with uvicorn on a TCP address and, optionally, a Unix domain socket.

Example::

    server = ApiServer(app, ("127.0.0.1", 7070), unix=Path("run/controller.sock"))
    await server.start()          # on the running loop; server.url has the real port
    ...
    await server.stop()

Both listeners serve the same app from the caller's event loop (the daemon's, where the
P4Runtime connections live). The Unix socket (mode 0600) is for clients in other network
namespaces on this machine (Mininet hosts: ``unix:PATH`` URLs); a stale socket file left by
a killed daemon is replaced. ``tls=(CERT, KEY)`` serves the TCP listener over TLS
(``https://`` URLs, for workers on other machines); the Unix socket stays plain, it never
leaves the machine. uvicorn's HTTP/1.1 protocol is used with two guards: a client
must send a request's head within ``HEAD_TIMEOUT`` seconds (an idle or half-sent request
does not hold a connection forever), and a malformed request (``Content-Length: abc``)
gets the API's JSON error shape. Bodies are limited by ``controller/api/limits.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT = 10.0
MAX_HEAD = 16 * 1024  # request line and headers
MAX_CONNECTIONS = 256
MAX_PER_CLIENT = 64  # connections from one TCP address


def _raw_error(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's head, at most
    ``per_client`` connections open from one TCP address (the rest get 503 and are closed:
    one client cannot take all ``MAX_CONNECTIONS``), and JSON errors."""

    head_timeout = HEAD_TIMEOUT
    per_client = MAX_PER_CLIENT
    open_from: Counter[str]  # one per server (``ApiServer`` makes a subclass)

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if isinstance(peer, tuple) and peer else None  # TCP only
        if self._peer is not None:
            if self.open_from[self._peer] >= self.per_client:
                self._peer = None
                message = f"too many connections from this address (at most {self.per_client})"
                transport.write(_raw_error(503, "Service Unavailable", message))
                transport.close()
                return
            self.open_from[self._peer] += 1
        self._watch_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # arms uvicorn's keep-alive timeout for idle links
        self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_deadline()
        if getattr(self, "_peer", None) is not None:
            assert self._peer is not None
            self.open_from[self._peer] -= 1
            if self.open_from[self._peer] <= 0:
                del self.open_from[self._peer]
            self._peer = None
        super().connection_lost(exc)

    def _watch_head(self) -> None:
        waiting = self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE
        idle_keep_alive = self.timeout_keep_alive_task is not None
        if waiting and not idle_keep_alive:
            if self._head_deadline is None:
                self._head_deadline = self.loop.call_later(self.head_timeout, self._head_late)
        else:
            self._cancel_head_deadline()

    def _cancel_head_deadline(self) -> None:
        if getattr(self, "_head_deadline", None) is not None:
            assert self._head_deadline is not None
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing():
            return
        message = f"no complete request within {self.head_timeout:g} s"
        self.transport.write(_raw_error(408, "Request Timeout", message))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        self.transport.write(
            _raw_error(
                400,
                "Bad Request",
                "malformed HTTP request (request line, headers or Content-Length)",
            )
        )
        self.transport.close()


class ApiServer:
    def __init__(
        self,
        app: Any,
        listen: tuple[str, int],
        unix: Path | None = None,
        head_timeout: float = HEAD_TIMEOUT,
        log_level: str = "warning",
        tls: tuple[Path, Path] | None = None,
        max_connections: int = MAX_CONNECTIONS,
        per_client: int = MAX_PER_CLIENT,
    ) -> None:
        self.app = app
        self.listen = listen
        self.unix = Path(unix) if unix is not None else None
        self.log_level = log_level
        self.tls = tls
        self.max_connections = max_connections
        self.protocol = type(
            "Guarded",
            (GuardedH11Protocol,),
            {"head_timeout": head_timeout, "per_client": per_client, "open_from": Counter()},
        )
        self._servers: list[uvicorn.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._sockets: list[socket.socket] = []
        self.address: tuple[str, int] = listen

    @property
    def url(self) -> str:
        host, port = self.address
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"

    def _bind(self) -> list[socket.socket]:
        host, port = self.listen
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        tcp = socket.socket(family, socket.SOCK_STREAM)
        try:
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tcp.bind((host, port))
            tcp.listen(128)
        except OSError:
            tcp.close()
            raise
        self.address = tcp.getsockname()[:2]
        socks = [tcp]
        if self.unix is not None:
            self.unix.parent.mkdir(parents=True, exist_ok=True)
            if self.unix.is_socket():
                self.unix.unlink()  # left over by a daemon that was killed
            us = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                us.bind(str(self.unix))
                os.chmod(self.unix, 0o600)  # root-only, like the localhost port's trust model
                us.listen(128)
            except OSError:
                us.close()
                tcp.close()
                raise
            socks.append(us)
        return socks

    def _config(self, tls: tuple[Path, Path] | None) -> uvicorn.Config:
        return uvicorn.Config(
            self.app,
            http=self.protocol,
            ws="none",
            lifespan="off",
            log_config=None,
            log_level=self.log_level,
            access_log=False,
            server_header=False,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=3,
            limit_concurrency=self.max_connections,
            h11_max_incomplete_event_size=MAX_HEAD,
            ssl_certfile=None if tls is None else str(tls[0]),
            ssl_keyfile=None if tls is None else str(tls[1]),
        )

    async def start(self, timeout: float = 10.0) -> None:
        self._sockets = self._bind()
        if self.tls is None:  # one server for both listeners
            groups = [(self._config(None), self._sockets)]
        else:  # TLS on TCP only: a server each
            groups = [(self._config(self.tls), self._sockets[:1])]
            groups += [(self._config(None), self._sockets[1:])] if self._sockets[1:] else []
        for config, socks in groups:
            server = uvicorn.Server(config)
            self._servers.append(server)
            self._tasks.append(asyncio.create_task(server.serve(sockets=socks)))
        deadline = asyncio.get_running_loop().time() + timeout
        while not all(s.started for s in self._servers):
            for task in self._tasks:
                if task.done():
                    task.result()  # raises what stopped it
                    raise RuntimeError("the HTTP server stopped during start-up")
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("the HTTP server did not start")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        for server in self._servers:
            server.should_exit = True
        for task in self._tasks:
            try:
                await asyncio.wait_for(task, 10.0)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
        for s in self._sockets:
            s.close()
        self._sockets = []
        if self.unix is not None:
            self.unix.unlink(missing_ok=True)
        self._servers = []
        self._tasks = []
