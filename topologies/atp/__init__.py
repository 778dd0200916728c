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
(network, daemon, hosts, impairments) is ``topologies/experiment.py``.

This package: the jobs, hosts and checks (here), the benchmarks behind ``--bench`` and
``--flood-bench`` (``bench.py``, built on this module), and the command (``__main__.py``,
over both).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topologies.experiment import (
    Experiment,
    HostRun,
    host_ip,
    host_mac,
)

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
