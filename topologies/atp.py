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
range ``[0, pool_size)``; one host after the workers runs ``hosts.atp.ps`` for every job (the
jobs' aggregation address). Each worker all-reduces seeded int32 vectors
(``hosts.vector_job``); the run checks every result against the host-side sum and prints
per job the call times, retransmissions, and the pool's statistics (claims, collisions,
fallbacks, releases) read from the switch. What is shared with other experiments
(network, daemon, hosts, impairments) is ``topologies/experiment.py``; the benchmarks
behind ``--bench`` and ``--flood-bench`` are ``topologies/atp_bench.py``.
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
    cmd = [sys.executable, "-m", "hosts.atp.ps", "--controller", ex.controller_url]
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

        from topologies.atp_bench import FloodConfig, flood_table, measure_flood

        cfg = FloodConfig(a.workers, size=a.size, calls=a.calls)
        console = Console(width=140)
        console.print(flood_table(measure_flood(cfg, log=console.print), cfg))
        return 0

    if a.flood_bench:
        return main_guard("topologies.atp", flood_bench)

    def bench() -> int:
        from rich.console import Console

        from topologies.atp_bench import BenchConfig, measure, plot, ratio_line, table

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
