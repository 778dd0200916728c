"""ATP's host side without a switch: the PS's piece merging, and the worker's bounds."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from hosts.atp.ps import AtpAggregator, AtpJobSpec, AtpParameterServer
from hosts.atp.worker import AtpClient
from hosts.netreduce.allreduce import AllReduceTimeout
from wire.header import Flag, Header, unpack

SPEC = {3: AtpJobSpec(4, "10.0.0.1")}


def piece(bitmap: int, values: list[int], psn: int = 0, flags: int = Flag.FALLBACK) -> Header:
    return Header(job_id=3, psn=psn, bitmap=bitmap, flags=flags, slot_count=len(values))


def test_pieces_that_nest_or_are_disjoint_are_summed_once_in_64_bits() -> None:
    ps = AtpAggregator(SPEC, slots=2)
    big = 2**31 - 1
    w0, w1 = [1, big], [2, 5 - big]
    assert ps.process(piece(0b0001, w0), np.array(w0)) == []
    # A rack's aggregate of workers 0 and 1 contains the stored piece: it replaces it.
    assert ps.process(piece(0b0011, [3, 5]), np.array([3, 5])) == []
    # Worker 1 alone (its retransmission reached the PS too): covered, a duplicate.
    assert ps.process(piece(0b0010, w1), np.array(w1)) == []
    # Workers 2 and 3; the int64 sum of the pieces is wrapped once, at the end.
    out = ps.process(piece(0b1100, [10, big]), np.array([10, big]))
    (payload, dest), = out  # fmt: skip
    h, v = unpack(payload)
    assert v.tolist() == [13, np.int32(np.int64(5 + big) - 2**32)]
    assert h.flags & Flag.RESULT and h.bitmap == 0b1111 and dest == ("10.0.0.1", 20050)
    assert ps.stats.duplicates == 1 and ps.stats.results == 1 and ps.stats.aggregates == 2


def test_finished_psn_is_served_again_only_to_a_retransmission() -> None:
    ps = AtpAggregator({3: AtpJobSpec(1, "10.0.0.1")}, slots=1)
    assert len(ps.process(piece(1, [7]), np.array([7]))) == 1
    assert ps.process(piece(1, [7]), np.array([7])) == []  # a late copy
    again = ps.process(piece(1, [7], flags=Flag.FALLBACK | Flag.RETX), np.array([7]))
    assert unpack(again[0][0])[1].tolist() == [7] and ps.stats.reserved == 1


def test_pieces_of_unknown_jobs_results_and_wrong_slot_counts_are_ignored() -> None:
    ps = AtpAggregator(SPEC, slots=2)
    assert ps.process(Header(job_id=4, bitmap=1, slot_count=2), np.array([1, 2])) == []
    assert ps.process(piece(1, [1, 2], flags=Flag.RESULT), np.array([1, 2])) == []
    assert ps.process(piece(1, [1]), np.array([1])) == []
    assert ps.stats.ignored == 3


@pytest.mark.parametrize("backend", ["native", "python"])
def test_an_atp_call_that_cannot_finish_ends_with_a_clear_error_within_its_bound(
    backend: str,
) -> None:
    """Nothing ever answers: the call fails within its bound, and its window is not cut (a
    call without any result is stalled, not congested: a partner not started yet)."""
    c = AtpClient(3, 0, 2, 0, 64, 8, dest=("127.0.0.1", 9), bind=("127.0.0.1", 0),
                  timeout=0.02, total_timeout=0.5, backend=backend)  # fmt: skip
    with pytest.raises(AllReduceTimeout, match=r"job 3, worker 0 timed out.*psn 0"):
        c.allreduce_int(np.arange(64, dtype=np.int32))
    assert c.stats.retransmissions >= 1 and c.stats.window_cuts == 0 and c.cwnd == 8
    c.close()


def test_worker_keeps_its_window_to_its_range_and_its_psns_in_flight_apart() -> None:
    """Window 64 asked in a range of 16: the worker keeps 16 psns in flight, and any 16
    consecutive psns (wherever they start) take 16 different aggregators of the range."""
    from wire.header import atp_index

    c = AtpClient(3, 0, 2, 100, 16, 64, dest=("127.0.0.1", 9), bind=("127.0.0.1", 0))
    assert c.window == c.max_window == 16
    assert [c._address(p) for p in range(20)] == [(atp_index(3, p, 100, 16), 0) for p in range(20)]
    for first in (0, 7, 1000, 2**32 - 16):
        assert sorted(c._address(first + i)[0] for i in range(16)) == list(range(100, 116))
    c.set_layout(1, 0, 8, window=32)  # a scheduled job's smaller range: the window follows
    assert c.window == c.max_window == 8
    c.close()


def test_results_from_any_address_but_the_aggregation_address_are_ignored() -> None:
    """A host that is not the job's PS (or switch) sends a wrong result first: the worker
    takes the PS's."""
    import socket

    from hosts.atp.ps import AtpParameterServer
    from wire.header import pack

    c = AtpClient(3, 0, 1, 0, 64, 8, dest=("127.0.0.1", 9), bind=("127.0.0.1", 0),
                  timeout=0.2, total_timeout=5.0)  # fmt: skip
    spec = AtpJobSpec(1, "127.0.0.1", result_port=c.endpoint.address[1])
    ps = AtpParameterServer({3: spec}, bind=("127.0.0.1", 0))
    c.dest = ps.address
    forger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    forger.bind(("127.0.0.2", 0))
    wrong = pack(Header(job_id=3, psn=0, flags=Flag.RESULT), np.full(32, 666, dtype=np.int32))
    forger.sendto(wrong, c.endpoint.address)
    ps.start()
    try:
        got = c.allreduce_int(np.arange(32, dtype=np.int32))
    finally:
        ps.stop()
        forger.close()
        c.close()
    assert got.tolist() == list(range(32)) and c.stats.foreign == 1


def test_a_timeout_whose_results_were_only_late_gives_the_window_back() -> None:
    """The PS stalls once for 0.2 s (a host descheduled) with the worker's window in flight:
    the worker times out, resends and halves its window; the PS then answers the originals
    and the copies, the duplicates show the results were late, not lost, and the window
    is restored. A worker whose PS never stalls never cuts."""

    def run(stall_at: int | None) -> AtpClient:
        c = AtpClient(5, 0, 1, 0, 64, 8, dest=("127.0.0.1", 9), bind=("127.0.0.1", 0),
                      timeout=0.05)  # fmt: skip
        spec = AtpJobSpec(1, "127.0.0.1", result_port=c.endpoint.address[1])
        # the Python PS, whose state machine the test wraps to stall it
        ps = AtpParameterServer({5: spec}, bind=("127.0.0.1", 0), backend="python")
        process, stalled = ps.aggregator.process, threading.Event()

        def late(h: Header, values: np.ndarray) -> list[tuple[bytes, tuple[str, int]]]:
            if h.psn == stall_at and not stalled.is_set():
                stalled.set()
                time.sleep(0.2)
            return process(h, values)

        ps.aggregator.process = late  # type: ignore[method-assign]
        ps.start()
        c.dest = ps.address
        data = np.arange(32 * 120, dtype=np.int32)
        try:
            assert c.allreduce_int(data).tolist() == data.tolist()
        finally:
            c.close()
            ps.stop()
        return c

    stalled = run(stall_at=60)
    assert stalled.stats.window_cuts >= 1 and stalled.stats.retransmissions >= 1
    assert stalled.stats.undone_cuts >= 1 and stalled.cwnd >= 7, stalled.stats
    plain = run(stall_at=None)
    assert plain.stats.window_cuts == 0 == plain.stats.undone_cuts


def test_the_switchs_copy_of_a_result_it_multicast_is_remembered_and_acknowledged() -> None:
    """A RESULT naming every worker is the switch's copy of a result it sent the workers:
    the PS answers with an ACK (no values), serves it again to a retransmission, and takes
    a second copy as a duplicate; from the bytes or the parsed header alike."""
    from wire.header import pack

    for via_bytes in (True, False):
        ps = AtpAggregator({3: AtpJobSpec(2, "10.0.0.1")}, slots=2)
        copy = Header(job_id=3, psn=5, agg_idx=9, bitmap=0b11, flags=Flag.RESULT, slot_count=2)
        values = np.array([4, -6], dtype=np.int32)
        if via_bytes:
            out = ps.process_payload(pack(copy, values))
        else:
            out = ps.process(copy, values)
        (ack, dest), = out  # fmt: skip
        h, v = unpack(ack)
        assert (h.flags, h.psn, h.agg_idx, h.slot_count, v.size) == (Flag.ACK, 5, 9, 0, 0)
        assert dest == ("10.0.0.1", 20050)
        assert ps.process_payload(pack(copy, values)) == []  # a second copy
        again = ps.process(piece(0b01, [4, -6], psn=5, flags=Flag.RETX), np.array([1, 1]))
        assert unpack(again[0][0])[1].tolist() == [4, -6]
        assert ps.stats.multicast == 1 and ps.stats.duplicates == 1 and ps.stats.reserved == 1


def test_the_native_and_python_atp_workers_give_the_same_sums() -> None:
    """The C loop with ATP's addressing and window (hosts/transport/native_window.c) and
    the Python loop, against the same PS: the same sums, call after call; the native
    window stays within 1 .. the range."""
    got = {}
    for backend in ("native", "python"):
        c = AtpClient(7, 0, 1, 0, 16, 64, dest=("127.0.0.1", 9), bind=("127.0.0.1", 0),
                      backend=backend)  # fmt: skip
        spec = AtpJobSpec(1, "127.0.0.1", result_port=c.endpoint.address[1])
        ps = AtpParameterServer({7: spec}, bind=("127.0.0.1", 0)).start()
        c.dest = ps.address
        rng = np.random.default_rng(3)
        try:
            got[backend] = [
                c.allreduce_int(rng.integers(-(2**30), 2**30, n, dtype=np.int32))
                for n in (1000, 33, 4096)
            ]
        finally:
            ps.stop()
            c.close()
        assert c.backend == backend and 1 <= c.cwnd <= 16
        assert c.stats.results == sum(-(-n // 32) for n in (1000, 33, 4096))
    for a, b in zip(got["native"], got["python"], strict=True):
        assert np.array_equal(a, b)
