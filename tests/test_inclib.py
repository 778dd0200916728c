"""inclib: admission through the real controller daemon (p4sim over gRPC), the host-only
fallback with its one-line notice, and per-block quantisation's error bound."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inclib
from controller.daemon import ControllerDaemon, DaemonConfig
from controller.p4rt.p4runtime_client import SwitchSpec
from hosts.netreduce.allreduce import LocalGroup, fixed_point_allreduce
from inclib.block_quantize import INT32_MAX, block_allreduce, words
from inclib.plan import AdmissionError
from tests.worker_threads import run_threads
from topologies.local_switch import LocalSwitch, PipelineFiles


@pytest.fixture
def daemon(files: PipelineFiles, tmp_path: Path) -> Iterator[ControllerDaemon]:
    with LocalSwitch(device_id=0) as sw:
        d = ControllerDaemon(
            DaemonConfig(
                switches=(SwitchSpec(0, sw.address),),
                p4info=files.p4info,
                device_config=files.device_config,
                db=tmp_path / "controller.db",
                listen=("127.0.0.1", 0),
                pool_size=64,
            )
        )
        d.start()
        try:
            yield d
        finally:
            d.stop()


def test_admission_gets_a_switch_job_then_falls_back_when_memory_is_exhausted(
    daemon: ControllerDaemon,
) -> None:
    first = inclib.admit(daemon.url, workers=2, name="big", window=64)  # the whole pool
    assert first.on_switch and first.job_id is not None and first.reason == ""
    with inclib.join(first, worker_id=1) as s:
        assert s.on_switch and s.config["region_size"] == 64 and s.config["worker_id"] == 1
    second = inclib.admit(daemon.url, workers=2, name="late", window=8)
    assert not second.on_switch and "no free region of 8 aggregators" in second.reason
    first.release()
    third = inclib.admit(daemon.url, workers=2, name="after", window=8)
    assert third.on_switch  # the released memory serves the next job


def test_a_bad_request_is_the_applications_error_not_a_fallback(daemon: ControllerDaemon) -> None:
    with pytest.raises(AdmissionError, match="window"):
        inclib.admit(daemon.url, workers=2, window=0)
    with pytest.raises(AdmissionError, match="3 peers given for 2 workers"):
        inclib.admit(daemon.url, workers=2, peers=["10.0.0.1", "10.0.0.2", "10.0.0.3"])


def free_udp_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_workers(plan: inclib.Plan, fn: Any) -> list[Any]:
    out: list[Any] = [None] * plan.n_workers
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            with inclib.join(plan.to_json(), worker_id=w, notice=notices[w]) as s:
                out[w] = fn(w, s)
        except BaseException as e:  # surfaced below
            errors.append(e)

    notices = [io.StringIO() for _ in range(plan.n_workers)]
    run_threads(plan.n_workers, work, 60)
    assert not errors, errors
    return [(o, n.getvalue()) for o, n in zip(out, notices, strict=True)]


def test_without_a_switch_the_same_calls_run_on_the_hosts_with_one_notice() -> None:
    peers = [f"127.0.0.1:{p}" for p in free_udp_ports(3)]
    plan = inclib.admit("unix:/nonexistent/inc.sock", workers=3, name="fallback", peers=peers)
    xs = [np.arange(100, dtype=np.int32) * (w + 1) for w in range(3)]
    fs = [np.linspace(-1, 1, 50, dtype=np.float32) * (w + 1) for w in range(3)]

    def work(w: int, s: inclib.Session) -> Any:
        return s.allreduce(xs[w]), s.allreduce(fs[w].reshape(5, 10)), s.last_error_bound

    got = run_workers(plan, work)
    notices = "".join(n for _, n in got)  # the workers share this process: one line
    assert notices.count("\n") == 1
    assert "cannot serve job 'fallback' (cannot reach the controller" in notices
    for (ints, floats, bound), _ in got:
        assert np.array_equal(ints, sum(xs))
        assert floats.shape == (5, 10)
        assert np.all(np.abs(floats.reshape(-1) - sum(fs)) <= bound.reshape(-1) + 1e-6)


def test_the_notice_is_written_once_per_job_in_a_process() -> None:
    plan = inclib.admit("unix:/nonexistent/inc.sock", workers=1, name="once", peers=["127.0.0.1:0"])
    out = io.StringIO()
    for _ in range(3):
        inclib.join(plan, 0, notice=out).close()
    assert out.getvalue().count("inclib: the switch cannot serve job 'once'") == 1
    assert out.getvalue().count("\n") == 1


def test_reduce_by_key_without_a_switch_sums_every_mappers_pairs_exactly() -> None:
    from collections import Counter

    port = free_tcp_port()
    plan = inclib.admit(
        "unix:/nonexistent/inc.sock", workers=3, kind="ask", name="words",
        reducer_address=f"127.0.0.1:{port}",
    )  # fmt: skip
    shards = [["a", "b", "a"] * 1000 + [f"w{w}-{i}" for i in range(5000)] for w in range(3)]
    totals: dict = {}
    with inclib.reducer(plan) as r:
        collector = threading.Thread(target=lambda: totals.update(r.collect(timeout=30)))
        collector.start()
        got = run_workers(plan, lambda w, s: s.reduce_by_key((x, 1) for x in shards[w]))
        collector.join(30)
    assert totals == Counter(x for shard in shards for x in shard)
    assert [n for n, _ in got] == [5002] * 3  # distinct keys each mapper sent
    assert "reduce-by-key sends each mapper's combined pairs" in "".join(n for _, n in got)


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def threads_block_allreduce(xs: list[np.ndarray], block: int) -> list[inclib.BlockQuantized]:
    group = LocalGroup(len(xs))
    out: list[Any] = [None] * len(xs)

    def work(w: int) -> None:
        out[w] = block_allreduce(group.allreduce_fn(w), len(xs), xs[w], block)

    run_threads(len(xs), work, 30)
    return out


@pytest.mark.parametrize("n", [1, 4, 32])
def test_per_block_sum_is_within_its_documented_bound(n: int) -> None:
    rng = np.random.default_rng(n)
    # magnitudes from 1e-6 to 1e3 along the vector, as gradients of different layers
    scale = np.repeat(10.0 ** rng.uniform(-6, 3, size=40), 64)
    xs = [(rng.standard_normal(scale.size) * scale).astype(np.float32) for _ in range(n)]
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    results = threads_block_allreduce(xs, block=64)
    # the documented relative form: n / (2 s_b) < n * B_b / (2**31 - 1 - n/2) with
    # B_b < 16 sum_w max|x_w in b| (each worker's block maximum rounded up to a power of two,
    # times eight: the headroom that lets the next call reuse the bounds)
    maxima = np.sum([np.abs(x.astype(np.float64)).reshape(40, 64).max(axis=1) for x in xs], 0)
    relative = n * 16 * maxima / (INT32_MAX - n / 2)
    for r in results:
        err = np.abs(r.values.astype(np.float64) - exact)
        assert np.all(err <= r.error_bound() + np.abs(r.values) * 2.0**-24)
        assert np.all(r.error_bound()[::64] < relative)
        assert np.array_equal(r.values, results[0].values)  # every worker, the same bits


def test_per_block_scaling_beats_one_scale_on_small_blocks() -> None:
    n = 4
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(512).astype(np.float32) * 1e-4 for _ in range(n)]
    for x in xs:
        x[:8] = 100.0  # one large block
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    group = LocalGroup(n)
    single: list[Any] = [None] * n

    def one_scale(w: int) -> None:
        single[w] = fixed_point_allreduce(group.allreduce_fn(w), n, xs[w], None)[0]

    run_threads(n, one_scale, 30)
    blocked = threads_block_allreduce(xs, block=64)[0].values
    small = slice(64, None)
    err_single = np.abs(single[0][small] - exact[small]).max()
    err_block = np.abs(blocked[small] - exact[small]).max()
    assert err_block * 1000 < err_single  # many more bits for the small values


def test_worst_case_block_sums_do_not_overflow_int32() -> None:
    n = 32
    x = np.full(256, 1.0, dtype=np.float32)
    x[::2] = -1.0
    rs = threads_block_allreduce([x.copy() for _ in range(n)], block=256)
    assert np.array_equal(rs[0].values, n * x)
    assert rs[0].scales[0] * n + n / 2 <= INT32_MAX


def test_a_bucket_takes_two_integer_calls_its_bounds_and_its_values() -> None:
    sizes: list[int] = []

    def identity(q: np.ndarray) -> np.ndarray:
        sizes.append(q.size)
        return q

    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    r = block_allreduce(identity, 4, x, block=256)
    assert sizes == [4 * words(4) + 1, 1024]  # 4 blocks: their bounds and the range flag
    assert np.all(np.abs(r.values - x) <= r.error_bound())


def test_the_next_call_of_a_bucket_takes_one_integer_call_unless_a_block_outgrows_its_promise() -> (
    None
):
    n, rng = 4, np.random.default_rng(5)
    group = LocalGroup(n)
    calls: list[list[int]] = [[] for _ in range(n)]
    rounds = [[(rng.standard_normal(700) * 1e-2).astype(np.float32) for _ in range(n)]]
    rounds.append([x * 1.5 for x in rounds[0]])  # grown by less than the 4x headroom
    rounds.append([x * 0.01 for x in rounds[0]])  # shrunk: still within the promise
    rounds.append([x * 1000 for x in rounds[0]])  # outgrown on every worker: resent
    out: list[list[Any]] = [[None] * n for _ in rounds]

    def work(w: int) -> None:
        def fn(q: np.ndarray) -> np.ndarray:
            calls[w].append(q.size)
            return group.allreduce_fn(w)(q)

        prior = None
        for r, xs in enumerate(rounds):
            out[r][w] = block_allreduce(fn, n, xs[w], block=256, prior=prior)
            prior = out[r][w].prior

    run_threads(n, work, 30)
    words_len = 3 * words(n) + 1
    one = 768 + words_len + 3  # values, bound words, one flag per block
    assert calls[0] == [words_len, 768, one, one, one, 768], calls[0]  # the last: resent
    assert all(c == calls[0] for c in calls)
    for r, xs in enumerate(rounds):
        exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
        res = out[r][0]
        assert np.all(np.abs(res.values - exact) <= res.error_bound() + np.abs(exact) * 2.0**-23)
        assert all(np.array_equal(o.values, res.values) for o in out[r])


def test_only_the_blocks_that_outgrew_a_promise_are_sent_again() -> None:
    n, rng = 3, np.random.default_rng(9)
    group = LocalGroup(n)
    calls: list[list[int]] = [[] for _ in range(n)]
    first = [(rng.standard_normal(1000) * 1e-2).astype(np.float32) for _ in range(n)]
    first[0][300:512] = 0.0  # block 1 of worker 0: all zero (a ReLU unit that was off)
    second = [x * 1.2 for x in first]
    second[0][300:512] = 0.5  # ... now nonzero: only block 1 outgrew, on worker 0 alone
    second[2][900] = 40.0  # block 3 of worker 2 too
    out: list[list[Any]] = [[None] * n for _ in range(2)]

    def work(w: int) -> None:
        def fn(q: np.ndarray) -> np.ndarray:
            calls[w].append(q.size)
            return group.allreduce_fn(w)(q)

        r = block_allreduce(fn, n, first[w], block=256)
        out[0][w] = r
        out[1][w] = block_allreduce(fn, n, second[w], block=256, prior=r.prior)

    run_threads(n, work, 30)
    words_len = 4 * words(n) + 1
    assert calls[0][2:] == [1024 + words_len + 4, 2 * 256], calls[0]  # blocks 1 and 3 again
    assert all(c == calls[0] for c in calls)
    exact = np.sum([x.astype(np.float64) for x in second], axis=0)
    res = out[1][0]
    assert np.all(np.abs(res.values - exact) <= res.error_bound() + np.abs(exact) * 2.0**-23)
    assert all(np.array_equal(o.values, res.values) for o in out[1])
    assert res.scales[1] < out[0][0].scales[1] and res.scales[0] == out[0][0].scales[0]


def test_a_value_beyond_the_range_fails_on_every_worker_alike() -> None:
    xs = [np.ones(300, dtype=np.float32) for _ in range(3)]
    xs[1][7] = 2.0**30  # only worker 1 holds it; all three must raise, none may hang
    group = LocalGroup(3)
    errors: list[str] = []

    def work(w: int) -> None:
        try:
            block_allreduce(group.allreduce_fn(w), 3, xs[w])
        except ValueError as e:
            errors.append(str(e))

    run_threads(3, work, 30)
    assert len(errors) == 3 and all("beyond what the fixed-point" in e for e in errors)


def test_block_allreduce_refuses_nan_and_a_bad_block() -> None:
    with pytest.raises(ValueError, match="NaN"):
        block_allreduce(lambda q: q, 1, np.array([np.nan], dtype=np.float32))
    with pytest.raises(ValueError, match="block must be >= 1"):
        block_allreduce(lambda q: q, 1, np.ones(3, dtype=np.float32), block=0)


def test_bad_plans_and_worker_ids_get_one_line_errors() -> None:
    with pytest.raises(ValueError, match="not an inclib plan"):
        inclib.Plan.from_json('{"controller": 1}')
    with pytest.raises(ValueError, match="not an inclib plan"):
        inclib.join("[1, 2", worker_id=0)
    plan = inclib.admit("unix:/nonexistent/inc.sock", workers=2, peers=["127.0.0.1:0"] * 2)
    with pytest.raises(ValueError, match=r"worker_id must be in 0\.\.1, got 2"):
        inclib.join(plan, worker_id=2)
    with pytest.raises(AdmissionError, match="workers must be >= 1"):
        inclib.admit("unix:/nonexistent/inc.sock", workers=0)
