"""Switch memory scheduling, simulated: EDF against FIFO, RR and MLFQ (no root needed).

Example (``make bench`` runs it first)::

    python -m tests.bench --only sched --sched-jobs 200 --sched-seeds 2

It runs ``controller.sched.sched_sim`` (the controller's own ``Scheduler`` and ``MemoryManager``
under simulated time, the seed's sizing models) over Poisson traces at several loads and
prints, per load, the share of MD deadlines met and the average JCT of each policy, then
the headline: EDF's deadlines met against the best baseline's, and the best baseline's
average JCT over EDF's (above 1: EDF is faster). The figures are measured side by side on
the same traces in one run; ``python -m controller.sched.sched_sim`` writes the full table and
plots under results/.
"""

from __future__ import annotations

import time
from typing import Any

from controller.sched.sched_sim import SweepConfig, headline, sweep

LOADS = SweepConfig.loads


def measure(jobs: int, seeds: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    t0 = time.monotonic()
    rows = sweep(SweepConfig(jobs=jobs, loads=LOADS, seeds=tuple(range(1, seeds + 1))))
    return rows, headline(rows), time.monotonic() - t0


def headline_lines(heads: list[dict[str, Any]]) -> list[str]:
    out = []
    for h in heads:
        out.append(
            f"load {h['load']:.1f}: EDF meets {100 * h['edf_met']:.1f} % of deadlines, best"
            f" baseline {100 * h['best_baseline_met']:.1f} % ({h['best_met_policy']});"
            f" average JCT best baseline / EDF = {h['jct_ratio']:.2f}x ({h['best_jct_policy']})"
        )
    held = sum(1 for h in heads if h["goal"])
    out.append(
        f"goal (no baseline meets more deadlines or has a lower average JCT than EDF): held at"
        f" {held} of {len(heads)} loads"
        + ("" if held == len(heads) else f", NOT at {[h['load'] for h in heads if not h['goal']]}")
    )
    return out
