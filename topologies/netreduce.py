"""The main job: switch aggregation (NetReduce) against a parameter server and ring all-reduce.

Example (root; ``make run`` does exactly this)::

    python -m topologies.netreduce run            # train with switch, ps, ring; table, plots
    python -m topologies.netreduce run --epochs 3 --bw 2

Network (``topologies/experiment.py``): one switch ``s1``, workers ``h1..hN`` on ports
``1..N``, the parameter-server host ``h{N+1}``, every link shaped to ``--bw``. One NetReduce
job is admitted with ``incctl``; the workers (``hosts/train.py``) train the digits MLP three
times with the same seed and hyper-parameters, summing gradients in the switch, on the
parameter server and by ring all-reduce. It prints a table and writes ``results/run.json``
and two plots.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    busiest,
    host_ip,
    main_guard,
    star,
)
from topologies.records import plot_bars, plot_lines, table, write_record

RUN_DIR = Path("run/netreduce")
METHODS = ("switch", "ps", "ring")
# p4sim's rate over AF_PACKET on this 2-core machine, measured with hosts/vector_job.py and
# no shaping (4 workers, 1024-packet vectors): ~10,800 aggregation packets/s into the switch
# (and as many result copies out), i.e. ~2,700 frames/s or ~4.2 Mbit/s per worker link.
# 2 Mbit/s links (~1,300 INC frames/s per worker) keep p4sim at half that: links set the pace.
DEFAULT_BW_MBPS = 2.0
DEFAULT_WINDOW = 32


@dataclass
class TrainSettings:
    epochs: int = 5
    batch_size: int = 64
    lr: float = 0.1
    momentum: float = 0.9
    hidden: int = 32
    seed: int = 0
    target: float = 0.9
    timeout: float = 1.0  # retransmission timeout: above the shaped links' queueing delay

    def args(self) -> list[str]:
        return [
            "--epochs", str(self.epochs), "--batch-size", str(self.batch_size),
            "--lr", str(self.lr), "--momentum", str(self.momentum),
            "--hidden", str(self.hidden), "--seed", str(self.seed),
            "--target", str(self.target), "--timeout", str(self.timeout),
            "--total-timeout", "60",
        ]  # fmt: skip


def train_method(
    ex: Experiment, method: str, job_id: int, workers: int, settings: TrainSettings, out: Path
) -> dict[str, Any]:
    """Train with ``method`` on every worker; the measured record of worker 0."""
    ps = None
    if method == "ps":
        cmd = [sys.executable, "-m", "hosts.ps", "--workers", str(workers)]
        ps = ex.start_service(f"h{workers + 1}", cmd, ready="parameter server on", log_name="ps")
    peers = ",".join(host_ip(i + 1) for i in range(workers))
    commands = []
    for w in range(workers):
        cmd = [sys.executable, "-m", "hosts.train", "--method", method, "--workers", str(workers)]
        cmd += ["--worker-id", str(w), "--controller", ex.controller_url, "--job-id", str(job_id)]
        cmd += ["--json", str(out / "workers" / f"{method}-w{w}.json"), *settings.args()]
        if method == "ring":
            cmd += ["--peers", peers]
        commands.append((f"h{w + 1}", cmd))
    before = ex.port_bytes()
    t0 = time.monotonic()
    try:
        runs = ex.run_hosts(commands, show=0)
    finally:
        if ps is not None:
            ex.stop(ps)
    wall = time.monotonic() - t0
    for w, run in enumerate(runs):
        if run.code:
            raise ExperimentError(f"{method}: worker {w} failed:\n" + "\n".join(run.lines[-8:]))
    hist = json.loads((out / "workers" / f"{method}-w0.json").read_text())["history"]
    link, nbytes = busiest(before, ex.port_bytes())
    return {
        "final_accuracy": hist["final_accuracy"],
        "time_to_target_s": hist["time_to_target_s"],
        "iter_time_s": hist["iter_time_s"],
        "busiest_link_bytes": nbytes,
        "busiest_link": link,
        "wall_s": wall,
        "epoch_accuracy": hist["epoch_accuracy"],
        "epoch_end_s": hist["epoch_end_s"],
    }


def summary(results: dict[str, dict[str, Any]], workers: int, target: float) -> Any:
    rows = []
    for m, r in results.items():
        ttt = r["time_to_target_s"]
        rows.append(
            [
                m,
                f"{r['iter_time_s'] * 1e3:.1f} ms",
                "not reached" if ttt is None else f"{ttt:.2f} s",
                f"{r['final_accuracy']:.4f}",
                f"{r['busiest_link_bytes'] / 1e6:.2f} MB ({r['busiest_link']})",
            ]
        )
    columns = ["method", "iter time", f"time to {target:.0%}", "final accuracy", "busiest link"]
    title = f"NetReduce on Mininet: {workers} workers, same model, seed and hyper-parameters"
    return table(title, columns, rows)


def plots(results: dict[str, dict[str, Any]], out: Path) -> list[Path]:
    """Accuracy vs training time per method; iteration time and busiest-link bytes."""
    curves = {m: (r["epoch_end_s"], r["epoch_accuracy"]) for m, r in results.items()}
    return [
        plot_lines(
            out / "accuracy_vs_time.png",
            curves,
            "training time (s)",
            "test accuracy",
            "accuracy vs wall time",
        ),
        plot_bars(
            out / "iteration_and_traffic.png",
            [
                (
                    "time per iteration (ms)",
                    {m: r["iter_time_s"] * 1e3 for m, r in results.items()},
                ),
                (
                    "bytes on the busiest link (MB)",
                    {m: r["busiest_link_bytes"] / 1e6 for m, r in results.items()},
                ),
            ],
        ),  # fmt: skip
    ]


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    log = console.print if sys.stdout.isatty() else print
    kind = os.environ.get("SWITCH", "p4sim")
    settings = TrainSettings(epochs=args.epochs, seed=args.seed)
    out = Path(args.results)
    (out / "workers").mkdir(parents=True, exist_ok=True)  # each worker's history
    n = args.workers
    log(
        f"netreduce: s1 = {kind}, workers h1..h{n}, parameter server h{n + 1}, every link "
        f"{args.bw:g} Mbit/s, window {args.window}, K = 32 slots"
    )
    config = ExperimentConfig(star(n + 1), bw_mbps=args.bw, run_dir=RUN_DIR, log=log)
    with Experiment(config) as ex:
        log(f"netreduce: controller daemon pid {ex.daemon.pid if ex.daemon else '?'}, "
            f"API on {ex.controller_url}")  # fmt: skip
        job_id = ex.submit("mlp-digits", show=True, workers=n, window=args.window)
        results = {}
        for method in METHODS:
            log(f"--- {method}: {n} workers train the MLP on digits ({settings.epochs} epochs)")
            results[method] = train_method(ex, method, job_id, n, settings, out)
    console.print(summary(results, n, settings.target))
    keys = ("final_accuracy", "time_to_target_s", "iter_time_s", "busiest_link_bytes")
    record: dict[str, Any] = {m: {k: r[k] for k in keys} for m, r in results.items()}
    record["network"] = {
        "workers": n,
        "link_bandwidth_mbps": args.bw,
        "K": 32,
        "window": args.window,
        "switch": kind,
    }
    record["curves"] = {
        m: {"epoch_end_s": r["epoch_end_s"], "epoch_accuracy": r["epoch_accuracy"]}
        for m, r in results.items()
    }
    written = [write_record(out / "run.json", record), *plots(results, out)]
    log("wrote " + ", ".join(str(p) for p in written))
    accs = [r["final_accuracy"] for r in results.values()]
    spread = (max(accs) - min(accs)) * 100
    if spread > 0.5:
        log(f"netreduce: the accuracies differ by {spread:.2f} points (> 0.5)")
        return 1
    log(f"netreduce: the three accuracies agree within {spread:.2f} points")
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m topologies.netreduce run",
        description="switch aggregation vs parameter server vs ring, training on Mininet",
        epilog="python -m topologies.demo --basic runs the basic ping demo instead",
    )
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--bw", type=float, default=DEFAULT_BW_MBPS, help="link Mbit/s")
    ap.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    ap.add_argument("--epochs", type=int, default=TrainSettings.epochs)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--results", default="results")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        argv = argv[1:]
    args = parser().parse_args(argv)
    return main_guard("netreduce", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
