"""Section kvcons of ``make bench``: the key-value cache against the server alone and the
switch sequencer against a host leader, at loads that saturate the host-only designs.

Both experiments run here one after the other (``topologies/kv_cache.py``,
``topologies/consensus.py``; within each, the two designs alternate pass by pass), print
their tables, ratios and whether each goal is met (key-value: reads >= 3x the server alone
with lower p50 and p99, 5 % writes >= 1.5x, 20 % writes >= 1x; ``--kvcons-systems kv`` or
``log`` runs one half), check every recorded history
(thousands of operations; a violation is printed, never hidden) and write one PNG of
throughput against offered load with a panel per system.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console

PNG = Path("results/kvcons_throughput_vs_load.png")


SYSTEMS = ("kv", "log")


def run(
    kv_count: int, log_count: int, console: Console, systems: tuple[str, ...] = SYSTEMS
) -> None:
    """Both systems, or those in ``systems`` (``kv``: the cache; ``log``: consensus)."""
    from topologies.consensus import LogBenchConfig
    from topologies.kv_cache import KvBenchConfig

    kv_cfg = KvBenchConfig(clients=8, window=128, count=kv_count, cache_size=512,
                           curve=(8, 32, 128), host_cpu=0.05)  # fmt: skip
    log_cfg = LogBenchConfig(clients=10, window=32, count=log_count, curve=(2, 8, 32),
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
    met: list[tuple[str, bool]] = []
    curves: dict[str, Any] = {}
    commands = []
    with sigterm_as_interrupt():  # a stopped bench still stops its network and processes
        if "kv" in systems:
            kv = kv_cache.measure(kv_cfg, log=console.print)
            console.print(kv_cache.table(kv, kv_cfg))
            console.print(kv_cache.ratio_line(kv))
            met += kv_cache.goals(kv)
            curves["key-value reads, Zipf 0.99"] = kv.curve
            commands.append(kv_cfg.command())
            for mode, c in kv.checks.items():
                for v in c.violations[:5]:
                    console.print(f"kv {mode}: {v}")
        if "log" in systems:
            log = consensus.measure(log_cfg, log=console.print)
            console.print(consensus.table(log, log_cfg))
            console.print(consensus.ratio_line(log))
            met += consensus.goals(log, log_cfg.host_cpu)
            curves["replicated log appends"] = log.curve
            commands.append(log_cfg.command())
            for mode, c in log.checks.items():
                for v in c.violations[:5]:
                    console.print(f"log {mode}: {v}")
    for goal, ok in met:
        console.print(f"goal {'MET' if ok else 'NOT met'}: {goal}")
    png = PNG if set(systems) == set(SYSTEMS) else PNG.with_name(f"kvcons_{systems[0]}_vs_load.png")
    plot_curves(curves, png)
    console.print(f"curves: {png}; measured in one run, {time.monotonic() - t0:.0f} s, on a "
                  f"machine shared with other work (load average "
                  f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}); commands: "
                  f"{'; '.join(c + ' --png PNG' for c in commands)}")  # fmt: skip
