"""Serene's experiment: 4 workers train the digits MLP through the switch with one straggler,
under each synchronisation mode and a dynamic policy; time to a target accuracy.

Example (root)::

    python -m topologies.serene                       # every mode, one 2x straggler
    python -m topologies.serene --modes sync,"partial 3" --iterations 100 --slow 4

Network (``topologies/experiment.py``): one switch, workers on h1..h4, the aggregation
address on h5. Per configuration a ``serene`` job is admitted (``incctl job submit --kind
serene --mode ...``) and the workers (``hosts/serene/train.py``) train for
``--iterations`` iterations, one all-reduce each (under ``bounded S`` they compute up to S
epochs ahead of their results: ``hosts/serene/ssp_client.py``; under ``async`` each gets the
switch's running aggregate back at once and waits for nobody); worker 4
(the last) straggles ``--slow``
times slower (``--straggle fixed|transient|random``). The dynamic configuration starts in
sync and runs ``--policy`` (``controller/systems/sync_policy.py``) against the switch's clocks
meanwhile, swapping modes through the daemon.

Every mode trains on the same data by default: ``--iterations`` full batches' worth of
gradients (``serene_train --same-data``), so a partial mode, whose rounds lack the late
worker's share, runs more rounds; ``--same-rounds`` runs ``--iterations`` rounds instead.

Time to accuracy is the training time (evaluation excluded) at which the first worker's
model reached ``--target`` (every worker holds the same model, except under async, where
each applies the others' gradients at its own times); final accuracy is the mean of the
last 5 evaluations (one evaluation swings by points between steps; the workers' learning
rate drops to a tenth for the last quarter of the data). It prints one table (and the
ratios against sync side by side; for the dynamic policy, each mode it swapped to and the
epoch from which it applied; under ``--straggle transient`` the straggler is slow for the
first half of the iterations) and writes ``results/serene/serene.json`` and
``results/serene/accuracy.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

from topologies.experiment import Experiment, ExperimentConfig, ExperimentError, main_guard, star
from topologies.records import plot_lines, table, write_record

RUN_DIR = Path("run/serene")
RESULTS = Path("results/serene")
WORKERS = 4
DYNAMIC = "dynamic"
FINAL = 5  # final accuracy: the mean of the last FINAL evaluations
MODES = ("sync", "partial 3", "bounded 1", "bounded 2", "bounded 4", "async", DYNAMIC)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m topologies.serene")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated; 'dynamic'")
    ap.add_argument("--policy", default="partial 3 when same slowest for 3 keep 5 else sync")
    ap.add_argument("--iterations", type=int, default=120)
    ap.add_argument("--compute", type=float, default=0.1, help="seconds per iteration")
    ap.add_argument("--eval-every", type=int, default=5, help="iterations between evaluations")
    ap.add_argument("--slow", type=float, default=2.0, help="the straggler's slow-down")
    ap.add_argument("--straggle", choices=("fixed", "transient", "random"), default="fixed")
    ap.add_argument("--target", type=float, default=0.9, help="target test accuracy")
    ap.add_argument(
        "--same-rounds",
        action="store_true",
        help="every mode runs --iterations rounds (default: --iterations full batches of "
        "data, so partial modes run more rounds; hosts/serene/train.py --same-data)",
    )
    ap.add_argument("--bw", type=float, default=None, help="link Mbit/s (default: unshaped)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    return ap


def ahead_of(mode: str) -> int:
    """Epochs a worker computes ahead of its results: the bound S of ``bounded S``, none
    otherwise (each epoch needs the last result; async's comes back at once)."""
    words = mode.split()
    return int(words[1]) if words[0] == "bounded" else 0


def run_mode(ex: Experiment, a: argparse.Namespace, mode: str, out: Path) -> dict[str, Any]:
    start_mode = "sync" if mode == DYNAMIC else mode
    job = ex.submit(
        mode.replace(" ", "-"), kind="serene", workers=WORKERS, window=64, region_size=256,
        mode=start_mode, worker_ports=list(range(1, WORKERS + 1)),
    )  # fmt: skip
    cmds = []
    for w in range(WORKERS):
        cmd = [sys.executable, "-m", "hosts.serene.train", "--controller", ex.controller_url,
               "--job-id", str(job), "--worker-id", str(w), "--iterations", str(a.iterations),
               "--compute", str(a.compute), "--eval-every", str(a.eval_every),
               "--json", str(out / f"w{w}.json")]  # fmt: skip
        cmd += ["--ahead", str(ahead_of(start_mode))]
        cmd += [] if a.same_rounds else ["--same-data"]
        if w == WORKERS - 1:
            cmd += ["--slow", str(a.slow), "--straggle", a.straggle]
            if a.straggle == "transient":
                cmd += ["--slow-from", "0", "--slow-until", str(a.iterations // 2)]
        cmds.append((f"h{w + 1}", cmd))
    changes: list[tuple[float, str, int]] = []
    done = threading.Event()
    watcher = None
    if mode == DYNAMIC:
        from controller.api_client import ControllerApi
        from controller.systems.sync_policy import Policy, watch_job

        policy, api = Policy.parse(a.policy), ControllerApi(ex.controller_url, timeout=10.0)

        def watch() -> None:
            changes.extend(watch_job(api, job, policy, 0.1, done.is_set))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    try:
        runs = ex.run_hosts(cmds, timeout=600.0)
    finally:
        done.set()
        if watcher is not None:
            watcher.join(10)
    recs = []
    for w, r in enumerate(runs):
        rec = json.loads((out / f"w{w}.json").read_text())
        if r.code != 0:
            raise ExperimentError(f"{mode}: worker {w} failed: {rec.get('error')}")
        recs.append(rec)
    sums = {rec["theta_sum"] for rec in recs}
    ex.api.cancel(job)
    return summarise(mode, recs, a.target, changes, identical=len(sums) == 1)


def summarise(
    mode: str, recs: list[dict[str, Any]], target: float, changes: list[Any], identical: bool
) -> dict[str, Any]:
    evals = recs[0]["evals"]  # worker 0, never the straggler; every replica is the same
    tta = next((e["time_s"] for e in evals if e["accuracy"] >= target), None)
    return {
        "mode": mode,
        "time_to_target_s": tta,
        # The mean of the last evaluations: one evaluation swings by points between steps.
        "final_accuracy": sum(e["accuracy"] for e in evals[-FINAL:]) / len(evals[-FINAL:]),
        "last_accuracy": evals[-1]["accuracy"],
        "rounds": evals[-1]["iteration"],
        "total_time_s": max(r["evals"][-1]["time_s"] for r in recs),
        "waiting_s": [round(r["comm_s"], 3) for r in recs],
        "late_rounds": [r["late_rounds"] for r in recs],
        "skips": [r["skips"] for r in recs],
        "waits": [r["waits"] for r in recs],
        "replicas_identical": identical,
        "mode_changes": changes,
        "curve": [(e["time_s"], e["accuracy"]) for e in evals],
    }


def report(rows: list[dict[str, Any]], a: argparse.Namespace) -> Any:
    base = next((r for r in rows if r["mode"] == "sync"), None)
    cols = ["mode", "time to target (s)", "vs sync", "final acc", "vs sync (pt)", "rounds",
            "train (s)", "waiting per worker (s)", "late rounds", "same model",
            "mode changes (from epoch)"]  # fmt: skip
    out = []
    for r in rows:
        tta = r["time_to_target_s"]
        ratio = "-"
        if base is not None and tta is not None and base["time_to_target_s"]:
            ratio = f"{(1 - tta / base['time_to_target_s']) * 100:+.0f}% sooner"
        dacc = (
            "-" if base is None else f"{(r['final_accuracy'] - base['final_accuracy']) * 100:+.1f}"
        )
        out.append([
            r["mode"], "not reached" if tta is None else f"{tta:.1f}", ratio,
            f"{r['final_accuracy']:.3f}", dacc, str(r["rounds"]), f"{r['total_time_s']:.1f}",
            " ".join(f"{w:.1f}" for w in r["waiting_s"]),
            str(sum(r["late_rounds"])), "yes" if r["replicas_identical"] else "NO",
            ", ".join(f"{m} ({b})" for _, m, b in r["mode_changes"]) or "-",
        ])  # fmt: skip
    title = (f"Serene: 4 workers, worker 4 {a.slow:g}x slower ({a.straggle}), "
             f"target accuracy {a.target:g}, {a.iterations} "
             + ("rounds" if a.same_rounds else "batches of data"))  # fmt: skip
    return table(title, cols, out)


def run_all(a: argparse.Namespace, log: Any = print) -> list[dict[str, Any]]:
    """Every configuration of ``a.modes`` on one network; writes the record and the plot."""
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    cfg = ExperimentConfig(star(WORKERS + 1), bw_mbps=a.bw, run_dir=RUN_DIR, log=log)
    rows = []
    with Experiment(cfg) as ex:
        for mode in modes:
            out = RUN_DIR / mode.replace(" ", "-")
            out.mkdir(parents=True, exist_ok=True)
            log(f"serene: training under {mode} ...")
            rows.append(run_mode(ex, a, mode, out))
    record = {"settings": vars(a) | {"out": str(a.out)}, "runs": rows}
    write_record(a.out / "serene.json", record)
    curves = {r["mode"]: tuple(zip(*r["curve"], strict=True)) for r in rows}
    plot_lines(a.out / "accuracy.png", curves, "training time (s)", "test accuracy")  # type: ignore[arg-type]
    return rows


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)

    def run() -> int:
        from rich.console import Console

        console = Console(width=170)
        rows = run_all(a, console.print)
        console.print(report(rows, a))
        console.print(f"wrote {a.out / 'serene.json'} and {a.out / 'accuracy.png'}")
        return 0

    return main_guard("topologies.serene", run)


if __name__ == "__main__":
    sys.exit(main())
