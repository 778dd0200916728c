"""ATP on Mininet: jobs sharing one pool of switch aggregators, a parameter server each.

Run (root; ``make setup`` first)::

    python -m topologies.atp [--jobs 2] [--workers 2] [--pool-size 16] [--window 32]
                             [--size 20000] [--calls 3] [--loss 0.01]
    python -m topologies.atp --racks 2 [--workers 2] ...   # one job, two levels
    python -m topologies.atp --bench [--delay-ms 10]       # shared pool vs static vs PS

``--racks R``: one job whose workers sit in R racks (``--workers`` each, a leaf switch per
rack, ``s2 ..``) under a spine ``s1`` that holds the PS host; the leaves aggregate their
rack, the spine the leaves' partial sums, and the result comes back down.

Jobs ``1..J`` have ``W`` workers each on one switch (hosts ``h1 ..``), all in the ATP pool
range ``[0, pool_size)``; one host after the workers runs ``hosts.atp_ps`` for every job (the
jobs' aggregation address). Each worker all-reduces seeded int32 vectors
(``hosts.vector_job``); the run checks every result against the host-side sum and prints
per job the call times, retransmissions, and the pool's statistics (claims, collisions,
fallbacks, releases) read from the switch. What is shared with other experiments
(network, daemon, hosts, impairments) is ``topologies/experiment.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    HostRun,
    host_ip,
    host_mac,
)
from topologies.impair_relay import Impairment

RUN_DIR = Path("run/atp")


@dataclass(frozen=True)
class AtpJob:
    """A submitted job: its id and its workers' host numbers (``h{n}``)."""

    job_id: int
    hosts: tuple[int, ...]
    kind: str = "atp"


def submit_atp(
    ex: Experiment, name: str, hosts: list[int], ps_host: int, window: int,
    pool: tuple[int, int], **extra: Any,
) -> AtpJob:  # fmt: skip
    """``incctl job submit --kind atp`` for workers on hosts ``h{n}`` of a star layout;
    ``extra``: more fields (``meter_pps=...``)."""
    job = ex.submit(
        name,
        kind="atp",
        workers=len(hosts),
        window=window,
        worker_ports=hosts,
        worker_ips=[host_ip(h) for h in hosts],
        worker_macs=[host_mac(h) for h in hosts],
        agg_ip=host_ip(ps_host),
        agg_mac=host_mac(ps_host),
        ps_port=ps_host,
        pool_offset=pool[0],
        pool_size=pool[1],
        **extra,
    )
    return AtpJob(job, tuple(hosts))


# A greedy tenant: the only worker of its ATP job sends valid packets of that job, new psns
# at `pps` packets/s (in batches every 5 ms), each one claiming an aggregator of the pool.
FLOODER = r"""
import socket, sys, time
import numpy as np
from wire.header import Header, atp_index, pack
ps_ip, job, offset, size, pps = sys.argv[1], *map(int, sys.argv[2:6])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
values = np.ones(32, dtype=np.int32)
psn, batch, t = 0, max(pps // 200, 1), time.monotonic()
while True:
    for _ in range(batch):
        h = Header(job_id=job, worker_id=0, psn=psn, agg_idx=atp_index(job, psn, offset, size))
        try:
            s.sendto(pack(h, values), (ps_ip, 20050))
        except OSError:
            pass  # the link's queue is full: that packet is not sent
        psn += 1
    t += batch / pps
    time.sleep(max(t - time.monotonic(), 0))
"""


def start_flood(ex: Experiment, job: AtpJob, ps_host: int, pool: tuple[int, int], pps: int) -> Any:
    """``FLOODER`` on the one host of ``job``: valid packets of its job at ``pps``."""
    args = [host_ip(ps_host), str(job.job_id), str(pool[0]), str(pool[1]), str(pps)]
    cmd = [sys.executable, "-c", FLOODER, *args]
    return ex.popen(f"h{job.hosts[0]}", cmd, stdout=subprocess.DEVNULL)


def start_ps(ex: Experiment, ps_host: int, job_ids: list[int]) -> Any:
    """One ATP parameter server on ``h{ps_host}`` serving ``job_ids``."""
    cmd = [sys.executable, "-m", "hosts.atp_ps", "--controller", ex.controller_url]
    for j in job_ids:
        cmd += ["--job-id", str(j)]
    return ex.start_service(f"h{ps_host}", cmd, ready="atp parameter server on")


def vector_cmd(
    ex: Experiment, job: AtpJob, worker: int, out: Path, size: int, calls: int, seed: int,
    *extra: str,
) -> list[str]:  # fmt: skip
    return [
        sys.executable, "-m", "hosts.vector_job", "--controller", ex.controller_url,
        "--job-id", str(job.job_id), "--worker-id", str(worker), "--size", str(size),
        "--calls", str(calls), "--seed", str(seed), "--out", str(out / f"j{job.job_id}w{worker}"),
        *extra,
    ]  # fmt: skip


def run_jobs(
    ex: Experiment, jobs: list[AtpJob], out: Path, size: int, calls: int, seed: int,
    *extra: str, timeout: float = 300.0,
) -> dict[int, list[dict[str, Any]]]:  # fmt: skip
    """All workers of all ``jobs`` at once; per job and worker: exit code, record, results.
    Job ``j`` all-reduces with seed ``seed + j``."""
    out.mkdir(parents=True, exist_ok=True)
    cmds = [
        (f"h{h}", vector_cmd(ex, j, w, out, size, calls, seed + j.job_id, *extra))
        for j in jobs
        for w, h in enumerate(j.hosts)
    ]
    runs: list[HostRun] = ex.run_hosts(cmds, timeout=timeout)
    got: dict[int, list[dict[str, Any]]] = {}
    i = 0
    for j in jobs:
        got[j.job_id] = []
        for w in range(len(j.hosts)):
            rec_path = out / f"j{j.job_id}w{w}.json"
            rec = json.loads(rec_path.read_text()) if rec_path.exists() else {"error": "no record"}
            npy = out / f"j{j.job_id}w{w}.npy"
            res = np.load(npy) if npy.exists() else None
            got[j.job_id].append({"code": runs[i].code, "rec": rec, "res": res})
            i += 1
    return got


def exact(got: list[dict[str, Any]], seed: int, size: int, calls: int, bits: int = 32) -> list[str]:
    """Problems of one job's results against the host-side int32 sum (empty: bit-exact)."""
    from hosts.vector_job import expected_sum

    want = np.stack([expected_sum(seed, len(got), c, size, bits) for c in range(calls)])
    bad = []
    for w, g in enumerate(got):
        if g["code"] != 0:
            bad.append(f"worker {w}: exit {g['code']}: {g['rec'].get('error')}")
        elif g["res"] is None or not np.array_equal(g["res"], want):
            bad.append(f"worker {w}: result differs from the host sum")
    return bad


def submit_two_racks(
    ex: Experiment, name: str, racks: int, per_rack: int, window: int, pool: tuple[int, int]
) -> tuple[int, list[AtpJob]]:
    """One ATP job over a ``leaf_spine(racks, per_rack)`` layout: its spine part on ``s1``
    (members: the leaves; the PS is the host after the racks, on the spine), and a leaf
    part on each leaf ``s{r+1}`` joining it. Returns the spine job's id (the id on the wire,
    which the PS serves) and per rack the leaf job with its workers' hosts."""
    n = racks * per_rack
    ps = n + 1
    first = [r * per_rack + 1 for r in range(racks)]  # each rack's first host
    common = {"kind": "atp", "window": window, "pool_offset": pool[0], "pool_size": pool[1],
              "agg_ip": host_ip(ps), "agg_mac": host_mac(ps)}  # fmt: skip
    spine = ex.api.submit(
        {
            **common,
            "name": f"{name}-spine",
            "role": "spine",
            "device_id": 1,
            "workers": racks,
            "all_workers": n,
            "worker_ports": list(range(1, racks + 1)),
            "worker_ips": [host_ip(h) for h in first],
            "worker_macs": [host_mac(h) for h in first],
            "ps_port": racks + 1,
        }  # fmt: skip
    )["job_id"]
    leaves = []
    for r in range(racks):
        hosts = list(range(first[r], first[r] + per_rack))
        job = ex.api.submit(
            {
                **common,
                "name": f"{name}-leaf{r + 1}",
                "role": "leaf",
                "device_id": r + 2,
                "workers": per_rack,
                "all_workers": n,
                "first_worker": r * per_rack,
                "up_id": r,
                "wire_job_id": spine,
                "worker_ports": list(range(1, per_rack + 1)),
                "worker_ips": [host_ip(h) for h in hosts],
                "worker_macs": [host_mac(h) for h in hosts],
                "ps_port": per_rack + 1,
            }  # fmt: skip
        )["job_id"]
        leaves.append(AtpJob(job, tuple(hosts)))
    return spine, leaves


def run_racks(
    ex: Experiment, leaves: list[AtpJob], out: Path, size: int, calls: int, seed: int,
    *extra: str,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every worker of a two-level job (global worker ids, hosts ``h1 ..``) at once."""
    out.mkdir(parents=True, exist_ok=True)
    cmds = []
    for leaf in leaves:
        for h in leaf.hosts:
            w = h - 1
            cmd = vector_cmd(ex, leaf, w, out, size, calls, seed, *extra)
            cmd[cmd.index("--out") + 1] = str(out / f"w{w}")
            cmds.append((f"h{h}", cmd))
    runs = ex.run_hosts(cmds, timeout=300.0)
    got = []
    for run, (_, cmd) in zip(runs, cmds, strict=True):
        prefix = Path(cmd[cmd.index("--out") + 1])
        rec = json.loads(prefix.with_suffix(".json").read_text()) if prefix.with_suffix(
            ".json").exists() else {"error": "no record"}  # fmt: skip
        npy = prefix.with_suffix(".npy")
        got.append({"code": run.code, "rec": rec, "res": np.load(npy) if npy.exists() else None})
    return got


def pool_events(ex: Experiment, switch: str = "s1") -> dict[str, int]:
    """ATP's ``atp_events`` counter by event name."""
    from wire.header import AtpEvent

    cells = ex.read_counter("IncIngress.atp.atp_events", switch)
    return {e.name.lower(): cells.get(int(e), (0, 0))[0] for e in AtpEvent}


# --- benchmark: shared pool vs static partitioning vs PS only --------------------------------
MODES = ("atp shared pool", "static partition", "ps only")


@dataclass(frozen=True)
class BenchConfig:
    """``jobs``: concurrent job counts; every job has ``workers`` workers and window
    ``window``; ``pool`` aggregators in all (the ATP range shared by every job, or split in
    equal NetReduce regions), smaller than the jobs' combined windows."""

    jobs: tuple[int, ...] = (1, 2, 4)
    workers: int = 2
    window: int = 16
    pool: int = 16
    size: int = 8192
    calls: int = 2
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

    @property
    def total_mbps(self) -> float:
        return sum(self.per_job_mbps)


WARM_UP = 1  # bench: first calls of every run, not measured (hosts, PS and switch warm up)


def _goodput(got: list[dict[str, Any]], size: int, skip: int = 0) -> float:
    """A job's all-reduce goodput, Mbit/s: vector bytes per call over the slowest worker's
    mean call time, the first ``skip`` calls left out."""
    runs = [g["rec"].get("times", [])[skip:] for g in got]
    times = [sum(t) / max(len(t), 1) for t in runs]
    slowest = max(times)
    return size * 4 * 8 / slowest / 1e6 if slowest > 0 else 0.0


def measure(cfg: BenchConfig, log: Any = print) -> list[BenchRow]:
    """Each job count on a fresh network: the three modes one after the other, same hosts."""
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
            for j, ps in zip(atp_jobs, ps_hosts, strict=True):
                start_ps(ex, ps, [j.job_id])
            share = max(cfg.pool // n, 1)
            static = [
                AtpJob(ex.submit(f"nr{j}", workers=cfg.workers, window=share, worker_ports=g,
                                 worker_ips=[host_ip(h) for h in g],
                                 worker_macs=[host_mac(h) for h in g],
                                 agg_ip=host_ip(ps_hosts[j]), agg_mac=host_mac(ps_hosts[j])),
                       tuple(g), "netreduce")
                for j, g in enumerate(groups)
            ]  # fmt: skip
            for ps in ps_hosts:
                ex.start_service(
                    f"h{ps}", [sys.executable, "-m", "hosts.ps", "--workers", str(cfg.workers)],
                    ready="parameter server on", log_name=f"ps-baseline-h{ps}",
                )  # fmt: skip
            for mode, jobs, extra in (
                (MODES[0], atp_jobs, ()),
                (MODES[1], static, ()),
                # the PS has no switch memory to share: its window is the ATP jobs' window
                (MODES[2], static, ("--method", "ps", "--window", str(cfg.window))),
            ):
                before = pool_events(ex)
                out = RUN_DIR / f"bench{n}" / mode.replace(" ", "_")
                calls = cfg.calls + WARM_UP
                got = run_jobs(ex, jobs, out, cfg.size, calls, 70, "--bits", "24",
                               "--compute-ms", str(cfg.compute_ms),
                               "--timeout", f"{cfg.timeout_s:g}", *extra)  # fmt: skip
                after = pool_events(ex)
                for j in jobs:
                    bad = exact(got[j.job_id], 70 + j.job_id, cfg.size, calls, bits=24)
                    if bad:
                        raise ExperimentError(f"{mode}, job {j.job_id}: {bad[0]}")
                d = {k: after[k] - before[k] for k in after}
                first = d["claimed"] + d["added"] + d["collision"] + d["overflow"]
                seen = first + d["retx_fallback"]
                fell = d["collision"] + d["retx_fallback"] + d["overflow"]
                rows.append(
                    BenchRow(
                        n, mode, tuple(_goodput(got[j.job_id], cfg.size, WARM_UP) for j in jobs),
                        d["collision"] / first if first else 0.0,
                        fell / seen if seen else 0.0,
                    )
                )  # fmt: skip
                log(f"{n} job(s), {mode}: {rows[-1].total_mbps:.2f} Mbit/s in total")
    return rows


def table(rows: list[BenchRow], cfg: BenchConfig) -> Any:
    from rich.table import Table

    t = Table(
        title=f"ATP shared pool vs static partitioning vs PS only ({cfg.pool} aggregators,"
        f" window {cfg.window} per job, {cfg.workers} workers per job, {cfg.links},"
        " p4sim on Mininet)"
    )
    for col in ("jobs", "mode", "per-job Mbit/s", "total Mbit/s", "vs static", "collisions",
                "fallbacks"):  # fmt: skip
        t.add_column(col, justify="left" if col == "mode" else "right")
    static = {r.jobs: r.total_mbps for r in rows if r.mode == MODES[1]}
    for r in rows:
        ratio = r.total_mbps / static[r.jobs] if static.get(r.jobs) else float("nan")
        atp = r.mode == MODES[0]
        t.add_row(
            str(r.jobs), r.mode, " ".join(f"{v:.2f}" for v in r.per_job_mbps),
            f"{r.total_mbps:.2f}", f"{ratio:.2f}x",
            f"{r.collisions:.1%}" if atp else "-", f"{r.fallbacks:.1%}" if atp else "-",
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
        ax.bar([c + (i - 1) * width for c in range(len(counts))], vals, width, label=mode)
    ax.set_xticks(range(len(counts)), [f"{n} job(s)" for n in counts])
    ax.set_ylabel("total all-reduce goodput, Mbit/s")
    ax.set_title(f"ATP vs NetReduce regions vs PS (p4sim, Mininet{', ' if links else ''}{links})")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def ratio_line(rows: list[BenchRow]) -> str:
    top = max(r.jobs for r in rows)
    by = {r.mode: r.total_mbps for r in rows if r.jobs == top}
    s = by.get(MODES[1]) or float("nan")
    return (
        f"at {top} jobs: shared pool / static partitioning = {by.get(MODES[0], 0) / s:.2f}x"
        f" (goal >= 1.3x; ATP reports +38-66%), PS only / static = {by.get(MODES[2], 0) / s:.2f}x"
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


def main(argv: list[str] | None = None) -> int:
    from topologies.experiment import leaf_spine, main_guard, star

    ap = argparse.ArgumentParser(
        prog="python -m topologies.atp", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pool-size", type=int, default=16)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--size", type=int, default=20000)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--loss", type=float, default=0.0, help="loss, duplication, reordering")
    ap.add_argument("--bench", action="store_true", help="shared pool vs static vs PS only")
    ap.add_argument("--bench-jobs", default="1,2,4", help="bench: concurrent job counts")
    ap.add_argument("--flood-bench", action="store_true", help="a job beside a flooding tenant")
    ap.add_argument("--compute-ms", type=float, default=0.0, help="bench: compute before a call")
    ap.add_argument("--delay-ms", type=float, default=0.0,
                    help="bench: one-way delay of every link, ms")  # fmt: skip
    ap.add_argument("--bw-mbps", type=float, default=None,
                    help="bench: every link shaped to this rate (default unshaped)")  # fmt: skip
    ap.add_argument("--racks", type=int, default=0,
                    help="one job over RACKS leaf switches (--workers each) and a spine with "
                         "the PS: two-level aggregation")  # fmt: skip
    ap.add_argument(
        "--bits",
        type=int,
        default=24,
        help="bits of each value (32: sums overflow int32 and fall back to the PS)",
    )
    a = ap.parse_args(argv)
    if a.racks == 1 or a.racks < 0:
        ap.error("--racks needs at least 2 racks (0: one switch)")
    if not 2 <= a.bits <= 32:
        ap.error("--bits must be in 2..32")
    if not 0 <= a.delay_ms <= 1000:
        ap.error("--delay-ms must be in 0..1000")
    if a.bw_mbps is not None and not 0 < a.bw_mbps <= 1000:
        ap.error("--bw-mbps must be in (0, 1000]")
    bits = ("--bits", str(a.bits))

    def flood_bench() -> int:
        from rich.console import Console

        cfg = FloodConfig(a.workers, size=a.size, calls=a.calls)
        console = Console(width=140)
        console.print(flood_table(measure_flood(cfg, log=console.print), cfg))
        return 0

    if a.flood_bench:
        return main_guard("topologies.atp", flood_bench)

    def bench() -> int:
        from rich.console import Console

        cfg = BenchConfig(
            tuple(int(x) for x in a.bench_jobs.split(",")), a.workers, a.window, a.pool_size,
            a.size, a.calls, a.compute_ms, a.delay_ms, a.bw_mbps,
        )  # fmt: skip
        console = Console(width=140)
        rows = measure(cfg, log=console.print)
        console.print(table(rows, cfg))
        console.print(ratio_line(rows))
        console.print(f"plot: {plot(rows, cfg.plot_path, cfg.links)}")
        return 0

    if a.bench:
        return main_guard("topologies.atp", bench)

    def run_two_levels() -> int:
        n = a.racks * a.workers
        imp = Impairment(loss=a.loss, dup=a.loss, reorder=a.loss, seed=3) if a.loss else None
        cfg = ExperimentConfig(leaf_spine(a.racks, a.workers), impairment=imp, run_dir=RUN_DIR)
        with Experiment(cfg) as ex:
            spine, leaves = submit_two_racks(
                ex, "racks", a.racks, a.workers, a.window, (0, a.pool_size)
            )
            start_ps(ex, n + 1, [spine])
            got = run_racks(ex, leaves, RUN_DIR / "out", a.size, a.calls, 7, *bits)
            events = {f"s{d}": pool_events(ex, f"s{d}") for d in range(1, a.racks + 2)}
        bad = exact(got, 7, a.size, a.calls, bits=a.bits)
        times = [t for g in got for t in g["rec"].get("times", [])]
        mean = sum(times) / len(times) if times else float("nan")
        print(f"job {spine} over {a.racks} racks of {a.workers} workers: "
              f"{'EXACT' if not bad else 'WRONG'}, mean call {mean:.3f} s")  # fmt: skip
        for b in bad:
            print(f"  {b}")
        for sw, ev in events.items():
            role = "spine" if sw == "s1" else "leaf"
            print(f"ATP pool at {sw} ({role}):", ", ".join(f"{k} {v}" for k, v in ev.items()))
        return 1 if bad else 0

    if a.racks:
        return main_guard("topologies.atp", run_two_levels)

    def run() -> int:
        n = a.jobs * a.workers
        imp = Impairment(loss=a.loss, dup=a.loss, reorder=a.loss, seed=3) if a.loss else None
        cfg = ExperimentConfig(star(n + 1), impairment=imp, run_dir=RUN_DIR)
        with Experiment(cfg) as ex:
            ps = n + 1
            jobs = [
                submit_atp(ex, f"atp{j}", list(range(j * a.workers + 1, (j + 1) * a.workers + 1)),
                           ps, a.window, (0, a.pool_size))
                for j in range(a.jobs)
            ]  # fmt: skip
            start_ps(ex, ps, [j.job_id for j in jobs])
            got = run_jobs(ex, jobs, RUN_DIR / "out", a.size, a.calls, 7, *bits)
            events = pool_events(ex)
        failed = 0
        for j in jobs:
            bad = exact(got[j.job_id], 7 + j.job_id, a.size, a.calls, bits=a.bits)
            times = [t for g in got[j.job_id] for t in g["rec"].get("times", [])]
            retx = sum(g["rec"].get("stats", {}).get("retransmissions", 0) for g in got[j.job_id])
            mean = sum(times) / len(times) if times else float("nan")
            print(f"job {j.job_id}: {'EXACT' if not bad else 'WRONG'}, mean call {mean:.3f} s,"
                  f" retransmissions {retx}")  # fmt: skip
            for b in bad:
                print(f"  {b}")
            failed += bool(bad)
        print("ATP pool:", ", ".join(f"{k} {v}" for k, v in events.items()))
        return 1 if failed else 0

    return main_guard("topologies.atp", run)


if __name__ == "__main__":
    sys.exit(main())
