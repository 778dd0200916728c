"""Deadline jobs arriving over time on one switch with a small memory pool: measured job
completion times next to the simulator's prediction for the same arrivals.

Example (root)::

    python -m topologies.scheduling run                     # EDF, then FIFO, same trace
    python -m topologies.scheduling run --jobs 4 --policies edf,rr --pool 3 --bw 1

Network (``topologies/experiment.py``): one switch ``s1``, two worker hosts per job on
links shaped to ``--bw`` Mbit/s. The daemon runs with ``--policy`` and a small pool of
``--pool`` aggregators (2: with the sub-millisecond RTT of p4sim and 1 Mbit/s links one
aggregator already carries a job at line rate, so two jobs run at a time and the others
wait). A seeded trace of ``--jobs`` training jobs (``trace``: Poisson arrivals, MD or BE,
gradient sizes, epochs, compute time, MD deadlines of ``slack x`` the time alone at line
rate) is played: at each arrival the job is submitted with ``incctl job submit --class
...`` and its workers (``hosts/scheduled_job.py``) start; they ask for each epoch's region,
compute, all-reduce through the switch and check every sum bit for bit, while the
scheduler resizes, moves and pauses regions as jobs come and go.

The job completion time (JCT) is measured by the daemon, from submission to the last
worker's done. Two predictions run ``controller.sched.sched_sim`` (the same scheduler and memory
manager) on the same arrivals, each job with the RTT its own workers measured (median of
their reports): *model* with the links' line rate (``--bw`` x 128 / 194, the share of a
frame that is values), *predicted* with the all-reduce rate each job achieved (p4sim, a
Python switch on a shared machine, may deliver less than the links carry; the model has no
term for that). The stated tolerance (``TOLERANCE``) applies to *predicted*;
docs/architecture.md ("Scheduling on Mininet") explains what the residual is. It prints one
table per policy and writes ``results/scheduling.json`` and ``results/scheduling_jct.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from controller.jobs.sizing import Network, Profile, job_time, memory_for
from controller.sched.sched_sim import TraceJob, simulate
from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    host_ip,
    host_mac,
    main_guard,
    star,
)
from topologies.records import plot_bars, table, write_record

RUN_DIR = Path("run/scheduling")
FRAME_BYTES = 14 + 20 + 8 + 24 + 128  # Ethernet, IPv4, UDP, INC header, 32 values
VALUE_SHARE = 128 / FRAME_BYTES
MODELS = {"small": 24 * 1024, "medium": 48 * 1024, "large": 96 * 1024}  # bytes per epoch
# A measured JCT agrees with the simulator's when it is within 10 % of it, or 1.5 s for
# short jobs: what the model leaves out (docs/architecture.md, "Scheduling on Mininet").
TOLERANCE = (0.10, 1.5)


def line_rate(bw_mbps: float) -> float:
    """Bytes of values per second one worker's link carries."""
    return bw_mbps * 1e6 / 8 * VALUE_SHARE


def trace(
    n: int,
    seed: int,
    net: Network,
    pool: int,
    mean_gap_s: float,
    slack: tuple[float, float] = (1.3, 2.5),
) -> list[TraceJob]:
    """``n`` jobs, every other one MD, Poisson arrivals ``mean_gap_s`` apart on average."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        model = rng.choice(sorted(MODELS))
        nbytes, epochs = MODELS[model], rng.randint(12, 24)
        compute = rng.choice((0.05, 0.1, 0.2))
        alone = job_time(Profile(epochs, nbytes, compute), net.line_rate)
        md = i % 2 == 1
        deadline = round(rng.uniform(*slack) * alone, 1) if md else None
        out.append(
            TraceJob(round(t, 2), "md" if md else "be", model, nbytes, compute, epochs, deadline)
        )
        t += rng.expovariate(1 / mean_gap_s)
    return out


def play(ex: Experiment, jobs: list[TraceJob], out: Path, seed: int) -> dict[int, dict[str, Any]]:
    """Submit each job at its arrival time and run its two workers; per trace index, the
    job id, the workers' records and the daemon's view of its end."""
    started = time.monotonic()
    result: dict[int, dict[str, Any]] = {}
    errors: list[str] = []

    agg = len(jobs) * 2 + 1  # the last host: the address workers send to (never reached)

    def one(i: int, tj: TraceJob) -> None:
        time.sleep(max(0.0, started + tj.arrival - time.monotonic()))
        hosts = [2 * i + 1, 2 * i + 2]
        fields: dict[str, Any] = {
            "workers": 2,
            "worker_ports": hosts,
            "worker_ips": [host_ip(h) for h in hosts],
            "worker_macs": [host_mac(h) for h in hosts],
            "agg_ip": host_ip(agg),
            "agg_mac": host_mac(agg),
            "class": tj.job_class,
            "epochs": tj.epochs,
            "model_bytes": tj.model_bytes,
            "compute_ms": round(tj.compute_s * 1e3, 3),
        }
        if tj.deadline_s is not None:
            fields["deadline"] = f"{tj.deadline_s}s"
        job_id = ex.submit(f"{tj.job_class}-{tj.model}-{i}", **fields)
        procs = []
        for w in range(2):
            rec = out / f"job{job_id}-w{w}.json"
            cmd = [
                sys.executable,
                "-m",
                "hosts.scheduled_job",
                "--controller",
                ex.controller_url,
                "--job-id",
                str(job_id),
                "--worker-id",
                str(w),
                "--seed",
                str(seed),
                "--out",
                str(rec),
            ]
            log = open(out / f"job{job_id}-w{w}.log", "wb")  # noqa: SIM115 (closed below)
            procs.append((ex.popen(f"h{hosts[w]}", cmd, stdout=log), rec))
            log.close()  # the child holds its own descriptor
        records = []
        for p, rec in procs:
            code = p.wait()
            records.append(json.loads(rec.read_text()) if rec.exists() else {"error": "no record"})
            if code != 0:
                errors.append(f"job {job_id} worker: {records[-1].get('error', code)}")
        result[i] = {"job_id": job_id, "workers": records}

    threads = [threading.Thread(target=one, args=(i, tj), daemon=True) for i, tj in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise ExperimentError("; ".join(errors))
    return result


def run_policy(
    args: argparse.Namespace, policy: str, jobs: list[TraceJob], net: Network, out: Path, log: Any
) -> dict[str, Any]:
    n_hosts = 2 * len(jobs) + 1
    daemon_args = (
        "--policy",
        policy,
        "--pool-size",
        str(args.pool),
        "--quantum",
        str(args.quantum),
        "--rtt-ms",
        str(net.rtt_s * 1e3),
        "--line-mbps",
        str(net.line_rate * 8 / 1e6),
    )
    config = ExperimentConfig(
        star(n_hosts), bw_mbps=args.bw, run_dir=RUN_DIR / policy, daemon_args=daemon_args, log=log
    )
    (out / policy).mkdir(parents=True, exist_ok=True)
    with Experiment(config) as ex:
        log(f"scheduling: policy {policy}, pool {args.pool} aggregators, {len(jobs)} jobs")
        played = play(ex, jobs, out / policy, args.seed)
        finished = {f["job_id"]: f for f in ex.api.schedule()["finished"]}
        drops = ex.drop_counters()
    jcts, rtts = {}, []
    for i, p in played.items():
        f = finished[p["job_id"]]
        mine = [e["rtt_s"] for w in p["workers"] for e in w.get("epochs", []) if e["rtt_s"]]
        starts = [w["start"] for w in p["workers"] if "start" in w]
        jcts[i] = {
            "jct": f["jct"],
            "met": f["met"],
            "inexact": sum(w.get("mismatches", 0) for w in p["workers"]),
            "regions": sorted(
                {tuple(e["region"]) for w in p["workers"] for e in w.get("epochs", [])}
            ),
            "rtt_s": statistics.median(mine) if mine else None,
            # submission to the last worker's first request: process start, not scheduling
            "startup_s": max(starts) - f["submitted"] if starts else None,
            "paused_s": max(
                (sum(e["wait_s"] for e in w.get("epochs", [])) for w in p["workers"]),
                default=0.0,
            ),
        }
        jcts[i]["rate"] = achieved_rate(jobs[i], p["workers"])
        rtts += mine
    return {"jobs": jcts, "rtt_samples": rtts, "drops": drops}


def achieved_rate(tj: TraceJob, workers: list[dict[str, Any]]) -> float | None:
    """Bytes/s of values the job's all-reduces moved (its slowest worker's view)."""
    rates = []
    for w in workers:
        epochs = w.get("epochs", [])
        busy = sum(e["allreduce_s"] for e in epochs)
        if epochs and busy > 0:
            rates.append(len(epochs) * tj.profile.wire_bytes / busy)
    return min(rates) if rates else None


def predict(
    jobs: list[TraceJob],
    policy: str,
    pool: int,
    net: Network,
    quantum: float,
    rtts: dict[int, float | None],
    rates: dict[int, float | None] | None = None,
) -> dict[int, float]:
    """The simulator's JCTs for the same arrivals, each job with the RTT its own workers
    measured (``rtts``, by trace index; None: ``net``'s) and, given ``rates``, the
    all-reduce rate it achieved as its line rate."""
    mine = [
        replace(tj, rtt_s=rtts.get(i) or tj.rtt_s, line_rate=(rates or {}).get(i) or tj.line_rate)
        for i, tj in enumerate(jobs)
    ]
    o = simulate(mine, policy, pool=pool, net=net, quantum=quantum)
    return {f.job_id - 1: f.jct for f in o.jobs}


def predicted_met(jobs: list[TraceJob], predicted: dict[int, float]) -> dict[int, bool | None]:
    return {
        i: None if tj.deadline_s is None else predicted[i] <= tj.deadline_s + 1e-6
        for i, tj in enumerate(jobs)
    }


def within(measured: float, predicted: float) -> bool:
    """The stated tolerance (``TOLERANCE``): relative, or absolute for short jobs."""
    rel, abs_s = TOLERANCE
    return abs(measured - predicted) <= max(rel * predicted, abs_s)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console() if sys.stdout.isatty() else Console(width=160)
    log = console.print if sys.stdout.isatty() else print
    out = Path(args.results)
    guess = Network(rtt_s=args.rtt_ms / 1e3, line_rate=line_rate(args.bw))
    jobs = trace(args.jobs, args.seed, guess, args.pool, args.gap)
    want = memory_for(guess.line_rate, guess.rtt_s)
    log(
        f"scheduling: {args.jobs} jobs, links {args.bw:g} Mbit/s (line rate"
        f" {guess.line_rate / 1e3:.1f} kB/s of values), pool {args.pool}, {want} aggregators"
        f" per job at line rate with the assumed {args.rtt_ms:g} ms RTT"
    )
    record: dict[str, Any] = {
        "trace": [asdict(j) for j in jobs],
        "bw_mbps": args.bw,
        "pool": args.pool,
        "policies": {},
    }
    code = 0
    for policy in args.policies:
        measured = run_policy(args, policy, jobs, guess, out, log)
        rtt = statistics.median(measured["rtt_samples"]) if measured["rtt_samples"] else guess.rtt_s
        net = Network(rtt_s=rtt, line_rate=guess.line_rate)
        per_job = {i: j["rtt_s"] for i, j in measured["jobs"].items()}
        rates = {i: j["rate"] for i, j in measured["jobs"].items()}
        model = predict(jobs, policy, args.pool, net, args.quantum, per_job)
        predicted = predict(jobs, policy, args.pool, net, args.quantum, per_job, rates)
        met_model = predicted_met(jobs, predicted)
        rows, errs, ok = [], [], 0
        for i, tj in enumerate(jobs):
            mj = measured["jobs"][i]
            m, p = mj["jct"], predicted[i]
            errs.append(abs(m - p) / p)
            ok += within(m, p)
            rows.append(
                [
                    f"{i} {tj.job_class} {tj.model}",
                    f"{tj.arrival:.1f}",
                    "-" if tj.deadline_s is None else f"{tj.deadline_s:.1f}",
                    "-" if mj["rtt_s"] is None else f"{mj['rtt_s'] * 1e3:.2f}",
                    "-" if mj["rate"] is None else f"{mj['rate'] / 1e3:.1f}",
                    f"{m:.1f}",
                    f"{model[i]:.1f}",
                    f"{p:.1f}",
                    f"{m - p:+.1f} ({100 * (m - p) / p:+.0f} %)",
                    "yes" if within(m, p) else "NO",
                    "-" if mj["startup_s"] is None else f"{mj['startup_s']:.1f}",
                    {None: "-", True: "yes", False: "no"}[mj["met"]]
                    + {None: "", True: " (yes)", False: " (no)"}[met_model[i]],
                    str(len(mj["regions"])),
                    str(mj["inexact"]),
                ]
            )
            if mj["inexact"]:
                code = 1
        md = [measured["jobs"][i]["met"] for i, tj in enumerate(jobs) if tj.job_class == "md"]
        summary = {
            "deadlines_met": sum(1 for x in md if x),
            "deadlines_met_predicted": sum(1 for x in met_model.values() if x),
            "md_jobs": len(md),
            "avg_jct": statistics.fmean(j["jct"] for j in measured["jobs"].values()),
            "avg_predicted_jct": statistics.fmean(predicted.values()),
            "avg_model_jct": statistics.fmean(model.values()),
            "mean_abs_error": statistics.fmean(errs),
            "max_abs_error": max(errs),
            "within_tolerance": ok,
            "tolerance": {"relative": TOLERANCE[0], "seconds": TOLERANCE[1]},
            "rtt_s": rtt,
            "line_rate": guess.line_rate,
        }
        console.print(
            table(
                f"{policy}: measured JCT vs the simulator's (seconds), {ok}/{len(jobs)} within"
                f" {100 * TOLERANCE[0]:g} % or {TOLERANCE[1]:g} s; deadlines met"
                f" {summary['deadlines_met']}/{len(md)} (predicted"
                f" {summary['deadlines_met_predicted']}); mean |error| "
                f"{100 * summary['mean_abs_error']:.0f} %. model: each job's measured RTT and"
                f" the links' {guess.line_rate / 1e3:.1f} kB/s; predicted: its measured RTT and"
                " all-reduce rate",
                [
                    "job",
                    "arrival",
                    "deadline",
                    "RTT ms",
                    "kB/s",
                    "JCT",
                    "model",
                    "predicted",
                    "error",
                    "within",
                    "start-up",
                    "met (pred.)",
                    "regions",
                    "inexact",
                ],
                rows,
            )
        )
        record["policies"][policy] = {
            "summary": summary,
            "jobs": measured["jobs"],
            "predicted": predicted,
            "model": model,
            "drops": measured["drops"],
        }
    written = [write_record(out / "scheduling.json", record)]
    bars = [
        (
            f"JCT {p} (s)",
            {
                f"{i}{k}": v
                for i, j in r["jobs"].items()
                for k, v in (("m", j["jct"]), ("p", r["predicted"][i]))
            },
        )
        for p, r in record["policies"].items()
    ]
    written.append(plot_bars(out / "scheduling_jct.png", bars))
    log("wrote " + ", ".join(str(p) for p in written) + " (bars: m measured, p predicted)")
    return code


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m topologies.scheduling", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="play the trace on Mininet under each policy")
    r.add_argument("--jobs", type=int, default=5, help="jobs in the trace (5)")
    r.add_argument("--policies", type=lambda s: s.split(","), default=["edf", "fifo"])
    r.add_argument("--pool", type=int, default=2, help="aggregators the daemon may hand out")
    r.add_argument("--bw", type=float, default=1.0, help="link Mbit/s")
    r.add_argument("--rtt-ms", type=float, default=0.5, help="RTT assumed until measured")
    r.add_argument("--gap", type=float, default=8.0, help="mean seconds between arrivals")
    r.add_argument("--quantum", type=float, default=10.0, help="RR/MLFQ seconds")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--results", default="results")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.jobs < 1 or args.pool < 1 or not args.bw > 0 or not math.isfinite(args.bw):
        print("scheduling: --jobs, --pool and --bw must be positive", file=sys.stderr)
        return 2
    return main_guard("scheduling", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
