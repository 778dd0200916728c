"""Parser features of compiled programs (tests/compiler_programs/parse.p4): select with
tuples, masks, ranges and value sets, header stacks, varbit, lookahead, verify, and the
BMv2 rule that a parser error sets parser_error and the packet still runs ingress.

Output layout: res_t (path, err, nlabels, extra) then the deparsed headers + payload.
err codes: 0 NoError, 1 PacketTooShort, 2 NoMatch, 3 StackOutOfBounds, 4 HeaderTooShort,
5 BadValue (a user-declared error).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim import Switch

PROG = Path(__file__).parent / "compiler_programs" / "parse.p4"


@pytest.fixture(scope="module", params=["python", "native"])
def prog_sw(request: pytest.FixtureRequest) -> Switch:
    """parse.p4 on each back end (the native one must not fall back)."""
    s = Switch.from_file(str(PROG), target="p4sim", backend=request.param)
    assert s.backend == request.param, s.backend_notice
    return s


def run(sw: Switch, data: bytes) -> tuple[dict[str, int], bytes]:
    out = sw.send(0, data)
    assert len(out) == 1 and out[0][0] == 2
    d = out[0][1]
    return {"path": d[0], "err": d[1], "nlabels": d[2], "extra": d[3]}, d[4:]


def test_stack_loop_stops_at_bottom_of_stack(prog_sw: Switch) -> None:
    res, rest = run(prog_sw, bytes([1, 0, 0x02, 0x04, 0x07, 0xAA]))
    assert res == {"path": 1, "err": 0, "nlabels": 3, "extra": 0}
    assert rest == bytes([1, 0, 0x02, 0x04, 0x07, 0xAA])


def test_stack_overflow_sets_stack_out_of_bounds_and_keeps_payload(prog_sw: Switch) -> None:
    res, rest = run(prog_sw, bytes([1, 0, 0x02, 0x04, 0x06, 0x08]))
    assert res["err"] == 3 and res["nlabels"] == 3
    assert rest == bytes([1, 0, 0x02, 0x04, 0x06, 0x08])  # 0x08 stays as payload


def test_masked_tuple_case_and_varbit_extract(prog_sw: Switch) -> None:
    res, rest = run(prog_sw, bytes([2, 0x05, 2, 0xAB, 0xCD, 0xEE]))
    assert res["path"] == 2 and res["err"] == 0
    assert rest == bytes([2, 0x05, 2, 0xAB, 0xCD, 0xEE])


def test_varbit_longer_than_max_is_header_too_short(prog_sw: Switch) -> None:
    res, rest = run(prog_sw, bytes([2, 0x05, 9, 1]))
    assert res["err"] == 4
    assert rest == bytes([2, 0x05, 9, 1])


def test_mask_mismatch_falls_to_default_reject_without_error(prog_sw: Switch) -> None:
    res, _ = run(prog_sw, bytes([2, 0x35]))
    assert res["path"] == 0 and res["err"] == 0


def test_range_case(prog_sw: Switch) -> None:
    assert run(prog_sw, bytes([3, 0x15, 9]))[0]["path"] == 3
    assert run(prog_sw, bytes([3, 0x25]))[0]["path"] == 0


def test_lookahead_does_not_consume(prog_sw: Switch) -> None:
    res, rest = run(prog_sw, bytes([4, 1, 0x77, 0x66]))
    assert res["path"] == 4 and res["extra"] == 0x77
    assert rest == bytes([4, 1, 0x77, 0x66])


def test_value_set_matches_after_control_plane_add() -> None:
    sw = Switch.from_file(str(PROG), target="p4sim")
    assert run(sw, bytes([5, 7]))[0]["path"] == 0
    sw.value_set_add("pvs", [7])
    assert run(sw, bytes([5, 7]))[0]["path"] == 5
    assert run(sw, bytes([5, 8]))[0]["path"] == 0


def test_verify_raises_user_error(prog_sw: Switch) -> None:
    res, _ = run(prog_sw, bytes([6, 1]))
    assert res["path"] == 6 and res["err"] == 5
    assert run(prog_sw, bytes([6, 0]))[0]["err"] == 0


def test_short_packet_is_packet_too_short(prog_sw: Switch) -> None:
    res, rest = run(prog_sw, bytes([1]))
    assert res["err"] == 1 and res["path"] == 0
    assert rest == bytes([1])
