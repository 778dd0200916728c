"""PyTorch DDP on Mininet: inclib's switch comm hook against gloo's own all-reduce (root).

Example (as root; ``make bench`` runs it)::

    python -m tests.bench --only ddp --ddp-epochs 4

One network (topologies/experiment.py: p4sim switch, hosts h1..h5, links unshaped), four
DDP processes on h1..h4 training the digits MLP of ``examples/training.py`` with the same
seeds, data shards and batches, once with gloo's all-reduce and once with the switch hook;
both runs in the same session, one after the other. Figures per run (rank 0): median time
per iteration (forward, backward with its all-reduce, step), training time until the test
accuracy first reaches ``--ddp-target`` (checked after each epoch), final accuracy, and
whether the four replicas ended bit-identical.
"""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from rich.table import Table

COMMS = ("gloo", "switch")


def measure(epochs: int, log: Any = print) -> dict[str, dict[str, Any]]:
    from examples.run import run_app
    from topologies.experiment import Experiment, ExperimentConfig, star

    out: dict[str, dict[str, Any]] = {}
    cfg = ExperimentConfig(star(5), run_dir=Path("run/bench-ddp"), log=lambda s: None)
    with TemporaryDirectory() as tmp, Experiment(cfg) as ex:
        for comm in COMMS:
            log(f"ddp: training with {comm} ({epochs} epochs, 4 DDP processes) ...")
            out[comm], _ = run_app(ex, "training", Path(tmp) / f"{comm}.json", comm, epochs)
    return out


def table(recs: dict[str, dict[str, Any]], target: float) -> Table:
    t = Table(title=f"PyTorch DDP, 4 workers on Mininet: switch hook vs gloo (target {target})")
    for col in ("all-reduce", "on switch", "ms / iteration", "time to accuracy, s",
                "final accuracy", "replicas identical"):  # fmt: skip
        t.add_column(col, justify="right")
    for comm, r in recs.items():
        hit = [e["train_s"] for e in r["epochs"] if e["accuracy"] >= target]
        t.add_row(
            comm, str(r["on_switch"]), f"{1000 * r['time_per_iter_s']:.1f}",
            f"{hit[0]:.2f}" if hit else "not reached", f"{r['epochs'][-1]['accuracy']:.3f}",
            str(r["replicas_identical"]),
        )  # fmt: skip
    return t


def ratio_line(recs: dict[str, dict[str, Any]]) -> str:
    g, s = recs["gloo"]["time_per_iter_s"], recs["switch"]["time_per_iter_s"]
    return f"time per iteration, switch hook / gloo: {s / g:.2f}x (same run, same network)"
