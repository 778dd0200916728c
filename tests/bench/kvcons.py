"""Section kvcons of ``make bench``: the key-value cache against the server alone and the
switch sequencer against a host leader, at loads that saturate the host-only designs.

Both experiments run here one after the other (``topologies/kv_cache.py``,
``topologies/consensus.py``; within each, the two designs alternate pass by pass), print
their tables, ratios and whether each goal is met, check every recorded history
(thousands of operations; a violation is printed, never hidden) and write one PNG of
throughput against offered load with a panel per system.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from rich.console import Console

PNG = Path("results/kvcons_throughput_vs_load.png")


def run(kv_count: int, log_count: int, console: Console) -> None:
    from topologies.consensus import LogBenchConfig
    from topologies.kv_cache import KvBenchConfig

    kv_cfg = KvBenchConfig(clients=8, window=128, count=kv_count, cache_size=512,
                           curve=(8, 32, 128), host_cpu=0.05)  # fmt: skip
    log_cfg = LogBenchConfig(clients=6, window=32, count=log_count, curve=(2, 8, 32),
                             host_cpu=0.05)  # fmt: skip
    console.rule("Key-value cache and consensus vs host-only (Mininet, pipelined clients)")
    if os.geteuid() != 0:
        console.print(f"kvcons bench skipped: Mininet needs root; as root run: "
                      f"{kv_cfg.command()} and {log_cfg.command()}")  # fmt: skip
        return
    from topologies import consensus, kv_cache
    from topologies.experiment import sigterm_as_interrupt
    from topologies.load_curve import plot_curves

    t0 = time.monotonic()
    with sigterm_as_interrupt():  # a stopped bench still stops its network and processes
        kv = kv_cache.measure(kv_cfg, log=console.print)
        console.print(kv_cache.table(kv, kv_cfg))
        console.print(kv_cache.ratio_line(kv))
        log = consensus.measure(log_cfg, log=console.print)
    console.print(consensus.table(log, log_cfg))
    console.print(consensus.ratio_line(log))
    for goal, met in [*kv_cache.goals(kv), *consensus.goals(log)]:
        console.print(f"goal {'MET' if met else 'NOT met'}: {goal}")
    for mode, c in kv.checks.items():
        for v in c.violations[:5]:
            console.print(f"kv {mode}: {v}")
    for mode, c in log.checks.items():
        for v in c.violations[:5]:
            console.print(f"log {mode}: {v}")
    plot_curves({"key-value reads, Zipf 0.99": kv.curve, "replicated log appends": log.curve},
                PNG)  # fmt: skip
    console.print(f"curves: {PNG}; measured in one run, {time.monotonic() - t0:.0f} s, on a "
                  f"machine shared with other work; commands: {kv_cfg.command()} --png PNG; "
                  f"{log_cfg.command()} --png PNG")  # fmt: skip
