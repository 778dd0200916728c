"""ATP's benchmarks on Mininet (``python -m topologies.atp --bench`` / ``--flood-bench``, and
``make bench``, section atp): the jobs' shared pool against static partitioning (NetReduce
regions) and the parameter server alone, on plain links or with a delay on every link; and
one job beside a tenant flooding the pool, metered or not. The jobs, hosts and checks are
``topologies/atp/__init__.py``'s.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topologies.atp import (
    RUN_DIR,
    AtpJob,
    exact,
    pool_events,
    run_jobs,
    start_flood,
    start_ps,
    submit_atp,
)
from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    host_ip,
    host_mac,
)
from topologies.impair_relay import Impairment
from wire.header import SLOTS

# --- benchmark: shared pool vs static partitioning vs PS only --------------------------------
# Static partitioning gets the shared pool's register memory: a NetReduce aggregator holds
# two copies (versions) of K values where an ATP aggregator holds one, so ``pool`` ATP
# aggregators are ``pool / 2`` NetReduce ones, split equally (each job's window its share).
# "static, 2x memory" splits ``pool`` NetReduce aggregators (twice the registers): the
# baseline before, printed beside it.
MODES = ("atp shared pool", "static partition", "ps only", "static, 2x memory")


@dataclass(frozen=True)
class BenchConfig:
    """``jobs``: concurrent job counts; every job has ``workers`` workers and window
    ``window``; ``pool`` ATP aggregators in all (the range shared by every job), or their
    register memory split in equal NetReduce regions (``pool / 2`` aggregators of two
    copies; and ``pool`` of them, twice the memory, in a row of its own), smaller than the
    jobs' combined windows."""

    jobs: tuple[int, ...] = (1, 2, 4)
    workers: int = 2
    window: int = 16
    pool: int = 16
    size: int = 8192
    # measured calls per worker: 6, not 2, so that a mode's figure averages over more of
    # the other sessions' moving load (calls last 30-150 ms on plain links)
    calls: int = 6
    compute_ms: float = 0.0  # a training job's compute phase before each call (vector_job)
    delay_ms: float = 0.0  # one-way delay of every link (an impairment relay on each)
    bw_mbps: float | None = None  # every link shaped to this (htb); None: unshaped
    plot: Path | None = None  # default: results/atp_bench[_delayDms].png

    @property
    def plot_path(self) -> Path:
        if self.plot is not None:
            return self.plot
        return Path(f"results/atp_bench{f'_delay{self.delay_ms:g}ms' if self.delay_ms else ''}.png")

    def command(self) -> str:
        return (
            f"{sys.executable} -m topologies.atp --bench --bench-jobs "
            f"{','.join(map(str, self.jobs))} --workers {self.workers} --window {self.window}"
            f" --pool-size {self.pool} --size {self.size} --calls {self.calls}"
            f" --compute-ms {self.compute_ms:g} --delay-ms {self.delay_ms:g}"
            + (f" --bw-mbps {self.bw_mbps:g}" if self.bw_mbps else "")
        )

    @property
    def links(self) -> str:
        shaped = f"{self.bw_mbps:g} Mbit/s" if self.bw_mbps else "unshaped"
        return f"links {shaped}, {self.delay_ms:g} ms delay"

    @property
    def timeout_s(self) -> float:
        """The workers' retransmission timeout: the default 50 ms plus 6 one-way delays (an
        ATP round trip crosses 4 delayed links: worker, switch, PS, switch, worker)."""
        return 0.05 + 6 * self.delay_ms / 1000


@dataclass(frozen=True)
class BenchRow:
    jobs: int
    mode: str
    per_job_mbps: tuple[float, ...]
    collisions: float  # of the first transmissions the pool saw (ATP only)
    fallbacks: float  # packets that reached the PS unaggregated / all packets admitted
    # CPU microseconds per psn (one packet's worth of the vector, all workers of its job):
    # the switch process, the parameter servers, the workers; and retransmissions per psn.
    cpu_us: tuple[float, float, float] = (0.0, 0.0, 0.0)
    retx: float = 0.0
    # Packets per psn into and out of the switch (its ports' counters): what each path
    # costs p4sim and the kernel (static partitioning: 2 in, 2 out with 2 workers).
    switch_packets: tuple[float, float] = (0.0, 0.0)

    @property
    def total_mbps(self) -> float:
        return sum(self.per_job_mbps)


WARM_UP = 1  # bench: first calls of every run, not measured (hosts, PS and switch warm up)


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU of processes (all their threads) so far, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def switch_packets(ex: Experiment) -> tuple[int, int]:
    """Packets received and sent by every switch port so far (the kernel's counters)."""
    rx = tx = 0
    for intf in ex.switch_intfs():
        stats = Path(f"/sys/class/net/{intf}/statistics")
        try:
            rx += int((stats / "rx_packets").read_text())
            tx += int((stats / "tx_packets").read_text())
        except OSError:
            continue  # not in this namespace's /sys
    return rx, tx


def _profile(
    got: dict[int, list[dict[str, Any]]], psns: int, switch_s: float, ps_s: float
) -> tuple[tuple[float, float, float], float]:
    """CPU µs per psn of switch, PSs and workers, and retransmissions per psn, over every
    call of every job (``psns`` in all)."""
    recs = [g["rec"] for gs in got.values() for g in gs]
    workers_s = sum(sum(r.get("cpu", [])) for r in recs)
    retx = sum(r.get("stats", {}).get("retransmissions", 0) for r in recs)
    per = 1e6 / max(psns, 1)
    return (switch_s * per, ps_s * per, workers_s * per), retx / max(psns, 1)


def _goodput(got: list[dict[str, Any]], size: int, skip: int = 0) -> float:
    """A job's all-reduce goodput, Mbit/s: vector bytes per call over the slowest worker's
    mean call time, the first ``skip`` calls left out."""
    runs = [g["rec"].get("times", [])[skip:] for g in got]
    times = [sum(t) / max(len(t), 1) for t in runs]
    slowest = max(times)
    return size * 4 * 8 / slowest / 1e6 if slowest > 0 else 0.0


def netreduce_jobs(
    ex: Experiment, name: str, share: int, groups: list[list[int]], ps_hosts: list[int]
) -> list[AtpJob]:
    """A NetReduce job per group of worker hosts, each a region of ``share`` aggregators
    (its window), aggregation address the group's PS host."""
    return [
        AtpJob(ex.submit(f"{name}{j}", workers=len(g), window=share, worker_ports=g,
                         worker_ips=[host_ip(h) for h in g], worker_macs=[host_mac(h) for h in g],
                         agg_ip=host_ip(ps), agg_mac=host_mac(ps)),
               tuple(g), "netreduce")
        for j, (g, ps) in enumerate(zip(groups, ps_hosts, strict=True))
    ]  # fmt: skip


def measure(cfg: BenchConfig, log: Any = print) -> list[BenchRow]:
    """Each job count on a fresh network: the modes one after the other, same hosts."""
    from topologies.experiment import star

    rows = []
    for n in cfg.jobs:
        hosts = n * cfg.workers
        # A parameter server per job, each on a host of its own after the workers (ATP keeps
        # one per job; one PS host for all would put every job's results on one link).
        ps_hosts = [hosts + 1 + j for j in range(n)]
        imp = Impairment(delay_s=cfg.delay_ms / 1000) if cfg.delay_ms else None
        run_cfg = ExperimentConfig(
            star(hosts + n), bw_mbps=cfg.bw_mbps, impairment=imp, run_dir=RUN_DIR / f"bench{n}",
            log=lambda s: None,
        )  # fmt: skip
        with Experiment(run_cfg) as ex:
            groups = [list(range(j * cfg.workers + 1, (j + 1) * cfg.workers + 1)) for j in range(n)]
            atp_jobs = [
                submit_atp(ex, f"atp{j}", g, ps_hosts[j], cfg.window, (0, cfg.pool))
                for j, g in enumerate(groups)
            ]
            ps_pids = [start_ps(ex, ps, [j.job_id]).pid
                       for j, ps in zip(atp_jobs, ps_hosts, strict=True)]  # fmt: skip
            switch_pid = [ex.switch().proc.pid] if getattr(ex.switch(), "proc", None) else []

            static = netreduce_jobs(ex, "nr", max(cfg.pool // (2 * n), 1), groups, ps_hosts)
            static_2x = netreduce_jobs(ex, "nr2x", max(cfg.pool // n, 1), groups, ps_hosts)
            for ps, g in zip(ps_hosts, groups, strict=True):
                ips = [a for h in g for a in ("--worker-ip", host_ip(h))]  # the plan's workers
                ps_pids.append(ex.start_service(
                    f"h{ps}",
                    [sys.executable, "-m", "hosts.netreduce.ps", "--workers", str(cfg.workers),
                     *ips],
                    ready="parameter server on", log_name=f"ps-baseline-h{ps}",
                ).pid)  # fmt: skip
            for mode, jobs, extra in (
                (MODES[0], atp_jobs, ()),
                (MODES[1], static, ()),
                # the PS has no switch memory to share: its window is the ATP jobs' window
                (MODES[2], static, ("--method", "ps", "--window", str(cfg.window))),
                (MODES[3], static_2x, ()),
            ):
                before = pool_events(ex)
                sw0, ps0 = cpu_seconds(switch_pid), cpu_seconds(ps_pids)
                pk0 = switch_packets(ex)
                out = RUN_DIR / f"bench{n}" / mode.replace(" ", "_")
                calls = cfg.calls + WARM_UP
                # Every worker of every job starts its calls at once (a barrier after its
                # set-up): the jobs run concurrently, not one after the other as they start.
                shutil.rmtree(out / "barrier", ignore_errors=True)
                got = run_jobs(ex, jobs, out, cfg.size, calls, 70, "--bits", "24",
                               "--compute-ms", str(cfg.compute_ms),
                               "--timeout", f"{cfg.timeout_s:g}",
                               "--barrier", str(out / "barrier"), str(n * cfg.workers),
                               *extra)  # fmt: skip
                sw1, ps1 = cpu_seconds(switch_pid), cpu_seconds(ps_pids)
                pk1 = switch_packets(ex)
                after = pool_events(ex)
                for j in jobs:
                    bad = exact(got[j.job_id], 70 + j.job_id, cfg.size, calls, bits=24)
                    if bad:
                        raise ExperimentError(f"{mode}, job {j.job_id}: {bad[0]}")
                d = {k: after[k] - before[k] for k in after}
                psns = n * calls * -(-cfg.size // SLOTS)
                fell_first = d["collision"] + d["followed"] + d["capped"] + d["overflow"]
                first = d["claimed"] + d["added"] + fell_first
                seen = first + d["retx_fallback"]
                fell = fell_first + d["retx_fallback"]
                rows.append(
                    BenchRow(
                        n, mode, tuple(_goodput(got[j.job_id], cfg.size, WARM_UP) for j in jobs),
                        d["collision"] / first if first else 0.0,
                        fell / seen if seen else 0.0,
                        *_profile(got, psns, sw1 - sw0, ps1 - ps0),
                        ((pk1[0] - pk0[0]) / psns, (pk1[1] - pk0[1]) / psns),
                    )
                )  # fmt: skip
                log(f"{n} job(s), {mode}: {rows[-1].total_mbps:.2f} Mbit/s in total")
    return rows


def table(rows: list[BenchRow], cfg: BenchConfig) -> Any:
    from rich.table import Table

    t = Table(
        title=f"ATP shared pool vs static partitioning vs PS only ({cfg.pool} ATP aggregators;"
        f" static: the same memory, {cfg.pool // 2} NetReduce aggregators of two copies;"
        f" window {cfg.window} per job, {cfg.workers} workers per job, {cfg.links},"
        " p4sim on Mininet)"
    )
    for col in ("jobs", "mode", "per-job Mbit/s", "total Mbit/s", "vs static", "collisions",
                "fallbacks", "retx/psn", "CPU µs/psn: switch", "PS", "workers",
                "switch pkts/psn in", "out"):  # fmt: skip
        t.add_column(col, justify="left" if col == "mode" else "right")
    static = {r.jobs: r.total_mbps for r in rows if r.mode == MODES[1]}
    for r in rows:
        ratio = r.total_mbps / static[r.jobs] if static.get(r.jobs) else float("nan")
        atp = r.mode == MODES[0]
        t.add_row(
            str(r.jobs), r.mode, " ".join(f"{v:.2f}" for v in r.per_job_mbps),
            f"{r.total_mbps:.2f}", f"{ratio:.2f}x",
            f"{r.collisions:.1%}" if atp else "-", f"{r.fallbacks:.1%}" if atp else "-",
            f"{r.retx:.3f}", *(f"{c:.0f}" for c in r.cpu_us),
            *(f"{p:.2f}" for p in r.switch_packets),
        )  # fmt: skip
    return t


def plot(rows: list[BenchRow], path: Path, links: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = sorted({r.jobs for r in rows})
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / len(MODES)
    for i, mode in enumerate(MODES):
        vals = [next((r.total_mbps for r in rows if r.jobs == n and r.mode == mode), 0.0)
                for n in counts]  # fmt: skip
        ax.bar(
            [c + (i - (len(MODES) - 1) / 2) * width for c in range(len(counts))],
            vals,
            width,
            label=mode,
        )
    ax.set_xticks(range(len(counts)), [f"{n} job(s)" for n in counts])
    ax.set_ylabel("total all-reduce goodput, Mbit/s")
    ax.set_title(f"ATP vs NetReduce regions vs PS (p4sim, Mininet{', ' if links else ''}{links})")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


GOAL_VS_STATIC = 1.3  # issue 22: the shared pool at 4 jobs against static partitioning


def ratio_line(rows: list[BenchRow]) -> str:
    """The goals at the largest job count: shared pool >= 1.3x static partitioning and
    ahead of the PS alone, each with whether this run met it."""
    top = max(r.jobs for r in rows)
    by = {r.mode: r.total_mbps for r in rows if r.jobs == top}
    s = by.get(MODES[1]) or float("nan")
    ps = by.get(MODES[2]) or float("nan")
    shared = by.get(MODES[0], 0.0)

    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"

    return (
        f"at {top} jobs: shared pool / static partitioning = {shared / s:.2f}x"
        f" (goal >= {GOAL_VS_STATIC}x: {met(shared / s >= GOAL_VS_STATIC)}; ATP reports"
        f" +38-66%), shared pool / PS only = {shared / ps:.2f}x (goal > 1: {met(shared > ps)}),"
        f" PS only / static = {ps / s:.2f}x; against static partitioning with twice the"
        f" memory: {shared / (by.get(MODES[3]) or float('nan')):.2f}x"
    )


FLOOD_MODES = ("alone", "flood, metered", "flood, not metered")


@dataclass(frozen=True)
class FloodConfig:
    """Job a (``workers`` workers) all-reduces alone, then while a one-worker tenant floods
    the pool it shares at ``flood_pps`` valid packets/s: once with that tenant's job
    metered at ``meter_pps``, once not metered. Same network, same PS, one run."""

    workers: int = 2
    window: int = 16
    pool: int = 16
    size: int = 16384
    calls: int = 4
    flood_pps: int = 6000
    meter_pps: int = 100

    def command(self) -> str:
        return (
            f"{sys.executable} -m topologies.atp --flood-bench --size {self.size}"
            f" --calls {self.calls}"
        )


@dataclass(frozen=True)
class FloodRow:
    mode: str
    mbps: float  # job a's all-reduce goodput
    metered: int  # METERED drops during the run
    collisions: int  # the pool's collisions during the run


def measure_flood(cfg: FloodConfig, log: Any = print) -> list[FloodRow]:
    from topologies.experiment import star

    a_hosts = list(range(1, cfg.workers + 1))
    metered_host, free_host, ps = cfg.workers + 1, cfg.workers + 2, cfg.workers + 3
    pool = (0, cfg.pool)
    run_cfg = ExperimentConfig(star(ps), run_dir=RUN_DIR / "flood", log=lambda s: None)
    rows = []
    with Experiment(run_cfg) as ex:
        # Job a once per mode, same hosts: the PS remembers a job's finished psns, and a new
        # worker process starts again at psn 0.
        runs = [submit_atp(ex, f"a-{i}", a_hosts, ps, cfg.window, pool) for i in range(4)]
        metered = submit_atp(ex, "greedy-metered", [metered_host], ps, cfg.window, pool,
                             meter_pps=cfg.meter_pps)  # fmt: skip
        free = submit_atp(ex, "greedy", [free_host], ps, cfg.window, pool)
        start_ps(ex, ps, [*(a.job_id for a in runs), metered.job_id, free.job_id])
        warm = runs.pop()  # a first run, not reported: the hosts' and the switch's warm-up
        run_jobs(ex, [warm], RUN_DIR / "flood" / "warm-up", cfg.size, 1, 30, "--bits", "24")
        for mode, a, flooder in zip(FLOOD_MODES, runs, (None, metered, free), strict=True):
            flood = start_flood(ex, flooder, ps, pool, cfg.flood_pps) if flooder else None
            try:
                before, events = ex.drop_counters(), pool_events(ex)
                out = RUN_DIR / "flood" / mode.replace(" ", "_").replace(",", "")
                got = run_jobs(ex, [a], out, cfg.size, cfg.calls, 30, "--bits", "24")
                after, events_after = ex.drop_counters(), pool_events(ex)
            finally:
                if flood is not None:
                    ex.stop(flood)
            bad = exact(got[a.job_id], 30 + a.job_id, cfg.size, cfg.calls, bits=24)
            if bad:
                raise ExperimentError(f"{mode}: {bad[0]}")
            rows.append(
                FloodRow(
                    mode, _goodput(got[a.job_id], cfg.size),
                    after.get("METERED", 0) - before.get("METERED", 0),
                    events_after["collision"] - events["collision"],
                )
            )  # fmt: skip
            log(f"job a, {mode}: {rows[-1].mbps:.2f} Mbit/s, exact")
    return rows


def flood_table(rows: list[FloodRow], cfg: FloodConfig) -> Any:
    from rich.table import Table

    t = Table(
        title=f"Job a ({cfg.workers} workers, ATP pool of {cfg.pool}) while a one-worker"
        f" tenant floods {cfg.flood_pps} packets/s into the same pool (meter {cfg.meter_pps}/s)"
    )
    for col in ("job a", "Mbit/s", "vs alone", "METERED drops", "pool collisions"):
        t.add_column(col, justify="left" if col == "job a" else "right")
    alone = rows[0].mbps or float("nan")
    for r in rows:
        t.add_row(r.mode, f"{r.mbps:.2f}", f"{r.mbps / alone:.2f}x", str(r.metered),
                  str(r.collisions))  # fmt: skip
    return t
