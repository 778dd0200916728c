"""Language features in compiled code (tests/compiler_programs/lang.p4).

Each packet is (op, arg[, extra bytes]); the output starts with out_t = r1 r2 r3 r4.
r4 gets bit 7 set at the end of ingress unless the control stopped early.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim import Switch

PROG = Path(__file__).parent / "compiler_programs" / "lang.p4"


@pytest.fixture(scope="module")
def sw() -> Switch:
    return Switch.from_file(str(PROG), target="p4sim")


def run(sw: Switch, op: int, arg: int, extra: bytes = b"") -> bytes:
    out = sw.send(0, bytes([op, arg]) + extra)
    assert len(out) == 1 and out[0][0] == 1
    return out[0][1]


def test_union_member_extracted_by_sub_parser(sw: Switch) -> None:
    assert run(sw, 1, 0, b"\x05") == bytes([1, 0, 1, 0x80])
    assert run(sw, 2, 0, b"\x01\x02") == bytes([0, 1, 1, 0x80])


def test_set_valid_on_union_member_invalidates_the_other(sw: Switch) -> None:
    assert run(sw, 1, 0, b"\x05")[3] == 0x80  # a was valid; b.setValid() cleared it


def test_functions_with_return_and_inout(sw: Switch) -> None:
    assert run(sw, 3, 50) == bytes([50, 57, 16, 0x80])
    assert run(sw, 3, 3) == bytes([40, 10, 16, 0x80])


def test_struct_assignment_copies(sw: Switch) -> None:
    assert run(sw, 4, 6) == bytes([6, 99, 7, 0x81])


def test_stack_push_and_pop_front(sw: Switch) -> None:
    assert run(sw, 5, 0) == bytes([1, 0, 1, 0x80])


def test_exit_stops_the_control(sw: Switch) -> None:
    assert run(sw, 6, 0) == bytes([1, 0, 0, 0])


def test_return_stops_the_apply_block(sw: Switch) -> None:
    assert run(sw, 7, 0) == bytes([2, 0, 0, 0])


def test_action_call_with_inout_argument_and_control_local(sw: Switch) -> None:
    assert run(sw, 8, 21) == bytes([42, 6, 0, 0x80])
    assert run(sw, 8, 21)[1] == 6  # control locals are re-initialised per packet


def test_switch_on_value_with_fallthrough_labels(sw: Switch) -> None:
    assert run(sw, 9, 1)[0] == 10
    assert run(sw, 9, 2)[0] == 23
    assert run(sw, 9, 3)[0] == 23
    assert run(sw, 9, 7)[0] == 99


def test_two_instances_of_a_control_have_their_own_tables(sw: Switch) -> None:
    assert run(sw, 10, 0)[0] == 31
    names = [t.name for t in sw.tables()]
    assert "Ing.adder1.t" in names and "Ing.adder2.t" in names


def test_name_annotations_on_tables_and_actions(sw: Switch) -> None:
    assert "global_table" in [t.name for t in sw.tables()]
    assert "Ing.renamed_action" in sw.actions()
    s = Switch.from_file(str(PROG), target="p4sim")
    s.table_add("global_table", {"hdr.ab.a.isValid()": 1}, "set_r4", {"x": 3})
    assert run(s, 1, 0, b"\x05")[3] == 0x80  # r4 overwritten later in the union branch
    assert run(s, 3, 1)[3] == 0x80
    s.table_add("global_table", {"hdr.ab.a.isValid()": 0}, "set_r4", {"x": 3})
    assert run(s, 3, 1)[3] == 0x83
