"""The main job on Mininet: switch aggregation (NetReduce) against a parameter server and ring.

Example (root; ``make run`` does exactly this)::

    python -m topologies.netreduce run            # train with switch, ps, ring; table, plots
    python -m topologies.netreduce run --epochs 3 --bw 2

Network: one switch ``s1`` (p4sim; ``SWITCH=bmv2``: simple_switch_grpc, same P4Switch node),
workers ``h1..hN`` on switch ports ``1..N`` (IP ``10.0.0.i``, MAC ``00:00:00:00:00:0i``), the
parameter-server host ``h{N+1}``, every link shaped to one bandwidth (TCLink ``bw``), static
ARP. With an impairment (tests) each host link becomes ``host -- relay -- switch``: relay
``r{i}`` runs topologies/impair_relay.py in its own namespace, because this kernel has no
netem. The controller daemon runs in the root namespace and pushes p4src/inc.p4 plus the
forwarding entries generated here; it also serves its API on a Unix socket under run/, which
the hosts (other network namespaces, same filesystem) use to fetch their job settings.

Everything started is recorded in ``run/netreduce/state.json`` (PIDs, interfaces) so that
``make stop`` can clean up after an interrupted run; a normal exit or a failure stops it all.

``python -m topologies.netreduce vector ...`` is the host-side tool the tests and the
benchmark run inside Mininet hosts: it all-reduces seeded integer vectors by one method and
writes the results (``.npy``) and per-call times (``.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from topologies.impair_relay import Impairment

ROOT = Path(__file__).resolve().parent.parent
P4_PROGRAM = ROOT / "p4src" / "inc.p4"
RUN_DIR = Path("run/netreduce")
METHODS = ("switch", "ps", "ring")
# p4sim's rate over AF_PACKET on this 2-core machine, measured with the `vector` tool and
# no shaping (4 workers, 1024-packet vectors): ~10,800 aggregation packets/s into the switch
# (and as many result copies out), i.e. ~2,700 frames/s or ~4.2 Mbit/s per worker link.
# 2 Mbit/s links (~1,300 INC frames/s per worker) keep p4sim at half that: links set the pace.
DEFAULT_BW_MBPS = 2.0
DEFAULT_WINDOW = 32
FRAME_OVERHEAD = 14 + 20 + 8 + 24  # Ethernet, IPv4, UDP, INC header: bytes per packet


def host_ip(i: int) -> str:
    """Mininet-style address of host ``h{i}`` (1-based), as controller/job.py assumes."""
    return f"10.0.0.{i}"


def host_mac(i: int) -> str:
    return ":".join(f"{b:02x}" for b in i.to_bytes(6, "big"))


def make_vector(seed: int, worker_id: int, call: int, size: int) -> np.ndarray:
    """The int32 vector worker ``worker_id`` all-reduces in call ``call`` (full range)."""
    rng = np.random.default_rng((seed, worker_id, call))
    return rng.integers(-(2**31), 2**31, size=size, dtype=np.int64).astype(np.int32)


def expected_sum(seed: int, workers: int, call: int, size: int) -> np.ndarray:
    """The host-side int32 sum (wrapping, like the switch) of every worker's vector."""
    total = np.zeros(size, dtype=np.int32)
    for w in range(workers):
        total += make_vector(seed, w, call, size)
    return total


# --- the switch program and its forwarding entries ------------------------------------------
@dataclass(frozen=True)
class Pipeline:
    p4info: Path
    device_config: Path


def compile_pipeline(out_dir: Path, kind: str) -> Pipeline:
    """p4src/inc.p4 for the target: p4sim's own compiler, or p4c for BMv2."""
    out_dir.mkdir(parents=True, exist_ok=True)
    p4info = out_dir / "inc.p4info.txtpb"
    if kind == "bmv2":
        if shutil.which("p4c") is None:
            raise NetReduceError("SWITCH=bmv2 needs p4c and simple_switch_grpc (see docker/)")
        cmd = ["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out_dir)]
        cmd += ["--p4runtime-files", str(p4info), str(P4_PROGRAM)]
        if subprocess.run(cmd, check=False).returncode != 0:
            raise NetReduceError("p4c failed on p4src/inc.p4")
        return Pipeline(p4info, out_dir / "inc.json")
    from p4sim.p4info import compile_outputs

    device = out_dir / "inc.p4sim"
    compile_outputs(str(P4_PROGRAM), p4info_out=str(p4info), device_config_out=str(device))
    return Pipeline(p4info, device)


def forwarding_entries(n_hosts: int) -> dict[str, Any]:
    """Runtime JSON (tutorial format): host ``h{i}`` /32 out of port i, for all other traffic."""
    entries = [
        {
            "table": "IncIngress.forwarder.ipv4_lpm",
            "match": {"hdr.ipv4.dstAddr": [host_ip(i), 32]},
            "action_name": "IncIngress.forwarder.ipv4_forward",
            "action_params": {"dst_mac": host_mac(i), "port": i},
        }
        for i in range(1, n_hosts + 1)
    ]
    return {"target": "bmv2", "table_entries": entries}


class NetReduceError(RuntimeError):
    """The experiment could not be set up or run; the message says why."""


# --- the network ----------------------------------------------------------------------------
@dataclass
class NetConfig:
    workers: int = 4
    bw_mbps: float | None = DEFAULT_BW_MBPS
    impairment: Impairment | None = None  # relays on every host link when set
    run_dir: Path = RUN_DIR
    log: Callable[[str], None] = print


@dataclass
class NetReduceNet:
    """The network, switch, relays and controller daemon; a context manager.

    >>> with NetReduceNet(NetConfig(workers=2)) as nr:      # doctest: +SKIP
    ...     job = nr.api.submit({"workers": 2, "window": 16})
    ...     p = nr.popen(nr.worker(0), ["python", "-m", "hosts.train", ...])
    """

    config: NetConfig
    net: Any = None
    daemon: subprocess.Popen[bytes] | None = None
    procs: list[Any] = field(default_factory=list)  # host processes, stopped on exit
    pipeline: Pipeline | None = None

    @property
    def n_hosts(self) -> int:
        return self.config.workers + 1

    @property
    def socket_path(self) -> Path:
        return self.config.run_dir / "controller.sock"

    @property
    def controller_url(self) -> str:
        return f"unix:{self.socket_path.resolve()}"

    @property
    def api(self) -> Any:
        from controller.api_client import ControllerApi

        return ControllerApi(self.controller_url, timeout=60.0)

    def worker(self, i: int) -> Any:
        return self.net.get(f"h{i + 1}")

    def ps_host(self) -> Any:
        return self.net.get(f"h{self.n_hosts}")

    def switch_intfs(self) -> list[str]:
        return [f"s1-eth{i}" for i in range(1, self.n_hosts + 1)]

    # --- set-up and tear-down ---------------------------------------------------------------
    def __enter__(self) -> NetReduceNet:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        from topologies.p4switch import switch_kind

        cfg = self.config
        run = cfg.run_dir
        run.mkdir(parents=True, exist_ok=True)
        kind = switch_kind()
        self.pipeline = compile_pipeline(run / "build", kind)
        runtime = run / "s1-runtime.json"
        runtime.write_text(json.dumps(forwarding_entries(self.n_hosts), indent=1))
        self.net = self._build(kind)
        self.net.start()
        self._record_state()
        self._configure_hosts()
        self._start_relays()
        self._start_daemon(runtime)
        self._record_state()

    def _build(self, kind: str) -> Any:
        from mininet.link import TCLink
        from mininet.net import Mininet

        from topologies.p4switch import P4Switch

        cfg = self.config
        net = Mininet(controller=None, link=TCLink, autoSetMacs=False, autoStaticArp=False)
        s1 = net.addSwitch(
            "s1", cls=P4Switch, program=None, kind=kind, log_dir=str(cfg.run_dir / "logs")
        )
        opts: dict[str, Any] = {} if cfg.bw_mbps is None else {"bw": cfg.bw_mbps}
        for i in range(1, self.n_hosts + 1):
            h = net.addHost(f"h{i}", ip=f"{host_ip(i)}/24", mac=host_mac(i))
            if cfg.impairment is None:
                net.addLink(h, s1, port2=i, intfName1="eth0", **opts)
                continue
            r = net.addHost(f"r{i}", ip=None)
            net.addLink(h, r, intfName1="eth0", intfName2=f"r{i}-eth0", **opts)
            net.addLink(r, s1, port2=i, intfName1=f"r{i}-eth1", **opts)
        return net

    def _configure_hosts(self) -> None:
        for i in range(1, self.n_hosts + 1):
            h = self.net.get(f"h{i}")
            h.cmd("ethtool -K eth0 rx off tx off sg off >/dev/null 2>&1")
            h.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
            for j in range(1, self.n_hosts + 1):
                if j != i:
                    h.setARP(host_ip(j), host_mac(j))
            if self.config.impairment is not None:
                r = self.net.get(f"r{i}")
                r.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
                for intf in (f"r{i}-eth0", f"r{i}-eth1"):
                    r.cmd(f"ethtool -K {intf} rx off tx off sg off >/dev/null 2>&1")

    def _start_relays(self) -> None:
        imp = self.config.impairment
        if imp is None:
            return
        for i in range(1, self.n_hosts + 1):
            cmd = [sys.executable, "-m", "topologies.impair_relay", f"r{i}-eth0", f"r{i}-eth1"]
            cmd += ["--loss", str(imp.loss), "--dup", str(imp.dup), "--reorder", str(imp.reorder)]
            cmd += ["--seed", str(imp.seed + i)]
            log = open(self.config.run_dir / "logs" / f"r{i}.log", "wb")
            self.procs.append(
                self.net.get(f"r{i}").popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            )
            log.close()
        time.sleep(1.0)  # the relays open their sockets (Python start-up)

    def _start_daemon(self, runtime: Path) -> None:
        assert self.pipeline is not None
        s1 = self.net.get("s1")
        db = self.config.run_dir / "controller.db"
        db.unlink(missing_ok=True)  # a fresh experiment: no jobs restored from an old run
        cmd = [sys.executable, "-m", "controller.daemon"]
        spec = f"{s1.device_id}@127.0.0.1:{s1.grpc_port}"
        if s1.kind == "bmv2":  # BMv2 serves registers over Thrift only
            spec += f",thrift={getattr(s1, 'thrift_port', 9090)}"
        cmd += ["--switch", spec]
        cmd += ["--p4info", str(self.pipeline.p4info)]
        cmd += ["--device-config", str(self.pipeline.device_config)]
        cmd += ["--runtime-json", f"{s1.device_id}={runtime}", "--db", str(db)]
        cmd += ["--listen", "127.0.0.1:0", "--unix", str(self.socket_path), "--force-pipeline"]
        log_path = self.config.run_dir / "logs" / "controller.log"
        with open(log_path, "wb") as log:
            self.daemon = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        (self.config.run_dir / "controller.pid").write_text(f"{self.daemon.pid}\n")
        deadline = time.monotonic() + 90.0
        while time.monotonic() < deadline:
            if self.daemon.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise NetReduceError(f"the controller daemon exited:\n{tail}")
            if b"controller: serving" in log_path.read_bytes():
                return
            time.sleep(0.2)
        raise NetReduceError(f"the controller daemon is not up after 90 s (see {log_path})")

    def _record_state(self) -> None:
        pids = [n.pid for n in self.net.hosts if getattr(n, "pid", None)]
        proc = getattr(self.net.get("s1"), "proc", None)
        if proc is not None:
            pids.append(proc.pid)
        if self.daemon is not None:
            pids.append(self.daemon.pid)
        pids += [p.pid for p in self.procs]
        state = {"pids": pids, "interfaces": self.switch_intfs(), "runner_pid": os.getpid()}
        (self.config.run_dir / "state.json").write_text(json.dumps(state, indent=1))

    def popen(self, host: Any, cmd: list[str], **kw: Any) -> Any:
        """Start ``cmd`` in ``host``'s namespace; it is stopped by PID on exit."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.STDOUT)
        p = host.popen(cmd, **kw)
        self.procs.append(p)
        self._record_state()
        return p

    def close(self) -> None:
        for p in self.procs:
            _terminate(p)
        self.procs.clear()
        if self.daemon is not None:
            _terminate(self.daemon)
            self.daemon = None
        if self.net is not None:
            self.net.stop()
            self.net = None
        for name in ("state.json", "controller.pid", "controller.sock", "controller.db"):
            (self.config.run_dir / name).unlink(missing_ok=True)

    # --- measurements -----------------------------------------------------------------------
    def port_bytes(self) -> dict[str, int]:
        """rx + tx bytes of every switch port so far (both directions of each link)."""
        out = {}
        for name in self.switch_intfs():
            stats = Path("/sys/class/net") / name / "statistics"
            out[name] = sum(int((stats / f).read_text()) for f in ("rx_bytes", "tx_bytes"))
        return out

    def drop_counters(self) -> dict[str, int]:
        """The switch's ``inc_drops`` counter by reason (a backup P4Runtime client reads it)."""
        import asyncio

        from controller.p4runtime_client import SwitchConnection, SwitchSpec
        from wire.header import DropReason

        s1 = self.net.get("s1")
        spec = SwitchSpec(s1.device_id, f"127.0.0.1:{s1.grpc_port}", election_id=1)

        async def read() -> dict[int, tuple[int, int]]:
            async with SwitchConnection(spec) as conn:
                return await conn.read_counter("IncIngress.inc_drops")

        cells = asyncio.run(read())
        return {DropReason(i).name: pkts for i, (pkts, _) in cells.items()}


def _terminate(p: Any, grace: float = 5.0) -> None:
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


def busiest(before: dict[str, int], after: dict[str, int]) -> tuple[str, int]:
    """The switch port whose link carried the most bytes between two samples."""
    deltas = {k: after[k] - before.get(k, 0) for k in after}
    name = max(deltas, key=lambda k: deltas[k])
    return name, deltas[name]


def submit_job(
    nr: NetReduceNet, workers: int, window: int, name: str, show: bool = False, **extra: Any
) -> int:
    """``incctl job submit`` against the daemon; returns the job id. ``show``: print the
    command and its output."""
    cmd = [sys.executable, "-m", "controller.incctl", "--controller", nr.controller_url]
    cmd += ["job", "submit", "--workers", str(workers), "--window", str(window), "--name", name]
    for key, value in extra.items():
        flag = "--" + key.replace("_", "-")
        cmd += [flag, ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)]
    res = subprocess.run(
        cmd if show else [*cmd, "--json"], capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        raise NetReduceError(f"incctl job submit failed: {res.stderr.strip() or res.stdout}")
    if not show:
        return int(json.loads(res.stdout)["job_id"])
    print(f"$ incctl --controller {nr.controller_url} job " + " ".join(cmd[cmd.index("submit") :]))
    print(res.stdout, end="", flush=True)
    found = re.match(r"job (\d+) ", res.stdout)
    if found is None:
        raise NetReduceError(f"incctl job submit: unexpected output {res.stdout!r}")
    return int(found.group(1))


# --- host-side tool: all-reduce seeded integer vectors (tests, benchmark) -------------------
def _vector_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m topologies.netreduce vector")
    ap.add_argument("--method", choices=METHODS, default="switch")
    ap.add_argument("--controller", required=True, help="daemon URL (unix:PATH)")
    ap.add_argument("--job-id", type=int, required=True)
    ap.add_argument("--worker-id", type=int, required=True)
    ap.add_argument("--size", default="4096", help="int32 values per call (list: 64,4096)")
    ap.add_argument("--calls", type=int, default=2, help="calls per size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=0.05, help="retransmission timeout, s")
    ap.add_argument("--total-timeout", type=float, default=30.0, help="bound of one call, s")
    ap.add_argument("--out", required=True, help="PREFIX: writes PREFIX.npy and PREFIX.json")
    return ap


def _vector_client(a: argparse.Namespace, cfg: dict[str, Any]) -> Any:
    from hosts.allreduce import AllReduceClient
    from hosts.ps import PS_UDP_PORT
    from hosts.ring import RING_UDP_PORT, RingAllReduce

    n = cfg["n_workers"]
    if a.method == "ring":
        peers = [(host_ip(i + 1), RING_UDP_PORT) for i in range(n)]
        return RingAllReduce(
            a.worker_id, peers, job_id=a.job_id, slots=cfg["slots"], window=cfg["window"],
            timeout=a.timeout, total_timeout=a.total_timeout,
        )  # fmt: skip
    port = cfg["udp_port"] if a.method == "switch" else PS_UDP_PORT
    return AllReduceClient(
        a.job_id, a.worker_id, n, cfg["region_offset"], cfg["region_size"], cfg["window"],
        dest=(cfg["agg_ip"], port), slots=cfg["slots"], timeout=a.timeout,
        total_timeout=a.total_timeout,
    )  # fmt: skip


def vector_main(argv: list[str]) -> int:
    """All-reduce ``--calls`` seeded vectors; results to PREFIX.npy, times to PREFIX.json."""
    from controller.api_client import ApiError, ControllerApi
    from hosts.allreduce import AllReduceTimeout

    a = _vector_parser().parse_args(argv)
    sizes = [int(x) for x in a.size.split(",")]
    out: dict[str, Any] = {"method": a.method, "worker_id": a.worker_id, "times": []}
    by_size: dict[str, list[float]] = {str(n): [] for n in sizes}
    out["times_by_size"] = by_size
    results = []
    try:
        cfg = ControllerApi(a.controller, timeout=30.0).worker_config(a.job_id, a.worker_id)
        client = _vector_client(a, cfg)
        try:
            for size in sizes:
                for call in range(a.calls):
                    x = make_vector(a.seed, a.worker_id, call, size)
                    t0 = time.perf_counter()
                    results.append(client.allreduce_int(x))
                    by_size[str(size)].append(time.perf_counter() - t0)
                    out["times"].append(by_size[str(size)][-1])
        finally:
            client.close()
    except (ApiError, AllReduceTimeout, ValueError, OSError) as e:
        out["error"] = str(e)
        print(f"netreduce vector: {e}", file=sys.stderr, flush=True)
    if results and len(sizes) == 1:
        np.save(a.out + ".npy", np.stack(results))
    Path(a.out + ".json").write_text(json.dumps(out))
    return 1 if "error" in out else 0


# --- the experiment (make run) ---------------------------------------------------------------
@dataclass
class TrainSettings:
    epochs: int = 5
    batch_size: int = 64
    lr: float = 0.1
    momentum: float = 0.9
    hidden: int = 32
    seed: int = 0
    target: float = 0.9
    timeout: float = 1.0  # retransmission timeout: above the shaped links' queueing delay

    def args(self) -> list[str]:
        return [
            "--epochs", str(self.epochs), "--batch-size", str(self.batch_size),
            "--lr", str(self.lr), "--momentum", str(self.momentum),
            "--hidden", str(self.hidden), "--seed", str(self.seed),
            "--target", str(self.target), "--timeout", str(self.timeout),
            "--total-timeout", "60",
        ]  # fmt: skip


def _stream(proc: Any, lines: list[str], show: Callable[[str], None] | None) -> None:
    """Collect a worker's output lines; ``show`` prints them as they come (progress)."""
    for raw in proc.stdout:
        line = raw.decode(errors="replace").rstrip() if isinstance(raw, bytes) else raw.rstrip()
        lines.append(line)
        if show is not None:
            show(line)


def train_method(
    nr: NetReduceNet, method: str, job_id: int, settings: TrainSettings, out_dir: Path
) -> dict[str, Any]:
    """Run the training with ``method`` on every worker; the measured record."""
    n = nr.config.workers
    ps_proc = None
    if method == "ps":
        cmd = [sys.executable, "-m", "hosts.ps", "--workers", str(n)]
        ps_proc = nr.popen(nr.ps_host(), cmd)
        time.sleep(1.0)  # the PS binds its port (Python start-up)
    peers = ",".join(host_ip(i + 1) for i in range(n))
    procs, outputs, readers = [], [], []
    before = nr.port_bytes()
    t0 = time.monotonic()
    for w in range(n):
        cmd = [sys.executable, "-m", "hosts.train", "--method", method, "--workers", str(n)]
        cmd += ["--worker-id", str(w), "--controller", nr.controller_url, "--job-id", str(job_id)]
        cmd += ["--json", str(out_dir / "workers" / f"{method}-w{w}.json"), *settings.args()]
        if method == "ring":
            cmd += ["--peers", peers]
        p = nr.popen(nr.worker(w), cmd)
        lines: list[str] = []
        show = nr.config.log if w == 0 else None
        t = threading.Thread(target=_stream, args=(p, lines, show), daemon=True)
        t.start()
        procs.append(p)
        outputs.append(lines)
        readers.append(t)
    try:
        codes = [p.wait(timeout=900) for p in procs]
    finally:
        for p in procs:
            _terminate(p)
        if ps_proc is not None:
            _terminate(ps_proc)
    wall = time.monotonic() - t0
    for t in readers:
        t.join(2.0)
    after = nr.port_bytes()
    if any(codes):
        bad = next(i for i, c in enumerate(codes) if c)
        raise NetReduceError(f"{method}: worker {bad} failed:\n" + "\n".join(outputs[bad][-8:]))
    hist = json.loads((out_dir / "workers" / f"{method}-w0.json").read_text())["history"]
    link, nbytes = busiest(before, after)
    return {
        "final_accuracy": hist["final_accuracy"],
        "time_to_target_s": hist["time_to_target_s"],
        "iter_time_s": hist["iter_time_s"],
        "busiest_link_bytes": nbytes,
        "busiest_link": link,
        "wall_s": wall,
        "epoch_accuracy": hist["epoch_accuracy"],
        "epoch_end_s": hist["epoch_end_s"],
    }


def _table(results: dict[str, dict[str, Any]], target: float) -> Any:
    from rich.table import Table

    t = Table(title="NetReduce on Mininet: 4 workers, same model, seed and hyper-parameters")
    for col in ("method", "iter time", f"time to {target:.0%}", "final accuracy", "busiest link"):
        t.add_column(col, justify="left" if col == "method" else "right")
    for m, r in results.items():
        ttt = r["time_to_target_s"]
        t.add_row(
            m,
            f"{r['iter_time_s'] * 1e3:.1f} ms",
            "not reached" if ttt is None else f"{ttt:.2f} s",
            f"{r['final_accuracy']:.4f}",
            f"{r['busiest_link_bytes'] / 1e6:.2f} MB ({r['busiest_link']})",
        )
    return t


def plot(results: dict[str, dict[str, Any]], out_dir: Path) -> list[Path]:
    """accuracy vs training time per method; iteration time and busiest-link bytes bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    fig, ax = plt.subplots(figsize=(6, 4))
    for m, r in results.items():
        ax.plot(r["epoch_end_s"], r["epoch_accuracy"], marker="o", label=m)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("test accuracy")
    ax.set_title("accuracy vs wall time")
    ax.grid(alpha=0.3)
    ax.legend()
    files.append(out_dir / "accuracy_vs_time.png")
    fig.savefig(files[-1], dpi=100, bbox_inches="tight")
    plt.close(fig)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    names = list(results)
    a1.bar(names, [results[m]["iter_time_s"] * 1e3 for m in names], color="tab:blue")
    a1.set_ylabel("time per iteration (ms)")
    a2.bar(names, [results[m]["busiest_link_bytes"] / 1e6 for m in names], color="tab:orange")
    a2.set_ylabel("bytes on the busiest link (MB)")
    files.append(out_dir / "iteration_and_traffic.png")
    fig.savefig(files[-1], dpi=100, bbox_inches="tight")
    plt.close(fig)
    return files


def run_experiment(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    log = console.print if sys.stdout.isatty() else print
    kind = os.environ.get("SWITCH", "p4sim")
    settings = TrainSettings(epochs=args.epochs, seed=args.seed)
    out_dir = Path(args.results)
    (out_dir / "workers").mkdir(parents=True, exist_ok=True)  # each worker's history
    cfg = NetConfig(workers=args.workers, bw_mbps=args.bw, log=lambda s: log(s))
    n = args.workers
    log(
        f"netreduce: s1 = {kind}, workers h1..h{n}, parameter server h{n + 1}, every link "
        f"{args.bw:g} Mbit/s, window {args.window}, K = 32 slots"
    )
    with NetReduceNet(cfg) as nr:
        log(f"netreduce: controller daemon pid {nr.daemon.pid if nr.daemon else '?'}, "
            f"API on {nr.controller_url}")  # fmt: skip
        job_id = submit_job(nr, n, args.window, "mlp-digits", show=True)
        results = {}
        for method in METHODS:
            log(f"--- {method}: 4 workers train the MLP on digits ({settings.epochs} epochs)")
            results[method] = train_method(nr, method, job_id, settings, out_dir)
    console.print(_table(results, settings.target))
    accs = [r["final_accuracy"] for r in results.values()]
    record: dict[str, Any] = {
        m: {k: r[k] for k in ("final_accuracy", "time_to_target_s", "iter_time_s",
                              "busiest_link_bytes")}
        for m, r in results.items()
    }  # fmt: skip
    record["network"] = {
        "workers": n,
        "link_bandwidth_mbps": args.bw,
        "K": 32,
        "window": args.window,
        "switch": kind,
    }
    record["curves"] = {
        m: {"epoch_end_s": r["epoch_end_s"], "epoch_accuracy": r["epoch_accuracy"]}
        for m, r in results.items()
    }
    (out_dir / "run.json").write_text(json.dumps(record, indent=1))
    pngs = plot(results, out_dir)
    log(f"wrote {out_dir / 'run.json'}, " + ", ".join(str(p) for p in pngs))
    spread = (max(accs) - min(accs)) * 100
    if spread > 0.5:
        log(f"netreduce: the accuracies differ by {spread:.2f} points (> 0.5)")
        return 1
    log(f"netreduce: the three accuracies agree within {spread:.2f} points")
    return 0


def _run_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m topologies.netreduce run",
        description="switch aggregation vs parameter server vs ring, training on Mininet",
        epilog="python -m topologies.demo --basic runs the basic ping demo instead",
    )
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--bw", type=float, default=DEFAULT_BW_MBPS, help="link Mbit/s")
    ap.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    ap.add_argument("--epochs", type=int, default=TrainSettings.epochs)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--results", default="results")
    return ap


@contextmanager
def _clean_signals() -> Iterator[None]:
    """SIGTERM ends the run like Ctrl-C, so the finally blocks clean up."""

    def _raise(*_: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["vector"]:
        return vector_main(argv[1:])
    if argv[:1] == ["run"]:
        argv = argv[1:]
    args = _run_parser().parse_args(argv)
    if os.geteuid() != 0:
        print("netreduce: Mininet needs root (network namespaces, veth links, raw sockets)")
        return 1
    try:
        with _clean_signals():
            return run_experiment(args)
    except NetReduceError as e:
        print(f"netreduce: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("netreduce: interrupted; everything started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
