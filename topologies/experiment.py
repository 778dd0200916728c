"""The experiment harness: P4 switches, hosts, the controller daemon and jobs on Mininet.

Example (root)::

    with Experiment(ExperimentConfig(star(5), bw_mbps=2.0, run_dir=Path("run/demo"))) as ex:
        job = ex.submit("demo", workers=4, window=32)          # incctl job submit
        ex.start_service("h5", ["python", "-m", "hosts.netreduce.ps", "--workers", "4"],
                         ready="parameter server on")
        runs = ex.run_hosts([(f"h{i + 1}", worker_cmd(i)) for i in range(4)])
        print(ex.drop_counters("s1"), ex.port_bytes())

Every system's experiment is a short module that says only what differs (its hosts'
commands, its job, its table); this module does what they share:

- the network from a ``Layout`` (``star`` around one switch, ``leaf_spine`` racks), every
  link shaped to ``bw_mbps`` (Mininet's TCLink, htb), static ARP, IPv4 forwarding entries
  on every switch from shortest paths over the layout;
- impairments: with ``impairment`` set, every link (host-switch and switch-switch) gets a
  relay host in the middle running ``topologies/impair_relay.py`` (this kernel has no
  netem: loss, duplication, reordering and a one-way delay are done there);
- the switches (``P4Switch``: p4sim, or BMv2 with ``SWITCH=bmv2``) start empty; the
  controller daemon (``controller/daemon.py``) owns all of them over P4Runtime, pushes
  ``p4src/inc.p4`` and the forwarding entries, and serves its API on a Unix socket under
  ``run_dir`` for the hosts (other network namespaces, same file system) and on localhost
  (port ``api_port``, 7070, or a free one), where its live dashboard is: the harness
  prints that URL (``dashboard_url``);
- host processes started by PID and stopped by PID (also on failure or SIGTERM), services
  that are waited for until they print that they are ready, workers whose output is
  collected (and one of them shown as progress);
- measurements every experiment needs: bytes per switch port, switch counters over
  P4Runtime (drops by reason), the relays' counters.

Everything started is recorded in ``run_dir/state.json`` (PIDs, interfaces) so that ``make
stop`` can clean up after an interrupted run.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topologies.impair_relay import Impairment
from topologies.p4switch import CompiledProgram, SwitchStartError, compile_program, switch_kind

ROOT = Path(__file__).resolve().parent.parent
P4_PROGRAM = ROOT / "p4src" / "inc.p4"
DAEMON_START_S = 90.0
SERVICE_START_S = 60.0


class ExperimentError(RuntimeError):
    """The experiment could not be set up or run; the message says why."""


# --- layouts --------------------------------------------------------------------------------
def host_ip(i: int) -> str:
    """Address of host ``h{i}`` (1-based), Mininet's convention that controller/jobs/job.py uses."""
    return f"10.0.0.{i}"


def host_mac(i: int) -> str:
    return ":".join(f"{b:02x}" for b in i.to_bytes(6, "big"))


@dataclass(frozen=True)
class HostPlace:
    """Host ``name`` on ``port`` of ``switch``."""

    name: str
    ip: str
    mac: str
    switch: str
    port: int


@dataclass(frozen=True)
class Trunk:
    """A switch-to-switch link: ``a``'s port ``a_port`` to ``b``'s port ``b_port``."""

    a: str
    a_port: int
    b: str
    b_port: int


@dataclass(frozen=True)
class Layout:
    """Switches, hosts on their ports, and trunks between switches."""

    switches: tuple[str, ...]
    hosts: tuple[HostPlace, ...]
    trunks: tuple[Trunk, ...] = ()

    def host(self, name: str) -> HostPlace:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no host {name!r} in the layout")

    def egress_ports(self) -> dict[str, dict[str, int]]:
        """Per switch, per host: the port that leads to the host (shortest path)."""
        neighbours: dict[str, list[tuple[str, int]]] = {s: [] for s in self.switches}
        for t in self.trunks:
            neighbours[t.a].append((t.b, t.a_port))
            neighbours[t.b].append((t.a, t.b_port))
        out: dict[str, dict[str, int]] = {s: {} for s in self.switches}
        for h in self.hosts:
            # Breadth-first from the host's switch; each switch reached learns its way back.
            out[h.switch][h.name] = h.port
            frontier = deque([h.switch])
            while frontier:
                here = frontier.popleft()
                for there, _ in neighbours[here]:
                    if h.name in out[there]:
                        continue
                    back = next(p for n, p in neighbours[there] if n == here)
                    out[there][h.name] = back
                    frontier.append(there)
        return out

    def forwarding_entries(self, switch: str) -> dict[str, Any]:
        """Runtime JSON (tutorial format): every host's /32 out of the port towards it, and
        the source guard of ``switch``'s host ports: each lets in only its host's address
        (``p4src/source_guard.p4``; trunks between switches stay unchecked)."""
        from controller.systems.source_guard import SourceBinding, runtime_entries

        ports = self.egress_ports()[switch]
        guard = [SourceBinding(h.port, h.ip) for h in self.hosts if h.switch == switch]
        entries = runtime_entries(guard) + [
            {
                "table": "IncIngress.forwarder.ipv4_lpm",
                "match": {"hdr.ipv4.dstAddr": [h.ip, 32]},
                "action_name": "IncIngress.forwarder.ipv4_forward",
                "action_params": {"dst_mac": h.mac, "port": ports[h.name]},
            }
            for h in self.hosts
            if h.name in ports
        ]
        return {"target": "bmv2", "table_entries": entries}


def star(n_hosts: int) -> Layout:
    """One switch ``s1``; host ``h{i}`` on port ``i`` with Mininet's address for ``h{i}``."""
    hosts = tuple(
        HostPlace(f"h{i}", host_ip(i), host_mac(i), "s1", i) for i in range(1, n_hosts + 1)
    )
    return Layout(("s1",), hosts)


def leaf_spine(racks: int, per_rack: int, spine_hosts: int = 1) -> Layout:
    """Spine ``s1`` and leaves ``s2..s{racks+1}``. Rack ``r`` (1-based) holds hosts
    ``h{(r-1)*per_rack+1} ..`` on leaf ports ``1..per_rack``; the leaf's port
    ``per_rack+1`` goes to spine port ``r``. Hosts after the racks hang off the spine on
    ports ``racks+1 ..`` (parameter servers, reducers)."""
    hosts, trunks, leaves = [], [], []
    n = 0
    for r in range(1, racks + 1):
        leaf = f"s{r + 1}"
        leaves.append(leaf)
        for p in range(1, per_rack + 1):
            n += 1
            hosts.append(HostPlace(f"h{n}", host_ip(n), host_mac(n), leaf, p))
        trunks.append(Trunk(leaf, per_rack + 1, "s1", r))
    for p in range(racks + 1, racks + 1 + spine_hosts):
        n += 1
        hosts.append(HostPlace(f"h{n}", host_ip(n), host_mac(n), "s1", p))
    return Layout(("s1", *leaves), tuple(hosts), tuple(trunks))


# --- the experiment -------------------------------------------------------------------------
@dataclass
class ExperimentConfig:
    layout: Layout
    bw_mbps: float | None = None  # every link; None: unshaped
    impairment: Impairment | None = None  # a relay on every link when set
    run_dir: Path = Path("run/experiment")
    program: Path = P4_PROGRAM
    daemon_args: tuple[str, ...] = ()  # more options for controller.daemon
    log: Callable[[str], None] = print
    api_port: int = 7070  # the daemon's API and dashboard on localhost; a free one if taken


@dataclass
class HostRun:
    """What one host process left: exit status and its output lines."""

    host: str
    code: int
    lines: list[str]


@dataclass
class Experiment:
    """The network, switches, relays, controller daemon and host processes; a context
    manager that stops all of it by PID on exit."""

    config: ExperimentConfig
    net: Any = None
    daemon: subprocess.Popen[bytes] | None = None
    dashboard_url: str = ""  # the daemon's live dashboard (http://127.0.0.1:7070/ when free)
    procs: list[Any] = field(default_factory=list)
    pipeline: CompiledProgram | None = None
    relays: list[str] = field(default_factory=list)

    @property
    def layout(self) -> Layout:
        return self.config.layout

    @property
    def run_dir(self) -> Path:
        return self.config.run_dir

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def socket_path(self) -> Path:
        return self.run_dir / "controller.sock"

    @property
    def controller_url(self) -> str:
        return f"unix:{self.socket_path.resolve()}"

    @property
    def api(self) -> Any:
        from controller.api_client import ControllerApi

        return ControllerApi(self.controller_url, timeout=60.0)

    @property
    def kind(self) -> str:
        return switch_kind()

    def host(self, name: str) -> Any:
        return self.net.get(name)

    def switch(self, name: str = "s1") -> Any:
        return self.net.get(name)

    def switch_intfs(self) -> list[str]:
        """Root-namespace interfaces of every switch port (the switches' side of links)."""
        return [
            i.name
            for s in self.layout.switches
            for i in self.switch(s).intfList()
            if i.name != "lo"
        ]

    # --- set-up and tear-down ---------------------------------------------------------------
    def __enter__(self) -> Experiment:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        try:
            self.pipeline = compile_program(self.config.program, self.kind, self.run_dir / "build")
        except SwitchStartError as err:
            raise ExperimentError(str(err)) from None
        self.net = self._build()
        self._record_state()
        self.net.start()
        self._record_state()
        self._configure_hosts()
        self._start_relays()
        self._start_daemon()
        self._record_state()

    def _build(self) -> Any:
        from mininet.link import TCLink
        from mininet.net import Mininet

        from topologies.p4switch import P4Switch

        cfg = self.config
        net = Mininet(controller=None, link=TCLink, autoSetMacs=False, autoStaticArp=False)
        for s in self.layout.switches:
            net.addSwitch(s, cls=P4Switch, program=None, kind=self.kind, log_dir=str(self.logs))
        opts: dict[str, Any] = {} if cfg.bw_mbps is None else {"bw": cfg.bw_mbps}
        ends: list[tuple[str, int | None, str | None, str, int]] = [
            (h.name, None, "eth0", h.switch, h.port) for h in self.layout.hosts
        ]
        ends += [(t.a, t.a_port, None, t.b, t.b_port) for t in self.layout.trunks]
        for h in self.layout.hosts:
            net.addHost(h.name, ip=f"{h.ip}/24", mac=h.mac)
        for a, a_port, a_intf, b, b_port in ends:
            if cfg.impairment is None:
                net.addLink(a, b, port1=a_port, port2=b_port, intfName1=a_intf, **opts)
                continue
            r = f"r{len(self.relays) + 1}"
            self.relays.append(r)
            net.addHost(r, ip=None)
            net.addLink(a, r, port1=a_port, intfName1=a_intf, intfName2=f"{r}-eth0", **opts)
            net.addLink(r, b, port2=b_port, intfName1=f"{r}-eth1", **opts)
        return net

    def _configure_hosts(self) -> None:
        for h in self.layout.hosts:
            node = self.host(h.name)
            node.cmd("ethtool -K eth0 rx off tx off sg off >/dev/null 2>&1")
            node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
            for other in self.layout.hosts:
                if other is not h:
                    node.setARP(other.ip, other.mac)
        for r in self.relays:
            node = self.host(r)
            node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
            for intf in (f"{r}-eth0", f"{r}-eth1"):
                node.cmd(f"ethtool -K {intf} rx off tx off sg off >/dev/null 2>&1")

    def _start_relays(self) -> None:
        imp = self.config.impairment
        if imp is None:
            return
        for i, r in enumerate(self.relays, start=1):
            cmd = [sys.executable, "-m", "topologies.impair_relay", f"{r}-eth0", f"{r}-eth1"]
            cmd += ["--loss", str(imp.loss), "--dup", str(imp.dup), "--reorder", str(imp.reorder)]
            cmd += ["--seed", str(imp.seed + i), "--delay-ms", f"{imp.delay_s * 1000:g}"]
            self.start_service(r, cmd, ready="impair_relay: ready", log_name=r)

    def _start_daemon(self) -> None:
        assert self.pipeline is not None
        db = self.run_dir / "controller.db"
        db.unlink(missing_ok=True)  # a fresh experiment: no jobs restored from an old run
        cmd = [sys.executable, "-m", "controller.daemon"]
        for name in self.layout.switches:
            sw = self.switch(name)
            spec = f"{sw.device_id}@127.0.0.1:{sw.grpc_port}"
            if sw.kind == "bmv2":  # BMv2 serves registers over Thrift only
                spec += f",thrift={sw.thrift_port}"
            runtime = self.run_dir / f"{name}-runtime.json"
            runtime.write_text(json.dumps(self.layout.forwarding_entries(name), indent=1))
            cmd += ["--switch", spec, "--runtime-json", f"{sw.device_id}={runtime}"]
        cmd += ["--p4info", str(self.pipeline.p4info)]
        cmd += ["--device-config", str(self.pipeline.device_config), "--db", str(db)]
        port = self.config.api_port if _port_free(self.config.api_port) else 0
        cmd += ["--listen", f"127.0.0.1:{port}", "--unix", str(self.socket_path)]
        cmd += ["--force-pipeline", *self.config.daemon_args]
        log_path = self.logs / "controller.log"
        with open(log_path, "wb") as log:
            self.daemon = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        (self.run_dir / "controller.pid").write_text(f"{self.daemon.pid}\n")
        line = _wait_for_line(
            self.daemon, log_path, r"controller: dashboard (\S+)", DAEMON_START_S, "daemon"
        )
        self.dashboard_url = line.group(1).decode()
        self.config.log(
            f"dashboard: {self.dashboard_url} (live while the experiment runs;"
            f" Prometheus: {self.dashboard_url}metrics)"
        )

    def _record_state(self) -> None:
        if self.net is None:
            return
        pids = [n.pid for n in self.net.hosts if getattr(n, "pid", None)]
        for s in self.net.switches:
            if getattr(s, "proc", None) is not None:
                pids.append(s.proc.pid)
        if self.daemon is not None:
            pids.append(self.daemon.pid)
        pids += [p.pid for p in self.procs]
        state = {"pids": pids, "interfaces": self.switch_intfs(), "runner_pid": os.getpid()}
        (self.run_dir / "state.json").write_text(json.dumps(state, indent=1))

    def close(self) -> None:
        for p in self.procs:
            terminate(p)
        self.procs.clear()
        if self.daemon is not None:
            terminate(self.daemon)
            self.daemon = None
        if self.net is not None:
            for sw in self.net.switches:  # before Mininet removes the links under them
                getattr(sw, "stop_process", lambda: None)()
            self.net.stop()
            self.net = None
        for name in ("state.json", "controller.pid", "controller.sock", "controller.db"):
            (self.run_dir / name).unlink(missing_ok=True)

    # --- host processes ---------------------------------------------------------------------
    def popen(self, host: str, cmd: list[str], **kw: Any) -> Any:
        """Start ``cmd`` in ``host``'s namespace; stopped by PID on exit."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.STDOUT)
        p = self.host(host).popen(cmd, **kw)
        self.procs.append(p)
        self._record_state()
        return p

    def stop(self, p: Any) -> None:
        """Stop one process started here (by PID) before the experiment ends."""
        terminate(p)
        if p in self.procs:
            self.procs.remove(p)
        self._record_state()

    def start_service(
        self, host: str, cmd: list[str], ready: str, log_name: str | None = None
    ) -> Any:
        """Start a long-running process (server, relay) and return once its output shows
        ``ready`` (a regular expression); its output goes to ``logs/<log_name>.log``."""
        path = self.logs / f"{log_name or host}.log"
        with open(path, "wb") as out:
            p = self.popen(host, cmd, stdout=out, stderr=subprocess.STDOUT)
        _wait_for_line(p, path, ready, SERVICE_START_S, f"{cmd[2] if len(cmd) > 2 else cmd[0]}")
        return p

    def run_hosts(
        self,
        commands: Sequence[tuple[str, list[str]]],
        timeout: float = 900.0,
        show: int | None = None,
    ) -> list[HostRun]:
        """Run one command per (host, argv) at once and wait for all; ``show``: print the
        output of that one (its index) as it comes, as progress."""
        procs, outputs, readers = [], [], []
        for i, (host, cmd) in enumerate(commands):
            p = self.popen(host, cmd)
            lines: list[str] = []
            printer = self.config.log if i == show else None
            t = threading.Thread(target=_collect, args=(p, lines, printer), daemon=True)
            t.start()
            procs.append(p)
            outputs.append(lines)
            readers.append(t)
        deadline = time.monotonic() + timeout
        try:
            codes = [p.wait(timeout=max(deadline - time.monotonic(), 0.1)) for p in procs]
        except subprocess.TimeoutExpired:
            raise ExperimentError(f"host processes still running after {timeout:g} s") from None
        finally:
            for p in procs:
                terminate(p)
        for t in readers:
            t.join(2.0)
        return [HostRun(h, c, out) for (h, _), c, out in zip(commands, codes, outputs, strict=True)]

    # --- jobs -------------------------------------------------------------------------------
    def submit(self, name: str, show: bool = False, **fields: Any) -> int:
        """``incctl job submit --name NAME --FIELD VALUE ...`` (lists comma-separated);
        returns the job id. ``show``: print the command and its output, as a user would."""
        cmd = [sys.executable, "-m", "controller.incctl", "--controller", self.controller_url]
        cmd += ["job", "submit", "--name", name]
        for key, value in fields.items():
            text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
            cmd += ["--" + key.replace("_", "-"), text]
        res = subprocess.run(
            cmd if show else [*cmd, "--json"], capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            raise ExperimentError(f"incctl job submit failed: {res.stderr.strip() or res.stdout}")
        if not show:
            return int(json.loads(res.stdout)["job_id"])
        shown = " ".join(cmd[cmd.index("submit") :])
        self.config.log(f"$ incctl --controller {self.controller_url} job {shown}")
        self.config.log(res.stdout.rstrip())
        found = re.match(r"job (\d+) ", res.stdout)
        if found is None:
            raise ExperimentError(f"incctl job submit: unexpected output {res.stdout!r}")
        return int(found.group(1))

    # --- measurements -----------------------------------------------------------------------
    def port_bytes(self) -> dict[str, int]:
        """rx + tx bytes of every switch port so far (both directions of each link)."""
        counters = interface_bytes()
        return {name: counters[name] for name in self.switch_intfs()}

    def read_counter(self, name: str, switch: str = "s1") -> dict[int, tuple[int, int]]:
        """Counter ``name`` of ``switch``: index -> (packets, bytes), read over P4Runtime by a
        backup client (the daemon stays primary)."""
        from controller.p4rt.p4runtime_client import SwitchConnection, SwitchSpec

        sw = self.switch(switch)
        spec = SwitchSpec(sw.device_id, f"127.0.0.1:{sw.grpc_port}", election_id=1)

        async def read() -> dict[int, tuple[int, int]]:
            async with SwitchConnection(spec) as conn:
                return await conn.read_counter(name)

        return asyncio.run(read())

    def drop_counters(self, switch: str = "s1") -> dict[str, int]:
        """The switch's ``inc_drops`` counter by reason name."""
        from wire.header import DropReason

        cells = self.read_counter("IncIngress.inc_drops", switch)
        return {DropReason(i).name: pkts for i, (pkts, _) in cells.items()}

    def relay_stats(self) -> dict[str, dict[str, int]]:
        """Per relay (one per link): frames sent, dropped, duplicated, reordered. Complete
        once the relays stopped (they print their counters on SIGTERM): call after close()."""
        out = {}
        for r in self.relays:
            lines = (self.logs / f"{r}.log").read_text().strip().splitlines()
            if lines and lines[-1].startswith("impair_relay: {"):
                out[r] = ast.literal_eval(lines[-1].removeprefix("impair_relay: "))
        return out


def interface_bytes() -> dict[str, int]:
    """rx + tx bytes per interface of this network namespace (``/proc/net/dev`` follows the
    reader's namespace; ``/sys/class/net`` follows the one sysfs was mounted in)."""
    out = {}
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, fields = line.partition(":")
        values = fields.split()
        out[name.strip()] = int(values[0]) + int(values[8])  # rx bytes, tx bytes
    return out


def busiest(before: dict[str, int], after: dict[str, int]) -> tuple[str, int]:
    """The switch port whose link carried the most bytes between two samples."""
    deltas = {k: after[k] - before.get(k, 0) for k in after}
    name = max(deltas, key=lambda k: deltas[k])
    return name, deltas[name]


def terminate(p: Any, grace: float = 5.0) -> None:
    """SIGTERM by PID, then SIGKILL."""
    if p.poll() is not None:
        return
    try:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=grace)
    except ProcessLookupError:
        pass


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_for_line(p: Any, path: Path, pattern: str, timeout: float, what: str) -> re.Match[bytes]:
    """Until ``pattern`` shows in the log at ``path`` (its match); the process dying or the
    time running out is an ``ExperimentError`` with the log's tail."""
    rx = re.compile(pattern.encode())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if match := rx.search(path.read_bytes()):
            return match
        if p.poll() is not None:
            tail = path.read_text(errors="replace")[-2000:]
            raise ExperimentError(f"{what} exited with status {p.returncode}:\n{tail}")
        time.sleep(0.05)
    raise ExperimentError(f"{what} not ready after {timeout:g} s (see {path})")


def _collect(proc: Any, lines: list[str], show: Callable[[str], None] | None) -> None:
    for raw in proc.stdout:
        line = raw.decode(errors="replace").rstrip() if isinstance(raw, bytes) else raw.rstrip()
        lines.append(line)
        if show is not None:
            show(line)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends a run like Ctrl-C, so that the context managers clean up."""

    def _raise(*_: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def main_guard(prog: str, run: Callable[[], int]) -> int:
    """The common ending of an experiment's ``main``: root check, SIGTERM, one-line errors."""
    if os.geteuid() != 0:
        print(f"{prog}: Mininet needs root (network namespaces, veth links, raw sockets)")
        return 1
    try:
        with sigterm_as_interrupt():
            return run()
    except ExperimentError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; everything started was stopped", file=sys.stderr)
        return 130
