"""Registers, counters, direct counters, meters, hash and digests in compiled programs
(tests/compiler_programs/stateful.p4).  res_t = old(32) now(32) h16(16) h32(32) color(8)."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from p4sim import Switch, SwitchError
from p4sim.runtime import hashes

PROG = Path(__file__).parent / "compiler_programs" / "stateful.p4"


def req(op: int, idx: int, val: int) -> bytes:
    return bytes([op, idx]) + val.to_bytes(4, "big")


def run(sw: Switch, op: int, idx: int, val: int) -> dict[str, int]:
    d = sw.send(0, req(op, idx, val))[0][1]
    return {
        "old": int.from_bytes(d[0:4], "big"),
        "now": int.from_bytes(d[4:8], "big"),
        "h16": int.from_bytes(d[8:10], "big"),
        "h32": int.from_bytes(d[10:14], "big"),
        "color": d[14],
    }


@pytest.fixture(params=["python", "native"])
def sw(request: pytest.FixtureRequest) -> Switch:
    """stateful.p4 on each back end (the native one must not fall back)."""
    s = Switch.from_file(str(PROG), backend=request.param)
    assert s.backend == request.param, s.backend_notice
    return s


def test_register_read_modify_write_across_packets(sw: Switch) -> None:
    r = run(sw, 0, 3, 10)
    assert (r["old"], r["now"]) == (0, 10)
    r = run(sw, 0, 3, 5)
    assert (r["old"], r["now"]) == (10, 15)
    assert sw.register_read("acc", 3) == 15
    assert sw.register_read("Ing.acc", 4) == 0


def test_register_write_from_control_plane_is_seen(sw: Switch) -> None:
    sw.register_write("acc", 2, 100)
    assert run(sw, 0, 2, 1)["old"] == 100


def test_register_value_wraps_at_width(sw: Switch) -> None:
    sw.register_write("acc", 1, 0xFFFFFFFF)
    assert run(sw, 0, 1, 2)["now"] == 1


def test_register_index_out_of_range_from_control_plane(sw: Switch) -> None:
    with pytest.raises(SwitchError):
        sw.register_read("acc", 16)


def test_counter_counts_packets_and_bytes(sw: Switch) -> None:
    for _ in range(3):
        run(sw, 0, 5, 1)
    assert sw.counter_read("pkts", 5) == (3, 18)
    assert sw.counter_read("pkts", 4) == (0, 0)


def test_hash_crc32_matches_zlib(sw: Switch) -> None:
    r = run(sw, 0, 3, 10)
    assert r["h32"] == zlib.crc32(bytes([3]) + (10).to_bytes(4, "big"))
    assert r["h16"] == hashes.compute_fields("crc16", [(3, 8), (10, 32)]) % 65536


def test_digest_is_collected_with_struct_name(sw: Switch) -> None:
    run(sw, 1, 7, 99)
    run(sw, 0, 7, 99)
    assert sw.digests == [("learn_t", (7, 99))]


def test_direct_counter_counts_hits_per_entry(sw: Switch) -> None:
    h = sw.table_add("t_dc", {"hdr.req.op": 2}, "count_it")
    for _ in range(4):
        run(sw, 2, 0, 0)
    run(sw, 0, 0, 0)
    assert sw.counter_read("dc", h) == (4, 24)


def test_thirty_two_register_updates_per_packet(sw: Switch) -> None:
    for _ in range(3):
        run(sw, 2, 0, 0)
    assert [sw.register_read("many", i) for i in (0, 15, 31)] == [3, 3, 3]


def test_unconfigured_meter_is_green(sw: Switch) -> None:
    assert run(sw, 0, 0, 0)["color"] == 0


def test_meter_marks_red_when_rate_exceeded(sw: Switch) -> None:
    # 1 packet burst, negligible rate: the second back-to-back packet is RED
    sw.meter_set_rates("m", 0, (1e-9, 1), (1e-9, 1))
    colors = [run(sw, 0, 0, 0)["color"] for _ in range(3)]
    assert colors[0] == 0 and colors[-1] == 2


def test_meters_mark_alike_on_both_back_ends() -> None:
    """Committed and peak buckets refilled by the switch clock, configured, changed and
    reset between packets: the same colours on Python and native, and the control plane
    reads the same token state back."""
    py = Switch.from_file(str(PROG))
    nat = Switch.from_file(str(PROG), backend="native")
    assert nat.backend == "native", nat.backend_notice
    now = [0]
    for s in (py, nat):
        s.pipeline.clock = lambda: now[0]
        s.meter_set_rates("m", 0, (0.0005, 3), (0.002, 6))  # per microsecond
    got: dict[str, list[int]] = {"python": [], "native": []}
    for k in range(300):
        now[0] += 137 * (k % 7)
        if k == 150:
            for s in (py, nat):
                s.meter_set_rates("m", 0, (0.001, 2), (0.001, 2))
        if k == 250:
            for s in (py, nat):
                s.extern("m").reset_rates(0)
        for name, s in (("python", py), ("native", nat)):
            got[name].append(run(s, 0, 0, 0)["color"])
    assert got["python"] == got["native"]
    assert {0, 1, 2} <= set(got["native"][:250]) and set(got["native"][250:]) == {0}
    st_py, st_nat = py.extern("m").states[0], nat.extern("m").states[0]
    assert (st_py.ptok, st_py.plast) == (st_nat.ptok, st_nat.plast)
