"""The goodput profile's attribution (tests/bench/netreduce_trace.py): a downlink's idle time
goes to the switch when it held a complete PSN, to a worker when its window allowed a packet
it had not sent."""

from __future__ import annotations

import pytest

from tests.bench.netreduce_trace import Frame, attribute

MS = 1e-3


def frames(ups: dict[int, tuple[float, float]], downs: dict[int, float]) -> list[Frame]:
    """Two workers on ports 1 and 2: per PSN their packets' arrival and the result's departure."""
    got = [Frame(t, port, False, psn) for psn, ts in ups.items() for port, t in enumerate(ts, 1)]
    got += [Frame(t, port, True, psn) for psn, t in downs.items() for port in (1, 2)]
    return sorted(got, key=lambda f: f.t)


def test_idle_downlinks_go_to_the_switch_or_to_the_worker_that_sent_late():
    ups = {0: (0.0, 0.0), 1: (1 * MS, 1 * MS), 2: (2 * MS, 2 * MS), 3: (3 * MS, 12 * MS)}
    # psn 2 complete at 2 ms, out at 8.5 ms: the switch held it; psn 3: worker 2 could send it
    # at 3 ms (psn 1's result at 2.5 ms, its link free after psn 2) and sent it at 12 ms
    downs = {0: 1.5 * MS, 1: 2.5 * MS, 2: 8.5 * MS, 3: 12.5 * MS}
    got = attribute(frames(ups, downs), 0, 4, window=2, frame_s=1 * MS)
    assert got["switch_s"] == pytest.approx(5.5 * MS)
    assert got["workers_s"] == pytest.approx(2.5 * MS)
    assert got["missed"] == 0


def test_a_psn_the_capture_lost_a_frame_of_is_left_out_and_counted():
    ups = {0: (0.0, 0.0), 1: (1 * MS, 1 * MS), 2: (2 * MS, 2 * MS)}
    downs = {0: 1.5 * MS, 1: 2.5 * MS, 2: 8.5 * MS}
    lost = [f for f in frames(ups, downs) if not (f.psn == 2 and f.port == 2 and f.result)]
    got = attribute(lost, 0, 3, window=2, frame_s=1 * MS)
    assert got == {"switch_s": 0.0, "workers_s": 0.0, "missed": 1}
