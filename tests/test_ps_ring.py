"""Host baselines: the parameter server's aggregator state machine and ring all-reduce."""

from __future__ import annotations

import numpy as np
import pytest

from hosts.netreduce.allreduce import AllReduceTimeout
from hosts.netreduce.ps import JobRegion, SoftAggregator
from hosts.netreduce.ps import main as ps_main
from hosts.netreduce.ring import RingAllReduce
from hosts.transport.udp import Endpoint, ImpairedEndpoint
from tests.worker_threads import run_threads
from wire.header import DropReason, Flag, Header, Op, unpack

LOCAL = ("127.0.0.1", 0)
K = 4


def wrapped_sum(xs: list[np.ndarray]) -> np.ndarray:
    total = xs[0].copy()
    for x in xs[1:]:
        total += x
    return total


# --- the parameter server's aggregator (no sockets) -------------------------------------------
def pkt(worker: int, psn: int, value: int, idx: int = 0, ver: int = 0, job: int = 1) -> tuple:
    h = Header(op=Op.AGG_SYNC, job_id=job, worker_id=worker, psn=psn, agg_idx=idx, ver=ver,
               slot_count=K)  # fmt: skip
    return h, np.full(K, value, dtype=np.int32), (f"w{worker}", 1)


def results(out: list) -> list[tuple[str, list[int], int, int]]:
    """(destination host, values, worker_id, flags) of each result datagram."""
    rows = []
    for payload, (host, _) in out:
        h, v = unpack(payload)
        rows.append((host, v.tolist(), h.worker_id, h.flags))
    return rows


def test_ps_sends_the_sum_to_every_worker_when_the_last_contribution_arrives() -> None:
    agg = SoftAggregator(3, slots=K)
    assert agg.process(*pkt(0, 5, 1)) == []
    assert agg.process(*pkt(2, 5, 10)) == []
    out = results(agg.process(*pkt(1, 5, 100)))
    assert [(d, v, w) for d, v, w, _ in out] == [
        ("w0", [111] * K, 0),
        ("w1", [111] * K, 1),
        ("w2", [111] * K, 2),
    ]
    assert all(f & Flag.RESULT for *_, f in out)
    assert unpack(agg.process(*pkt(1, 5, 0))[0][0])[0].bitmap == 0b111


def test_ps_drops_a_repeated_contribution_while_the_aggregation_is_open() -> None:
    agg = SoftAggregator(2, slots=K)
    agg.process(*pkt(0, 0, 7))
    assert agg.process(*pkt(0, 0, 7)) == []
    assert agg.stats.drops[DropReason.DUPLICATE] == 1
    out = results(agg.process(*pkt(1, 0, 1)))
    assert out[0][1] == [8] * K  # counted once


def test_ps_serves_a_finished_result_again_only_to_the_retransmitting_worker() -> None:
    agg = SoftAggregator(2, slots=K)
    agg.process(*pkt(0, 0, 2))
    agg.process(*pkt(1, 0, 3))
    h, v, src = pkt(1, 0, 999)
    out = results(agg.process(h.with_flags(Flag.RETX), v, src))
    assert [(d, vals, w) for d, vals, w, _ in out] == [("w1", [5] * K, 1)]
    assert agg.stats.reserved == 1


def test_ps_reuses_a_copy_for_a_newer_psn_and_drops_older_ones_as_stale() -> None:
    agg = SoftAggregator(2, slots=K)
    agg.process(*pkt(0, 0, 1))
    agg.process(*pkt(1, 0, 1))
    agg.process(*pkt(0, 8, 5))  # same copy, psn + 2S with S = 4: starts afresh
    assert results(agg.process(*pkt(1, 8, 6)))[0][1] == [11] * K
    assert agg.process(*pkt(1, 0, 1)) == []  # a delayed duplicate of the old use
    assert agg.stats.drops[DropReason.STALE] == 1


def test_ps_keeps_the_two_versions_of_an_aggregator_apart() -> None:
    agg = SoftAggregator(2, slots=K)
    agg.process(*pkt(0, 0, 1, ver=0))
    agg.process(*pkt(0, 4, 20, ver=1))
    assert results(agg.process(*pkt(1, 0, 2, ver=0)))[0][1] == [3] * K
    assert results(agg.process(*pkt(1, 4, 30, ver=1)))[0][1] == [50] * K


def test_ps_sum_wraps_around_like_the_switch_int32() -> None:
    agg = SoftAggregator(2, slots=K)
    agg.process(*pkt(0, 0, 2**31 - 1))
    assert results(agg.process(*pkt(1, 0, 2)))[0][1] == [-(2**31) + 1] * K


@pytest.mark.parametrize(
    ("packet", "reason"),
    [
        (pkt(0, 0, 1, job=2), DropReason.UNKNOWN_JOB),
        (pkt(3, 0, 1), DropReason.UNKNOWN_WORKER),
        (pkt(0, 0, 1, idx=9), DropReason.OUT_OF_REGION),
        (pkt(0, 0, 1, idx=2), DropReason.OUT_OF_REGION),
    ],
)
def test_ps_admission_drops_unknown_jobs_workers_and_foreign_indices(
    packet: tuple, reason: DropReason
) -> None:
    agg = SoftAggregator(2, slots=K, jobs={1: JobRegion(quorum=2, offset=4, size=4)})
    assert agg.process(*packet) == []
    assert agg.stats.drops[reason] == 1


def test_ps_ignores_results_and_packets_with_the_wrong_slot_count() -> None:
    agg = SoftAggregator(1, slots=K)
    h, v, src = pkt(0, 0, 1)
    assert agg.process(h.with_flags(Flag.RESULT), v, src) == []
    bad = Header(job_id=1, slot_count=2)
    assert agg.process(bad, np.zeros(2, np.int32), src) == []
    assert agg.stats.ignored == 1 and agg.stats.drops[DropReason.BAD_SLOT_COUNT] == 1


def test_ps_command_line_reports_a_bad_worker_count_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ps_main(["--workers", "0", "--port", "0", "--bind", "127.0.0.1"]) == 2
    assert "n_workers" in capsys.readouterr().err


# --- ring all-reduce --------------------------------------------------------------------------
def ring_run(
    n: int,
    calls: list[list[np.ndarray]],
    impair: tuple[float, float, float] = (0.0, 0.0, 0.0),
    slots: int = 32,
    window: int = 16,
    floats: bool = False,
) -> list[list[np.ndarray]]:
    eps = [Endpoint(LOCAL) for _ in range(n)]
    peers = [e.address for e in eps]

    def worker(w: int) -> list[np.ndarray]:
        ep = ImpairedEndpoint(eps[w], *impair, seed=w) if any(impair) else eps[w]
        r = RingAllReduce(w, peers, endpoint=ep, slots=slots, window=window, timeout=0.02)
        try:
            fn = r.allreduce if floats else r.allreduce_int
            return [fn(xs[w]) for xs in calls]
        finally:
            r.close(linger=0.1)

    return run_threads(n, worker)  # type: ignore[return-value]


def int_vectors(n: int, size: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-(2**31), 2**31, size=size, dtype=np.int64).astype(np.int32)
            for _ in range(n)]  # fmt: skip


@pytest.mark.parametrize(("n", "size"), [(2, 1), (2, 999), (4, 5), (4, 2047), (8, 700)])
def test_ring_int_allreduce_equals_numpy_wrapping_sum(n: int, size: int) -> None:
    calls = [int_vectors(n, size, seed=size), int_vectors(n, size + 3, seed=1)]
    out = ring_run(n, calls)
    for k, xs in enumerate(calls):
        for w in range(n):
            np.testing.assert_array_equal(out[w][k], wrapped_sum(xs))


@pytest.mark.parametrize(
    ("impair", "n"),
    [((0.01, 0.0, 0.0), 4), ((0.05, 0.0, 0.0), 4), ((0.05, 0.0, 0.0), 8),
     ((0.0, 0.1, 0.1), 4), ((0.03, 0.05, 0.05), 3)],
)  # fmt: skip
def test_ring_is_exact_under_loss_duplication_and_reordering(
    impair: tuple[float, float, float], n: int
) -> None:
    calls = [int_vectors(n, 1500, seed=3), int_vectors(n, 600, seed=4), int_vectors(n, 40, 5)]
    out = ring_run(n, calls, impair=impair, slots=16)
    for k, xs in enumerate(calls):
        for w in range(n):
            np.testing.assert_array_equal(out[w][k], wrapped_sum(xs))


def test_ring_float_allreduce_matches_the_sum_within_the_bound_on_every_rank() -> None:
    n = 4
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(500).astype(np.float32) for _ in range(n)]
    out = ring_run(n, [xs], floats=True)
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
    bound = n * 2.0**-26  # |x| < 8 here: B <= 8, scale >= 2**24 for 4 workers
    assert np.all(np.abs(out[0][0] - exact) <= bound + np.abs(exact) * 2.0**-23)
    for w in range(1, n):
        np.testing.assert_array_equal(out[w][0], out[0][0])


def test_ring_with_a_dead_peer_ends_in_allreduce_timeout() -> None:
    eps = [Endpoint(LOCAL) for _ in range(3)]  # rank 2 is bound but never runs
    peers = [e.address for e in eps]

    def worker(w: int) -> BaseException | None:
        r = RingAllReduce(w, peers, endpoint=eps[w], timeout=0.02, max_retries=5,
                          total_timeout=0.5)  # fmt: skip
        try:
            r.allreduce_int(np.arange(300, dtype=np.int32))
        except AllReduceTimeout as e:
            return e
        finally:
            r.close(linger=0)
        return None

    errs = run_threads(2, worker)
    eps[2].close()
    for w, e in enumerate(errs):
        assert isinstance(e, AllReduceTimeout)
        assert f"worker {w}" in str(e) and e.missing


def test_ring_rejects_a_rank_outside_the_peer_list() -> None:
    with pytest.raises(ValueError, match="rank"):
        RingAllReduce(3, [LOCAL, LOCAL])
