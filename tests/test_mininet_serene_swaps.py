"""Two clients swap a Serene job's mode at the same moments while its two workers all-reduce
through the switch in Mininet, with loss, duplicated and held-back frames on every link
(root). Seeded histories of the clients' requests (invocation, response, answer) are
checked (docs/protocol.md, "Hot swap", S1; issue 26, case 2):

- the accepted swaps are one sequence: distinct boundary epochs, in the order the requests
  were answered (a swap answered before another was asked has the earlier boundary);
- every round is aggregated under exactly one mode, the one the history gives its epoch
  (a partial-1 round has one contributor, any other two), and every packet's result is
  the exact sum of the workers its bitmap names, the same on both workers;
- every copy of a round's result that reaches a host (duplicates, held-back and late
  packets of older epochs answered by the switch included) is the same: a delayed
  duplicate judged under a mode other than its epoch's would complete the round a second
  time with another bitmap.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topologies.impair_relay import Impairment
from wire.header import SLOTS

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(600)]
RUN_DIR = Path("run/serene-swaps-test")
WORKERS, SIZE, EPOCHS, DATA_SEED = 2, 64, 40, 11
MODES = ("sync", "partial 1", "bounded 1", "bounded 2")
CLIENTS = 2


@dataclass(frozen=True)
class Request:
    """One client's swap request as it happened (times: ``time.monotonic``)."""

    client: int
    mode: str
    asked: float
    answered: float
    status: int  # 200: applied; 409: refused
    boundary: int | None  # the first epoch under ``mode`` when applied
    message: str = ""


@pytest.fixture(scope="module")
def net() -> Iterator[Any]:
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(
        star(WORKERS + 1),  # the last host stands for the aggregation address
        impairment=Impairment(loss=0.01, dup=0.02, reorder=0.05, hold_s=0.05, seed=3),
        run_dir=RUN_DIR,
        log=lambda s: None,
    )
    ex = Experiment(cfg).__enter__()
    try:
        yield ex
    finally:
        ex.close()


def swapper(
    url: str,
    job: int,
    client: int,
    seed: int,
    gate: threading.Barrier,
    done: threading.Event,
    out: list[Request],
) -> None:
    """Asks for a random mode each time both clients meet at ``gate`` (so the two requests
    are in flight together), then waits a random while."""
    from controller.api_client import ApiError, ControllerApi

    rng = random.Random(seed * 100 + client)
    api = ControllerApi(url, timeout=60.0)
    while not done.is_set():
        try:
            gate.wait(timeout=30)
        except threading.BrokenBarrierError:
            return
        time.sleep(rng.uniform(0.0, 0.01))
        mode = rng.choice(MODES)
        asked = time.monotonic()
        try:
            got = api.set_mode(job, mode)
            req = Request(client, mode, asked, time.monotonic(), 200, int(got["boundary_epoch"]))
        except ApiError as err:
            req = Request(client, mode, asked, time.monotonic(), err.status, None, str(err))
        out.append(req)
        time.sleep(rng.uniform(0.05, 0.4))


def run_workers(net: Any, job: int, out: Path) -> list[dict[str, Any]]:
    procs = []
    for w in range(WORKERS):
        cmd = [sys.executable, "-m", "hosts.serene.worker", "--controller", net.controller_url,
               "--job-id", str(job), "--worker-id", str(w), "--epochs", str(EPOCHS),
               "--size", str(SIZE), "--seed", str(DATA_SEED),
               "--out", str(out / f"w{w}")]  # fmt: skip
        if w == WORKERS - 1:
            cmd += ["--slow", "0.05"]  # a straggler: partial rounds go on without it
        procs.append(net.popen(f"h{w + 1}", cmd))
    got = []
    for w, p in enumerate(procs):
        code = p.wait(timeout=300)
        rec = json.loads((out / f"w{w}.json").read_text())
        assert code == 0, f"worker {w}: {rec.get('error')}"
        data = np.load(out / f"w{w}.npz")
        got.append({"results": data["results"], "bitmaps": data["bitmaps"]})
    return got


def serialised(history: list[Request]) -> list[Request]:
    """The accepted swaps in the order they took effect: by boundary, and at one boundary
    in the order they were answered (the job's lock ran them one after the other)."""
    accepted = [r for r in history if r.status == 200]
    return sorted(accepted, key=lambda r: (r.boundary, r.answered))


def mode_of_epochs(history: list[Request]) -> list[str]:
    """Each epoch's mode by the accepted swaps (the job starts in sync)."""
    modes, mode, swaps = [], "sync", serialised(history)
    for e in range(EPOCHS):
        for r in swaps:
            if r.boundary == e:
                mode = r.mode
        modes.append(mode)
    return modes


def check_history(history: list[Request]) -> None:
    """Refusals say why; the accepted swaps are one sequence in real-time order, and two
    share a boundary only when the first changed nothing (asked for the mode in force:
    the entry then holds one mode, which the next swap may replace at once)."""
    for r in history:
        assert r.status in (200, 409), r
        if r.status == 409:
            assert "in progress" in r.message or "passing the fence" in r.message, r
    swaps = serialised(history)
    for before, after in zip(swaps, swaps[1:], strict=False):
        if before.boundary == after.boundary:
            assert before.mode == mode_before(swaps, before), (before, after, swaps)
    for a in swaps:
        for b in swaps:
            if a.answered < b.asked:
                assert a.boundary is not None and b.boundary is not None
                assert a.boundary <= b.boundary, (a, b)
                if a.boundary == b.boundary:
                    assert a.mode == mode_before(swaps, a), (a, b)


def mode_before(swaps: list[Request], r: Request) -> str:
    """The mode in force when swap ``r`` was applied."""
    i = swaps.index(r)
    return swaps[i - 1].mode if i else "sync"


def check_rounds(got: list[dict[str, Any]], modes: list[str]) -> None:
    """Both workers got the same; each packet is the exact sum its bitmap names, and its
    epoch's rounds have the contributors its mode asks for."""
    from hosts.vector_job import make_vector

    bitmaps = got[0]["bitmaps"]
    for g in got[1:]:
        assert np.array_equal(g["results"], got[0]["results"])
        assert np.array_equal(g["bitmaps"], bitmaps)
    for e in range(EPOCHS):
        want_count = 1 if modes[e] == "partial 1" else WORKERS
        for j, bm in enumerate(bitmaps[e]):
            named = [w for w in range(WORKERS) if int(bm) >> w & 1]
            assert len(named) == want_count, (e, j, modes[e], named, modes)
            want = np.zeros(SLOTS, dtype=np.int32)
            for w in named:
                want += make_vector(DATA_SEED, w, e, SIZE)[j * SLOTS : (j + 1) * SLOTS]
            assert np.array_equal(got[0]["results"][e, j * SLOTS : (j + 1) * SLOTS], want), (e, j)


def check_copies(paths: list[Path]) -> tuple[int, int]:
    """Every copy of each round's result that reached a host is the same; how many psns,
    and how many copies a host got beyond the first of each psn (duplicates, answers to
    late or resent packets)."""
    seen: dict[int, tuple[int, int, int]] = {}
    again = 0
    for path in paths:
        mine: set[int] = set()
        for line in path.read_text().splitlines():
            psn, epoch, bitmap, crc = json.loads(line)
            first = seen.setdefault(psn, (epoch, bitmap, crc))
            assert first == (epoch, bitmap, crc), f"psn {psn}: results {first} and {line}"
            again += psn in mine
            mine.add(psn)
    return len(seen), again


@pytest.mark.parametrize("seed", [1, 2])
def test_concurrent_mode_swaps_under_training_never_split_or_redo_a_round(
    net: Any, tmp_path: Path, seed: int
) -> None:
    job = net.submit(f"swaps-{seed}", kind="serene", workers=WORKERS, window=8, mode="sync")
    recorders, paths = [], []
    for w in range(WORKERS):
        paths.append(tmp_path / f"h{w + 1}.results")
        iface = net.host(f"h{w + 1}").defaultIntf().name
        cmd = [sys.executable, "-m", "tests.result_recorder", "--iface", iface,
               "--job", str(job), "--out", str(paths[-1])]  # fmt: skip
        recorders.append(net.start_service(f"h{w + 1}", cmd, "recording", f"rec{seed}-{w}"))
    history: list[Request] = []
    gate, done = threading.Barrier(CLIENTS), threading.Event()
    clients = [
        threading.Thread(
            target=swapper, args=(net.controller_url, job, c, seed, gate, done, history)
        )
        for c in range(CLIENTS)
    ]
    for t in clients:
        t.start()
    try:
        got = run_workers(net, job, tmp_path)
    except AssertionError as err:
        state = net.api.sync_state(job)
        raise AssertionError(f"{err}\nswitch: {state}\nhistory: {history}") from None
    finally:
        done.set()
        gate.abort()
        for t in clients:
            t.join(90)
        for p in recorders:
            net.stop(p)
    check_history(history)
    modes = mode_of_epochs(history)
    check_rounds(got, modes)
    psns, again = check_copies(paths)
    assert psns >= EPOCHS and again > 0, (psns, again)  # the recorders saw the run
    late = net.api.sync_state(job)["late"]
    assert late > 0  # late packets of finished partial rounds were answered, not added
    # what the history must hold to say anything: requests in flight together, swaps
    # applied into partial and out of it, and refusals
    overlapping = sum(
        1 for a in history for b in history if a.client < b.client and a.asked < b.answered
        and b.asked < a.answered
    )  # fmt: skip
    assert overlapping >= 3, history
    assert "partial 1" in modes and modes.count("partial 1") < EPOCHS, modes
    assert any(r.status == 409 for r in history), history
    net.api.cancel(job)
