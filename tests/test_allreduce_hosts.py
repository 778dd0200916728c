"""Worker all-reduce client and UDP transport, against the parameter server on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from hosts.netreduce.allreduce import AllReduceClient, AllReduceTimeout, LocalGroup
from hosts.netreduce.ps import ParameterServer
from hosts.transport.udp import Endpoint, ImpairedEndpoint
from tests.worker_threads import run_threads
from wire.header import SLOTS, DropReason, Flag, aggregator_address, hashed_address, unpack

LOCAL = ("127.0.0.1", 0)


def int_vectors(n: int, size: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-(2**31), 2**31, size=size, dtype=np.int64).astype(np.int32)
            for _ in range(n)]  # fmt: skip


def wrapped_sum(xs: list[np.ndarray]) -> np.ndarray:
    total = xs[0].copy()
    for x in xs[1:]:
        total += x  # int32 addition wraps, like the switch
    return total


def impaired(p_loss: float, p_dup: float, p_reorder: float, seed: int) -> ImpairedEndpoint:
    return ImpairedEndpoint(Endpoint(LOCAL), loss=p_loss, dup=p_dup, reorder=p_reorder, seed=seed)


def ps_allreduce(
    n: int,
    xs_per_call: list[list[np.ndarray]],
    impair: tuple[float, float, float] = (0.0, 0.0, 0.0),
    window: int = 16,
    size: int = 16,
) -> tuple[list[list[np.ndarray]], ParameterServer]:
    """Every worker all-reduces each vector of xs_per_call through one PS; per-call results."""
    ps_ep = impaired(*impair, seed=1000) if any(impair) else None
    ps = ParameterServer(n, bind=LOCAL, endpoint=ps_ep).start()
    try:

        def worker(w: int) -> list[np.ndarray]:
            ep = impaired(*impair, seed=w) if any(impair) else Endpoint(LOCAL)
            with AllReduceClient(
                7, w, n, 100, size, window, dest=ps.address, endpoint=ep, timeout=0.02
            ) as c:
                return [c.allreduce_int(xs[w]) for xs in xs_per_call]

        return run_threads(n, worker), ps  # type: ignore[return-value]
    finally:
        ps.stop()


# --- transport ------------------------------------------------------------------------------
def test_endpoint_drains_every_queued_datagram_in_one_call() -> None:
    with Endpoint(LOCAL) as a, Endpoint(LOCAL) as b:
        assert a.send_many((bytes([i]), b.address) for i in range(50)) == 50
        assert b.wait(1.0)
        got: list[bytes] = []
        deadline = time.monotonic() + 1.0
        while len(got) < 50 and time.monotonic() < deadline:
            got += [d for d, _ in b.recv_many()]
        assert got == [bytes([i]) for i in range(50)]
        assert b.recv_many() == []  # non-blocking when empty


def test_endpoint_wait_is_false_when_nothing_arrives_and_true_once_a_datagram_is_queued() -> None:
    with Endpoint(LOCAL) as a, Endpoint(LOCAL) as b:
        assert a.wait(0.05) is False
        b.send_many([(b"x", a.address)])
        assert a.wait(5.0) is True
        assert [d for d, _ in a.recv_many()] == [b"x"]


def test_impairment_is_reproducible_for_a_seed_and_changes_the_stream() -> None:
    def delivered(seed: int) -> list[bytes]:
        with Endpoint(LOCAL) as rx:
            tx = impaired(0.2, 0.2, 0.2, seed)
            tx.send_many((i.to_bytes(2, "big"), rx.address) for i in range(200))
            tx.flush()
            # An end marker sent on the same socket, past the impairment, arrives last
            # (loopback keeps one socket's order): everything delivered is in before it.
            tx.inner.send_many([(b"end", rx.address)])
            out: list[bytes] = []
            while b"end" not in out:
                assert rx.wait(5.0), "the end marker never arrived"
                out += [d for d, _ in rx.recv_many()]
            tx.close()
            return out[: out.index(b"end")]

    a, b = delivered(3), delivered(3)
    assert a == b
    sent = [i.to_bytes(2, "big") for i in range(200)]
    assert a != sent and len(set(a)) < 200  # some lost
    assert len(a) != len(set(a))  # some duplicated
    assert a != sorted(a)  # some reordered


def test_impairment_rejects_a_probability_outside_0_1() -> None:
    with pytest.raises(ValueError, match="loss"):
        ImpairedEndpoint(Endpoint(LOCAL), loss=1.5)


# --- the client through the parameter server --------------------------------------------------
@pytest.mark.parametrize(("n", "size"), [(2, 1), (2, 1000), (4, 33), (4, 2047), (8, 500)])
def test_int_allreduce_through_ps_equals_numpy_wrapping_sum(n: int, size: int) -> None:
    calls = [int_vectors(n, size, seed=size), int_vectors(n, size + 5, seed=size + 1)]
    results, ps = ps_allreduce(n, calls)
    for k, xs in enumerate(calls):
        expected = wrapped_sum(xs)
        for w in range(n):
            assert results[w][k].dtype == np.int32
            np.testing.assert_array_equal(results[w][k], expected)
    # Admission drops never happen; a retransmission after a timeout (a loaded machine) may
    # legitimately arrive as a duplicate or a stale packet.
    admission = (
        DropReason.UNKNOWN_JOB,
        DropReason.UNKNOWN_WORKER,
        DropReason.OUT_OF_REGION,
        DropReason.BAD_SLOT_COUNT,
    )
    assert [ps.stats.drops[r] for r in admission] == [0] * len(admission)


@pytest.mark.parametrize(
    ("impair", "n"),
    [((0.01, 0.0, 0.0), 4), ((0.05, 0.0, 0.0), 4), ((0.05, 0.0, 0.0), 8), ((0.0, 0.1, 0.1), 4),
     ((0.03, 0.05, 0.05), 2)],
)  # fmt: skip
def test_int_allreduce_through_ps_is_exact_under_loss_dup_reorder(
    impair: tuple[float, float, float], n: int
) -> None:
    calls = [int_vectors(n, 1500, seed=5), int_vectors(n, 700, seed=6)]
    results, ps = ps_allreduce(n, calls, impair=impair, window=8, size=8)
    for k, xs in enumerate(calls):
        for w in range(n):
            np.testing.assert_array_equal(results[w][k], wrapped_sum(xs))


def test_lost_results_are_served_again_by_the_ps() -> None:
    calls = [int_vectors(4, 3000, seed=9)]
    results, ps = ps_allreduce(4, calls, impair=(0.05, 0.0, 0.0))
    assert ps.stats.reserved > 0
    np.testing.assert_array_equal(results[0][0], wrapped_sum(calls[0]))


class _Recording(Endpoint):
    """An endpoint that keeps every datagram it receives (the PS side, in tests)."""

    def __init__(self) -> None:
        super().__init__(LOCAL)
        self.log: list[bytes] = []

    def recv_many(self, max_count: int = 4096) -> list[tuple[bytes, tuple[str, int]]]:
        out = super().recv_many(max_count)
        self.log += [d for d, _ in out]
        return out


def test_psns_continue_across_calls_and_address_both_copies_of_the_region() -> None:
    rec = _Recording()
    ps = ParameterServer(1, endpoint=rec).start()
    try:
        with AllReduceClient(3, 0, 1, 40, 4, 4, dest=ps.address, bind=LOCAL) as c:
            c.allreduce_int(np.ones(32 * 6, dtype=np.int32))
            c.allreduce_int(np.ones(32 * 5 + 1, dtype=np.int32))
            assert c.next_psn == 12
    finally:
        ps.stop()
    headers = [unpack(d)[0] for d in rec.log]
    assert sorted(h.psn for h in headers) == list(range(12))
    for h in headers:
        assert (h.agg_idx, h.ver) == aggregator_address(h.psn, 40, 4)
        assert (h.job_id, h.worker_id, h.slot_count, h.flags) == (3, 0, 32, Flag.NONE)
    assert {h.ver for h in headers} == {0, 1}


def test_hashed_layout_addresses_psns_by_the_jobs_hash_in_its_region() -> None:
    rec = _Recording()
    ps = ParameterServer(1, endpoint=rec).start()
    try:
        with AllReduceClient(3, 0, 1, 40, 4, 4, dest=ps.address, bind=LOCAL) as c:
            c.set_layout(0, 40, 6, addressing="hashed")
            c.allreduce_int(np.ones(32 * 6, dtype=np.int32))
            c.set_layout(1, 10, 5, addressing="hashed")  # resized: the hash follows the size
            got = c.allreduce_int(np.ones(32 * 5, dtype=np.int32))
            with pytest.raises(ValueError, match="addressing"):
                c.set_layout(2, 10, 5, addressing="crc")
    finally:
        ps.stop()
    assert np.array_equal(got, np.ones(32 * 5, dtype=np.int32))
    headers = [unpack(d)[0] for d in rec.log]
    assert sorted(h.psn for h in headers) == list(range(11))
    for h in headers:
        region = (40, 6) if h.epoch == 0 else (10, 5)
        assert (h.agg_idx, h.ver) == hashed_address(h.psn, 3, *region)
    assert [h.agg_idx for h in headers if h.epoch == 0] != [40 + p % 6 for p in range(6)]


def test_float_allreduce_is_within_the_quantisation_bound_and_identical_on_workers() -> None:
    n, size = 4, 3000
    rng = np.random.default_rng(11)
    xs = [(rng.standard_normal(size) * 10.0 ** rng.integers(-3, 2)).astype(np.float32)
          for _ in range(n)]  # fmt: skip
    ps = ParameterServer(n, bind=LOCAL).start()
    try:

        def worker(w: int) -> tuple[np.ndarray, float]:
            with AllReduceClient(2, w, n, 0, 32, 32, dest=ps.address, bind=LOCAL) as c:
                out = c.allreduce(xs[w])
                return out, c.error_bound()

        results = run_threads(n, worker)
    finally:
        ps.stop()
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
    out0, bound = results[0]  # type: ignore[misc]
    assert out0.dtype == np.float32
    assert bound < 1e-6 * max(float(np.abs(x).max()) for x in xs)  # a fine scale was agreed
    err = np.abs(out0.astype(np.float64) - exact)
    assert np.all(err <= bound + np.abs(exact) * 2.0**-23)
    for out, _ in results[1:]:  # type: ignore[misc]
        np.testing.assert_array_equal(out, out0)


def test_float_allreduce_refuses_nan() -> None:
    with AllReduceClient(1, 0, 1, 0, 4, 4, dest=LOCAL, bind=LOCAL) as c:
        with pytest.raises(ValueError, match="NaN"):
            c.allreduce(np.array([1.0, np.nan], dtype=np.float32))


def test_unreachable_ps_ends_in_allreduce_timeout_naming_job_worker_and_psns() -> None:
    with Endpoint(LOCAL) as silent:  # bound, so no ICMP errors; it never answers
        c = AllReduceClient(
            9, 1, 2, 0, 8, 8, dest=silent.address, bind=LOCAL, timeout=0.02, max_retries=4
        )
        with pytest.raises(AllReduceTimeout) as err:
            c.allreduce_int(np.arange(100, dtype=np.int32))
        c.close()
    msg = str(err.value)
    assert "job 9" in msg and "worker 1" in msg and "psn 0" in msg
    assert "after 4 retransmissions" in msg  # max_retries ended it, not the total timeout
    assert err.value.missing == [0, 1, 2, 3]


def test_total_timeout_bounds_a_call_when_a_worker_is_missing() -> None:
    ps = ParameterServer(2, bind=LOCAL).start()  # worker 1 never shows up
    try:
        c = AllReduceClient(
            1, 0, 2, 0, 8, 8, dest=ps.address, bind=LOCAL, timeout=0.02,
            max_retries=10_000, total_timeout=0.3,
        )  # fmt: skip
        with pytest.raises(AllReduceTimeout, match="no complete result within 0.3 s"):
            c.allreduce_int(np.arange(64, dtype=np.int32))
        assert c.stats.retransmissions < 10_000  # the total timeout ended it, not the retries
        c.close()
    finally:
        ps.stop()
    assert ps.stats.drops[5] > 0  # its retransmissions were duplicates of an open use


@pytest.mark.parametrize(
    ("args", "match"),
    [((0, 0, 2, 0, 8, 8), "job_id"), ((1, 2, 2, 0, 8, 8), "worker_id"),
     ((1, 0, 2, 0, 4, 8), "window"), ((1, 0, 33, 0, 64, 8), "n_workers")],
)  # fmt: skip
def test_client_rejects_bad_job_settings_with_a_clear_message(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AllReduceClient(*args, dest=LOCAL, bind=LOCAL)


def test_local_group_sums_in_the_same_order_for_every_thread() -> None:
    g = LocalGroup(3)
    xs = [np.full(4, 0.1 * (w + 1), dtype=np.float32) for w in range(3)]
    out = run_threads(3, lambda w: g.allreduce_fn(w)(xs[w]))
    for o in out:
        np.testing.assert_array_equal(o, (xs[0] + xs[1]) + xs[2])


# --- the same client against the switch program (p4src/inc.p4 on p4sim, in process) ----------
class SwitchBridge:
    """p4sim running p4src/inc.p4, with one UDP socket per switch port standing in for a link.

    Worker w's datagrams to port w's socket become Ethernet/IPv4/UDP frames entering switch
    port w + 1; every frame the switch emits on port p goes back as a datagram to the
    worker attached to p. The job's tables and multicast group are set as the controller
    would set them.
    """

    def __init__(
        self,
        n: int,
        offset: int = 0,
        size: int = 0,
        impair: tuple = (0.0, 0.0, 0.0),
        switch: Any = None,
    ) -> None:
        """``switch``: an existing one (anything with ``send(port, frame)``, e.g. a
        ``LocalSwitch`` the controller programs); else p4sim with job 5 set up here."""
        self.ports = [
            impaired(*impair, seed=500 + w) if any(impair) else Endpoint(LOCAL) for w in range(n)
        ]
        self.workers: list[tuple[str, int] | None] = [None] * n
        self._stop = threading.Event()
        if switch is None:
            switch = self._program(n, offset, size)
        self.switch = switch
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _program(self, n: int, offset: int, size: int) -> Any:
        from p4sim.switch import Switch

        sw = Switch.from_file("p4src/inc.p4", include_dirs=["p4src"])
        sw.table_add("jobs", {"hdr.inc.job_id": 5}, "set_region",
                     {"offset": offset, "size": size, "quorum": n, "mcast_grp": 1,
                      "slot_count": SLOTS})  # fmt: skip
        for w in range(n):
            sw.table_add(
                "workers",
                {"hdr.inc.job_id": 5, "hdr.inc.worker_id": w,
                 "standard_metadata.ingress_port": w + 1},
                "set_worker", {"bit_index": w},
            )  # fmt: skip
            sw.table_add(
                "result_dst", {"hdr.inc.job_id": 5, "standard_metadata.egress_rid": w + 1},
                "set_result_dst", {"dst_mac": self._mac(w), "dst_ip": 0x0A000001 + w,
                                   "worker_id": w},
            )  # fmt: skip
        sw.mc_group_create(1, [(w + 1, w + 1) for w in range(n)])
        return sw

    @staticmethod
    def _mac(w: int) -> int:
        return 0x020000000001 + w

    def _serve(self) -> None:
        from wire.framing import decapsulate, encapsulate

        switch_mac, switch_ip = (0x0200000000FF).to_bytes(6, "big"), bytes([10, 0, 0, 100])
        while not self._stop.is_set():
            busy = False
            for w, ep in enumerate(self.ports):
                for payload, src in ep.recv_many(256):
                    busy = True
                    self.workers[w] = src
                    frame = encapsulate(payload, self._mac(w).to_bytes(6, "big"), switch_mac,
                                        bytes([10, 0, 0, 1 + w]), switch_ip)  # fmt: skip
                    for port, out in self.switch.send(w + 1, frame):
                        inner, dest = decapsulate(out), self.workers[port - 1]
                        if inner is not None and dest is not None:
                            self.ports[port - 1].send_many([(bytes(inner), dest)])
            if not busy:
                self.ports[0].wait(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for ep in self.ports:
            ep.close()


@pytest.mark.parametrize(
    ("n", "impair"),
    [(2, (0.0, 0.0, 0.0)), (4, (0.0, 0.0, 0.0)), (4, (0.01, 0.0, 0.0)), (3, (0.05, 0.05, 0.05))],
)
def test_int_allreduce_through_the_p4_switch_equals_numpy_wrapping_sum(
    n: int, impair: tuple[float, float, float]
) -> None:
    bridge = SwitchBridge(n, offset=16, size=8, impair=impair)
    calls = [int_vectors(n, 700, seed=n), int_vectors(n, 65, seed=n + 1)]
    try:

        def worker(w: int) -> list[np.ndarray]:
            ep = impaired(*impair, seed=w) if any(impair) else Endpoint(LOCAL)
            with AllReduceClient(
                5, w, n, 16, 8, 8, dest=bridge.ports[w].address, endpoint=ep, timeout=0.03
            ) as c:
                return [c.allreduce_int(xs[w]) for xs in calls]

        results = run_threads(n, worker)
    finally:
        bridge.stop()
    for k, xs in enumerate(calls):
        for w in range(n):
            np.testing.assert_array_equal(results[w][k], wrapped_sum(xs))  # type: ignore[index]
    drops = [bridge.switch.counter_read("inc_drops", i)[0] for i in range(3)]
    assert drops == [0, 0, 0]  # no packet refused by admission


def test_window_base_is_resent_early_once_three_later_results_arrived() -> None:
    from hosts.netreduce.allreduce import _Window

    now = [0.0]
    w = _Window(100, 8, 4, timeout=10.0, clock=lambda: now[0])  # type: ignore[arg-type]
    for psn, retx in w.poll():
        w.sent(psn, retx)
    for psn in (101, 102):
        w.on_result(psn)
        w.ack(psn)
    assert w.stalled_base() is None  # two later results may still be reordering
    w.on_result(103)
    w.ack(103)
    assert w.stalled_base() == 100
    assert w.expedite(100) and not w.expedite(100)
    resent = [(p, r) for p, r in w.poll() if r]
    assert resent == [(100, True)]
    w.sent(100, True)
    assert w.stalled_base() is None  # needs three more later results after the resend
