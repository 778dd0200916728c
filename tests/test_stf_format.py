"""STF parsing, packet matching and reporting; a small fake switch stands in for p4sim."""

from __future__ import annotations

from typing import Any

import pytest

from p4sim.stf import main, run_stf
from p4sim.stf_format import (
    CheckCounter,
    CheckRegister,
    Expect,
    MatchValue,
    McGroupCreate,
    McNodeAssociate,
    McNodeCreate,
    MirroringAdd,
    MirroringAddMc,
    Nop,
    PacketIn,
    RegisterWrite,
    Remove,
    SetDefault,
    StfError,
    TableAdd,
    ValueSetAdd,
    match_expected,
    parse_stf,
    parse_value,
)

# -- parsing ----------------------------------------------------------------------------


def test_comments_and_blank_lines_are_ignored() -> None:
    cmds = parse_stf("# header\n\n   \npacket 0 00 # trailing\n", "t.stf")
    assert len(cmds) == 1
    assert isinstance(cmds[0], PacketIn) and cmds[0].line == 4


def test_add_with_priority_keys_action_and_handle_name() -> None:
    (cmd,) = parse_stf("add ingress.t 7 h.h.a:0x0a ipv4.dst:10/8 ingress.fwd(port:2, m:0x1f) = A")
    assert isinstance(cmd, TableAdd)
    assert cmd.table == "ingress.t" and cmd.priority == 7
    assert cmd.keys == (
        ("h.h.a", MatchValue("int", 10)),
        ("ipv4.dst", MatchValue("lpm", 10, prefix=8)),
    )
    assert cmd.action == "ingress.fwd" and cmd.args == (("port", 2), ("m", 31))
    assert cmd.name == "A"


def test_add_without_priority_and_without_args() -> None:
    (cmd,) = parse_stf("add t k:0b101 NoAction()")
    assert isinstance(cmd, TableAdd)
    assert cmd.priority is None and cmd.keys == (("k", MatchValue("int", 5)),) and cmd.args == ()


def test_add_with_no_key_fields() -> None:
    (cmd,) = parse_stf("add t a()")
    assert isinstance(cmd, TableAdd) and cmd.keys == () and cmd.action == "a"


def test_stack_element_dollar_spelling_becomes_brackets() -> None:
    (cmd,) = parse_stf("add t hdr.s$1.f:3 a()")
    assert isinstance(cmd, TableAdd) and cmd.keys[0][0] == "hdr.s[1].f"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", MatchValue("int", 42)),
        ("0x2A", MatchValue("int", 42)),
        ("0b101010", MatchValue("int", 42)),
        ("0o52", MatchValue("int", 42)),
        ("0x0800&&&0xff00", MatchValue("ternary", 0x0800, mask=0xFF00)),
        ("0x0a000000/8", MatchValue("lpm", 0x0A000000, prefix=8)),
        ("10->20", MatchValue("range", 10, hi=20)),
        ("*", MatchValue("any")),
        ("0x****0101", MatchValue("wild", 0x0101, mask=0xFFFF, prefix=16)),
        ("0b1*0", MatchValue("wild", 0b100, mask=0b101, prefix=2)),
    ],
)
def test_value_spellings(text: str, expected: MatchValue) -> None:
    assert parse_value(text) == expected


def test_setdefault_parses_action_and_args() -> None:
    (cmd,) = parse_stf("setdefault ingress.t ingress.set(v:0x10)")
    assert isinstance(cmd, SetDefault) and cmd.action == "ingress.set" and cmd.args == (("v", 16),)


def test_packet_joins_hex_groups() -> None:
    (cmd,) = parse_stf("packet 3 0011 22 33445566")
    assert isinstance(cmd, PacketIn) and cmd.port == 3
    assert cmd.data == bytes.fromhex("0011223344556 6".replace(" ", ""))


def test_expect_keeps_wildcards_and_dollar() -> None:
    (cmd,) = parse_stf("expect 1 00** 22 33 $")
    assert isinstance(cmd, Expect)
    assert cmd.pattern == "00**2233" and cmd.exact_length


def test_expect_without_data_means_any_packets() -> None:
    (cmd,) = parse_stf("expect 4")
    assert isinstance(cmd, Expect) and cmd.pattern is None


def test_replication_mirroring_and_state_commands() -> None:
    cmds = parse_stf(
        "mc_mgrp_create 1113\nmc_node_create 400 6 7\nmc_node_associate 1113 0\n"
        "mirroring_add 5 4\nmirroring_add_mc 6 1113\nregister_write ingress.r 3 0x7\n"
        "check_register ingress.r(3) == 7\ncheck_counter c(2) packets >= 1\ncheck_counter c(0)\n"
        "wait\nno_packet\nremove all\n"
    )
    assert cmds[0] == McGroupCreate("<stf>", 1, 1113)
    assert cmds[1] == McNodeCreate("<stf>", 2, 400, (6, 7))
    assert cmds[2] == McNodeAssociate("<stf>", 3, 1113, 0)
    assert cmds[3] == MirroringAdd("<stf>", 4, 5, 4)
    assert cmds[4] == MirroringAddMc("<stf>", 5, 6, 1113)
    assert cmds[5] == RegisterWrite("<stf>", 6, "ingress.r", 3, 7)
    assert cmds[6] == CheckRegister("<stf>", 7, "ingress.r", 3, "==", 7)
    assert cmds[7] == CheckCounter("<stf>", 8, "c", 2, "packets", ">=", 1)
    assert cmds[8] == CheckCounter("<stf>", 9, "c", 0, None, "==", 0)
    assert [type(c) for c in cmds[9:]] == [Nop, Nop, Remove]


def test_check_counter_of_a_named_entry() -> None:
    (cmd,) = parse_stf("check_counter dc($E) bytes >= 64")
    assert cmd == CheckCounter("<stf>", 1, "dc", 0, "bytes", ">=", 64, entry="E")


def test_value_set_add_with_and_without_masks() -> None:
    plain, masked = parse_stf("value_set_add pvs 0x42 7\nvalue_set_add pvs 1&&&0xF 2&&&3\n")
    assert plain == ValueSetAdd("<stf>", 1, "pvs", (0x42, 7), None)
    assert masked == ValueSetAdd("<stf>", 2, "pvs", (1, 2), (0xF, 3))


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("packet 0 00\nfrobnicate 1\n", 2, "unknown command"),
        ("\n\npacket x 00\n", 3, "port number"),
        ("packet 0 0g\n", 1, "hex digit"),
        ("packet 0 001\n", 1, "odd number"),
        ("packet 0 0*\n", 1, "hex digit"),
        ("add t k:0x1 a(p:zz)\n", 1, "bad number"),
        ("add t k a()\n", 1, "<field>:<value>"),
        ("add t k:1 a(p:1) extra\n", 1, "after the action"),
        ("add t k:1\n", 1, "<action>("),
        ("mc_node_associate 1\n", 1, "usage"),
        ("check_counter c packets == 1\n", 1, "usage"),
        ("expect 1 $\n", 1, "'$'"),
        ("value_set_add pvs 1&&&0xF 2\n", 1, "mask for every value"),
    ],
)
def test_bad_lines_report_file_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(StfError) as info:
        parse_stf(text, "bad.stf")
    assert info.value.line == line
    assert str(info.value).startswith(f"bad.stf:{line}: error:")
    assert words in str(info.value)


# -- packet matching --------------------------------------------------------------------


def test_wildcard_nibbles_match_anything() -> None:
    assert match_expected("0A*B**", False, bytes.fromhex("0a1bff")) is None


def test_mismatch_reports_first_bad_nibble() -> None:
    assert match_expected("0A1B", False, bytes.fromhex("0a1c")) == 3


def test_longer_packet_matches_prefix_without_dollar() -> None:
    assert match_expected("0A1B", False, bytes.fromhex("0a1b2233")) is None


def test_dollar_demands_exact_length() -> None:
    assert match_expected("0A1B", True, bytes.fromhex("0a1b22")) == 4
    assert match_expected("0A1B", True, bytes.fromhex("0a1b")) is None


def test_shorter_packet_never_matches() -> None:
    assert match_expected("0A1B22", False, bytes.fromhex("0a1b")) == 4


# -- running against a fake switch ------------------------------------------------------


class FakeSwitch:
    """Echoes a packet to port (first byte), after applying a 'rewrite' default action."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.groups: dict[int, list[tuple[int, int]]] = {}
        self.sessions: dict[int, list[tuple[int, int]]] = {}
        self.regs: dict[tuple[str, int], int] = {}

    def table_info(self, name: str) -> Any:
        if name not in ("t", "ingress.t"):
            raise ValueError(f"unknown table '{name}'")
        return _FakeTable()

    def table_add(
        self, table: str, match: dict, action: str, params: dict, priority: int | None = None
    ) -> int:
        self.calls.append(("add", table, match, action, params, priority))
        return len(self.calls)

    def table_delete(self, table: str, handle: int) -> None:
        self.calls.append(("delete", table, handle))

    def table_set_default(self, table: str, action: str, params: dict) -> None:
        if table != "ingress.t":
            raise KeyError(f"no table '{table}'")
        self.calls.append(("default", table, action, params))

    def mc_group_create(self, gid: int, replicas: list[tuple[int, int]]) -> None:
        self.groups[gid] = list(replicas)

    def clone_session_set(self, sid: int, replicas: list[tuple[int, int]]) -> None:
        self.sessions[sid] = list(replicas)

    def register_write(self, name: str, idx: int, val: int) -> None:
        self.regs[(name, idx)] = val

    def register_read(self, name: str, idx: int) -> int:
        return self.regs.get((name, idx), 0)

    def counter_read(self, name: str, idx: int) -> tuple[int, int]:
        return (2, 128)

    def send(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        return [(data[0], data)] if data and data[0] != 0xFF else []


class _FakeKey:
    def __init__(self, name: str, kind: str, width: int) -> None:
        self.name, self.match_kind, self.width = name, kind, width


class _FakeTable:
    keys = [
        _FakeKey("hdr.ipv4.dstAddr", "lpm", 32),
        _FakeKey("hdr.eth.type", "ternary", 16),
        _FakeKey("meta.x", "exact", 8),
    ]


def _run(text: str, sw: FakeSwitch | None = None) -> Any:
    return run_stf(sw or FakeSwitch(), parse_stf(text, "f.stf"))


def test_matching_packets_pass() -> None:
    res = _run("packet 0 01aabb\npacket 0 02cc\nexpect 2 02cc$\nexpect 1 01**\n")
    assert res.passed and res.report == "PASS"


def test_expect_may_come_before_its_packet() -> None:
    assert _run("expect 1 0100$\npacket 0 0100\n").passed


def test_same_port_expectations_are_ordered() -> None:
    res = _run("packet 0 0101\npacket 0 0102\nexpect 1 0102\nexpect 1 0101\n")
    assert not res.passed
    assert "port 1: expected 2 packet(s), got 2; packet #1 differs at nibble 3" in res.report


def test_failure_report_shows_expected_actual_and_caret() -> None:
    res = _run("packet 0 01aabb\nexpect 1 01abbb\n")
    lines = res.report.splitlines()
    assert "      01ABBB" in lines and "      01AABB" in lines
    caret = next(line for line in lines if "^" in line)
    assert caret.index("^") == len("      ") + 3


def test_missing_packet_fails() -> None:
    res = _run("packet 0 ff00\nexpect 1 ff00\n")
    assert not res.passed and "expected 1 packet(s), got 0" in res.report


def test_unexpected_output_port_fails() -> None:
    res = _run("packet 0 0300\n")
    assert not res.passed and "port 3: expected 0 packet(s), got 1" in res.report


def test_expect_without_data_accepts_any_output() -> None:
    assert _run("packet 0 0300\npacket 0 0301\nexpect 3\n").passed


def test_key_names_resolve_by_suffix_and_missing_keys_are_dont_care() -> None:
    sw = FakeSwitch()
    assert _run("add t 5 ipv4.dstAddr:0x0a****** a(p:1)\n", sw).passed
    _, table, match, action, params, prio = sw.calls[0]
    assert table == "t" and prio == 5 and params == {"p": 1}
    assert match == {"hdr.ipv4.dstAddr": (0x0A000000, 8), "hdr.eth.type": (0, 0), "meta.x": 0}


def test_ternary_wildcard_digits_become_a_mask() -> None:
    sw = FakeSwitch()
    _run("add ingress.t eth.type:0x08** a()\n", sw)
    assert sw.calls[0][2]["hdr.eth.type"] == (0x0800, 0xFF00)


def test_unknown_key_field_is_reported_with_line() -> None:
    res = _run("\nadd t nosuch:1 a()\n")
    assert not res.passed
    assert res.report.startswith("f.stf:2: error: table has no key field 'nosuch'")


def test_switch_error_stops_the_run_with_line() -> None:
    res = _run("setdefault other a()\npacket 0 0100\nexpect 1 0100\n")
    assert not res.passed and "f.stf:1: error" in res.report


def test_multicast_nodes_become_replica_lists() -> None:
    sw = FakeSwitch()
    text = (
        "mc_mgrp_create 7\nmc_node_create 400 6\nmc_node_create 401 7 8\n"
        "mc_node_associate 7 0\nmc_node_associate 7 1\nmirroring_add_mc 9 7\nmirroring_add 5 4\n"
    )
    assert _run(text, sw).passed
    assert sw.groups[7] == [(6, 400), (7, 401), (8, 401)]
    assert sw.sessions == {9: [(6, 400), (7, 401), (8, 401)], 5: [(4, 0)]}


def test_associating_unknown_node_fails() -> None:
    res = _run("mc_mgrp_create 7\nmc_node_associate 7 3\n")
    assert not res.passed and "node handle 3" in res.report


def test_register_write_then_check() -> None:
    assert _run("register_write r 1 9\ncheck_register r(1) == 9\n").passed
    res = _run("check_register r(1) == 9\n")
    assert not res.passed and "r[1] is 0" in res.report


def test_counter_checks_compare_packets_and_bytes() -> None:
    assert _run("check_counter c(0) packets == 2\ncheck_counter c(0) bytes > 100\n").passed
    res = _run("check_counter c(0)\n")
    assert not res.passed and "packets is 2" in res.report


def test_remove_named_entry_deletes_its_handle() -> None:
    sw = FakeSwitch()
    assert _run("add t meta.x:1 a() = E\nremove E\n", sw).passed
    assert sw.calls[-1] == ("delete", "t", 1)


def test_cli_reports_bad_script_with_exit_code_2(tmp_path: Any, capsys: Any) -> None:
    stf = tmp_path / "bad.stf"
    stf.write_text("packet zz\n")
    prog = tmp_path / "p.p4"
    prog.write_text("")
    assert main([str(prog), str(stf)]) == 2
    assert "bad.stf:1: error" in capsys.readouterr().err
