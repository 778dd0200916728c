"""Serene's synchronisation modes through the switch in Mininet, with 1% loss on every
link (root): partial rounds with a straggler, workers running ahead under bounded
staleness, async's running aggregate, and the mode swapped back and forth while the
workers run, every round checked.

Three workers (``python -m hosts.serene.worker``, worker 2 a straggler) all-reduce seeded
vectors, one all-reduce per epoch; each packet's result must be exactly the sum of the
workers its bitmap names, the same on every worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from controller.api_client import ApiError
from topologies.impair_relay import Impairment
from wire.header import SLOTS

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/serene-test")
WORKERS, SIZE, SEED = 3, 64, 5


@pytest.fixture(scope="module")
def net() -> Iterator[Any]:
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(
        star(WORKERS + 1),
        impairment=Impairment(loss=0.01, seed=3),
        run_dir=RUN_DIR,
        log=lambda s: None,
    )
    ex = Experiment(cfg).__enter__()
    try:
        yield ex
    finally:
        ex.close()


def run_workers(
    net: Any, job: int, out: Path, epochs: int, slow: float, *extra: str
) -> list[dict[str, Any]]:
    procs = []
    for w in range(WORKERS):
        cmd = [sys.executable, "-m", "hosts.serene.worker", "--controller", net.controller_url,
               "--job-id", str(job), "--worker-id", str(w), "--epochs", str(epochs),
               "--size", str(SIZE), "--seed", str(SEED), "--out", str(out / f"w{w}")]  # fmt: skip
        cmd += list(extra)
        if w == WORKERS - 1:
            cmd += ["--slow", str(slow)]
        procs.append(net.popen(f"h{w + 1}", cmd))
    got = []
    for w, p in enumerate(procs):
        code = p.wait(timeout=240)
        rec = json.loads((out / f"w{w}.json").read_text())
        assert code == 0, f"worker {w}: {rec.get('error')}"
        data = np.load(out / f"w{w}.npz")
        got.append({"rec": rec, "results": data["results"], "bitmaps": data["bitmaps"]})
    return got


def check_every_packet(got: list[dict[str, Any]], epochs: int) -> np.ndarray:
    """Each packet's sums are exactly those of the workers its bitmap names, and every
    worker got the same; returns the bitmaps (epoch x packet)."""
    from hosts.vector_job import make_vector

    bitmaps = got[0]["bitmaps"]
    for g in got[1:]:
        assert np.array_equal(g["results"], got[0]["results"])
        assert np.array_equal(g["bitmaps"], bitmaps)
    for e in range(epochs):
        for j, bm in enumerate(bitmaps[e]):
            want = np.zeros(SLOTS, dtype=np.int32)
            for w in range(WORKERS):
                if int(bm) >> w & 1:
                    want += make_vector(SEED, w, e, SIZE)[j * SLOTS : (j + 1) * SLOTS]
            assert np.array_equal(got[0]["results"][e, j * SLOTS : (j + 1) * SLOTS], want), (e, j)
    return bitmaps


def popcount(bitmaps: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda b: bin(int(b)).count("1"))(bitmaps)


def incctl(net: Any, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "controller.incctl", "--controller", net.controller_url]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, check=False)


def test_partial_rounds_complete_without_the_straggler_and_name_their_contributors(
    net: Any, tmp_path: Path
) -> None:
    job = net.submit("partial", kind="serene", workers=WORKERS, window=8, mode="partial 2")
    epochs = 8
    got = run_workers(net, job, tmp_path, epochs, slow=0.3)
    bitmaps = check_every_packet(got, epochs)
    assert (popcount(bitmaps) == 2).all(), bitmaps
    straggler = WORKERS - 1
    without = sum(1 for bm in bitmaps.ravel() if not int(bm) >> straggler & 1)
    assert without >= bitmaps.size // 2, bitmaps  # the rounds mostly went on without it
    assert incctl(net, "job", "cancel", str(job)).returncode == 0


def test_mode_swapped_repeatedly_under_traffic_never_splits_a_round(
    net: Any, tmp_path: Path
) -> None:
    job = net.submit("swap", kind="serene", workers=WORKERS, window=8, mode="sync")
    epochs = 24
    swaps: list[tuple[int, str]] = []  # (boundary epoch, mode from there on)
    done = threading.Event()

    refused: list[str] = []  # why a swap was refused: only because another was under way
    api = net.api

    def swapper() -> None:
        # The first swap through the command line, the rest through its API client: a
        # process start per swap would leave a loaded machine's workers few swaps to see.
        modes = ["partial 2", "sync"]
        while not done.is_set():
            if not swaps:
                res = incctl(net, "job", "mode", str(job), *modes[0].split(), "--json")
                got = json.loads(res.stdout) if res.returncode == 0 else None
                why = res.stderr
            else:
                try:
                    got, why = api.set_mode(job, modes[0]), ""
                except ApiError as err:
                    got, why = None, str(err)
            if got is not None:
                swaps.append((int(got["boundary_epoch"]), got["mode"]))
                modes.reverse()
            else:
                refused.append(why)
            time.sleep(0.2)

    t = threading.Thread(target=swapper, daemon=True)
    t.start()
    try:
        got = run_workers(net, job, tmp_path, epochs, slow=0.1)
    finally:
        done.set()
        t.join(30)
    bitmaps = check_every_packet(got, epochs)
    assert all("in progress" in why or "racing" in why for why in refused), refused
    assert len(swaps) >= 3 and {m for _, m in swaps} == {"partial 2", "sync"}, swaps
    boundaries = [b for b, _ in swaps]
    assert boundaries == sorted(set(boundaries)), swaps
    counts = popcount(bitmaps)
    for e in range(epochs):
        mode = "sync"
        for b, m in swaps:
            if b <= e:
                mode = m
        want = WORKERS if mode == "sync" else 2
        assert (counts[e] == want).all(), (e, mode, counts[e], swaps)
    assert incctl(net, "job", "cancel", str(job)).returncode == 0


def test_workers_running_ahead_are_held_to_the_bound_and_every_round_is_whole(
    net: Any, tmp_path: Path
) -> None:
    """Workers keep 4 epochs in flight (``--ahead 3``) beside a straggler. Under bounded 1
    the switch refuses epochs more than 2 past the slowest worker's (WAIT replies, resent
    until admitted), and every round completes with all three, exactly."""
    job = net.submit("bounded-1", kind="serene", workers=WORKERS, window=16,
                     region_size=16, mode="bounded 1")  # fmt: skip
    epochs = 12
    got = run_workers(net, job, tmp_path, epochs, 0.2, "--ahead", "3")
    bitmaps = check_every_packet(got, epochs)
    assert (popcount(bitmaps) == WORKERS).all(), bitmaps
    fast_waits = sum(g["rec"]["waits"] for g in got[:-1])
    assert fast_waits > 0, [g["rec"]["waits"] for g in got]
    assert incctl(net, "job", "cancel", str(job)).returncode == 0


def test_async_adds_every_contribution_once_and_nobody_waits_for_the_straggler(
    net: Any, tmp_path: Path
) -> None:
    """async under 1% loss: each answer is the switch's running aggregate (RUNNING), the
    fast workers finish without
    the straggler (their last answers lack its later epochs), and the straggler's last
    answer is exactly the sum of every contribution of every worker: each was added once,
    none lost, none twice."""
    from hosts.vector_job import make_vector

    job = net.submit("async", kind="serene", workers=WORKERS, window=8, region_size=8,
                     mode="async")  # fmt: skip
    epochs = 10
    got = run_workers(net, job, tmp_path, epochs, 0.3, "--pipeline")
    assert all(g["rec"]["running"] == [True] * epochs for g in got), [g["rec"] for g in got]
    total = sum(make_vector(SEED, w, e, SIZE) for w in range(WORKERS) for e in range(epochs))
    straggler = got[-1]["results"]
    assert np.array_equal(straggler[-1], total)
    for g in got[:-1]:
        assert not np.array_equal(g["results"][-1], total)  # done before the straggler
    # Once the fast workers are done, each of the straggler's answers adds its own only.
    mine = [make_vector(SEED, WORKERS - 1, e, SIZE) for e in range(epochs)]
    assert np.array_equal(straggler[-1] - straggler[-2], mine[-1])
    assert incctl(net, "job", "cancel", str(job)).returncode == 0
