"""Integer all-reduce through the switch in Mininet: exact sums on clean and impaired links,
isolation between jobs, and a bounded timeout when peers never come (root).

Every worker runs ``python -m hosts.vector_job`` in its Mininet host; it asks the
controller daemon (Unix socket) for its job settings, all-reduces seeded int32 vectors and
writes the results to files that the test compares with the host-side sum.
Run under ``flock /tmp/inc-mininet.lock`` when others may start Mininet networks too.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topologies.impair_relay import Impairment
from wire.header import SLOTS

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(240)]
RUN_DIR = Path("run/netreduce")

FORGER = r"""
import socket, sys, time
import numpy as np
from wire.header import Header, pack
dst = (sys.argv[1], 20050)
specs = [tuple(int(v) for v in s.split(":")) for s in sys.argv[2:]]  # job:worker:idx_lo:idx_hi
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
junk = np.full(32, 0x01010101, dtype=np.int32)
sent = 0
while True:
    for psn in range(512):
        for job, worker, lo, hi in specs:
            idx = lo + psn % (hi - lo)
            h = Header(job_id=job, worker_id=worker, psn=psn, agg_idx=idx, ver=(psn // 32) % 2)
            s.sendto(pack(h, junk), dst)
            sent += 1
        time.sleep(0.01)  # a steady stream (~100 per spec and second), not a flood
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def start_net(workdir: Path, workers: int = 4, impairment: Impairment | None = None) -> Any:
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(
        star(workers + 1), impairment=impairment, run_dir=RUN_DIR, log=lambda s: None
    )
    return Experiment(cfg).__enter__()


@pytest.fixture
def clean_net(workdir: Path) -> Iterator[Any]:
    nr = start_net(workdir)
    yield nr
    nr.close()


def run_vectors(
    nr: Any, job_id: int, hosts: list[int], out: Path, size: int, calls: int, seed: int,
    *extra: str, limit: float = 90.0,
) -> list[dict[str, Any]]:  # fmt: skip
    """Worker w of the job on host h{hosts[w]}; returns per worker: code, record, results."""
    procs = []
    for w, h in enumerate(hosts):
        cmd = [sys.executable, "-m", "hosts.vector_job", "--controller",
               nr.controller_url, "--job-id", str(job_id), "--worker-id", str(w),
               "--size", str(size), "--calls", str(calls), "--seed", str(seed),
               "--out", str(out / f"j{job_id}w{w}"), *extra]  # fmt: skip
        procs.append(nr.popen(f"h{h}", cmd))
    got = []
    for w, p in enumerate(procs):
        code = p.wait(timeout=limit)
        rec = json.loads((out / f"j{job_id}w{w}.json").read_text())
        npy = out / f"j{job_id}w{w}.npy"
        got.append({"code": code, "rec": rec, "res": np.load(npy) if npy.exists() else None})
    return got


def assert_exact(got: list[dict[str, Any]], seed: int, size: int, calls: int) -> None:
    from hosts.vector_job import expected_sum

    n = len(got)
    want = np.stack([expected_sum(seed, n, c, size) for c in range(calls)])
    for w, g in enumerate(got):
        assert g["code"] == 0, f"worker {w}: {g['rec'].get('error')}"
        assert g["res"].dtype == np.int32 and np.array_equal(g["res"], want), f"worker {w}"


def test_switch_sum_of_integer_vectors_is_exact_on_clean_links(clean_net: Any, tmp_path: Path):
    job = clean_net.submit(workers=4, window=32, name="clean")
    # one untimed call first (the goodput bench's start): neither timed nor among the results
    got = run_vectors(clean_net, job, [1, 2, 3, 4], tmp_path, 5000, 3, 11, "--warmup", "1")
    assert_exact(got, 11, 5000, 3)
    assert all(len(g["rec"]["times"]) == 3 and g["rec"]["stats"]["calls"] == 4 for g in got)


def impairments_within(frames: int, imp: Impairment, seed: int) -> dict[str, int]:
    """What a relay seeded ``seed`` does to the first ``frames`` frames it sees, whichever
    they are: it decides each frame's fate by its own random generator alone, so replaying
    its decision code (a sink for a socket) gives what every such relay did to them."""
    from topologies.impair_relay import Direction, _forward

    class Sink:
        def send(self, data: bytes) -> int:
            return len(data)

    d = Direction(src=None, dst=Sink(), held=deque())
    rng = random.Random(seed)
    for count in range(1, frames + 1):
        _forward(d, b"frame", imp, rng, now=0.0, count=count)
    return {"dropped": d.dropped, "duplicated": d.duplicated, "reordered": d.reordered}


@pytest.mark.parametrize("p", [0.01, 0.05], ids=["1pct", "5pct"])
def test_switch_sum_is_exact_with_loss_duplication_and_reordering_on_every_link(
    tmp_path: Path, p: float
):
    imp, size, calls = Impairment(loss=p, dup=p, reorder=p, seed=5), 3000, 2
    nr = start_net(tmp_path, impairment=imp)
    try:
        job = nr.submit(workers=4, window=32, name=f"lossy-{p}")
        got = run_vectors(nr, job, [1, 2, 3, 4], tmp_path, size, calls, 23, "--timeout", "0.05")
    finally:
        nr.close()
    assert_exact(got, 23, size, calls)
    stats = nr.relay_stats()
    assert sorted(stats) == [f"r{i}" for i in range(1, 6)], stats  # one relay per link
    # Every worker link (relay r{w}, seeded imp.seed + w) carried at least each psn's packet
    # up and its result down: at least as many impairments as its first such frames got.
    frames = 2 * calls * math.ceil(size / SLOTS)
    for w in range(1, 5):
        least = impairments_within(frames, imp, imp.seed + w)
        assert all(least.values()), f"seed {imp.seed + w} spares {frames} frames: pick another"
        got_w = stats[f"r{w}"]
        assert all(got_w[k] >= n for k, n in least.items()), (w, got_w, least)


def test_forged_packets_of_another_job_or_outside_the_region_change_no_result(
    clean_net: Any, tmp_path: Path
):
    from controller.api_client import ControllerApi
    from topologies.experiment import host_ip, host_mac

    a = clean_net.submit(workers=2, window=32, name="a", worker_ports=[1, 2], agg_ip=host_ip(5))
    b = clean_net.submit(
        workers=2, window=32, name="b", worker_ports=[3, 4],
        worker_ips=[host_ip(3), host_ip(4)], worker_macs=[host_mac(3), host_mac(4)],
        agg_ip=host_ip(5),
    )  # fmt: skip
    api: ControllerApi = clean_net.api
    ra, rb = api.job(a)["region"], api.job(b)["region"]
    a_lo, a_hi = ra["offset"], ra["offset"] + ra["size"]
    b_lo, b_hi = rb["offset"], rb["offset"] + rb["size"]
    forgers = [
        # h1 is job a's worker 0: job b's id, and job a's id pointed into job b's region.
        (
            1,
            [
                f"{b}:0:{b_lo}:{b_hi}",
                f"{b}:1:{b_lo}:{b_hi}",
                f"{a}:0:{b_lo}:{b_hi}",
                f"{a}:0:{b_hi}:{b_hi + 64}",
            ],
        ),
        # h5 belongs to no job: both jobs' ids, in their own regions.
        (5, [f"{a}:1:{a_lo}:{a_hi}", f"{b}:0:{b_lo}:{b_hi}"]),
        # h3 is job b's worker 0: job a's id in job a's region.
        (3, [f"{a}:0:{a_lo}:{a_hi}", f"{b}:0:{a_lo}:{a_hi}"]),
    ]
    procs = [
        clean_net.popen(f"h{h}", [sys.executable, "-c", FORGER, host_ip(5), *s]) for h, s in forgers
    ]
    try:
        # The jobs start once the switch is refusing every forger's packets.
        deadline = time.monotonic() + 30
        while not all(n >= 100 for n in forged(clean_net.drop_counters()).values()):
            assert all(p.poll() is None for p in procs), "a forger died"
            assert time.monotonic() < deadline, clean_net.drop_counters()
            time.sleep(0.1)
        before = forged(clean_net.drop_counters())
        out_a, out_b = tmp_path / "a", tmp_path / "b"
        out_a.mkdir()
        out_b.mkdir()
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            fa = pool.submit(run_vectors, clean_net, a, [1, 2], out_a, 8192, 4, 31)
            fb = pool.submit(run_vectors, clean_net, b, [3, 4], out_b, 8192, 4, 37)
            got_a, got_b = fa.result(), fb.result()
        assert all(p.poll() is None for p in procs), "a forger stopped before the jobs ended"
        after = forged(clean_net.drop_counters())
    finally:
        for p in procs:
            p.terminate()
            p.wait(5)
    assert_exact(got_a, 31, 8192, 4)
    assert_exact(got_b, 37, 8192, 4)
    # Forged packets kept reaching the switch while the jobs ran; it refused them.
    assert all(after[r] > before[r] for r in after), (before, after)


def forged(drops: dict[str, int]) -> dict[str, int]:
    """The drop reasons the forgers cause: wrong (job, worker, port), outside the region."""
    return {r: drops.get(r, 0) for r in ("UNKNOWN_WORKER", "OUT_OF_REGION")}


def test_worker_whose_peers_never_come_fails_with_a_clear_bounded_timeout(
    clean_net: Any, tmp_path: Path
):
    job = clean_net.submit(workers=2, window=16, name="alone")
    got = run_vectors(clean_net, job, [1], tmp_path, 512, 1, 3, "--total-timeout", "3", limit=30.0)
    assert got[0]["code"] == 1 and got[0]["res"] is None
    error = got[0]["rec"]["error"]
    assert "timed out" in error and f"job {job}" in error, error
    assert "no complete result within 3 s" in error, error  # the bound ended it
