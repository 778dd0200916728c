"""Deadline jobs arriving over time on one switch with a small memory pool: measured job
completion times next to the simulator's prediction for the same arrivals.

Example (root)::

    python -m topologies.scheduling run                     # EDF, then FIFO, same trace
    python -m topologies.scheduling run --jobs 4 --policies edf --pool 8 --bw 1

Network (``topologies/experiment.py``): one switch ``s1``, two worker hosts per job on
links shaped to ``--bw`` Mbit/s. The daemon runs with ``--policy`` and a pool of ``--pool``
aggregators. A seeded trace of ``--jobs`` training jobs (``trace``: Poisson arrivals,
MD or BE, gradient sizes, epochs, compute time, MD deadlines of ``slack x`` the time alone
at line rate) is played: at each arrival the job is submitted with ``incctl job submit
--class ...`` and its workers (``hosts/scheduled_job.py``) start; they ask for each
epoch's region, compute, all-reduce through the switch and check every sum bit for bit,
while the scheduler resizes, moves and pauses regions as jobs come and go.

The job completion time (JCT) is measured by the daemon, from submission to the last
worker's done. The prediction runs ``controller.sched_sim`` (the same scheduler and memory
manager) on the same trace with the path measured in the run: the median of the RTTs the
workers reported, and the line rate of the links (``--bw`` x 128 / 194, the share of a
frame that is values). It prints one table per policy (measured and predicted JCT, the
error, deadline met) and writes ``results/scheduling.json`` and
``results/scheduling_jct.png``.
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
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller.sched_sim import TraceJob, simulate
from controller.sizing import Network, Profile, job_time, memory_for
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
        jcts[i] = {
            "jct": f["jct"],
            "met": f["met"],
            "inexact": sum(w.get("mismatches", 0) for w in p["workers"]),
            "regions": sorted(
                {tuple(e["region"]) for w in p["workers"] for e in w.get("epochs", [])}
            ),
        }
        rtts += [e["rtt_s"] for w in p["workers"] for e in w.get("epochs", []) if e["rtt_s"]]
    return {"jobs": jcts, "rtt_samples": rtts, "drops": drops}


def predict(
    jobs: list[TraceJob], policy: str, pool: int, net: Network, quantum: float
) -> dict[int, float]:
    o = simulate(jobs, policy, pool=pool, net=net, quantum=quantum)
    return {f.job_id - 1: f.jct for f in o.jobs}


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
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
        predicted = predict(jobs, policy, args.pool, net, args.quantum)
        rows, errs = [], []
        for i, tj in enumerate(jobs):
            m, p = measured["jobs"][i]["jct"], predicted[i]
            errs.append(abs(m - p) / p)
            met = measured["jobs"][i]["met"]
            rows.append(
                [
                    f"{i} {tj.job_class} {tj.model}",
                    f"{tj.arrival:.1f} s",
                    "-" if tj.deadline_s is None else f"{tj.deadline_s:.1f} s",
                    f"{m:.1f} s",
                    f"{p:.1f} s",
                    f"{100 * (m - p) / p:+.0f} %",
                    {None: "-", True: "yes", False: "no"}[met],
                    str(len(measured["jobs"][i]["regions"])),
                    str(measured["jobs"][i]["inexact"]),
                ]
            )
            if measured["jobs"][i]["inexact"]:
                code = 1
        md = [measured["jobs"][i]["met"] for i, tj in enumerate(jobs) if tj.job_class == "md"]
        summary = {
            "deadlines_met": sum(1 for x in md if x),
            "md_jobs": len(md),
            "avg_jct": statistics.fmean(j["jct"] for j in measured["jobs"].values()),
            "avg_predicted_jct": statistics.fmean(predicted.values()),
            "mean_abs_error": statistics.fmean(errs),
            "max_abs_error": max(errs),
            "rtt_s": rtt,
        }
        console.print(
            table(
                f"{policy}: measured JCT vs simulator (RTT {rtt * 1e3:.2f} ms measured), deadlines"
                f" met {summary['deadlines_met']}/{len(md)}, mean |error|"
                f" {100 * summary['mean_abs_error']:.0f} %",
                [
                    "job",
                    "arrival",
                    "deadline",
                    "JCT",
                    "predicted",
                    "error",
                    "met",
                    "regions",
                    "inexact epochs",
                ],
                rows,
            )
        )
        record["policies"][policy] = {
            "summary": summary,
            "jobs": measured["jobs"],
            "predicted": predicted,
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
    r.add_argument("--pool", type=int, default=8, help="aggregators the daemon may hand out")
    r.add_argument("--bw", type=float, default=1.0, help="link Mbit/s")
    r.add_argument("--rtt-ms", type=float, default=6.0, help="RTT assumed until measured")
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
