"""The controller daemon: owns the switches, admits jobs, serves the API and the dashboard.

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

The API (FastAPI on uvicorn, ``controller/api/``; OpenAPI at ``/openapi.json`` and
``/docs``; errors are ``{"error": "..."}`` with 400, 401, 403, 404, 405, 408, 409, 413,
415, 502 or 503):

=============================================  ==============================================
``GET /``                                      the live dashboard
``POST /jobs``                                 submit: ``{"workers": 4, "window": 64, ...}``
                                               (the kind's request, controller/jobs/job.py) -> 201
``GET /jobs``, ``GET /jobs/{id}``              every job, one job
``DELETE /jobs/{id}``                          cancel: entries deleted, region cleared, freed
``GET /jobs/{id}/workers/{wid}``               what worker agent ``wid`` needs at start
``POST /jobs/{id}/workers/{wid}/progress``     a worker's progress report (figures) -> 204
``GET /memory``, ``GET /switches``             memory per switch and pool; the switches
``GET /stats``, ``GET /stats/stream``          live figures now; the same as server-sent events
``GET /metrics``, ``GET /events``              Prometheus text format; recent decisions
``POST /jobs/{id}/workers/{wid}/epoch``        scheduled job: ``{"epoch": e, "rtt_s": ..,
                                               "wait": s}`` -> the region of epoch e
``GET /schedule``                              the scheduler: queue, plan, regions, predictions
``GET /tokens``                                where this machine's clients find the tokens
=============================================  ==============================================

``--policy edf|fifo|rr|mlfq`` picks how jobs submitted with a class share the memory pool
(``controller/sched/scheduled_jobs.py``); ``--quantum``, ``--rtt-ms``, ``--line-mbps`` set the
policies' time slice and the path model used until workers report their RTT.

Every change takes a token (``controller/api/tenants.py``): submitting the operator's,
which the daemon writes to ``TOKEN_DIR/operator.token`` (mode 0600) at each start; a job's
own changes (cancel, mode, epochs, progress) its token, returned at submission and written
to ``TOKEN_DIR/job-ID.token``. ``TOKEN_DIR`` (``--token-dir``) is the Unix socket's folder,
else the database's, where ``incctl`` and the job's hosts on this machine find them.
Reading is open to this machine. It listens on localhost by default; ``--listen
0.0.0.0:7070 --allowed-host NAME --tls-cert C --tls-key K`` serves workers on other
machines (``docs/deploy.md``). ``--unix PATH`` serves the same API on a Unix domain
socket as well (mode 0600), for clients in other network namespaces on the same machine
(Mininet hosts): ``unix:PATH`` URLs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.api import ApiContext, Caps, Tenants, create_app
from controller.api.http_server import MAX_CONNECTIONS, MAX_PER_CLIENT, ApiServer
from controller.api.live_stats import LiveFeed, LiveStats
from controller.api.worker_reports import WorkerReports
from controller.job_manager import JobManager
from controller.jobs.events import EventLog
from controller.jobs.memory_manager import AGG_POOL_SIZE
from controller.jobs.store import DEFAULT_DB, JobStore, StoreError
from controller.p4rt.p4runtime_client import (
    Pipeline,
    SwitchConnection,
    SwitchError,
    SwitchSet,
    SwitchSpec,
)
from controller.p4rt.runtime_config import apply_runtime_config
from controller.sched.policies import DEFAULT_QUANTUM, POLICIES
from controller.sched.scheduled_jobs import SchedulingOptions
from p4rt_config.runtime_json import RuntimeConfig, RuntimeJsonError, load_runtime_json

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
    stats_interval: float = 1.0  # seconds between live samples while the dashboard is open
    request_timeout: float = 10.0  # for a request's head, and again for its body
    scheduling: SchedulingOptions = SchedulingOptions()
    token_dir: Path | None = None  # the tokens' files: None = the socket's folder, or the db's
    allowed_hosts: tuple[str, ...] = ()  # Host names besides localhost and the listen address
    tls: tuple[Path, Path] | None = None  # (certificate, key): HTTPS on the TCP listener
    caps: Caps = Caps()
    max_connections: int = MAX_CONNECTIONS  # open at once; more get 503
    per_client: int = MAX_PER_CLIENT  # open at once from one TCP address

    @property
    def tokens_in(self) -> Path:
        if self.token_dir is not None:
            return self.token_dir
        return (self.unix if self.unix is not None else self.db).parent


class ControllerDaemon:
    """The daemon in-process: ``start()`` returns once switches and API are up."""

    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.switches: SwitchSet | None = None
        self.manager: JobManager | None = None
        self.store: JobStore | None = None
        self.events = EventLog()
        self.reports = WorkerReports()
        self.feed: LiveFeed | None = None
        self._server: ApiServer | None = None
        self._loop_thread: threading.Thread | None = None
        self._runtime: dict[int, RuntimeConfig] = {}
        self._watchdog: asyncio.Task[None] | None = None
        self._scheduler: asyncio.Task[None] | None = None
        self._ticks: asyncio.Task[None] | None = None
        self.tenants: Tenants | None = None

    @property
    def operator_token(self) -> str:
        assert self.tenants is not None
        return self.tenants.operator_token

    @property
    def url(self) -> str:
        assert self._server is not None
        return self._server.url

    def start(self, timeout: float = 60.0) -> None:
        self._loop_thread = threading.Thread(
            target=self.loop.run_forever, daemon=True, name="controller-loop"
        )
        self._loop_thread.start()
        try:
            self.call(self._setup(), timeout)
            self.call(self._serve(), timeout)
        except BaseException:
            self.stop()
            raise
        if self.config.unix is not None:
            log.info("controller API also on unix:%s", self.config.unix)
        log.info("controller API on %s", self.url)

    async def _serve(self) -> None:
        assert self.switches is not None and self.manager is not None
        stats = LiveStats(self.switches, self.manager, self.reports, self.events)
        self.feed = LiveFeed(stats, self.config.stats_interval)
        ctx = ApiContext(self.manager, self.switches, stats, self.feed, self.reports, self.events)
        cfg = self.config
        assert self.store is not None
        self.tenants = Tenants(self.store, cfg.tokens_in)
        names = (*_listen_names(cfg.listen[0]), *cfg.allowed_hosts)
        app = create_app(ctx, self.tenants, cfg.request_timeout, names, cfg.caps)
        self._server = ApiServer(
            app,
            cfg.listen,
            cfg.unix,
            head_timeout=cfg.request_timeout,
            tls=cfg.tls,
            max_connections=cfg.max_connections,
            per_client=cfg.per_client,
        )
        await self._server.start()

    def stop(self) -> None:
        running = self._loop_thread is not None and self.loop.is_running()
        if running and self._server is not None:
            if self.feed is not None:
                self.loop.call_soon_threadsafe(self.feed.close)  # ends the dashboards' streams
            try:
                self.call(self._server.stop(), 15.0)
            except Exception as err:  # stopping is best effort
                log.warning("stopping the API server: %s", err)
        self._server = None
        if running:
            for task in (self._watchdog, self._scheduler, self._ticks):
                if task is not None:
                    self.loop.call_soon_threadsafe(task.cancel)
            if self.switches is not None:
                try:
                    self.call(self.switches.close(), 10.0)
                except Exception as err:  # closing is best effort
                    log.warning("closing switch connections: %s", err)
            self.loop.call_soon_threadsafe(self.loop.stop)
            assert self._loop_thread is not None
            self._loop_thread.join(10.0)
        if self.store is not None:
            self.store.close()
            self.store = None
        self._loop_thread = None

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = CALL_TIMEOUT) -> Any:
        """Run ``coro`` on the daemon's loop from another thread and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

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
        self.manager = JobManager(
            self.switches.connections,
            self.store,
            cfg.pool_size,
            groups,
            events=self.events,
            scheduling=cfg.scheduling,
        )
        again = await self.manager.restore()
        if again:
            log.info("re-installed jobs the switches had lost: %s", again)
        self._watchdog = asyncio.create_task(self._watch(), name="switch-watchdog")
        self._scheduler = asyncio.create_task(self.manager.run_scheduler(), name="scheduler")
        self._ticks = asyncio.create_task(self.manager.run_ticks(), name="job-ticks")

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
                    self.events.record(
                        "switch", f"switch {conn.spec.label} is back", device_id=conn.spec.device_id
                    )
                    log.info("switch %s is back; jobs re-installed: %s", conn.spec.label, again)
                except SwitchError as err:
                    log.warning("switch %s still unavailable: %s", conn.spec.label, err)


def _require_primary(conn: SwitchConnection) -> None:
    if not conn.is_primary:
        raise SwitchError(
            f"switch {conn.spec.label} ({conn.spec.address}): another client is primary"
            f" (election id {conn.primary_id} >= ours, {conn.spec.election_id});"
            " stop it or give this controller a higher election id"
        )


def _listen_names(host: str) -> tuple[str, ...]:
    """The listen address itself is a name of the controller (not a wildcard)."""
    return () if host in ("", "0.0.0.0", "::") else (host,)


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
        help="HTTP API and dashboard address (127.0.0.1:7070; port 0: any free port)",
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
    p.add_argument(
        "--policy",
        choices=sorted(POLICIES),
        default="edf",
        help="how scheduled jobs (submitted with a class) share the pool (edf)",
    )
    p.add_argument(
        "--quantum",
        type=float,
        default=DEFAULT_QUANTUM,
        help=f"seconds: RR's time slice, MLFQ's first level ({DEFAULT_QUANTUM:g})",
    )
    p.add_argument(
        "--rtt-ms",
        type=float,
        default=SchedulingOptions.rtt_s * 1e3,
        help="round-trip time the model assumes until workers measure theirs (0.1)",
    )
    p.add_argument(
        "--line-mbps",
        type=float,
        default=SchedulingOptions.line_rate * 8 / 1e6,
        help="bytes of values one worker's link carries, in Mbit/s (100000)",
    )
    p.add_argument(
        "--token-dir",
        type=Path,
        metavar="DIR",
        help="where operator.token and job-ID.token are written (the socket's folder, else"
        " the database's)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name or address clients use besides localhost and the listen address"
        " (repeat; a request naming another Host is refused: DNS rebinding)",
    )
    p.add_argument("--tls-cert", type=Path, metavar="PEM", help="serve TCP over TLS: certificate")
    p.add_argument("--tls-key", type=Path, metavar="PEM", help="serve TCP over TLS: private key")
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
    if (args.tls_cert is None) != (args.tls_key is None):
        print("controller: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    try:
        scheduling = SchedulingOptions(
            policy=args.policy,
            quantum=args.quantum,
            rtt_s=args.rtt_ms / 1e3,
            line_rate=args.line_mbps * 1e6 / 8,
        )
    except ValueError as err:
        print(f"controller: {err}", file=sys.stderr)
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
        scheduling=scheduling,
        token_dir=args.token_dir,
        allowed_hosts=tuple(args.allowed_host),
        tls=None if args.tls_cert is None else (args.tls_cert, args.tls_key),
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
    print(f"controller: dashboard {daemon.url}/", flush=True)
    print(f"controller: operator token in {config.tokens_in / 'operator.token'}", flush=True)
    stop.wait()
    daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
