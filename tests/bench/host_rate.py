"""One worker's INC packet rate on the host: the native (C) and the Python packet loop.

Example (no root needed; ``make bench`` runs it as section hostrate)::

    python -m tests.bench --only hostrate

One aggregation client (hosts/netreduce/allreduce.py: window, timers, retransmission and the
scatter of results included) all-reduces int32 vectors of ``packets`` packets through a
parameter server with a quorum of one (hosts/netreduce/ps.py, native back end) on
127.0.0.1, so every packet sent comes back as one result. The client is pinned to one core
and the server to the other where there are two. Per back end: packets sent (= results
received) per second of wall time, the client's CPU time as a share of one core, and
packets per CPU-second of the client, i.e. what one core running only the client sustains.
The goal (issue 22): >= 150,000 packets/s sent and received on one core.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

GOAL_PPS = 150_000


@dataclass(frozen=True)
class RateConfig:
    packets: int = 20_000  # per call (640,000 int32 at 32 slots)
    calls: int = 3
    window: int = 256
    slots: int = 32

    def command(self) -> str:
        return f"{sys.executable} -m tests.bench --only hostrate"


def _pin(pid: int, core: int) -> None:
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) > 1:
        os.sched_setaffinity(pid, {cores[core % len(cores)]})


def _start_ps() -> tuple[subprocess.Popen, tuple[str, int]]:
    cmd = [sys.executable, "-m", "hosts.netreduce.ps", "--workers", "1", "--bind",
           "127.0.0.1", "--port", "0", "--host-backend", "native"]  # fmt: skip
    ps = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = ps.stdout.readline() if ps.stdout else ""
    if "parameter server on" not in line:
        ps.kill()
        raise RuntimeError(f"the parameter server did not start: {line!r}")
    host, port = line.split()[3].rstrip(",").rsplit(":", 1)
    _pin(ps.pid, 1)
    return ps, (host, int(port))


def measure_backend(
    backend: str, job: int, cfg: RateConfig, dest: tuple[str, int]
) -> dict[str, Any]:
    """``job``: a job id of its own, so that its PSNs start afresh at the server."""
    from hosts.netreduce.allreduce import AllReduceClient

    x = np.arange(cfg.packets * cfg.slots, dtype=np.int32)
    c = AllReduceClient(
        job, 0, 1, 0, cfg.window, cfg.window, dest=dest, bind=("127.0.0.1", 0),
        slots=cfg.slots, timeout=0.2, backend=backend,
    )  # fmt: skip
    with c:
        c.allreduce_int(x[: 1000 * cfg.slots])  # warm: build, first ARP-free round trips
        sent0, retx0 = c.stats.packets_sent, c.stats.retransmissions
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        for _ in range(cfg.calls):
            out = c.allreduce_int(x)
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
        if not np.array_equal(out, x):
            raise RuntimeError(f"{backend}: the quorum-of-one sum is not the vector itself")
        received = cfg.calls * cfg.packets
        return {
            "backend": backend,
            "pps": received / wall,
            "cpu_share": cpu / wall,
            "pps_per_core": received / cpu if cpu > 0 else float("inf"),
            "sent": c.stats.packets_sent - sent0,
            "retransmissions": c.stats.retransmissions - retx0,
        }


def measure(cfg: RateConfig) -> list[dict[str, Any]]:
    ps, dest = _start_ps()
    me = os.sched_getaffinity(0)
    try:
        _pin(0, 0)
        return [measure_backend(b, j, cfg, dest) for j, b in enumerate(("python", "native"), 1)]
    finally:
        os.sched_setaffinity(0, me)
        ps.terminate()
        ps.wait(10)


def table(rows: list[dict[str, Any]], cfg: RateConfig) -> Any:
    from rich.table import Table

    t = Table(
        title=f"one worker's INC packets/s: {cfg.calls} calls of {cfg.packets:,} packets "
        f"({cfg.slots} slots), window {cfg.window}, through a quorum-of-one PS on 127.0.0.1"
    )
    for c in ("host back end", "packets/s (wall)", "client CPU", "packets per CPU-s",
              "retransmissions", f"goal >= {GOAL_PPS:,}/s on one core"):  # fmt: skip
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(
            r["backend"],
            f"{r['pps']:,.0f}",
            f"{r['cpu_share']:.0%} of a core",
            f"{r['pps_per_core']:,.0f}",
            str(r["retransmissions"]),
            "met" if r["pps_per_core"] >= GOAL_PPS else "not met",
        )
    return t


def bench_host_rate(console: Any) -> int:
    cfg = RateConfig()
    console.rule("hostrate: one worker's packet loop, native (C) vs Python")
    t0 = time.monotonic()
    rows = measure(cfg)
    console.print(table(rows, cfg))
    by = {r["backend"]: r for r in rows}
    console.print(
        f"native / python: {by['native']['pps_per_core'] / by['python']['pps_per_core']:.1f}x "
        f"packets per CPU-second, {by['native']['pps'] / by['python']['pps']:.1f}x packets/s; "
        f"measured in one run, {time.monotonic() - t0:.0f} s, on a machine others may share; "
        f"command: {cfg.command()}"
    )
    return 0


if __name__ == "__main__":
    from rich.console import Console

    sys.exit(bench_host_rate(Console(width=140)))
