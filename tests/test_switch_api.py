"""The in-process Switch API: names, control-plane errors, introspection, log hook."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim import Switch, SwitchError
from p4sim.compiler import compile_file

PROGS = Path(__file__).parent / "compiler_programs"
BASIC = str(PROGS / "basic.p4")
LANG = str(PROGS / "lang.p4")


def test_unknown_table_name_lists_known_tables() -> None:
    sw = Switch.from_file(BASIC)
    with pytest.raises(SwitchError, match="unknown table 'nope'.*Ing.ipv4_lpm"):
        sw.table_add("nope", {}, "drop")


def test_ambiguous_suffix_is_rejected() -> None:
    sw = Switch.from_file(LANG, target="p4sim")
    with pytest.raises(SwitchError, match="ambiguous table 't'"):
        sw.table_info("t")
    assert sw.table_info("adder1.t").name == "Ing.adder1.t"


def test_matches_by_position_and_unknown_key_name() -> None:
    sw = Switch.from_file(BASIC)
    sw.table_add("ipv4_lpm", [(0x0A000000, 8)], "ipv4_forward", [1, 2])
    with pytest.raises(SwitchError, match="unknown key"):
        sw.table_add("ipv4_lpm", {"dst": (1, 32)}, "drop")


def test_key_suffix_and_missing_parameter() -> None:
    sw = Switch.from_file(BASIC)
    sw.table_add("ipv4_lpm", {"dstAddr": (0x0B000000, 8)}, "drop")
    with pytest.raises(SwitchError, match="missing parameter"):
        sw.table_add("ipv4_lpm", {"dstAddr": (0x0C000000, 8)}, "ipv4_forward", {"port": 1})


def test_duplicate_entry_is_a_switch_error() -> None:
    sw = Switch.from_file(BASIC)
    sw.table_add("ipv4_lpm", {"dstAddr": (0x0B000000, 8)}, "drop")
    with pytest.raises(SwitchError, match="already exists"):
        sw.table_add("ipv4_lpm", {"dstAddr": (0x0B000000, 8)}, "drop")


def test_extern_introspection_lists_sizes_and_widths() -> None:
    sw = Switch.from_file(str(PROGS / "stateful.p4"))
    ex = {e.name: e for e in sw.externs()}
    assert (ex["Ing.acc"].kind, ex["Ing.acc"].size, ex["Ing.acc"].width) == ("register", 16, 32)
    assert ex["Ing.pkts"].kind == "counter" and ex["Ing.pkts"].unit == "packets_and_bytes"
    assert ex["Ing.dc"].table == "Ing.t_dc"
    assert sw.program.digests["learn_t"] == [("idx", 8), ("val", 32)]


def test_log_hook_traces_tables_and_actions() -> None:
    lines: list[str] = []
    sw = Switch.from_file(BASIC, log=lines.append)
    sw.send(0, bytes(14))
    assert any("Parser 'P' entering state 'start'" in x for x in lines)
    assert any("Extracting header 'hdr.ethernet'" in x for x in lines)
    assert any("Dropping packet" in x for x in lines)


def test_without_log_hook_no_logging_code_is_generated() -> None:
    assert "LOG(" not in compile_file(BASIC).source
    assert "LOG(" in compile_file(BASIC, trace=True).source


def test_two_switches_do_not_share_state() -> None:
    prog = compile_file(str(PROGS / "stateful.p4"))
    a, b = Switch(prog), Switch(prog)
    a.register_write("acc", 0, 5)
    assert b.register_read("acc", 0) == 0


def test_counter_read_unknown_name() -> None:
    sw = Switch.from_file(str(PROGS / "stateful.p4"))
    with pytest.raises(SwitchError, match="unknown counter"):
        sw.counter_read("acc", 0)


def test_program_info_keeps_annotations_and_scopes() -> None:
    info = Switch.from_file(LANG, target="p4sim").info
    t = info.table("global_table")
    assert t.annotations == ('@name(".global_table")',)
    assert info.action("Ing.renamed_action").annotations == ('@name("renamed_action")',)
    assert [p.width for p in info.action("Ing.set_r4").params] == [8]
    tern = Switch.from_file(str(PROGS / "tables.p4")).info.table("t_tern")
    assert [r.scope for r in tern.actions] == ["TABLE_AND_DEFAULT", "DEFAULT_ONLY"]
    const = Switch.from_file(str(PROGS / "tables.p4")).info.table("t_const").const_entries
    assert const is not None and len(const) == 3


def test_only_the_last_digest_of_a_packet_is_sent() -> None:
    src = (
        (PROGS / "stateful.p4")
        .read_text()
        .replace(
            "digest<learn_t>(1, { hdr.req.idx, hdr.req.val });",
            "digest<learn_t>(1, { hdr.req.idx, hdr.req.val });\n"
            "            digest<learn_t>(1, { 8w1, 32w2 });",
        )
    )
    sw = Switch.from_source(src, "two_digests.p4")
    sw.send(0, bytes([1, 7]) + (99).to_bytes(4, "big"))
    assert sw.digests == [("learn_t", (1, 2))]


def test_table_default_reports_the_current_default_action() -> None:
    sw = Switch.from_file(BASIC)
    assert sw.table_default("ipv4_lpm") == ("Ing.drop", ())
    sw.table_set_default("ipv4_lpm", "ipv4_forward", {"dstAddr": 5, "port": 2})
    assert sw.table_default("ipv4_lpm") == ("Ing.ipv4_forward", (5, 2))
