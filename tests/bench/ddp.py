"""PyTorch DDP on Mininet: inclib's switch comm hook against gloo's own all-reduce (root).

Example (as root; ``make bench`` runs it)::

    python -m tests.bench --only ddp --ddp-epochs 4 --ddp-models small,large

Per model (``hosts/mlp.py``: ``small``, 2,410 parameters, whose iterations are bound by
round trips and per-packet costs; ``large``, 1,126,410, bound by the links' bandwidth) and
per link setting, one network (topologies/experiment.py: p4sim switch, hosts h1..h5): links
unshaped, and links shaped by the rule ``make run`` uses (``topologies/link_rate.py``). On
each, four DDP processes on h1..h4 train the digits MLP of ``examples/training.py`` with the
same seeds, data shards and batches, with gloo's all-reduce, with the switch hook at its
default of 128 values per packet (``inclib.torch_ddp.DDP_SLOTS``, 578-byte frames) and with
the hook at 32 (194-byte frames), one after the other; the goals use the default row.
Each row names its regime: on shaped links the model's (``hosts/mlp.py``), on unshaped
veths the CPU of the hosts and p4sim. One run on the shared 2-core machine (load average
12-24; ``--ddp-epochs 4 --ddp-models small,large``), gloo / switch 128 / switch 32: small
model unshaped 10.6 / 12.0 / 23.7 ms per iteration, shaped 14.7 / 16.1 / 24.5 ms, time to
0.9 0.46 / 0.42 / 0.85 s (1.10x: the iterations are set by the 4 processes' CPU on the
loaded cores, not by the links); large model unshaped 0.51 / 1.49 / 4.38 s per iteration
(likely p4sim's packet rate, 8,800 packets per worker per iteration; not profiled), shaped
2.89 / 2.28 / 5.96 s, time to 0.9 106.7 / 81.6 / 216.9 s (1.31x). In-network
aggregation's bound there is 1.5 x 1,514/1,448 (ring's bytes per link in TCP frames) /
(578/512 x 1.016, the frames and the block bounds and flags) = 1.37x. Before (a whole
bucket sent twice when one block outgrew its bounds), the large model shaped took 3.6 s
against gloo's 3.0. A later run of the small model on a quieter machine (load average 3-4):
unshaped 5.1 / 4.6 / 7.9 ms, shaped 10.9 / 10.1 / 11.4 ms, time to 0.9 0.28 / 0.25 / 0.28 s
(1.15x). With ~5 ms of compute per iteration, the bytes bound the small model's gain at
about (5 + 4.6) / (5 + 3.5) = 1.13x plus ring's 6 steps' latency: 14.5 KB per link for
ring, 11 KB (19 frames of 578 bytes) for the switch, at 25.2 Mbit/s.
Figures per run (rank 0): median time per iteration (forward,
backward with its all-reduce, step), training time until the test accuracy first reaches
``--ddp-target`` (checked after each epoch), final accuracy, and whether the four replicas
ended bit-identical.

The goals (issue 22): shaped, the switch hook reaches the target >= 1.3x sooner than gloo;
unshaped, its time per iteration is no more than 1.5x gloo's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from rich.table import Table

#: The runs side by side per link setting: (row name, --comm, extra worker arguments). The
#: switch hook as the example runs it (examples/training.py: DDP_SLOTS, 578-byte frames, an
#: iteration's buckets in one call) and as it ran before (one call per bucket), gloo's
#: all-reduce over TCP.
RUNS = (
    ("gloo", "gloo", ()),
    ("switch", "switch", ()),
    ("switch, per bucket", "switch", ("--per-bucket",)),
)
SHAPED_SOONER = 1.3  # shaped links: gloo's time to accuracy / the switch hook's, at least
UNSHAPED_SLOWER = 1.5  # unshaped links: the switch hook's time per iteration / gloo's, at most


@dataclass
class Links:
    """One link setting of the bench: its name and rate (None: unshaped)."""

    name: str
    mbps: float | None
    why: str = ""


def link_settings() -> list[Links]:
    from examples.run import shaped_rate

    rate = shaped_rate()
    return [Links("unshaped", None), Links("shaped", rate.mbps, rate.describe())]


def measure(
    epochs: int, model: str = "small", log: Any = print
) -> dict[str, dict[str, dict[str, Any]]]:
    """links name -> comm -> rank 0's record, for ``model``."""
    from examples.run import run_app
    from topologies.experiment import Experiment, ExperimentConfig, star

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for links in link_settings():
        bw = "unshaped" if links.mbps is None else f"{links.mbps:g} Mbit/s ({links.why})"
        log(f"ddp: {model} model, links {bw}")
        cfg = ExperimentConfig(
            star(5), bw_mbps=links.mbps, run_dir=Path("run/bench-ddp"), log=lambda s: None
        )
        out[links.name] = {}
        with TemporaryDirectory() as tmp, Experiment(cfg) as ex:
            for i, (name, comm, extra) in enumerate(RUNS):
                log(f"ddp: training with {name} ({epochs} epochs, 4 DDP processes) ...")
                rec, _ = run_app(
                    ex, "training", Path(tmp) / f"{i}.json", comm, epochs,
                    ("--model", model, *extra),
                )  # fmt: skip
                rec["links_mbps"] = links.mbps
                out[links.name][name] = rec
    return out


def time_to(rec: dict[str, Any], target: float) -> float | None:
    hit = [e["train_s"] for e in rec["epochs"] if e["accuracy"] >= target]
    return hit[0] if hit else None


def table(recs: dict[str, dict[str, dict[str, Any]]], target: float, model: str) -> Table:
    from hosts.mlp import describe_model

    t = Table(
        title=f"PyTorch DDP, 4 workers on Mininet, {describe_model(model)}: switch hook vs "
        f"gloo (target {target})"
    )
    for col in ("links", "regime", "all-reduce", "slots", "ms / iteration",
                "time to accuracy, s", "final accuracy", "replicas identical"):  # fmt: skip
        t.add_column(col, justify="right")
    for links, by_comm in recs.items():
        for comm, r in by_comm.items():
            mbps = r["links_mbps"]
            hit = time_to(r, target)
            t.add_row(
                links if mbps is None else f"{links} ({mbps:g} Mbit/s)", regime(model, mbps), comm,
                str(r.get("slots") or "-") if r["on_switch"] or comm == "gloo" else "on hosts",
                f"{1000 * r['time_per_iter_s']:.1f}",
                f"{hit:.2f}" if hit is not None else "not reached",
                f"{r['epochs'][-1]['accuracy']:.3f}", str(r["replicas_identical"]),
            )  # fmt: skip
    return t


def regime(model: str, mbps: float | None) -> str:
    """What bounds an iteration in a row: the model's regime (``hosts/mlp.py``) on shaped
    links; on unshaped veths the CPU of the hosts and the software switch (the veths carry
    more than 4 workers and p4sim on 2 cores produce)."""
    from hosts.mlp import REGIME

    return REGIME[model] if mbps is not None else "CPU-bound (hosts, p4sim)"


def hook_lines(recs: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Where each switch row's time per iteration went (rank 0): the hook's all-reduce
    calls against the whole iteration, integer calls and packets per iteration."""
    lines = []
    for links, by_comm in recs.items():
        for comm, r in by_comm.items():
            if "hook_s" not in r or not r["iterations"]:
                continue
            n = r["iterations"]
            hook = sum(r["hook_s"]) / n
            whole = sum(r["iteration_s"]) / n
            tr = r.get("transport", {})
            calls = tr.get("calls", 0) / n
            ints = [t for _, t in tr.get("int_calls", [])]
            lines.append(
                f"{links}, {comm}: per iteration (mean of {n}) {1000 * whole:.1f} ms, of it "
                f"{1000 * hook:.1f} ms in the hook's all-reduce ({1000 * sum(ints) / n:.1f} ms "
                f"in {calls:.2f} integer calls on the wire), "
                f"{tr.get('packets_sent', 0) / n:,.0f} packets sent, "
                f"{tr.get('retransmissions', 0) / n:.1f} resent"
            )
    return lines


def goal_lines(recs: dict[str, dict[str, dict[str, Any]]], target: float) -> list[str]:
    """The ratios measured side by side and whether each goal is met."""
    lines = []
    un = recs["unshaped"]
    slower = un["switch"]["time_per_iter_s"] / un["gloo"]["time_per_iter_s"]
    met = "met" if slower <= UNSHAPED_SLOWER else "NOT met"
    lines.append(
        f"unshaped: time per iteration, switch hook / gloo = {slower:.2f}x "
        f"(goal <= {UNSHAPED_SLOWER}x: {met})"
    )
    sh = recs["shaped"]
    g, s = time_to(sh["gloo"], target), time_to(sh["switch"], target)
    per_iter = sh["gloo"]["time_per_iter_s"] / sh["switch"]["time_per_iter_s"]
    if g is None or s is None:
        sooner = f"not measured (target {target} not reached by " + (
            "gloo)" if g is None else "the switch hook)"
        )
        met = "NOT met" if s is None else "met"
    else:
        sooner = f"{g / s:.2f}x"
        met = "met" if g / s >= SHAPED_SOONER else "NOT met"
    lines.append(
        f"shaped: time to {target} accuracy, gloo / switch hook = {sooner} "
        f"(goal >= {SHAPED_SOONER}x: {met}); per iteration gloo / switch hook = {per_iter:.2f}x"
    )
    return lines
