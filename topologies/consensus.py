"""Consensus experiment: the switch as sequencer against a host-only leader, same replicas,
pipelined clients at a load that saturates the leader.

Example (as root; ``make bench`` runs it in section kvcons)::

    python -m topologies.consensus --clients 3 --window 32 --count 6000 --curve 1,4,16

One network (``star(clients + 6)``: clients ``h1..hN``, each design's three replicas on
three hosts of its own, replica 0 leading), one run, two replicated logs measured pass by
pass in turn with the same clients and replicas (``hosts/consensus/``, the same code in both):

- **host leader**: clients send to the leader, which numbers the requests and sends them
  to the followers (``--sequencer host``): client → leader → followers → client;
- **switch sequencer**: clients send to the group address, the switch numbers the requests
  and multicasts them to all replicas: client → replicas → client.

Both designs' replicas take requests on the same C path (``hosts/consensus/native_replica.c``:
``recvmmsg``/``sendmmsg``, the host sequencer's leader numbering and forwarding a batch at
once); ``INC_HOST_BACKEND=python`` runs both on the Python loop instead.

Each pass runs one pipelined client per client host (``hosts/consensus/pipelined_client.py``:
``count`` appends, ``window`` in flight, all starting at one instant); an append commits
with the leader's and ``f`` other replicas' answers. A row gives commits per second (all
commits over the span from the first send to the last commit), p50/p99 commit latency and,
over that span alone (``topologies/host_cpu.py``, ``Sampler``), each replica's CPU as a share
of its budget, the leader's throttled CFS periods and request-socket queue (near 100 % of
the budget, throttled in most periods: saturated), the clients' CPU and the switch's. The
curve repeats the pass at several windows. After the passes the replicas' logs and every
client's commits are checked (``hosts/consensus/log_check.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

MODES = {"host leader": "host", "switch sequencer": "switch"}
START_DELAY = 6.0  # seconds for every client process to start before the common instant


@dataclass(frozen=True)
class LogBenchConfig:
    clients: int = 3
    window: int = 32
    count: int = 6000  # appends per client per pass
    curve: tuple[int, ...] = ()
    host_cpu: float = 0.05  # each host's CPU budget in cores (topologies/host_cpu.py); 0: none
    run_dir: Path = Path("run/consensus")

    def command(self) -> str:
        return (f"{sys.executable} -m topologies.consensus --clients {self.clients}"
                f" --window {self.window} --count {self.count}"
                f" --curve {','.join(map(str, self.curve))}"
                f" --host-cpu {self.host_cpu}")  # fmt: skip


@dataclass
class LogRun:
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    curve: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)  # mode -> log_check result


def _fields(cfg: LogBenchConfig, reps: list[int]) -> dict[str, Any]:
    from topologies.experiment import host_ip, host_mac

    clients = list(range(1, cfg.clients + 1))
    return {
        "kind": "consensus", "workers": len(clients), "worker_ports": clients,
        "worker_ips": [host_ip(h) for h in clients], "worker_macs": [host_mac(h) for h in clients],
        "replicas": 3, "replica_ports": reps, "replica_ips": [host_ip(h) for h in reps],
        "replica_macs": [host_mac(h) for h in reps],
    }  # fmt: skip


def summarize(res: list[dict[str, Any]], commits: list[list[Any]]) -> dict[str, Any]:
    import numpy as np

    lat = np.array([c[6] - c[5] for c in commits])
    began, ended = min(r["began"] for r in res), max(r["ended"] for r in res)
    span = ended - began
    return {
        "ops_per_s": len(commits) / span, "ops": len(commits), "span_s": span,
        "began": began, "ended": ended,
        "p50_us": float(np.percentile(lat, 50) * 1e6),
        "p99_us": float(np.percentile(lat, 99) * 1e6),
        "client_us_per_op": sum(r["cpu_s"] for r in res) / len(commits) * 1e6,
        # each client's CPU over its own run, the most loaded one's (budget or a core)
        "client_cpu": max(r["cpu_s"] / max(r["ended"] - r["began"], 1e-9) for r in res),
        "retransmissions": sum(r["retransmissions"] for r in res),
        "given_up": sum(r["given_up"] for r in res),
    }  # fmt: skip


def check_run(ex: Any, job: int, commits: list[list[Any]]) -> Any:
    """The replicas' logs (their summaries at stop) against every client's commits."""
    from hosts.consensus.log_check import Ack, check_log
    from hosts.consensus.log_wire import Entry

    logs = []
    for r in range(3):
        lines = (ex.logs / f"replica{job}-{r}.log").read_text().splitlines()
        summary = json.loads(next(x for x in reversed(lines) if x.startswith("{")))
        logs.append([Entry.of(e) for e in summary["log"]])
    acks = [Ack(int(c[0]), int(c[1]), str(c[2]).encode(), int(c[4])) for c in commits]
    return check_log(logs, acks)


def measure(cfg: LogBenchConfig, log: Any = print) -> LogRun:
    from topologies.host_cpu import budgets

    with budgets(cfg.host_cpu) as cpu:
        return _measure(cfg, cpu, log)


@dataclass
class _Group:
    """One design's log: its job, replica hosts and processes, every pass's commits."""

    mode: str
    job: int
    hosts: list[str]
    procs: list[Any]
    commits: list[list[Any]] = field(default_factory=list)


def _measure(cfg: LogBenchConfig, cpu: Any, log: Any) -> LogRun:
    from topologies.experiment import Experiment, ExperimentConfig, star, terminate
    from topologies.host_cpu import in_budget

    n = cfg.clients
    out = LogRun()
    ex_cfg = ExperimentConfig(star(n + 6), run_dir=cfg.run_dir, log=lambda s: None)
    with Experiment(ex_cfg) as ex:
        if cpu is not None:  # the switch stands for hardware: no quota, never starved
            cpu.hardware("s1", ex.switch("s1").proc.pid)
        groups = []
        for k, (mode, seq) in enumerate(MODES.items()):
            reps = [n + 1 + 3 * k + r for r in range(3)]
            job = ex.api.submit(_fields(cfg, reps))["job_id"]
            hosts = [f"h{h}" for h in reps]
            cmd = [sys.executable, "-m", "hosts.consensus.replicated_log", "replica",
                   "--controller", ex.controller_url, "--job-id", str(job),
                   "--sequencer", seq]  # fmt: skip
            procs = [
                ex.start_service(hosts[r], in_budget(cpu, hosts[r], [*cmd, "--replica-id", str(r)]),
                                 "ready", f"replica{job}-{r}")
                for r in range(3)
            ]  # fmt: skip
            groups.append(_Group(mode, job, hosts, procs))
        time.sleep(1.5)  # replica 0 leads each new group after BOOT_WAIT
        # the two designs alternate, pass by pass, so a change of the machine's other load
        # falls on both alike
        for g in groups:
            log(f"consensus: {g.mode}, {n} clients x {cfg.count} appends, window {cfg.window} ...")
            out.rows[g.mode] = _pass(ex, cfg, cpu, g, "main", cfg.window)
        for window in cfg.curve:
            for g in groups:
                r = out.rows[g.mode] if window == cfg.window else None
                if r is None:  # (at the main row's window, that row is the point)
                    log(f"consensus: {g.mode}, curve: window {window} ...")
                    r = _pass(ex, cfg, cpu, g, f"curve{window}", window)
                out.curve.setdefault(g.mode, []).append((n * window, r["ops_per_s"]))
        time.sleep(0.5)  # followers fill their last gaps from the leader
        for g in groups:
            for p in g.procs:
                terminate(p, grace=60.0)  # a replica on its budget takes a while to print its log
                ex.stop(p)
            out.checks[g.mode] = check_run(ex, g.job, g.commits)
    return out


def _pass(
    ex: Any, cfg: LogBenchConfig, cpu: Any, g: _Group, name: str, window: int
) -> dict[str, Any]:
    """One pass of every client against one design; its row."""
    from topologies.host_cpu import Sampler, in_budget
    from wire.header import INC_UDP_PORT

    n = cfg.clients
    hist_dir = ex.run_dir / "histories"
    hist_dir.mkdir(parents=True, exist_ok=True)
    paths = [hist_dir / f"job{g.job}-{name}-c{c}.json" for c in range(1, n + 1)]
    start_at = time.monotonic() + START_DELAY
    cmds = []
    for c in range(1, n + 1):
        cmd = [sys.executable, "-m", "hosts.consensus.pipelined_client", "--controller",
               ex.controller_url, "--job-id", str(g.job), "--sequencer", MODES[g.mode],
               "--worker-id", str(c - 1), "--count", str(cfg.count), "--window", str(window),
               "--start-at", str(start_at), "--history", str(paths[c - 1])]  # fmt: skip
        cmds.append((f"h{c}", in_budget(cpu, f"h{c}", cmd, START_DELAY - 0.5)))
    with Sampler(cpu) as sampler:
        for r, (host, p) in enumerate(zip(g.hosts, g.procs, strict=True)):
            sampler.watch(f"replica{r}", p.pid, host, INC_UDP_PORT)
        sampler.watch("switch", ex.switch("s1").proc.pid)
        runs = ex.run_hosts(cmds)
    for r in runs:
        if r.code != 0:
            raise RuntimeError(f"{r.host}: {r.lines[-3:]}")
    commits = [c for p in paths for c in json.loads(p.read_text())]
    g.commits.extend(commits)
    res = [json.loads(r.lines[-1]) for r in runs]
    row = summarize(res, commits)
    t0, t1 = row["began"], row["ended"]
    row["replicas"] = [sampler.between(f"replica{r}", t0, t1) for r in range(len(g.procs))]
    row["switch"] = sampler.between("switch", t0, t1)
    return row


def saturation(row: dict[str, Any], share: float) -> dict[str, Any]:
    """What the sampler saw over the pass's span: each replica's CPU as a share of its
    budget (``share`` cores; 0: of a core), the share of its CFS periods throttled, how long
    it waited for a CPU with work to do, its request socket's mean queue and drops."""
    span, ops = row["span_s"], row["ops"]
    per = []
    for r in row["replicas"]:
        periods = r.get("periods", 0.0)
        per.append({
            "cpu": r["cpu_s"] / span / (share or 1.0),
            "throttled": r["throttled"] / periods if periods > 0 else None,
            "wait": r["wait_s"] / span,
            "queue_kib": r.get("queue", 0.0) / 1024,
            "drops": int(r.get("drops", 0)),
            "us_per_op": r["cpu_s"] / ops * 1e6,
        })  # fmt: skip
    return {"replicas": per, "switch_cpu": row["switch"]["cpu_s"] / span,
            "switch_wait": row["switch"]["wait_s"] / span}  # fmt: skip


def goals(run: LogRun, share: float) -> list[tuple[str, bool]]:
    a, b = run.rows["host leader"], run.rows["switch sequencer"]
    out = [
        ("log: host leader saturated (>= 90 % of its CPU budget, throttled in most periods)",
         saturated(a, share)),
        ("log: switch sequencer >= 2x host leader commits/s", b["ops_per_s"] >= 2 * a["ops_per_s"]),
        ("log: lower median commit latency", b["p50_us"] < a["p50_us"]),
    ]  # fmt: skip
    for mode, c in run.checks.items():
        out.append((f"{mode}: log check clean over {c.acked} commits", c.ok))
    return out


def table(run: LogRun, cfg: LogBenchConfig) -> Table:
    t = Table(title=f"Replicated log, 3 replicas, {cfg.clients} pipelined clients x "
                    f"{cfg.window} in flight (p4sim, Mininet)")  # fmt: skip
    budget = f"% of {cfg.host_cpu:g} core" if cfg.host_cpu else "% of a core"
    for col in ("sequencer", "in flight", "commits/s", "x", "p50 us", "p99 us",
                f"leader CPU {budget}", "leader throttled",
                "leader queue KiB, drops", f"followers CPU {budget}",
                f"busiest client CPU {budget}", "switch CPU, waits for CPU",
                "CPU us/op leader, follower, clients", "retx"):  # fmt: skip
        t.add_column(col, justify="right")
    base = run.rows["host leader"]["ops_per_s"]
    for mode, r in run.rows.items():
        s = saturation(r, cfg.host_cpu)
        lead, foll = s["replicas"][0], s["replicas"][1:]
        t.add_row(mode, str(cfg.clients * cfg.window), f"{r['ops_per_s']:.0f}",
                  f"{r['ops_per_s'] / base:.2f}", f"{r['p50_us']:.0f}", f"{r['p99_us']:.0f}",
                  f"{100 * lead['cpu']:.0f}",
                  "-" if lead["throttled"] is None else f"{100 * lead['throttled']:.0f} %",
                  f"{lead['queue_kib']:.0f}, {lead['drops']}",
                  ", ".join(f"{100 * f['cpu']:.0f}" for f in foll),
                  f"{100 * r['client_cpu'] / (cfg.host_cpu or 1):.0f}",
                  f"{100 * s['switch_cpu']:.0f} %, {100 * s['switch_wait']:.0f} %",
                  f"{lead['us_per_op']:.1f}, {max(f['us_per_op'] for f in foll):.1f}, "
                  f"{r['client_us_per_op']:.1f}",
                  str(r["retransmissions"]))  # fmt: skip
    return t


def saturated(row: dict[str, Any], share: float) -> bool:
    """Whether the design's busiest replica used its whole budget over the pass: at least
    90 % of it, throttled in most CFS periods (with no budget: 90 % of a core)."""
    for r in saturation(row, share)["replicas"]:
        if r["cpu"] >= 0.9 and (r["throttled"] is None or r["throttled"] >= 0.5):
            return True
    return False


def ratio_line(run: LogRun) -> str:
    a, b = run.rows["host leader"], run.rows["switch sequencer"]
    speed, lat = b["ops_per_s"] / a["ops_per_s"], b["p50_us"] / a["p50_us"]
    return (f"switch sequencer / host leader: commits/s {speed:.2f}x, median commit latency"
            f" {lat:.2f}x (same run, same network)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from topologies.experiment import main_guard

    doc = __doc__.split("\n")[0]
    ap = argparse.ArgumentParser(prog="python -m topologies.consensus", description=doc)
    ap.add_argument("--clients", type=int, default=3, help="client hosts, one client each")
    ap.add_argument("--window", type=int, default=32, help="appends in flight per client")
    ap.add_argument("--count", type=int, default=6000, help="appends per client per pass")
    ap.add_argument("--curve", default="", help="windows of the curve, e.g. 1,4,16")
    ap.add_argument(
        "--host-cpu",
        type=float,
        default=0.05,
        help="each host's CPU budget in cores (0: none; the switch has none)",
    )
    ap.add_argument("--png", type=Path, default=None, help="write the curve here")
    a = ap.parse_args(argv)
    try:
        curve = tuple(int(x) for x in a.curve.split(",") if x.strip())
    except ValueError:
        print("consensus: --curve takes comma-separated integers")
        return 2
    if min(a.clients, a.window, a.count, *curve) < 1 or a.host_cpu < 0:
        print("consensus: --clients, --window, --count and --curve must be positive,"
              " --host-cpu 0 or positive")  # fmt: skip
        return 2
    cfg = LogBenchConfig(a.clients, a.window, a.count, curve, a.host_cpu)

    def run() -> int:
        from topologies.load_curve import plot_curves

        console = Console(width=150)
        res = measure(cfg, log=console.print)
        console.print(table(res, cfg))
        console.print(ratio_line(res))
        for goal, met in goals(res, cfg.host_cpu):
            console.print(f"goal {'MET' if met else 'NOT met'}: {goal}")
        if a.png is not None and res.curve:
            plot_curves({"replicated log appends": res.curve}, a.png)
            console.print(f"curve: {a.png}")
        return 0

    return main_guard("consensus", run)


if __name__ == "__main__":
    sys.exit(main())
