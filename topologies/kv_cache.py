"""Key-value cache experiment: Zipf reads through the switch cache against the server alone.

Example (as root; ``make bench`` runs it in section kvcons)::

    python -m topologies.kv_cache --clients 4 --reads 2000 --keys 1000 --alpha 0.99

One network (``star(clients + 2)``: clients ``h1..hN``, two storage servers), one run, two
key-value jobs measured one after the other with the same clients, keys and seeds:

- **server only**: a job whose controller never caches a key (``min_reads`` out of reach),
  so every read goes client → switch → server → switch → client;
- **switch cache**: ``cache_size`` entries, hot keys chosen by the controller from the
  switch's counters (a warm-up pass lets it see the workload; the measured pass follows).

Each client reads ``reads`` keys drawn from Zipf(``alpha``) over ``keys`` keys, one request
outstanding (``hosts/kv/store.py bench``). Figures: reads per second (all clients), median
and 99th percentile latency, the share the switch answered, and the reads the server saw.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

MODES = ("server only", "switch cache")


@dataclass(frozen=True)
class KvBenchConfig:
    clients: int = 4
    reads: int = 2000
    keys: int = 1000
    alpha: float = 0.99
    cache_size: int = 64
    run_dir: Path = Path("run/kv-cache")

    def command(self) -> str:
        return (f"{sys.executable} -m topologies.kv_cache --clients {self.clients} "
                f"--reads {self.reads} --keys {self.keys} --alpha {self.alpha} "
                f"--cache-size {self.cache_size}")  # fmt: skip


def _fields(cfg: KvBenchConfig, server: int, **extra: Any) -> dict[str, Any]:
    from topologies.experiment import host_ip, host_mac

    hosts = list(range(1, cfg.clients + 1))
    return {
        "kind": "kv_cache", "workers": cfg.clients, "worker_ports": hosts, "server": server,
        "worker_ips": [host_ip(h) for h in hosts], "worker_macs": [host_mac(h) for h in hosts],
        "agg_ip": host_ip(server), "agg_mac": host_mac(server), **extra,
    }  # fmt: skip


def measure(cfg: KvBenchConfig, log: Any = print) -> dict[str, dict[str, Any]]:
    from topologies.experiment import Experiment, ExperimentConfig, star

    n = cfg.clients
    out: dict[str, dict[str, Any]] = {}
    ex_cfg = ExperimentConfig(star(n + 2), run_dir=cfg.run_dir, log=lambda s: None)
    with Experiment(ex_cfg) as ex:
        for mode, server in zip(MODES, (n + 1, n + 2), strict=True):
            extra = {"cache_size": 1, "min_reads": 1 << 30} if mode == MODES[0] else {
                "cache_size": cfg.cache_size, "refresh_ms": 1000}  # fmt: skip
            job = ex.api.submit(_fields(cfg, server, **extra))["job_id"]
            srv = [sys.executable, "-m", "hosts.kv.store", "server", "--job-id", str(job)]
            server_proc = ex.start_service(f"h{server}", srv, "kv server", f"kv-server{job}")

            def bench(count: int, job: int = job) -> list[dict[str, Any]]:
                runs = ex.run_hosts([
                    (f"h{c}", [sys.executable, "-m", "hosts.kv.store", "bench", "--controller",
                               ex.controller_url, "--job-id", str(job), "--worker-id", str(c - 1),
                               "--count", str(count), "--keys", str(cfg.keys),
                               "--alpha", str(cfg.alpha), "--seed", str(c)])
                    for c in range(1, n + 1)
                ])  # fmt: skip
                for r in runs:
                    if r.code != 0:
                        raise RuntimeError(f"{r.host}: {r.lines[-3:]}")
                return [json.loads(r.lines[-1]) for r in runs]

            if mode == MODES[1]:
                log(f"kv: warming the cache ({cfg.reads // 2} reads per client) ...")
                bench(cfg.reads // 2)
                time.sleep(2.5)  # two refreshes: the hottest keys are in the switch
            log(f"kv: {mode}, {n} clients x {cfg.reads} Zipf({cfg.alpha}) reads ...")
            res = bench(cfg.reads)
            ex.stop(server_proc)
            lines = (ex.logs / f"kv-server{job}.log").read_text().splitlines()
            served = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
            out[mode] = {
                "ops_per_s": sum(r["ops_per_s"] for r in res),
                "p50_us": max(r["p50_us"] for r in res),
                "p99_us": max(r["p99_us"] for r in res),
                "hit_p50_us": _median(r["hit_p50_us"] for r in res),
                "miss_p50_us": _median(r["miss_p50_us"] for r in res),
                "switch_share": sum(r["cached"] for r in res) / sum(r["reads"] for r in res),
                "server_reads": served.get("reads"),
                "retransmissions": sum(r["retransmissions"] for r in res),
            }
    return out


def _median(values: Any) -> float | None:
    got = [v for v in values if v is not None]
    return sorted(got)[len(got) // 2] if got else None


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def table(rows: dict[str, dict[str, Any]], cfg: KvBenchConfig) -> Table:
    t = Table(title=f"Key-value reads, Zipf {cfg.alpha} over {cfg.keys} keys, {cfg.clients}"
                    f" clients, cache {cfg.cache_size} entries (p4sim, Mininet)")  # fmt: skip
    for col in ("path", "reads/s", "p50 us", "p99 us", "p50 us of hits", "p50 us of misses",
                "answered by switch", "server reads"):  # fmt: skip
        t.add_column(col, justify="right")
    for mode, r in rows.items():
        t.add_row(mode, f"{r['ops_per_s']:.0f}", f"{r['p50_us']:.0f}", f"{r['p99_us']:.0f}",
                  _us(r["hit_p50_us"]), _us(r["miss_p50_us"]),
                  f"{100 * r['switch_share']:.1f} %", str(r["server_reads"]))  # fmt: skip
    return t


def ratio_line(rows: dict[str, dict[str, Any]]) -> str:
    a, b = rows[MODES[0]], rows[MODES[1]]
    speed, lat = b["ops_per_s"] / a["ops_per_s"], b["p50_us"] / a["p50_us"]
    return (f"switch cache / server only: reads/s {speed:.2f}x, median latency {lat:.2f}x"
            " (same run, same network)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from topologies.experiment import main_guard

    ap = argparse.ArgumentParser(
        prog="python -m topologies.kv_cache", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--reads", type=int, default=2000, help="measured reads per client")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.99, help="Zipf exponent")
    ap.add_argument("--cache-size", type=int, default=64)
    a = ap.parse_args(argv)
    if min(a.clients, a.reads, a.keys, a.cache_size) < 1 or not a.alpha > 0:
        print("kv_cache: --clients, --reads, --keys, --cache-size and --alpha must be positive")
        return 2
    cfg = KvBenchConfig(a.clients, a.reads, a.keys, a.alpha, a.cache_size)

    def run() -> int:
        console = Console()
        rows = measure(cfg, log=console.print)
        console.print(table(rows, cfg))
        console.print(ratio_line(rows))
        return 0

    return main_guard("kv_cache", run)


if __name__ == "__main__":
    sys.exit(main())
