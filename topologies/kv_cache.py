"""Key-value cache experiment: pipelined Zipf load through the switch cache against the
server alone, at a load that saturates the server.

Example (as root; ``make bench`` runs it in section kvcons)::

    python -m topologies.kv_cache --clients 4 --window 32 --count 6000 \\
        --write-shares 0,0.05,0.2 --curve 1,4,16,64 --png run/kv-cache/curve.png

One network (``star(clients + 2)``: clients ``h1..hN``, two storage servers), one run, two
key-value jobs with the same clients, keys and seeds:

- **server only**: a job whose controller never caches a key (``min_reads`` out of reach),
  so every operation goes client → switch → server → switch → client;
- **switch cache**: ``cache_size`` entries, hot keys chosen by the controller from the
  switch's counters (a read-only warm-up pass lets it see the workload).

Each pass runs one pipelined client per client host (``hosts/kv/pipelined_client.py``:
``count`` operations, ``window`` in flight, a share of writes), all starting at one instant.
A row gives the pass's operations per second (all operations over the span from the first
send to the last answer), p50/p99 latency, the switch's share, and the server's CPU over
that span alone (``topologies/host_cpu.py``, ``Sampler``): near 100 % of its budget means
the single-threaded server is the bottleneck. The switch (p4sim, no budget: it stands for
hardware) shows its CPU and the share of the pass its packet loop spent runnable but
waiting for a CPU, held back by the machine's other load (``/proc/PID/task/*/schedstat``). The
curve repeats the read-only pass at several windows (offered load = clients x window) for
both designs. Every pass's history is kept
and all of a job's passes are checked together for linearizability
(``hosts/kv/linearizability.py``).
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

MODES = ("server only", "switch cache")
START_DELAY = 6.0  # seconds for every client process to start before the common instant


@dataclass(frozen=True)
class KvBenchConfig:
    clients: int = 4
    window: int = 32
    count: int = 6000  # operations per client per pass
    keys: int = 1000
    alpha: float = 0.99
    cache_size: int = 256
    write_shares: tuple[float, ...] = (0.0, 0.05, 0.2)
    curve: tuple[int, ...] = ()  # windows of the read-only curve (empty: none)
    host_cpu: float = 0.05  # each host's CPU budget in cores (topologies/host_cpu.py); 0: none
    # the controller's hot-key refresh (both jobs): each reads the kv_keys table and ~5 x
    # cache_size register cells over P4Runtime, work done in p4sim's one process beside its
    # packet loop (every 500 ms: 0.1 core idle, 512 entries); a static Zipf workload's hot
    # set needs no faster refresh (docs/protocol.md, measured with 1000 and 4000 ms)
    refresh_ms: int = 4000
    run_dir: Path = Path("run/kv-cache")

    def command(self) -> str:
        return (f"{sys.executable} -m topologies.kv_cache --clients {self.clients} "
                f"--window {self.window} --count {self.count} --keys {self.keys} "
                f"--alpha {self.alpha} --cache-size {self.cache_size} --write-shares "
                f"{','.join(map(str, self.write_shares))} --curve "
                f"{','.join(map(str, self.curve))} --host-cpu {self.host_cpu} "
                f"--refresh-ms {self.refresh_ms}")  # fmt: skip


@dataclass
class KvRun:
    rows: dict[tuple[float, str], dict[str, Any]] = field(default_factory=dict)
    curve: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)  # mode -> linearizability result


def _fields(cfg: KvBenchConfig, server: int, **extra: Any) -> dict[str, Any]:
    from topologies.experiment import host_ip, host_mac

    hosts = list(range(1, cfg.clients + 1))
    return {
        "kind": "kv_cache", "workers": cfg.clients, "worker_ports": hosts, "server": server,
        "worker_ips": [host_ip(h) for h in hosts], "worker_macs": [host_mac(h) for h in hosts],
        "agg_ip": host_ip(server), "agg_mac": host_mac(server), **extra,
    }  # fmt: skip


def summarize(res: list[dict[str, Any]], cpu: float, histories: list[Path]) -> dict[str, Any]:
    """One pass: all clients' operations over the common span, latency over every op."""
    import numpy as np

    lat, cached, ops = [], 0, 0
    for h in histories:
        with np.load(h) as d:
            done = d["done"]
            lat.append((d["end"] - d["start"])[done])
            cached += int((d["cached"] & done).sum())
            ops += int(done.sum())
    all_lat = np.concatenate(lat)
    span = max(r["ended"] for r in res) - min(r["began"] for r in res)
    return {
        "ops_per_s": ops / span, "ops": ops, "span_s": span,
        "p50_us": float(np.percentile(all_lat, 50) * 1e6),
        "p99_us": float(np.percentile(all_lat, 99) * 1e6),
        "switch_share": cached / ops, "server_cpu": cpu / span,
        "server_us_per_op": cpu / ops * 1e6,
        "client_us_per_op": sum(r["cpu_s"] for r in res) / ops * 1e6,
        "retransmissions": sum(r["retransmissions"] for r in res),
        "given_up": sum(r["given_up"] for r in res),
    }  # fmt: skip


def measure(cfg: KvBenchConfig, log: Any = print) -> KvRun:
    from topologies.host_cpu import budgets

    with budgets(cfg.host_cpu) as cpu:
        return _measure(cfg, cpu, log)


@dataclass
class _Store:
    """One design's job: its server process and every pass's histories."""

    mode: str
    job: int
    host: str
    proc: Any
    histories: list[Path] = field(default_factory=list)


def _measure(cfg: KvBenchConfig, cpu: Any, log: Any) -> KvRun:
    from hosts.kv.linearizability import check_files
    from topologies.experiment import Experiment, ExperimentConfig, star
    from topologies.host_cpu import in_budget

    n = cfg.clients
    out = KvRun()
    ex_cfg = ExperimentConfig(star(n + 2), run_dir=cfg.run_dir, log=lambda s: None)
    with Experiment(ex_cfg) as ex:
        if cpu is not None:  # the switch stands for hardware: no quota, never starved
            cpu.hardware("s1", ex.switch("s1").proc.pid)
        stores = []
        for mode, server in zip(MODES, (n + 1, n + 2), strict=True):
            # both jobs refresh alike: each refresh is P4Runtime work in the one switch
            # process, felt by the passes of both designs
            extra = {"cache_size": 1, "min_reads": 1 << 30} if mode == MODES[0] else {
                "cache_size": cfg.cache_size}  # fmt: skip
            extra["refresh_ms"] = cfg.refresh_ms
            job = ex.api.submit(_fields(cfg, server, **extra))["job_id"]
            srv = [sys.executable, "-m", "hosts.kv.store", "server", "--job-id", str(job),
                   "--controller", ex.controller_url]  # fmt: skip
            host = f"h{server}"
            proc = ex.start_service(host, in_budget(cpu, host, srv), "kv server", f"kv-server{job}")
            stores.append(_Store(mode, job, host, proc))
        log(f"kv: warming the cache ({cfg.count // 2} reads per client) ...")
        _pass(ex, cfg, cpu, stores[1], "warm", cfg.window, 0.0, cfg.count // 2)
        time.sleep(2.2 * cfg.refresh_ms / 1e3)  # two refreshes: the hot keys are in the switch
        # the two designs alternate, pass by pass, so a change of the machine's other load
        # falls on both alike
        for share in cfg.write_shares:
            for st in stores:
                log(f"kv: {st.mode}, {n} clients x {cfg.count} ops, window {cfg.window}, "
                    f"{100 * share:g} % writes ...")  # fmt: skip
                out.rows[(share, st.mode)] = _pass(ex, cfg, cpu, st, f"w{share}", cfg.window,
                                                   share, cfg.count)  # fmt: skip
        for window in cfg.curve:
            for st in stores:
                r = out.rows.get((0.0, st.mode)) if window == cfg.window else None
                if r is None:  # (at the rows' window, the read-only row is the point)
                    log(f"kv: {st.mode}, curve: window {window} ...")
                    r = _pass(ex, cfg, cpu, st, f"curve{window}", window, 0.0, cfg.count)
                out.curve.setdefault(st.mode, []).append((n * window, r["ops_per_s"]))
        for st in stores:
            ex.stop(st.proc)
            log(f"kv: {st.mode}: checking {len(st.histories)} histories for linearizability ...")
            out.checks[st.mode] = check_files(st.histories)
    return out


def _pass(
    ex: Any, cfg: KvBenchConfig, cpu: Any, st: _Store, name: str, window: int, share: float,
    count: int,
) -> dict[str, Any]:  # fmt: skip
    """One pass of every client against one design; its row."""
    from topologies.host_cpu import Sampler, in_budget

    n = cfg.clients
    hist_dir = ex.run_dir / "histories"
    hist_dir.mkdir(parents=True, exist_ok=True)
    paths = [hist_dir / f"job{st.job}-{name}-c{c}.npz" for c in range(1, n + 1)]
    start_at = time.monotonic() + START_DELAY
    cmds = []
    for c in range(1, n + 1):
        cmd = [sys.executable, "-m", "hosts.kv.pipelined_client", "--controller",
               ex.controller_url, "--job-id", str(st.job), "--worker-id", str(c - 1),
               "--count", str(count), "--window", str(window), "--write-share", str(share),
               "--keys", str(cfg.keys), "--alpha", str(cfg.alpha),
               "--seed", str(c + 100 * len(st.histories)), "--start-at", str(start_at),
               "--history", str(paths[c - 1])]  # fmt: skip
        cmds.append((f"h{c}", in_budget(cpu, f"h{c}", cmd, START_DELAY - 0.5)))
    with Sampler(cpu) as sampler:  # the server's and switch's figures over the span alone
        sampler.watch("server", st.proc.pid, st.host)
        sampler.watch("switch", ex.switch("s1").proc.pid)
        runs = ex.run_hosts(cmds)
    for r in runs:
        if r.code != 0:
            raise RuntimeError(f"{r.host}: {r.lines[-3:]}")
    st.histories.extend(paths)
    res = [json.loads(r.lines[-1]) for r in runs]
    t0, t1 = min(r["began"] for r in res), max(r["ended"] for r in res)
    srv, sw = sampler.between("server", t0, t1), sampler.between("switch", t0, t1)
    row = summarize(res, srv["cpu_s"], paths)
    periods = srv.get("periods", 0.0)
    throttled = srv["throttled"] / periods if periods > 0 else None
    return row | {"server_throttled": throttled, "switch_cpu": sw["cpu_s"] / row["span_s"],
                  "switch_wait": sw["wait_s"] / row["span_s"]}  # fmt: skip


#: Write mixes: the switch cache's least ops/s as a multiple of the server alone's (issue 23
#: asks the mixes in the table, exact; these targets say the cache must stay ahead).
WRITE_GOALS = {0.05: 1.5, 0.2: 1.0}


def goals(run: KvRun) -> list[tuple[str, bool]]:
    """The issue's goals, each with whether this run met it."""
    out = []
    for share in sorted({s for s, _ in run.rows}):
        a, b = run.rows[(share, MODES[0])], run.rows[(share, MODES[1])]
        if share == 0.0:
            out.append(("reads: switch cache >= 3x server-only ops/s",
                        b["ops_per_s"] >= 3 * a["ops_per_s"]))  # fmt: skip
            out.append(("reads: lower p50 and p99",
                        b["p50_us"] < a["p50_us"] and b["p99_us"] < a["p99_us"]))  # fmt: skip
        else:
            least = WRITE_GOALS.get(share, 1.0)
            out.append((f"{100 * share:g} % writes: switch cache >= {least:g}x server-only "
                        "ops/s", b["ops_per_s"] >= least * a["ops_per_s"]))  # fmt: skip
    for mode, c in run.checks.items():
        out.append((f"{mode}: no linearizability violation in {c.ops} ops", c.ok))
    return out


def table(run: KvRun, cfg: KvBenchConfig) -> Table:
    t = Table(title=f"Key-value ops, Zipf {cfg.alpha} over {cfg.keys} keys, {cfg.clients} "
                    f"pipelined clients x {cfg.window} in flight, cache {cfg.cache_size} "
                    "entries (p4sim, Mininet)")  # fmt: skip
    budget = f"of {cfg.host_cpu:g} core" if cfg.host_cpu else "of a core"
    for col in ("writes", "path", "ops/s", "x", "p50 us", "p99 us", "by switch",
                f"server CPU ({budget})", "server throttled", "switch CPU",
                "switch waits for CPU", "CPU us/op server, clients", "retx"):  # fmt: skip
        t.add_column(col, justify="right", no_wrap=col == "path")
    for (share, mode), r in run.rows.items():
        base = run.rows[(share, MODES[0])]["ops_per_s"]
        t.add_row(f"{100 * share:g} %", mode, f"{r['ops_per_s']:.0f}",
                  f"{r['ops_per_s'] / base:.2f}", f"{r['p50_us']:.0f}", f"{r['p99_us']:.0f}",
                  f"{100 * r['switch_share']:.1f} %",
                  f"{100 * r['server_cpu'] / (cfg.host_cpu or 1):.0f} %",
                  _pct(r["server_throttled"]),
            f"{100 * r['switch_cpu']:.0f} %", f"{100 * r['switch_wait']:.0f} %",
                  f"{r['server_us_per_op']:.1f}, {r['client_us_per_op']:.1f}",
                  str(r["retransmissions"]))  # fmt: skip
    return t


def ratio_line(run: KvRun) -> str:
    parts = []
    for share in sorted({s for s, _ in run.rows}):
        a, b = run.rows[(share, MODES[0])], run.rows[(share, MODES[1])]
        speed, p50 = b["ops_per_s"] / a["ops_per_s"], b["p50_us"] / a["p50_us"]
        parts.append(f"{100 * share:g} % writes: ops/s {speed:.2f}x, p50 {p50:.2f}x, "
                     f"p99 {b['p99_us'] / a['p99_us']:.2f}x")  # fmt: skip
    return "switch cache / server only (same run, same network): " + "; ".join(parts)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f} %"


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    from topologies.experiment import main_guard

    ap = argparse.ArgumentParser(
        prog="python -m topologies.kv_cache", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--clients", type=int, default=4, help="client hosts, one client each")
    ap.add_argument("--window", type=int, default=32, help="requests in flight per client")
    ap.add_argument("--count", type=int, default=6000, help="operations per client per pass")
    ap.add_argument("--write-shares", default="0,0.05,0.2", help="one row pair per share")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.99, help="Zipf exponent")
    ap.add_argument("--cache-size", type=int, default=256)
    ap.add_argument("--curve", default="", help="windows of the read-only curve, e.g. 1,4,16")
    ap.add_argument(
        "--host-cpu",
        type=float,
        default=0.05,
        help="each host's CPU budget in cores (0: none; the switch has none)",
    )
    ap.add_argument("--refresh-ms", type=int, default=4000, help="the hot-key refresh period")
    ap.add_argument("--png", type=Path, default=None, help="write the curve here")
    a = ap.parse_args(argv)
    try:
        shares, curve = _floats(a.write_shares), tuple(int(w) for w in _floats(a.curve))
    except ValueError:
        print("kv_cache: --write-shares and --curve take comma-separated numbers")
        return 2
    if min(a.clients, a.window, a.count, a.keys, a.cache_size, *curve) < 1 or not a.alpha > 0:
        print("kv_cache: --clients, --window, --count, --keys, --cache-size, --curve and --alpha"
              " must be positive")  # fmt: skip
        return 2
    if not 10 <= a.refresh_ms <= 600_000:
        print("kv_cache: --refresh-ms must be in [10, 600000]")
        return 2
    if a.host_cpu < 0:
        print("kv_cache: --host-cpu must be 0 (no budget) or positive")
        return 2
    if not shares or any(not 0 <= s <= 1 for s in shares):
        print("kv_cache: --write-shares must be numbers in [0, 1]")
        return 2
    cfg = KvBenchConfig(
        a.clients,
        a.window,
        a.count,
        a.keys,
        a.alpha,
        a.cache_size,
        shares,
        curve,
        a.host_cpu,
        a.refresh_ms,
    )

    def run() -> int:
        from topologies.load_curve import plot_curves

        console = Console(width=150)
        res = measure(cfg, log=console.print)
        console.print(table(res, cfg))
        console.print(ratio_line(res))
        for goal, met in goals(res):
            console.print(f"goal {'MET' if met else 'NOT met'}: {goal}")
        if a.png is not None and res.curve:
            plot_curves({"key-value reads": res.curve}, a.png)
            console.print(f"curve: {a.png}")
        return 0

    return main_guard("kv_cache", run)


if __name__ == "__main__":
    sys.exit(main())
