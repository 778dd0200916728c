"""Trace-driven simulator of switch memory scheduling: EDF against FIFO, RR and MLFQ.

Example::

    python -m controller.sched.sched_sim                      # 6 loads x 4 policies, 3 seeds
    python -m controller.sched.sched_sim --jobs 100 --loads 0.8 --seeds 1 --out /tmp/sim
    python -m controller.sched.sched_sim --trace run/trace.json --pool 12 --rtt-ms 8 ...

It drives the controller's own ``Scheduler`` and ``MemoryManager`` (the code the daemon
runs, not a copy) with simulated time: jobs arrive, the scheduler re-plans at every event
(arrival, completion, end of a quantum, a switch-over at an epoch boundary), and each job
then advances at the rate the seed's model gives for the memory it holds
(``controller/jobs/sizing.py``: ``Time_job = Epochs x (Time_comp + Size_model / Throughput)``,
``Throughput = Memory / RTT`` up to the line rate). A job with no memory waits. A job whose
region changes in the middle of an epoch finishes that epoch at its old speed in its old
memory, which is released at the boundary, as the daemon's switch-over does
(``controller/sched/switchover.py``). A trace may give each job its own RTT and line rate
(``TraceJob.rtt_s``, ``line_rate``: e.g. measured on Mininet by ``topologies/scheduling.py``).

Workload (``poisson_trace``): Poisson arrivals; models drawn from real networks
(``MODELS``: parameter counts of ResNet-50, ResNet-101, VGG-16 and BERT-base, float32
gradients, with an assumed compute time per iteration); iterations log-uniform; a share
of the jobs are MD with a deadline of ``slack x`` their time alone at line rate. The load
is the offered work over the pool's capacity: ``rate x E[time at line rate] / (pool /
memory per job at line rate)``.

It prints, per load and policy, the share of MD deadlines met and the average job
completion time (JCT), with EDF's ratios to the best baseline, and writes
``OUT/sched_sim.json`` and ``OUT/sched_sim.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from controller.jobs.memory_manager import MemoryManager
from controller.jobs.sizing import Network, Profile, epoch_time, job_time, memory_for
from controller.sched.policies import DEFAULT_QUANTUM, POLICIES, make_policy
from controller.sched.scheduler import JobClass, SchedJob, Scheduler
from wire.header import AGG_POOL_SIZE

# name: (parameters, assumed compute seconds per iteration on one GPU)
MODELS: dict[str, tuple[int, float]] = {
    "resnet50": (25_557_032, 0.18),
    "resnet101": (44_549_160, 0.30),
    "vgg16": (138_357_544, 0.30),
    "bert-base": (109_482_240, 0.25),
}
DEFAULT_NET = Network(rtt_s=40e-6, line_rate=100e9 / 8)  # 100 Gbit/s links, 40 us RTT
BASELINES = ("fifo", "rr", "mlfq")


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace: when it arrives and what it declares."""

    arrival: float
    job_class: str  # "md" or "be"
    model: str
    model_bytes: int
    compute_s: float
    epochs: int
    deadline_s: float | None = None  # relative to arrival (MD only)
    rtt_s: float | None = None  # the job's own round-trip time (None: the network's)
    line_rate: float | None = None  # the job's own bytes/s at most (None: the network's)

    @property
    def profile(self) -> Profile:
        return Profile(self.epochs, self.model_bytes, self.compute_s)


def poisson_trace(
    n: int,
    load: float,
    seed: int = 1,
    md_share: float = 0.5,
    pool: int = AGG_POOL_SIZE,
    net: Network = DEFAULT_NET,
    epochs: tuple[int, int] = (200, 4000),
    slack: tuple[float, float] = (1.2, 3.0),
) -> list[TraceJob]:
    """``n`` jobs arriving as a Poisson process at ``load`` (offered work / pool capacity)."""
    if n <= 0 or load <= 0:
        raise ValueError("need n > 0 and load > 0")
    rng = random.Random(seed)
    shapes = []
    for _ in range(n):
        model = rng.choice(sorted(MODELS))
        params, compute = MODELS[model]
        iters = round(math.exp(rng.uniform(math.log(epochs[0]), math.log(epochs[1]))))
        shapes.append((model, params * 4, compute, iters, rng.random() < md_share))
    full = [job_time(Profile(it, b, c), net.line_rate) for _, b, c, it, _ in shapes]
    slots = pool / memory_for(net.line_rate, net.rtt_s)  # jobs that fit at line rate
    rate = load * slots / statistics.fmean(full)  # arrivals per second
    out, t = [], 0.0
    for (model, nbytes, compute, iters, md), alone in zip(shapes, full, strict=True):
        t += rng.expovariate(rate)
        deadline = rng.uniform(*slack) * alone if md else None
        out.append(
            TraceJob(round(t, 6), "md" if md else "be", model, nbytes, compute, iters, deadline)
        )
    return out


@dataclass
class Finished:
    job_id: int
    job_class: str
    arrival: float
    finish: float
    deadline: float | None

    @property
    def jct(self) -> float:
        return self.finish - self.arrival

    @property
    def met(self) -> bool | None:
        return None if self.deadline is None else self.finish <= self.deadline + 1e-6


@dataclass
class Outcome:
    policy: str
    jobs: list[Finished] = field(default_factory=list)
    replans: int = 0
    planned_area: float = 0.0  # integral of planned aggregators over time
    granted_area: float = 0.0  # integral of granted aggregators over time

    @property
    def deadline_ratio(self) -> float:
        md = [j for j in self.jobs if j.deadline is not None]
        return sum(1 for j in md if j.met) / len(md) if md else 1.0

    @property
    def avg_jct(self) -> float:
        return statistics.fmean(j.jct for j in self.jobs)

    def avg_jct_of(self, job_class: str) -> float:
        xs = [j.jct for j in self.jobs if j.job_class == job_class]
        return statistics.fmean(xs) if xs else math.nan

    def summary(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "jobs": len(self.jobs),
            "deadline_ratio": self.deadline_ratio,
            "avg_jct": self.avg_jct,
            "avg_jct_md": self.avg_jct_of("md"),
            "avg_jct_be": self.avg_jct_of("be"),
            "replans": self.replans,
            "granted_over_planned": self.granted_area / self.planned_area
            if self.planned_area
            else 1.0,
        }


@dataclass
class _Pending:
    """A job whose region changed mid-epoch: it finishes the epoch under the old layout."""

    boundary: float  # epochs_done at which the new region takes effect
    rate: float  # bytes/s under the old region until then
    memory: int  # aggregators of the old region


def simulate(
    trace: Sequence[TraceJob],
    policy: str,
    pool: int = AGG_POOL_SIZE,
    net: Network = DEFAULT_NET,
    quantum: float = DEFAULT_QUANTUM,
    switchover: bool = True,
) -> Outcome:
    """Run ``trace`` under ``policy``.

    ``switchover`` (the daemon's behaviour, ``controller/sched/switchover.py``): a region that
    changes while a job is inside an epoch takes effect at the job's next epoch boundary;
    until then the job runs at its old speed and its old memory stays held, and is released
    at that boundary. A job waiting at a boundary (paused, or new) switches at once.
    Without it, every change takes effect at once."""
    sched = Scheduler(make_policy(policy, quantum), MemoryManager(pool))
    out = Outcome(policy)
    arrivals = sorted(enumerate(trace), key=lambda x: (x[1].arrival, x[0]))
    pending: dict[int, _Pending] = {}
    now, i, idle = 0.0, 0, 0

    def rate_now(job: SchedJob) -> float:
        p = pending.get(job.job_id)
        return job.rate() if p is None else p.rate

    def to_boundary(job: SchedJob) -> float:
        p = pending[job.job_id]
        return (p.boundary - job.epochs_done) * epoch_time(job.profile, p.rate)

    def to_finish(job: SchedJob) -> float:
        p = pending.get(job.job_id)
        if p is None:
            return job.time_left()
        if p.boundary >= job.profile.epochs:
            return job_time(job.profile, p.rate, job.epochs_left)
        return to_boundary(job) + job_time(job.profile, job.rate(), job.profile.epochs - p.boundary)

    while i < len(arrivals) or sched.jobs:
        jobs = list(sched.jobs.values())
        running = [j for j in jobs if rate_now(j) > 0]
        t_fin = min((now + to_finish(j) for j in running), default=math.inf)
        t_arr = arrivals[i][1].arrival if i < len(arrivals) else math.inf
        t_bound = min((now + to_boundary(sched.jobs[jid]) for jid in pending), default=math.inf)
        t_dec = sched.next_decision(now)
        t = min(t_fin, t_arr, t_bound, t_dec or math.inf)
        if math.isinf(t):
            raise RuntimeError(f"{policy}: jobs {sorted(sched.jobs)} wait for memory forever")
        idle = idle + 1 if t <= now else 0
        if idle > 1000:
            raise RuntimeError(f"{policy}: simulated time stands still at {now}")
        t = max(t, now)
        planned = sum(min(sched.planned.get(j, 0), sched.jobs[j].want()) for j in sched.jobs)
        out.planned_area += planned * (t - now)
        out.granted_area += sum(
            pending[j.job_id].memory if j.job_id in pending else j.memory for j in running
        ) * (t - now)
        for job in running:
            p = pending.get(job.job_id)
            if now + to_finish(job) <= t * (1 + 1e-12):
                job.epochs_done = float(job.profile.epochs)
            elif p is not None and now + to_boundary(job) <= t * (1 + 1e-12):
                job.epochs_done = p.boundary
            else:
                job.epochs_done += (t - now) / epoch_time(job.profile, rate_now(job))
        now = t
        sched.advance(now)
        for job in [j for j in sched.jobs.values() if j.finished]:
            out.jobs.append(
                Finished(job.job_id, job.job_class.value, job.arrival, now, job.deadline)
            )
            pending.pop(job.job_id, None)
            sched.remove(job.job_id)
        while i < len(arrivals) and arrivals[i][1].arrival <= now:
            jid, tj = arrivals[i]
            sched.add(_sched_job(jid + 1, tj, net))
            i += 1
        for jid in [jid for jid, p in pending.items() if sched.jobs[jid].epochs_done >= p.boundary]:
            del pending[jid]
            sched.memory.release(jid)
        for _ in range(16):  # as the daemon: again while a change freed memory at once
            out.replans += 1
            if not _replan(sched, now, pending, switchover, rate_now, to_boundary):
                break
    out.jobs.sort(key=lambda f: f.job_id)
    return out


def _replan(
    sched: Scheduler,
    now: float,
    pending: dict[int, _Pending],
    switchover: bool,
    rate_now: Callable[[SchedJob], float],
    to_boundary: Callable[[SchedJob], float],
) -> bool:
    """One re-plan; a change that waits for the job's epoch boundary becomes pending, the
    others take effect now. True when memory was released at once (re-plan again)."""
    before = {j.job_id: (rate_now(j), j.memory) for j in sched.jobs.values()}
    for job in sched.jobs.values():  # what a change now still runs under the old layout
        rate = before[job.job_id][0]
        left = math.ceil(job.epochs_done - 1e-9) - job.epochs_done
        if job.job_id in pending:
            job.to_boundary = (pending[job.job_id].boundary - job.epochs_done, to_boundary(job))
        elif switchover and rate > 0 and left > 1e-9:
            job.to_boundary = (left, left * epoch_time(job.profile, rate))
        else:
            job.to_boundary = (0.0, 0.0)
    freed = False
    for c in sched.replan(now):
        job = sched.jobs[c.job_id]
        rate, memory = before[c.job_id]
        if switchover and c.old is not None and rate > 0 and job.to_boundary[0] > 0:
            if c.job_id not in pending:  # a second change keeps the first boundary
                boundary = float(math.ceil(job.epochs_done - 1e-9))
                pending[c.job_id] = _Pending(boundary, rate, memory)
        elif c.job_id not in pending:
            freed = bool(sched.memory.release(c.job_id)) or freed
    return freed


def _sched_job(job_id: int, tj: TraceJob, net: Network) -> SchedJob:
    md = tj.job_class == "md"
    return SchedJob(
        job_id=job_id,
        job_class=JobClass.MD if md else JobClass.BE,
        profile=tj.profile,
        arrival=tj.arrival,
        network=replace(
            net,
            rtt_s=net.rtt_s if tj.rtt_s is None else tj.rtt_s,
            line_rate=net.line_rate if tj.line_rate is None else tj.line_rate,
        ),
        rtt_measured=tj.rtt_s is not None,
        deadline=tj.arrival + tj.deadline_s if md and tj.deadline_s is not None else None,
    )


# ------------------------------------------------------------------------ experiment


@dataclass(frozen=True)
class SweepConfig:
    jobs: int = 300
    loads: tuple[float, ...] = (0.4, 0.6, 0.8, 1.0, 1.2, 1.4)
    seeds: tuple[int, ...] = (1, 2, 3)
    policies: tuple[str, ...] = ("edf", *BASELINES)
    pool: int = AGG_POOL_SIZE
    net: Network = DEFAULT_NET
    quantum: float = DEFAULT_QUANTUM
    md_share: float = 0.5


def sweep(cfg: SweepConfig) -> list[dict[str, Any]]:
    """One row per (load, policy): means over seeds of deadline ratio and JCTs."""
    rows = []
    for load in cfg.loads:
        per_policy: dict[str, list[dict[str, Any]]] = {p: [] for p in cfg.policies}
        for seed in cfg.seeds:
            trace = poisson_trace(cfg.jobs, load, seed, cfg.md_share, cfg.pool, cfg.net)
            for p in cfg.policies:
                per_policy[p].append(simulate(trace, p, cfg.pool, cfg.net, cfg.quantum).summary())
        for p, runs in per_policy.items():
            row: dict[str, Any] = {"load": load, "policy": p, "seeds": len(runs)}
            for key in ("deadline_ratio", "avg_jct", "avg_jct_md", "avg_jct_be"):
                row[key] = statistics.fmean(r[key] for r in runs)
            row["granted_over_planned"] = min(r["granted_over_planned"] for r in runs)
            rows.append(row)
    return rows


def headline(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per load: EDF's deadline ratio and JCT against the best baseline of each."""
    out = []
    for load in sorted({r["load"] for r in rows}):
        at = {r["policy"]: r for r in rows if r["load"] == load}
        if "edf" not in at or not any(b in at for b in BASELINES):
            continue
        base = [at[b] for b in BASELINES if b in at]
        best_met = max(base, key=lambda r: r["deadline_ratio"])
        best_jct = min(base, key=lambda r: r["avg_jct"])
        edf = at["edf"]
        out.append(
            {
                "load": load,
                "edf_met": edf["deadline_ratio"],
                "best_baseline_met": best_met["deadline_ratio"],
                "best_met_policy": best_met["policy"],
                "met_gain": edf["deadline_ratio"] - best_met["deadline_ratio"],
                "edf_jct": edf["avg_jct"],
                "best_baseline_jct": best_jct["avg_jct"],
                "best_jct_policy": best_jct["policy"],
                "jct_ratio": best_jct["avg_jct"] / edf["avg_jct"],
                # The goal: no baseline meets more deadlines, and none has a lower average JCT.
                "goal": edf["deadline_ratio"] >= best_met["deadline_ratio"]
                and edf["avg_jct"] <= best_jct["avg_jct"],
            }
        )
    return out


def print_tables(rows: Sequence[dict[str, Any]], heads: Sequence[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title="switch memory scheduling (simulated): per load and policy")
    for col in ("load", "policy", "MD deadlines met", "avg JCT", "avg JCT MD", "avg JCT BE"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(
            f"{r['load']:.2f}",
            r["policy"],
            f"{100 * r['deadline_ratio']:.1f} %",
            f"{r['avg_jct']:.0f} s",
            f"{r['avg_jct_md']:.0f} s",
            f"{r['avg_jct_be']:.0f} s",
        )
    console.print(t)
    h = Table(title="EDF against the best baseline at each load")
    for col in (
        "load",
        "EDF met",
        "best baseline met",
        "EDF JCT",
        "best baseline JCT",
        "JCT ratio",
        "goal",
    ):
        h.add_column(col, justify="right")
    for x in heads:
        h.add_row(
            f"{x['load']:.2f}",
            f"{100 * x['edf_met']:.1f} %",
            f"{100 * x['best_baseline_met']:.1f} % ({x['best_met_policy']})",
            f"{x['edf_jct']:.0f} s",
            f"{x['best_baseline_jct']:.0f} s ({x['best_jct_policy']})",
            f"{x['jct_ratio']:.2f}x",
            "held" if x["goal"] else "NOT held",
        )
    console.print(h)


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for p in dict.fromkeys(r["policy"] for r in rows):
        xs = [r["load"] for r in rows if r["policy"] == p]
        a.plot(xs, [100 * r["deadline_ratio"] for r in rows if r["policy"] == p], "o-", label=p)
        b.plot(xs, [r["avg_jct"] for r in rows if r["policy"] == p], "o-", label=p)
    a.set(xlabel="load", ylabel="MD deadlines met (%)", title="deadline satisfaction")
    b.set(xlabel="load", ylabel="average JCT (s)", title="average job completion time")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def load_trace(path: Path) -> list[TraceJob]:
    data = json.loads(path.read_text())
    return [TraceJob(**job) for job in data["jobs"]]


def save_trace(trace: Sequence[TraceJob], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"jobs": [asdict(j) for j in trace]}, indent=1))


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas: {text!r}"
        ) from None


def _policies(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    for n in names:
        if n not in POLICIES:
            raise argparse.ArgumentTypeError(
                f"unknown policy {n!r} (known: {', '.join(sorted(POLICIES))})"
            )
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m controller.sched.sched_sim", description=__doc__.split("\n", 1)[0]
    )
    p.add_argument("--jobs", type=int, default=300, help="jobs per trace (300)")
    p.add_argument("--loads", type=_floats, default=SweepConfig.loads, help="e.g. 0.5,0.8,1,1.3")
    p.add_argument("--seeds", type=int, default=3, help="traces per load (3)")
    p.add_argument("--policies", type=_policies, default=SweepConfig.policies)
    p.add_argument("--pool", type=int, default=AGG_POOL_SIZE, help="aggregators in the pool")
    p.add_argument("--rtt-ms", type=float, default=DEFAULT_NET.rtt_s * 1e3)
    p.add_argument(
        "--line-gbps", type=float, default=DEFAULT_NET.line_rate * 8 / 1e9, help="link rate"
    )
    p.add_argument("--quantum", type=float, default=DEFAULT_QUANTUM, help="RR/MLFQ seconds")
    p.add_argument("--md-share", type=float, default=0.5, help="share of MD jobs (0.5)")
    p.add_argument("--trace", type=Path, help="replay this trace (JSON) instead of a sweep")
    p.add_argument("--out", type=Path, default=Path("results"), help="where to write (results/)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        net = Network(rtt_s=args.rtt_ms / 1e3, line_rate=args.line_gbps * 1e9 / 8)
        if args.pool <= 0 or args.jobs <= 0 or args.seeds <= 0:
            raise ValueError("--pool, --jobs and --seeds must be positive")
    except ValueError as err:
        print(f"sched_sim: {err}", file=sys.stderr)
        return 2
    if args.trace is not None:
        return _replay(args, net)
    cfg = SweepConfig(
        jobs=args.jobs,
        loads=args.loads,
        seeds=tuple(range(1, args.seeds + 1)),
        policies=args.policies,
        pool=args.pool,
        net=net,
        quantum=args.quantum,
        md_share=args.md_share,
    )
    rows = sweep(cfg)
    heads = headline(rows)
    print_tables(rows, heads)
    args.out.mkdir(parents=True, exist_ok=True)
    setup = {k: v for k, v in asdict(cfg).items() if k != "net"}
    setup["net"] = {"rtt_s": net.rtt_s, "line_rate": net.line_rate}
    setup["models"] = MODELS
    (args.out / "sched_sim.json").write_text(
        json.dumps({"config": setup, "rows": rows, "headline": heads}, indent=1)
    )
    plot(rows, args.out / "sched_sim.png")
    print(f"wrote {args.out / 'sched_sim.json'} and {args.out / 'sched_sim.png'}")
    return 0


def _replay(args: argparse.Namespace, net: Network) -> int:
    try:
        trace = load_trace(args.trace)
    except (OSError, ValueError, TypeError, KeyError) as err:
        print(f"sched_sim: {args.trace}: {err}", file=sys.stderr)
        return 2
    for p in args.policies:
        o = simulate(trace, p, args.pool, net, args.quantum)
        print(json.dumps({**o.summary(), "jct": {f.job_id: f.jct for f in o.jobs}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
