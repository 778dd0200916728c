"""The controller daemon: owns the switches, admits jobs, serves a small HTTP/JSON API.

Example::

    python -m controller.daemon --switch 0@127.0.0.1:9559 \\
        --p4info build/inc.p4info.txtpb --device-config build/inc.p4sim \\
        --runtime-json 0=topologies/inc/s1-runtime.json \\
        --db run/controller.db --listen 127.0.0.1:7070

On start it connects to every switch over P4Runtime, becomes primary, pushes the pipeline
(unless the switch already runs it: same cookie), installs forwarding from the runtime JSON
files, loads the jobs stored in SQLite and re-installs those a switch lost. While it runs,
a switch that restarts (its P4Runtime stream closes) is reconnected within
``watch_interval`` seconds and gets its pipeline, forwarding entries and jobs back.

API (JSON in and out; errors are ``{"error": "..."}`` with 400, 404, 409 or 502):

=========================================  ==================================================
``POST /jobs``                             submit: ``{"workers": 4, "window": 64, ...}``
                                           (the kind's request fields, controller/job.py) -> 201
``GET /jobs``                              every job
``GET /jobs/{id}``                         one job
``DELETE /jobs/{id}``                      cancel: entries deleted, region cleared and freed
``GET /jobs/{id}/workers/{wid}``           what worker agent ``wid`` needs at start
``GET /memory``                            per switch: who owns which aggregators
``GET /switches``                          the switches and whether we are primary
=========================================  ==================================================

The API listens on localhost by default and has no authentication: keep it there.
``--unix PATH`` serves the same API on a Unix domain socket as well (mode 0600), for clients
in other network namespaces on the same machine (Mininet hosts): ``unix:PATH`` URLs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn, UnixStreamServer
from typing import Any

from controller.job import JobError, parse_request
from controller.jobs import JobManager, UnknownJob
from controller.memory_manager import AGG_POOL_SIZE, OutOfMemory
from controller.p4runtime_client import (
    Pipeline,
    SwitchConnection,
    SwitchError,
    SwitchSet,
    SwitchSpec,
)
from controller.runtime_config import apply_runtime_config
from controller.store import DEFAULT_DB, JobStore, StoreError
from p4sim.runtime_json import RuntimeConfig, RuntimeJsonError, load_runtime_json

log = logging.getLogger("controller.daemon")

DEFAULT_LISTEN = ("127.0.0.1", 7070)
CALL_TIMEOUT = 120.0  # clearing a large region over P4Runtime takes a while


@dataclass(frozen=True)
class DaemonConfig:
    switches: tuple[SwitchSpec, ...]
    p4info: Path | None = None
    device_config: Path | None = None
    db: Path = DEFAULT_DB
    listen: tuple[str, int] = DEFAULT_LISTEN
    runtime_json: tuple[tuple[int, Path], ...] = ()  # (device id, file)
    pool_size: int = AGG_POOL_SIZE
    force_pipeline: bool = False
    watch_interval: float = 2.0  # seconds between checks for lost switch connections
    unix: Path | None = None  # also serve the API on this Unix domain socket


class ControllerDaemon:
    """The daemon in-process: ``start()`` returns once switches and API are up."""

    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.switches: SwitchSet | None = None
        self.manager: JobManager | None = None
        self.store: JobStore | None = None
        self._loop_thread: threading.Thread | None = None
        self._http: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self._unix: _UnixHTTPServer | None = None
        self._runtime: dict[int, RuntimeConfig] = {}
        self._watchdog: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        assert self._http is not None
        host, port = self._http.server_address[:2]
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}"

    def start(self, timeout: float = 60.0) -> None:
        self._loop_thread = threading.Thread(
            target=self.loop.run_forever, daemon=True, name="controller-loop"
        )
        self._loop_thread.start()
        try:
            self.call(self._setup(), timeout)
            self._http = ThreadingHTTPServer(self.config.listen, _handler(self))
            if self.config.unix is not None:
                self._unix = _UnixHTTPServer(self.config.unix, _handler(self))
        except BaseException:
            self.stop()
            raise
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, daemon=True, name="controller-http"
        )
        self._http_thread.start()
        if self._unix is not None:
            threading.Thread(
                target=self._unix.serve_forever, daemon=True, name="controller-unix"
            ).start()
            log.info("controller API also on unix:%s", self.config.unix)
        log.info("controller API on %s", self.url)

    def stop(self) -> None:
        if self._unix is not None:
            self._unix.shutdown()
            self._unix.server_close()
            self._unix = None
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._loop_thread is not None and self.loop.is_running():
            if self._watchdog is not None:
                self.loop.call_soon_threadsafe(self._watchdog.cancel)
            if self.switches is not None:
                try:
                    self.call(self.switches.close(), 10.0)
                except Exception as err:  # closing is best effort
                    log.warning("closing switch connections: %s", err)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._loop_thread.join(10.0)
        if self.store is not None:
            self.store.close()
            self.store = None
        self._loop_thread = None

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = CALL_TIMEOUT) -> Any:
        """Run ``coro`` on the daemon's loop from another thread and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def on_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn`` on the loop's thread: the job state is only touched from there."""

        async def run() -> Any:
            return fn(*args)

        return self.call(run())

    async def _setup(self) -> None:
        cfg = self.config
        pipeline = None
        if cfg.p4info is not None:
            pipeline = Pipeline.from_files(cfg.p4info, cfg.device_config)
        self._runtime = {dev: load_runtime_json(path) for dev, path in cfg.runtime_json}
        self.switches = SwitchSet(cfg.switches, pipeline)
        await self.switches.connect(force_pipeline=cfg.force_pipeline)
        for conn in self.switches:
            _require_primary(conn)
            await self._install_forwarding(conn)
        self.store = JobStore(cfg.db)
        groups = {g.group_id for rc in self._runtime.values() for g in rc.multicast_groups}
        self.manager = JobManager(self.switches.connections, self.store, cfg.pool_size, groups)
        again = await self.manager.restore()
        if again:
            log.info("re-installed jobs the switches had lost: %s", again)
        self._watchdog = asyncio.create_task(self._watch(), name="switch-watchdog")

    async def _install_forwarding(self, conn: SwitchConnection) -> None:
        rc = self._runtime.get(conn.spec.device_id)
        if rc is not None:
            await apply_runtime_config(conn, rc)

    async def _watch(self) -> None:
        """Reconnect to a switch whose stream closed (it restarted) and give it back its
        pipeline, forwarding entries and jobs."""
        assert self.switches is not None and self.manager is not None
        while True:
            await asyncio.sleep(self.config.watch_interval)
            for conn in self.switches:
                if conn.connected:
                    continue
                try:
                    await conn.reconnect()
                    _require_primary(conn)
                    await self._install_forwarding(conn)
                    again = await self.manager.restore(conn.spec.device_id)
                    log.info("switch %s is back; jobs re-installed: %s", conn.spec.label, again)
                except SwitchError as err:
                    log.warning("switch %s still unavailable: %s", conn.spec.label, err)

    def switch_status(self) -> list[dict[str, Any]]:
        assert self.switches is not None
        return [
            {
                "device_id": c.spec.device_id,
                "name": c.spec.label,
                "address": c.spec.address,
                "primary": c.is_primary,
            }
            for c in self.switches
        ]


def _require_primary(conn: SwitchConnection) -> None:
    if not conn.is_primary:
        raise SwitchError(
            f"switch {conn.spec.label} ({conn.spec.address}): another client is primary"
            f" (election id {conn.primary_id} >= ours, {conn.spec.election_id});"
            " stop it or give this controller a higher election id"
        )


# ------------------------------------------------------------------------------- HTTP


class _UnixHTTPServer(ThreadingMixIn, UnixStreamServer):
    """The HTTP API on a Unix domain socket; the socket file is replaced on start and
    removed on close."""

    daemon_threads = True

    def __init__(self, path: Path, handler: type[BaseHTTPRequestHandler]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_socket():
            self.path.unlink()  # left over by a daemon that was killed
        super().__init__(str(self.path), handler)
        os.chmod(self.path, 0o600)  # root-only, like the localhost port's trust model

    def server_close(self) -> None:
        super().server_close()
        self.path.unlink(missing_ok=True)


class ApiError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


Route = tuple[str, re.Pattern[str], Callable[..., tuple[HTTPStatus, Any]]]


def _routes(d: ControllerDaemon) -> list[Route]:
    def manager() -> JobManager:
        assert d.manager is not None
        return d.manager

    def list_jobs() -> tuple[HTTPStatus, Any]:
        return HTTPStatus.OK, {"jobs": [j.to_dict() for j in d.on_loop(manager().jobs)]}

    def get_job(job_id: str) -> tuple[HTTPStatus, Any]:
        return HTTPStatus.OK, {"job": d.on_loop(manager().get, int(job_id)).to_dict()}

    def submit(body: Any) -> tuple[HTTPStatus, Any]:
        if not isinstance(body, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        job = d.call(manager().submit(parse_request(body)))
        return HTTPStatus.CREATED, {"job": job.to_dict()}

    def cancel(job_id: str) -> tuple[HTTPStatus, Any]:
        job = d.call(manager().cancel(int(job_id)))
        return HTTPStatus.OK, {"job": job.to_dict()}

    def worker(job_id: str, wid: str) -> tuple[HTTPStatus, Any]:
        job = d.on_loop(manager().get, int(job_id))
        assert d.switches is not None
        address = (
            d.switches[job.device_id].spec.address
            if job.device_id in d.switches.connections
            else ""
        )
        try:
            return HTTPStatus.OK, d.on_loop(manager().worker_config, job.job_id, int(wid), address)
        except KeyError as err:
            raise ApiError(HTTPStatus.NOT_FOUND, str(err.args[0])) from None

    return [
        ("GET", re.compile(r"/jobs"), list_jobs),
        ("POST", re.compile(r"/jobs"), submit),
        ("GET", re.compile(r"/jobs/(\d+)"), get_job),
        ("DELETE", re.compile(r"/jobs/(\d+)"), cancel),
        ("GET", re.compile(r"/jobs/(\d+)/workers/(\d+)"), worker),
        (
            "GET",
            re.compile(r"/memory"),
            lambda: (HTTPStatus.OK, {"switches": d.on_loop(manager().memory_view)}),
        ),
        ("GET", re.compile(r"/switches"), lambda: (HTTPStatus.OK, {"switches": d.switch_status()})),
    ]


def _handler(daemon: ControllerDaemon) -> type[BaseHTTPRequestHandler]:
    routes = _routes(daemon)

    class Handler(BaseHTTPRequestHandler):
        server_version = "inc-controller/0.1"

        def address_string(self) -> str:
            # A Unix socket's peer has no (host, port); the base class would index "".
            return str(self.client_address[0]) if self.client_address else "unix"

        def log_message(self, fmt: str, *args: Any) -> None:
            log.debug("%s - " + fmt, self.address_string(), *args)

        def _dispatch(self, method: str) -> None:
            path = self.path.split("?", 1)[0].rstrip("/") or "/"
            try:
                status, body = self._route(method, path)
            except ApiError as err:
                status, body = err.status, {"error": str(err)}
            except (JobError, json.JSONDecodeError) as err:
                status, body = HTTPStatus.BAD_REQUEST, {"error": str(err)}
            except UnknownJob as err:
                status, body = HTTPStatus.NOT_FOUND, {"error": str(err)}
            except OutOfMemory as err:
                status, body = HTTPStatus.CONFLICT, {"error": str(err)}
            except SwitchError as err:
                status, body = HTTPStatus.BAD_GATEWAY, {"error": str(err)}
            except Exception as err:  # a bug: report it, keep serving
                log.exception("%s %s failed", method, path)
                status, body = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": repr(err)}
            self._reply(status, body)

        def _route(self, method: str, path: str) -> tuple[HTTPStatus, Any]:
            allowed = False
            for m, pattern, fn in routes:
                match = pattern.fullmatch(path)
                if match is None:
                    continue
                allowed = True
                if m != method:
                    continue
                args = list(match.groups())
                if method == "POST":
                    args.append(self._body())
                return fn(*args)
            if allowed:
                raise ApiError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} not allowed on {path}")
            raise ApiError(HTTPStatus.NOT_FOUND, f"no such resource: {path}")

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            return json.loads(raw.decode("utf-8") or "{}")

        def _reply(self, status: HTTPStatus, body: Any) -> None:
            data = json.dumps(body, indent=1).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._dispatch("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._dispatch("POST")

        def do_DELETE(self) -> None:  # noqa: N802
            self._dispatch("DELETE")

    return Handler


# -------------------------------------------------------------------------------- CLI


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


def _switch(text: str) -> SwitchSpec:
    try:
        return SwitchSpec.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _runtime(text: str) -> tuple[int, Path]:
    dev, sep, path = text.partition("=")
    if not sep or not dev.isdigit():
        raise argparse.ArgumentTypeError(f"expected DEVICE_ID=FILE, got {text!r}")
    return int(dev), Path(path)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m controller.daemon",
        description="INC controller daemon (P4Runtime + job API)",
    )
    p.add_argument(
        "--switch",
        action="append",
        type=_switch,
        required=True,
        metavar="ID@HOST:PORT[,thrift=PORT][,election=N]",
        help="a switch to own (repeat for several); thrift=PORT: BMv2 registers over Thrift",
    )
    p.add_argument("--p4info", type=Path, help="P4Info (text or binary) of the switch program")
    p.add_argument(
        "--device-config", type=Path, help="p4_device_config: p4sim source bundle or BMv2 JSON"
    )
    p.add_argument(
        "--runtime-json",
        action="append",
        type=_runtime,
        default=[],
        metavar="ID=FILE",
        help="tutorial-style sN-runtime.json for switch ID",
    )
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite file ({DEFAULT_DB})")
    p.add_argument(
        "--listen",
        type=_listen,
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help="HTTP API address (127.0.0.1:7070)",
    )
    p.add_argument(
        "--unix",
        type=Path,
        metavar="PATH",
        help="also serve the API on this Unix domain socket (for Mininet hosts)",
    )
    p.add_argument(
        "--pool-size",
        type=int,
        default=AGG_POOL_SIZE,
        help=f"aggregators per switch ({AGG_POOL_SIZE})",
    )
    p.add_argument(
        "--force-pipeline",
        action="store_true",
        help="push the pipeline even if the switch already runs it (clears state)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s: %(message)s",
    )
    if args.device_config is not None and args.p4info is None:
        print("controller: --device-config needs --p4info", file=sys.stderr)
        return 2
    config = DaemonConfig(
        switches=tuple(args.switch),
        p4info=args.p4info,
        device_config=args.device_config,
        db=args.db,
        listen=args.listen,
        runtime_json=tuple(args.runtime_json),
        pool_size=args.pool_size,
        force_pipeline=args.force_pipeline,
        unix=args.unix,
    )
    daemon = ControllerDaemon(config)
    try:
        daemon.start()
    except (SwitchError, StoreError, RuntimeJsonError, OSError, ValueError) as err:
        print(f"controller: {err}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    unix = f" and unix:{args.unix}" if args.unix is not None else ""
    print(f"controller: serving {daemon.url}{unix}", flush=True)
    stop.wait()
    daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
