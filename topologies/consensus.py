"""Consensus experiment: the switch as sequencer against a host-only leader, same replicas.

Example (as root; ``make bench`` runs it in section kvcons)::

    python -m topologies.consensus --clients 2 --appends 500

One network (``star(clients + 3)``: clients ``h1..hN``, replicas on the next three hosts,
replica 0 leading), one run, two replicated logs measured one after the other with the
same clients and replica hosts (``hosts/consensus/replicated_log.py``, the same code in both):

- **host leader**: clients send to the leader, which numbers the requests and sends them
  to the followers (``--sequencer host``): client → leader → followers → client;
- **switch sequencer**: clients send to the group address, the switch numbers the requests
  and multicasts them to all replicas: client → replicas → client.

Each client appends ``appends`` entries, one outstanding, and waits for each commit (the
leader's and ``f`` other replicas' answers). Figures: commits per second (all clients),
median and 99th percentile commit latency, retransmissions.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

MODES = {"host leader": "host", "switch sequencer": "switch"}


@dataclass(frozen=True)
class LogBenchConfig:
    clients: int = 2
    appends: int = 500
    run_dir: Path = Path("run/consensus")

    def command(self) -> str:
        return (f"{sys.executable} -m topologies.consensus --clients {self.clients}"
                f" --appends {self.appends}")  # fmt: skip


def _fields(cfg: LogBenchConfig) -> dict[str, Any]:
    from topologies.experiment import host_ip, host_mac

    clients = list(range(1, cfg.clients + 1))
    reps = [cfg.clients + 1 + i for i in range(3)]
    return {
        "kind": "consensus", "workers": len(clients), "worker_ports": clients,
        "worker_ips": [host_ip(h) for h in clients], "worker_macs": [host_mac(h) for h in clients],
        "replicas": 3, "replica_ports": reps, "replica_ips": [host_ip(h) for h in reps],
        "replica_macs": [host_mac(h) for h in reps],
    }  # fmt: skip


def measure(cfg: LogBenchConfig, log: Any = print) -> dict[str, dict[str, Any]]:
    from topologies.experiment import Experiment, ExperimentConfig, star

    n = cfg.clients
    out: dict[str, dict[str, Any]] = {}
    ex_cfg = ExperimentConfig(star(n + 3), run_dir=cfg.run_dir, log=lambda s: None)
    with Experiment(ex_cfg) as ex:
        for mode, seq in MODES.items():
            job = ex.api.submit(_fields(cfg))["job_id"]
            base = [sys.executable, "-m", "hosts.consensus.replicated_log"]
            common = ["--controller", ex.controller_url, "--job-id", str(job), "--sequencer", seq]
            reps = [
                ex.start_service(f"h{n + 1 + r}", [*base, "replica", *common, "--replica-id",
                                                   str(r)], "ready", f"replica{job}-{r}")
                for r in range(3)
            ]  # fmt: skip
            log(f"consensus: {mode}, {n} clients x {cfg.appends} appends ...")
            runs = ex.run_hosts([
                (f"h{c}", [*base, "client", *common, "--worker-id", str(c - 1),
                           "--count", str(cfg.appends)])
                for c in range(1, n + 1)
            ])  # fmt: skip
            for r in runs:
                if r.code != 0:
                    raise RuntimeError(f"{r.host}: {r.lines[-3:]}")
            res = [json.loads(r.lines[-1]) for r in runs]
            for p in reps:
                ex.stop(p)
            out[mode] = {
                "ops_per_s": sum(r["ops_per_s"] for r in res),
                "p50_us": max(r["p50_us"] for r in res),
                "p99_us": max(r["p99_us"] for r in res),
                "retransmissions": sum(r["retransmissions"] for r in res),
            }
    return out


def table(rows: dict[str, dict[str, Any]], cfg: LogBenchConfig) -> Table:
    t = Table(title=f"Replicated log, 3 replicas, {cfg.clients} clients (p4sim, Mininet)")
    for col in ("sequencer", "commits/s", "p50 us", "p99 us", "retransmissions"):
        t.add_column(col, justify="right")
    for mode, r in rows.items():
        t.add_row(mode, f"{r['ops_per_s']:.0f}", f"{r['p50_us']:.0f}", f"{r['p99_us']:.0f}",
                  str(r["retransmissions"]))  # fmt: skip
    return t


def ratio_line(rows: dict[str, dict[str, Any]]) -> str:
    a, b = rows["host leader"], rows["switch sequencer"]
    speed, lat = b["ops_per_s"] / a["ops_per_s"], b["p50_us"] / a["p50_us"]
    return (f"switch sequencer / host leader: commits/s {speed:.2f}x, median commit latency"
            f" {lat:.2f}x (same run, same network)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from topologies.experiment import main_guard

    doc = __doc__.split("\n")[0]
    ap = argparse.ArgumentParser(prog="python -m topologies.consensus", description=doc)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--appends", type=int, default=500, help="appends per client")
    a = ap.parse_args(argv)
    if a.clients < 1 or a.appends < 1:
        print("consensus: --clients and --appends must be positive")
        return 2
    cfg = LogBenchConfig(a.clients, a.appends)

    def run() -> int:
        console = Console()
        rows = measure(cfg, log=console.print)
        console.print(table(rows, cfg))
        console.print(ratio_line(rows))
        return 0

    return main_guard("consensus", run)


if __name__ == "__main__":
    sys.exit(main())
