"""Sender window (timeouts, retransmission, window limit) and result reassembly."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hosts.transport.sliding_window import (
    ResultAssembler,
    SendWindow,
    WindowTimeout,
    split_into_packets,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_fills_the_window_then_waits_for_results() -> None:
    w = SendWindow(first_psn=100, count=10, window=4, timeout=1.0, clock=FakeClock())
    assert w.poll() == [(100, False), (101, False), (102, False), (103, False)]
    assert w.poll() == []


def test_retransmits_only_after_the_timeout() -> None:
    clock = FakeClock()
    w = SendWindow(first_psn=0, count=2, window=2, timeout=1.0, clock=clock)
    w.poll()
    clock.now = 0.99
    assert w.poll() == []
    clock.now = 1.0
    assert w.poll() == [(0, True), (1, True)]
    assert w.retransmissions == 2
    clock.now = 1.5  # the timer restarted at the retransmission
    assert w.poll() == []


def test_out_of_order_result_does_not_open_the_window_past_the_oldest_missing() -> None:
    w = SendWindow(first_psn=0, count=10, window=2, timeout=1.0, clock=FakeClock())
    w.poll()
    assert w.ack(1)
    assert w.poll() == []  # psn 2 would reuse psn 0's aggregator copy too early
    assert w.ack(0)
    assert w.poll() == [(2, False), (3, False)]


def test_never_sends_beyond_the_window_under_random_loss_and_reordering() -> None:
    rng = random.Random(3)
    clock = FakeClock()
    window, count = 5, 60
    w = SendWindow(first_psn=1000, count=count, window=window, timeout=1.0, clock=clock)
    in_network: list[int] = []
    results = set()
    for _ in range(2000):
        for psn, _retx in w.poll():
            assert w.base <= psn < w.base + window
            if rng.random() > 0.2:  # 20% loss
                in_network.append(psn)
        assert all(p < w.base + window for p in w.in_flight())
        rng.shuffle(in_network)
        if in_network:
            psn = in_network.pop()
            if w.ack(psn):
                results.add(psn)
        clock.now += 0.3
        if w.done:
            break
    assert w.done and results == set(range(1000, 1000 + count))


def test_gives_up_with_a_clear_error_after_max_retries() -> None:
    clock = FakeClock()
    w = SendWindow(first_psn=0, count=1, window=1, timeout=1.0, clock=clock, max_retries=2)
    w.poll()
    for _ in range(2):
        clock.now += 1.0
        assert w.poll() == [(0, True)]
    clock.now += 1.0
    with pytest.raises(WindowTimeout, match="psn 0 got no result after 2 retransmissions"):
        w.poll()


def test_duplicate_and_stray_results_are_not_acknowledged_twice() -> None:
    w = SendWindow(first_psn=0, count=3, window=3, timeout=1.0, clock=FakeClock())
    w.poll()
    assert w.ack(2) and not w.ack(2) and not w.ack(99)
    assert w.in_flight() == [0, 1]


def test_next_deadline_is_oldest_send_plus_timeout() -> None:
    clock = FakeClock()
    w = SendWindow(first_psn=0, count=2, window=1, timeout=0.5, clock=clock)
    assert w.next_deadline() is None
    clock.now = 2.0
    w.poll()
    assert w.next_deadline() == 2.5


def test_a_resend_moves_its_deadline_behind_the_sends_that_are_older_now() -> None:
    clock = FakeClock()
    w = SendWindow(first_psn=0, count=4, window=3, timeout=1.0, clock=clock)
    assert w.poll() == [(0, False), (1, False), (2, False)]
    clock.now = 0.5
    assert w.ack(1) and w.base == 0
    clock.now = 1.0  # 0 and 2 fall due together and go out again, in psn order
    assert w.poll() == [(0, True), (2, True)]
    assert w.next_deadline() == 2.0
    assert w.ack(0) and w.base == 2  # 1 was acknowledged before: the base skips it
    clock.now = 1.5
    assert w.poll() == [(3, False)]
    clock.now = 2.0
    assert w.poll() == [(2, True)]  # only 2 is due: 3 was sent at 1.5
    assert w.next_deadline() == 2.5  # now 3 is the oldest send


def test_a_psn_made_due_goes_out_at_the_next_poll_before_later_deadlines() -> None:
    clock = FakeClock()
    w = SendWindow(first_psn=0, count=3, window=3, timeout=1.0, clock=clock)
    w.poll()
    clock.now = 0.2
    assert w.make_due(1) and not w.make_due(1) and not w.make_due(7)
    assert w.poll() == [(1, True)]
    assert w.next_deadline() == 1.0  # 0 and 2, sent at 0.0, fall due next


def test_assembler_orders_results_by_psn_and_ignores_duplicates() -> None:
    r = ResultAssembler(first_psn=7, count=3, slots=4, length=10)
    assert r.accept(9, np.array([9, 9, 0, 0]))
    assert r.accept(7, np.arange(4))
    assert not r.accept(7, np.full(4, -1))  # duplicate keeps the first copy
    assert not r.accept(10, np.arange(4))  # outside this call
    assert r.missing() == [8] and not r.complete
    with pytest.raises(ValueError, match="missing for psns \\[8\\]"):
        r.result()
    r.accept(8, np.array([4, 5, 6, 7]))
    assert r.result().tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 9, 9]


def test_assembler_rejects_result_with_wrong_slot_count() -> None:
    r = ResultAssembler(first_psn=0, count=1, slots=4)
    with pytest.raises(ValueError, match="expected 4"):
        r.accept(0, np.arange(3))


def test_split_then_reassemble_round_trips_a_vector() -> None:
    v = np.arange(-50, 53, dtype=np.int32)
    packets = split_into_packets(v, 32)
    r = ResultAssembler(first_psn=0, count=len(packets), slots=32, length=v.size)
    for psn in reversed(range(len(packets))):
        r.accept(psn, packets[psn])
    assert np.array_equal(r.result(), v)


# --- the window rule against a model of p4src/aggregator.p4 --------------------------------
class AggregatorModel:
    """Python mirror of Aggregator.apply for one job (docs/protocol.md state machine)."""

    def __init__(self, quorum: int, holders: list[ResultAssembler]) -> None:
        self.quorum, self.holders = quorum, holders
        self.copies: dict[int, dict] = {}
        self.drops = {"stale": 0, "duplicate": 0}

    def receive(self, psn: int, idx: int, ver: int, bit: int, values: np.ndarray):
        """('multicast' | 'unicast' | None, psn, values) as the switch would emit."""
        addr = 2 * idx + ver
        st = self.copies.get(addr)
        delta = (psn - st["psn"]) % 2**32 if st else 1
        if st and delta >= 2**31:
            self.drops["stale"] += 1
            return None
        if st and delta == 0 and st["count"] >= self.quorum:
            return "unicast", psn, st["values"].copy()
        if st and delta == 0 and st["bitmap"] & bit:
            self.drops["duplicate"] += 1
            return None
        if not st or delta != 0:
            # I3: overwriting is safe only if every worker already holds the old result.
            if st:
                assert all(st["psn"] not in h.missing() for h in self.holders)
            st = {"psn": psn, "bitmap": 0, "count": 0, "values": np.zeros_like(values)}
            self.copies[addr] = st
        st["values"] = st["values"] + values
        st["bitmap"] |= bit
        st["count"] += 1
        if st["count"] >= self.quorum:
            return "multicast", psn, st["values"].copy()
        return None


def test_window_rule_gives_exact_sums_through_the_switch_model_under_loss_dup_reorder() -> None:
    rng = random.Random(11)
    n, window, count, slots = 3, 4, 40, 4
    clock = FakeClock()
    data = [np.array([[rng.randrange(-1000, 1000) for _ in range(slots)] for _ in range(count)])
            for _ in range(n)]  # fmt: skip
    windows = [SendWindow(0, count, window, timeout=5.0, clock=clock) for _ in range(n)]
    holders = [ResultAssembler(0, count, slots) for _ in range(n)]
    switch = AggregatorModel(quorum=n, holders=holders)
    net: list[tuple[float, int, str, int, int, np.ndarray]] = []  # (time, seq, dir, w, psn, v)
    seq = 0

    def transmit(direction: str, worker: int, psn: int, values: np.ndarray) -> None:
        nonlocal seq
        copies = 0 if rng.random() < 0.1 else (2 if rng.random() < 0.1 else 1)
        for _ in range(copies):  # 10% loss, 10% duplication, random delay = reordering
            seq += 1
            late = rng.random() < 0.05  # a few stragglers arrive rounds later (stale)
            delay = rng.uniform(10.0, 40.0) if late else rng.uniform(0.1, 3.0)
            net.append((clock.now + delay, seq, direction, worker, psn, values))

    while not all(w.done for w in windows):
        assert clock.now < 10_000, "simulation did not converge"
        for w_id, w in enumerate(windows):
            for psn, _ in w.poll():
                transmit("up", w_id, psn, data[w_id][psn])
        net.sort(key=lambda e: (e[0], e[1]))
        while net and net[0][0] <= clock.now:
            _, _, direction, w_id, psn, values = net.pop(0)
            if direction == "down":
                holders[w_id].accept(psn, values)
                windows[w_id].ack(psn)
                continue
            idx, ver = psn % window, (psn // window) % 2
            out = switch.receive(psn, idx, ver, 1 << w_id, values)
            if out and out[0] == "multicast":
                for dst in range(n):
                    transmit("down", dst, psn, out[2])
            elif out:
                transmit("down", w_id, psn, out[2])
        clock.now += 0.5
    expected = np.sum(data, axis=0).reshape(-1)
    for h in holders:
        assert np.array_equal(h.result(), expected)
    # The run exercised both protections of the state machine.
    assert switch.drops["duplicate"] > 0 and switch.drops["stale"] > 0
