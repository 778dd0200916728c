"""Behaviour of p4sim.runtime.externs (BMv2 simple_switch semantics)."""

from __future__ import annotations

import logging

import pytest

from p4sim.runtime.externs import (
    GREEN,
    RED,
    YELLOW,
    Counter,
    DirectCounter,
    DirectMeter,
    ExternError,
    Meter,
    Register,
)
from p4sim.runtime.tables import Entry, KeyField, Table

# -- registers ---------------------------------------------------------------------------


def test_register_write_masks_value_to_width() -> None:
    r = Register("r", width=8, size=4)
    r.write(1, 0x1FF)
    assert r.read(1) == 0xFF


def test_register_stores_negative_as_twos_complement_pattern() -> None:
    r = Register("r", width=8, size=1)
    r.write(0, -1)
    assert r.read(0) == 0xFF


def test_register_out_of_range_write_is_ignored_and_logged(caplog) -> None:
    r = Register("r", width=8, size=2)
    with caplog.at_level(logging.ERROR, logger="p4sim.externs"):
        r.write(2, 5)
    assert r.values == [0, 0]
    assert "out-of-bounds index 2" in caplog.text


def test_register_out_of_range_read_keeps_destination_value() -> None:
    r = Register("r", width=8, size=2)
    assert r.read(7, default=42) == 42
    assert r.read(7) == 0


def test_register_control_plane_out_of_range_raises() -> None:
    r = Register("MyIngress.r", width=8, size=2)
    with pytest.raises(ExternError, match="MyIngress.r: index 2 is out of range"):
        r.cp_read(2)
    with pytest.raises(ExternError):
        r.cp_write(-1, 0)


def test_register_reset_zeroes_cells() -> None:
    r = Register("r", width=8, size=2)
    r.cp_write(0, 3)
    r.reset()
    assert r.cp_read(0) == 0


# -- counters ----------------------------------------------------------------------------


def test_counter_counts_packets_and_bytes() -> None:
    c = Counter("c", 4, "packets_and_bytes")
    c.count(2, 100)
    c.count(2, 60)
    assert c.read(2) == (2, 160)
    assert c.read(0) == (0, 0)


def test_packets_counter_still_tracks_bytes_like_bmv2() -> None:
    c = Counter("c", 1, "packets")
    c.count(0, 64)
    assert c.read(0) == (1, 64)


def test_counter_out_of_range_count_is_ignored() -> None:
    c = Counter("c", 2)
    c.count(5, 100)
    assert c.packets == [0, 0] and c.bytes == [0, 0]


def test_counter_write_and_reset() -> None:
    c = Counter("c", 2)
    c.write(1, 7, 700)
    assert c.read(1) == (7, 700)
    c.reset()
    assert c.read(1) == (0, 0)


def test_counter_rejects_unknown_kind() -> None:
    with pytest.raises(ExternError, match="unknown kind 'flows'"):
        Counter("c", 1, "flows")


# -- meters ------------------------------------------------------------------------------


def _trace(execute) -> list[int]:
    """The hand-computed RFC 2698 trace: CIR 1000 B/s CBS 1000, PIR 2000 B/s PBS 1500."""
    return [
        execute(600, 0),
        execute(600, 0),
        execute(600, 0),
        execute(400, 100_000),
        execute(200, 100_000),
        execute(1500, 1_000_000),
    ]


# t=0: P 1500-600=900, C 1000-600=400 -> G; P 900-600=300, C 400<600 -> Y;
# P 300<600 -> R.  t=0.1s: P +200=500-400=100, C +100=500-400=100 -> G;
# P 100<200 -> R.  t=1s: P +1800 capped 1500-1500=0, C +900 capped 1000<1500 -> Y.
EXPECTED = [GREEN, YELLOW, RED, GREEN, RED, YELLOW]


def test_meter_colours_follow_rfc2698_hand_trace() -> None:
    m = Meter("m", 1, "bytes")
    m.set_rates(0, (0.001, 1000), (0.002, 1500))
    assert _trace(lambda n, t: m.execute(0, n, t)) == EXPECTED


def test_meter_per_second_config_matches_per_microsecond_rates() -> None:
    m = Meter("m", 2, "bytes")
    m.set_config(1, cir=1000, cburst=1000, pir=2000, pburst=1500)
    assert _trace(lambda n, t: m.execute(1, n, t)) == EXPECTED
    assert m.get_config(1) == (1000, 1000, 2000, 1500)
    assert m.get_rates(1) == [(0.001, 1000), (0.002, 1500)]


def test_packet_meter_counts_one_unit_per_packet() -> None:
    m = Meter("m", 1, "packets")
    m.set_rates(0, (1e-6, 1), (2e-6, 2))  # 1 and 2 packets per second
    colours = [m.execute(0, 9000, 0) for _ in range(3)]
    assert colours == [GREEN, YELLOW, RED]
    assert m.execute(0, 9000, 1_000_000) == GREEN  # one second refills both buckets


def test_time_origin_shift_gives_same_colours() -> None:
    m = Meter("m", 1, "bytes")
    m.reset_time_origin(5_000_000)
    m.set_rates(0, (0.001, 1000), (0.002, 1500))
    assert _trace(lambda n, t: m.execute(0, n, 5_000_000 + t)) == EXPECTED


def test_unconfigured_meter_returns_green() -> None:
    m = Meter("m", 1, "bytes")
    assert [m.execute(0, 10**6, 0) for _ in range(3)] == [GREEN] * 3
    assert m.get_rates(0) == [] and m.get_config(0) is None


def test_reset_rates_makes_meter_green_again() -> None:
    m = Meter("m", 1, "packets")
    m.set_rates(0, (0.0, 0), (0.0, 0))
    assert m.execute(0, 1, 0) == RED
    m.reset_rates(0)
    assert m.execute(0, 1, 0) == GREEN


def test_meter_rejects_committed_rate_above_peak() -> None:
    m = Meter("m", 1, "bytes")
    with pytest.raises(ExternError, match="committed rate .* above peak"):
        m.set_rates(0, (0.5, 10), (0.1, 10))
    assert m.get_rates(0) == []


def test_meter_out_of_range_execute_returns_default() -> None:
    m = Meter("m", 1, "bytes")
    assert m.execute(3, 100, 0, default=YELLOW) == YELLOW
    with pytest.raises(ExternError):
        m.set_rates(3, (0.1, 1), (0.1, 1))


def test_meter_pre_colour_is_a_floor() -> None:
    m = Meter("m", 1, "bytes")
    m.set_rates(0, (1.0, 1000), (1.0, 1000))
    assert m.execute(0, 10, 0, pre_color=YELLOW) == YELLOW


# -- direct externs ----------------------------------------------------------------------


def _table() -> Table:
    return Table("t", [KeyField("k", "exact", 8)], 8, "drop")


def test_direct_counter_counts_per_entry() -> None:
    t = _table()
    dc = DirectCounter("dc", t)
    h1, h2 = t.add(Entry((1,), "a", ())), t.add(Entry((2,), "a", ()))
    dc.count(t.lookup((1,)), 100)
    dc.count(t.lookup((1,)), 50)
    assert dc.read(h1) == (2, 150) and dc.read(h2) == (0, 0)
    dc.write(h2, 5, 5)
    assert dc.read(h2) == (5, 5)
    dc.reset()
    assert dc.read(h2) == (0, 0)


def test_direct_counter_state_removed_with_entry() -> None:
    t = _table()
    dc = DirectCounter("dc", t)
    h = t.add(Entry((1,), "a", ()))
    dc.count(t.get(h), 10)
    t.delete(h)
    with pytest.raises(ExternError, match="dc: table t: no entry with handle"):
        dc.read(h)
    h = t.add(Entry((1,), "a", ()))
    assert dc.read(h) == (0, 0)


def test_direct_meter_per_entry_colours_and_removed_with_entry() -> None:
    t = _table()
    dm = DirectMeter("dm", t, "bytes")
    h = t.add(Entry((1,), "a", ()))
    other = t.get(t.add(Entry((2,), "a", ())))
    dm.set_config(h, cir=1000, cburst=1000, pir=2000, pburst=1500)
    assert _trace(lambda n, tm: dm.execute(t.get(h), n, tm)) == EXPECTED
    assert dm.execute(other, 10**6, 0) == GREEN  # no rates on that entry
    assert dm.get_config(h) == (1000, 1000, 2000, 1500)
    t.delete(h)
    h = t.add(Entry((1,), "a", ()))
    assert dm.get_rates(h) == []


def test_direct_meter_reset_rates_returns_to_green() -> None:
    t = _table()
    dm = DirectMeter("dm", t, "packets")
    h = t.add(Entry((1,), "a", ()))
    dm.set_rates(h, (0.0, 0), (0.0, 0))
    assert dm.execute(t.get(h), 1, 0) == RED
    dm.reset_rates(h)
    assert dm.execute(t.get(h), 1, 0) == GREEN
