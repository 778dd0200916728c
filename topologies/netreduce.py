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

from hosts.mlp import MODELS, describe_model
from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    busiest,
    host_ip,
    main_guard,
    star,
)
from topologies.link_rate import LinkRate, link_rate
from topologies.records import plot_bars, plot_lines, table, write_record
from wire.header import AGG_SLOT_COUNTS, SLOTS

RUN_DIR = Path("run/netreduce")
METHODS = ("switch", "ps", "ring")
# The links' rate is chosen for the switch that runs the job (topologies/link_rate.py):
# p4sim (native back end, ~130,000 aggregation packets/s here) gets ~25 Mbit/s links with
# 4 workers (3.9 Mbit/s with P4SIM_BACKEND=python, ~20,000), BMv2 (~5,000) ~1 Mbit/s, so
# that on each the links set the pace and not the switch.
DEFAULT_WINDOW = 32


@dataclass
class TrainSettings:
    epochs: int = 5
    batch_size: int = 64
    lr: float = 0.1
    momentum: float = 0.9
    model: str = "small"  # hosts/mlp.py: small (2,410 parameters) or large (1.1M)
    seed: int = 0
    target: float = 0.9
    timeout: float = 1.0  # retransmission timeout: above the shaped links' queueing delay
    host_backend: str | None = None  # every method's packet loop (None: $INC_HOST_BACKEND)
    slots: int = SLOTS  # values per packet: the job's, and the parameter server's

    def args(self) -> list[str]:
        return [
            "--epochs", str(self.epochs), "--batch-size", str(self.batch_size),
            "--lr", str(self.lr), "--momentum", str(self.momentum),
            "--model", self.model, "--seed", str(self.seed),
            "--target", str(self.target), "--timeout", str(self.timeout),
            "--total-timeout", "60",
        ]  # fmt: skip


def train_method(
    ex: Experiment, method: str, job_id: int, workers: int, settings: TrainSettings, out: Path
) -> dict[str, Any]:
    """Train with ``method`` on every worker; the measured record of worker 0."""
    ps = None
    if method == "ps":
        cmd = [sys.executable, "-m", "hosts.netreduce.ps", "--workers", str(workers)]
        cmd += ["--slots", str(settings.slots)]
        cmd += [a for i in range(workers) for a in ("--worker-ip", host_ip(i + 1))]
        if settings.host_backend:
            cmd += ["--host-backend", settings.host_backend]
        ps = ex.start_service(f"h{workers + 1}", cmd, ready="parameter server on", log_name="ps")
    peers = ",".join(host_ip(i + 1) for i in range(workers))
    commands = []
    for w in range(workers):
        cmd = [sys.executable, "-m", "hosts.train", "--method", method, "--workers", str(workers)]
        cmd += ["--worker-id", str(w), "--controller", ex.controller_url, "--job-id", str(job_id)]
        cmd += ["--json", str(out / "workers" / f"{method}-w{w}.json"), *settings.args()]
        if settings.host_backend:
            cmd += ["--host-backend", settings.host_backend]
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


def summary(
    results: dict[str, dict[str, Any]],
    workers: int,
    target: float,
    rate: LinkRate | None = None,
    model: str = "small",
) -> Any:
    rows = []
    switch_iter = results.get("switch", {}).get("iter_time_s")
    for m, r in results.items():
        ttt = r["time_to_target_s"]
        rows.append(
            [
                m,
                f"{r['iter_time_s'] * 1e3:.1f} ms",
                f"{r['iter_time_s'] / switch_iter:.2f}x" if switch_iter else "-",
                "not reached" if ttt is None else f"{ttt:.2f} s",
                f"{r['final_accuracy']:.4f}",
                f"{r['busiest_link_bytes'] / 1e6:.2f} MB ({r['busiest_link']})",
            ]
        )
    columns = ["method", "iter time", "/ switch's", f"time to {target:.0%}", "final accuracy"]
    columns.append("busiest link")
    title = (
        f"NetReduce on Mininet: {workers} workers, {describe_model(model)}, same seed and "
        "hyper-parameters"
    )
    if rate is not None:
        title += f"; {rate.switch}, links {rate.mbps:g} Mbit/s"
    title += (
        "; every method's one-time set-up (process start, a first all-reduce as start "
        "barrier) outside the timed region"
    )
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


def targets() -> list[str]:
    """The switches to run the job on: ``SWITCH`` (p4sim by default); with ``SWITCH=both``
    p4sim and, where simple_switch_grpc and p4c are installed, BMv2 too."""
    import shutil

    kind = os.environ.get("SWITCH", "p4sim")
    if kind != "both":
        return [kind]
    if shutil.which("simple_switch_grpc") and shutil.which("p4c"):
        return ["p4sim", "bmv2"]
    return ["p4sim"]


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    log = console.print if sys.stdout.isatty() else print
    kinds = targets()
    if os.environ.get("SWITCH") == "both" and kinds == ["p4sim"]:
        log("netreduce: BMv2 absent (simple_switch_grpc or p4c not on PATH): p4sim only")
    records: dict[str, dict[str, Any]] = {}
    code = 0
    for kind in kinds:
        os.environ["SWITCH"] = kind  # the harness starts this target's switch
        sub = Path(args.results) / kind if len(kinds) > 1 else Path(args.results)
        record, rc = run_target(args, kind, sub, log, console)
        records[kind] = record
        code = code or rc
    if len(kinds) > 1:
        console.print(side_by_side(records))
    return code


def run_target(
    args: argparse.Namespace, kind: str, out: Path, log: Any, console: Any
) -> tuple[dict[str, Any], int]:
    settings = TrainSettings(
        epochs=args.epochs,
        seed=args.seed,
        host_backend=args.host_backend,
        model=args.model,
        slots=args.slots,
    )
    (out / "workers").mkdir(parents=True, exist_ok=True)  # each worker's history
    n = args.workers
    rate = link_rate(
        kind, n, switch_rate=args.switch_rate, fixed_mbps=args.bw, host_backend=args.host_backend
    )
    log(
        f"netreduce: s1 = {kind}, workers h1..h{n}, parameter server h{n + 1}, every link "
        f"{rate.mbps:g} Mbit/s ({rate.describe()}), window {args.window}, K = {args.slots} "
        "slots"
    )
    config = ExperimentConfig(star(n + 1), bw_mbps=rate.mbps, run_dir=RUN_DIR, log=log)
    with Experiment(config) as ex:
        log(f"netreduce: controller daemon pid {ex.daemon.pid if ex.daemon else '?'}, "
            f"API on {ex.controller_url}")  # fmt: skip
        job_id = ex.submit(
            "mlp-digits", show=True, workers=n, window=args.window, slots=settings.slots
        )
        results = {}
        for method in METHODS:
            log(
                f"--- {method}: {n} workers train the {describe_model(settings.model)} on "
                f"digits ({settings.epochs} epochs)"
            )
            results[method] = train_method(ex, method, job_id, n, settings, out)
    console.print(summary(results, n, settings.target, rate, settings.model))
    keys = ("final_accuracy", "time_to_target_s", "iter_time_s", "busiest_link_bytes")
    record: dict[str, Any] = {m: {k: r[k] for k in keys} for m, r in results.items()}
    record["network"] = {
        "workers": n,
        "link_bandwidth_mbps": rate.mbps,
        "link_rate": rate.describe(),
        "K": args.slots,
        "window": args.window,
        "switch": kind,
        "host_backend": rate.host_backend,
        "setup_timed": False,
        "model": describe_model(
            settings.model
        ),  # every method: process start and a start barrier untimed
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
        return record, 1
    log(f"netreduce: the three accuracies agree within {spread:.2f} points")
    return record, 0


def side_by_side(records: dict[str, dict[str, Any]]) -> Any:
    """One row per method, one column group per switch: iteration time and its ratio to
    the switch path's, at each switch's own link rate."""
    kinds = list(records)
    columns = ["method"]
    for k in kinds:
        net = records[k]["network"]
        columns += [f"{k} iter ({net['link_bandwidth_mbps']:g} Mbit/s)", f"{k} / switch's"]
    rows = []
    for m in METHODS:
        row = [m]
        for k in kinds:
            it = records[k][m]["iter_time_s"]
            row += [f"{it * 1e3:.1f} ms", f"{it / records[k]['switch']['iter_time_s']:.2f}x"]
        rows.append(row)
    return table("the main job on each switch, links chosen for each", columns, rows)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m topologies.netreduce run",
        description="switch aggregation vs parameter server vs ring, training on Mininet",
        epilog="python -m topologies.demo --basic runs the basic ping demo instead",
    )
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument(
        "--bw",
        type=float,
        default=None,
        help="link Mbit/s (default: chosen for the switch, topologies/link_rate.py)",
    )
    ap.add_argument(
        "--switch-rate",
        type=float,
        default=None,
        metavar="PPS",
        help="aggregation packets/s the switch sustains (e.g. measured by make bench); "
        "the links are chosen from it",
    )
    ap.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    ap.add_argument(
        "--slots",
        type=int,
        default=SLOTS,
        help="values per packet (K) for every method: "
        f"{', '.join(map(str, AGG_SLOT_COUNTS))} (the links' rate is chosen for {SLOTS})",
    )
    ap.add_argument("--epochs", type=int, default=TrainSettings.epochs)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--model",
        choices=list(MODELS),
        default="small",
        help="the digits MLP: small (2,410 parameters, round-trip-bound) or large "
        "(1,126,410, bandwidth-bound)",
    )
    ap.add_argument("--results", default="results")
    ap.add_argument(
        "--host-backend",
        choices=["native", "python"],
        default=None,
        help="every method's host packet loop: native (C) or python "
        "(default $INC_HOST_BACKEND, else native)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        argv = argv[1:]
    ap = parser()
    args = ap.parse_args(argv)
    if args.slots not in AGG_SLOT_COUNTS:
        ap.error(
            f"--slots must be one of {', '.join(map(str, AGG_SLOT_COUNTS))} (whole blocks of "
            f"{SLOTS} values), got {args.slots}"
        )
    return main_guard("netreduce", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
