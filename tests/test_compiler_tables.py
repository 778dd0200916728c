"""Tables in compiled programs (tests/compiler_programs/tables.p4): exact, lpm, ternary,
range and optional keys, const entries with priorities, default actions, hit/miss and
switch on action_run.  res_t = exact_v, lpm_v, tern_v, const_v, sw_v, hit_flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim import Switch, SwitchError

PROG = Path(__file__).parent / "compiler_programs" / "tables.p4"


def req(a: int, b: int, ip: int, c: int) -> bytes:
    return bytes([a]) + b.to_bytes(2, "big") + ip.to_bytes(4, "big") + bytes([c])


def run(sw: Switch, *args: int) -> dict[str, int]:
    out = sw.send(0, req(*args))
    assert len(out) == 1
    names = ["exact_v", "lpm_v", "tern_v", "const_v", "sw_v", "flags"]
    return dict(zip(names, out[0][1], strict=False))


@pytest.fixture
def sw() -> Switch:
    return Switch.from_file(str(PROG))


def test_empty_tables_run_default_actions(sw: Switch) -> None:
    r = run(sw, 0x10, 5, 0x0A000001, 1)
    assert r["exact_v"] == 0xEE  # default miss_default()
    assert r["lpm_v"] == 0x77  # default with argument
    assert r["tern_v"] == 0  # implicit NoAction
    assert r["flags"] == 4  # exact miss, lpm miss, switch took a1


def test_exact_hit_sets_hit_flag(sw: Switch) -> None:
    sw.table_add("t_exact", {"hdr.req.a": 0x10, "hdr.req.b": 5}, "set_exact", {"v": 9})
    r = run(sw, 0x10, 5, 0, 1)
    assert r["exact_v"] == 9 and r["flags"] & 1
    assert run(sw, 0x10, 6, 0, 1)["exact_v"] == 0xEE


def test_lpm_key_by_name_annotation_longest_prefix(sw: Switch) -> None:
    sw.table_add("t_lpm", {"ip_addr": (0x0A000000, 8)}, "set_lpm", {"v": 8})
    sw.table_add("t_lpm", {"ip_addr": (0x0A000000, 24)}, "set_lpm", {"v": 24})
    assert run(sw, 0, 0, 0x0A000001, 0)["lpm_v"] == 24
    assert run(sw, 0, 0, 0x0A010001, 0)["lpm_v"] == 8
    assert run(sw, 0, 0, 0x0A010001, 0)["flags"] & 2


def test_ternary_range_optional_highest_priority_wins(sw: Switch) -> None:
    sw.table_add(
        "t_tern",
        {"hdr.req.a": (0x10, 0xF0), "hdr.req.b": (0, 10)},
        "set_tern",
        {"v": 1},
        priority=1,
    )
    sw.table_add(
        "t_tern", {"hdr.req.a": (0x10, 0xFF), "hdr.req.c": 2}, "set_tern", {"v": 2}, priority=5
    )
    assert run(sw, 0x10, 5, 0, 1)["tern_v"] == 1  # optional c=2 does not match
    assert run(sw, 0x10, 5, 0, 2)["tern_v"] == 2  # both match, priority 5 wins
    assert run(sw, 0x10, 11, 0, 1)["tern_v"] == 0  # outside the range: miss
    assert run(sw, 0x1F, 10, 0, 1)["tern_v"] == 1


def test_const_entries_earlier_entry_wins(sw: Switch) -> None:
    assert run(sw, 0x11, 0, 0, 0)["const_v"] == 1  # 0x10 &&& 0xF0 listed first
    assert run(sw, 0x20, 0, 0, 0)["const_v"] == 3  # catch-all _


def test_const_entries_table_rejects_control_plane_add(sw: Switch) -> None:
    with pytest.raises(SwitchError, match="const"):
        sw.table_add("t_const", {"hdr.req.a": 1}, "set_const", {"v": 1})


def test_const_default_action_cannot_change(sw: Switch) -> None:
    with pytest.raises(SwitchError, match="const"):
        sw.table_set_default("t_sw", "a1")


def test_switch_on_action_run(sw: Switch) -> None:
    assert run(sw, 0, 0, 0, 1)["sw_v"] == 1 and run(sw, 0, 0, 0, 1)["flags"] & 4
    assert run(sw, 0, 0, 0, 2)["sw_v"] == 2 and run(sw, 0, 0, 0, 2)["flags"] & 8
    assert run(sw, 0, 0, 0, 3)["flags"] & 16  # default label


def test_table_introspection_names_keys_and_actions(sw: Switch) -> None:
    t = sw.table_info("t_tern")
    assert t.name == "Ing.t_tern"
    assert [(k.name, k.match_kind, k.width) for k in t.keys] == [
        ("hdr.req.a", "ternary", 8),
        ("hdr.req.b", "range", 16),
        ("hdr.req.c", "optional", 8),
    ]
    assert t.actions == ["Ing.set_tern", "NoAction"]
    assert t.action_scopes["NoAction"] == "defaultonly"
    assert sw.action_info("set_tern").params == [("v", 8)]


def test_bad_action_parameter_is_reported(sw: Switch) -> None:
    with pytest.raises(SwitchError, match="does not fit"):
        sw.table_add("t_exact", {"hdr.req.a": 1, "hdr.req.b": 2}, "set_exact", {"v": 256})
    with pytest.raises(SwitchError, match="unknown action"):
        sw.table_add("t_exact", {"hdr.req.a": 1, "hdr.req.b": 2}, "set_lpm", {"v": 1})
