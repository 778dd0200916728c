"""Aggregation goodput on Mininet: switch (NetReduce), parameter server and ring, measured in
one run at several worker counts and two vector sizes (root).

Example (as root; ``make bench`` runs it after the p4sim section)::

    python -m tests.bench --only netreduce --workers 4,8 --sizes 65536,262144 --calls 3 --bw 25

Per worker count one network (topologies/experiment.py: p4sim switch, N workers, a PS host,
every link ``--bw`` Mbit/s) and one admitted job; for each method every worker all-reduces
seeded int32 vectors (``python -m hosts.vector_job``) and reports each call's
time. Goodput per worker = vector bytes / median call time, as a fraction of the link
bandwidth. A link carries at most ``128 / 194`` of its bandwidth as values (32 int32 per
frame of 194 bytes: Ethernet, IPv4, UDP, INC header), the *link limit*: the switch reaches
it when each worker's link is the only bottleneck. Ring all-reduce sends 2(N-1)/N of the
vector per worker, so the ideal switch/ring time ratio is N / (2(N-1)).

Links of 25 Mbit/s (``make run``'s rate on p4sim with 4 workers) and vectors of 256 KiB and
1 MiB (2,048 and 8,192 packets): the bandwidth-bound regime, where a call takes tens of
round trips' worth of packets, with a window of 128 packets (about 8 ms of one link's
packets) so that the switch's round trip under load does not bound the rate. Goal (issue
22): with 4 and 8 workers the switch reaches >= 0.9 of the link limit.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

PAYLOAD = 32 * 4
LINK_LIMIT = PAYLOAD / (PAYLOAD + 14 + 20 + 8 + 24)


@dataclass(frozen=True)
class BenchConfig:
    workers: tuple[int, ...] = (4, 8)
    sizes: tuple[int, ...] = (65536, 262144)  # int32 values: 2,048 and 8,192 packets
    calls: int = 3
    bw_mbps: float = 25.0
    window: int = 128

    def command(self) -> str:
        return (
            f"{sys.executable} -m tests.bench --only netreduce"
            f" --workers {','.join(map(str, self.workers))}"
            f" --sizes {','.join(map(str, self.sizes))} --calls {self.calls} --bw {self.bw_mbps:g}"
        )


def _run_method(nr: Any, job: int, method: str, cfg: BenchConfig, out: Path) -> dict[int, float]:
    """Median call time (s) per vector size, over workers and calls, for one method."""
    n = len(nr.layout.hosts) - 1
    ps = None
    if method == "ps":
        cmd = [sys.executable, "-m", "hosts.netreduce.ps", "--workers", str(n)]
        ps = nr.start_service(f"h{n + 1}", cmd, ready="parameter server on", log_name="ps")
    commands = []
    for w in range(n):
        cmd = [sys.executable, "-m", "hosts.vector_job", "--method", method,
               "--controller", nr.controller_url, "--job-id", str(job), "--worker-id", str(w),
               "--size", ",".join(map(str, cfg.sizes)), "--calls", str(cfg.calls),
               "--timeout", "1.0", "--total-timeout", "120",
               "--out", str(out / f"{method}{w}")]  # fmt: skip
        commands.append((f"h{w + 1}", cmd))
    try:
        codes = [run.code for run in nr.run_hosts(commands, timeout=600)]
    finally:
        if ps is not None:
            nr.stop(ps)
    recs = [json.loads((out / f"{method}{w}.json").read_text()) for w in range(n)]
    if any(codes):
        errors = {r.get("error") for r in recs if r.get("error")}
        raise RuntimeError(f"{method} with {n} workers failed: {errors}")
    return {
        size: statistics.median(t for r in recs for t in r["times_by_size"][str(size)])
        for size in cfg.sizes
    }


def measure(cfg: BenchConfig, log: Any = print) -> list[dict[str, Any]]:
    """One row per (workers, size): goodput fractions and the switch/ring time ratio."""
    from topologies.experiment import Experiment, ExperimentConfig, star

    rows = []
    for n in cfg.workers:
        log(f"netreduce bench: {n} workers, links {cfg.bw_mbps:g} Mbit/s ...")
        with (
            TemporaryDirectory() as tmp,
            Experiment(
                ExperimentConfig(
                    star(n + 1), cfg.bw_mbps, run_dir=Path("run/bench"), log=lambda s: None
                )
            ) as nr,
        ):
            job = nr.submit(f"bench-{n}", workers=n, window=cfg.window)
            times = {m: _run_method(nr, job, m, cfg, Path(tmp)) for m in ("switch", "ps", "ring")}
        for size in cfg.sizes:
            bits = size * 4 * 8
            frac = {m: bits / times[m][size] / (cfg.bw_mbps * 1e6) for m in times}
            rows.append(
                {
                    "workers": n,
                    "size": size,
                    **{f"{m}_goodput": frac[m] for m in frac},
                    **{f"{m}_time_s": times[m][size] for m in times},
                    "switch_vs_limit": frac["switch"] / LINK_LIMIT,
                    "ratio": times["switch"][size] / times["ring"][size],
                    "ratio_theory": n / (2 * (n - 1)),
                }
            )
    return rows


def table(rows: list[dict[str, Any]], cfg: BenchConfig) -> Any:
    from rich.table import Table

    t = Table(
        title=f"aggregation goodput per worker, fraction of the {cfg.bw_mbps:g} Mbit/s link "
        f"(link limit {LINK_LIMIT:.2f}: 128 value bytes per 194-byte frame)"
    )
    cols = ("workers", "vector", "switch", "ps", "ring", "switch / limit",
            "switch/ring time", "theory N/(2(N-1))")  # fmt: skip
    for c in cols:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(
            str(r["workers"]),
            f"{r['size'] * 4 // 1024} KiB",
            f"{r['switch_goodput']:.3f}",
            f"{r['ps_goodput']:.3f}",
            f"{r['ring_goodput']:.3f}",
            f"{r['switch_vs_limit']:.2f}",
            f"{r['ratio']:.2f}",
            f"{r['ratio_theory']:.2f}",
        )
    return t


GOAL_VS_LIMIT = 0.9


def goal_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The goal per row with 4 or more workers: switch goodput >= 0.9 of the link limit."""
    out = []
    for r in rows:
        if r["workers"] >= 4:
            met = r["switch_vs_limit"] >= GOAL_VS_LIMIT
            out.append(
                f"goal switch >= {GOAL_VS_LIMIT} of the link limit, {r['workers']} workers, "
                f"{r['size'] * 4 // 1024} KiB: {r['switch_vs_limit']:.2f} "
                f"({'met' if met else 'not met'})"
            )
    return out
