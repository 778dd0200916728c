"""Generated arithmetic vs an independent Python reference (property test).

tests/compiler_programs/ops.p4 computes every operator on two bit<8> and two int<8>
inputs carried in the packet and emits the results; the reference below re-derives
each result from the P4_16 specification's rules (wrap-around, saturation, shifts,
two's complement).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4sim import Switch

PROG = Path(__file__).parent / "compiler_programs" / "ops.p4"

# (name, width, signed) in the order of res_t
FIELDS = [
    ("add", 8, False),
    ("sub", 8, False),
    ("mul", 8, False),
    ("shl", 8, False),
    ("shr", 8, False),
    ("sat_add", 8, False),
    ("sat_sub", 8, False),
    ("band", 8, False),
    ("bor", 8, False),
    ("bxor", 8, False),
    ("bnot", 8, False),
    ("neg", 8, False),
    ("s_add", 8, True),
    ("s_sub", 8, True),
    ("s_mul", 8, True),
    ("s_shr", 8, True),
    ("s_shl", 8, True),
    ("s_sat_add", 8, True),
    ("s_sat_sub", 8, True),
    ("s_neg", 8, True),
    ("cat", 16, False),
    ("s_widen", 16, False),
    ("slice_mid", 8, False),
    ("narrow", 4, False),
    ("lt", 1, False),
    ("s_lt", 1, False),
    ("ge", 1, False),
    ("s_ge", 1, False),
    ("eq", 1, False),
    ("bool_cast", 1, False),
    ("ternary", 8, False),
    ("set_slice", 8, False),
    ("pad", 6, False),
    ("div3", 8, False),
    ("mod7", 8, False),
]


def to_signed(v: int, w: int) -> int:
    return v - (1 << w) if v & (1 << (w - 1)) else v


def wrap(v: int, w: int = 8) -> int:
    return v % (1 << w)


def clamp_signed(v: int) -> int:
    return wrap(max(-128, min(127, v)))


def reference(a: int, b: int, sa: int, sb: int) -> dict[str, int]:
    """Expected results; sa/sb are the signed values (-128..127)."""
    r = {
        "add": wrap(a + b),
        "sub": wrap(a - b),
        "mul": wrap(a * b),
        "shl": wrap(a << b) if b < 8 else 0,
        "shr": a >> b if b < 8 else 0,
        "sat_add": min(a + b, 255),
        "sat_sub": max(a - b, 0),
        "band": a & b,
        "bor": a | b,
        "bxor": a ^ b,
        "bnot": 255 - a,
        "neg": wrap(-a),
        "s_add": wrap(sa + sb),
        "s_sub": wrap(sa - sb),
        "s_mul": wrap(sa * sb),
        # arithmetic shift: the sign fills in, whatever the shift amount
        "s_shr": wrap(sa >> min(b, 8)),
        "s_shl": wrap(sa << b) if b < 8 else 0,
        "s_sat_add": clamp_signed(sa + sb),
        "s_sat_sub": clamp_signed(sa - sb),
        "s_neg": wrap(-sa),
        "cat": (a << 8) | b,
        "s_widen": wrap(sa, 16),
        "slice_mid": (a >> 2) & 0xF,
        "narrow": b & 0xF,
        "lt": int(a < b),
        "s_lt": int(sa < sb),
        "ge": int(a >= b),
        "s_ge": int(sa >= sb),
        "eq": int(a == b),
        "bool_cast": int(a < b),
        "ternary": a if a > 100 else wrap(b + 1),
        "set_slice": ((b & 0xF) << 4) | (a & 0xF),
        "pad": 0,
        "div3": a // 3,
        "mod7": a % 7,
    }
    return r


def decode(data: bytes) -> dict[str, int]:
    total = sum(w for _, w, _ in FIELDS)
    v = int.from_bytes(data, "big")
    nbits = len(data) * 8
    assert nbits == total
    out = {}
    pos = nbits
    for name, w, _ in FIELDS:
        pos -= w
        out[name] = (v >> pos) & ((1 << w) - 1)
    return out


@pytest.fixture(scope="module")
def sw() -> Switch:
    return Switch.from_file(str(PROG), target="p4sim")


def run(sw: Switch, a: int, b: int, sa: int, sb: int) -> dict[str, int]:
    out = sw.send(0, bytes([a, b, wrap(sa), wrap(sb)]))
    assert len(out) == 1 and out[0][0] == 1
    data = out[0][1]
    assert data[:4] == bytes([a, b, wrap(sa), wrap(sb)])
    return decode(data[4:])


def test_ops_known_values(sw: Switch) -> None:
    got = run(sw, 200, 3, -112, 5)
    assert got == reference(200, 3, -112, 5)
    assert got["s_shr"] == wrap(-14)  # arithmetic shift keeps the sign
    assert got["sat_add"] == 203 and got["s_sat_sub"] == wrap(-117)


def test_ops_shift_by_width_or_more_gives_zero(sw: Switch) -> None:
    got = run(sw, 0xFF, 8, -1, 0)
    assert got["shl"] == 0 and got["shr"] == 0
    assert got["s_shr"] == 0xFF  # -1 >> 8 is still -1


def test_ops_signed_saturation_clamps(sw: Switch) -> None:
    got = run(sw, 0, 0, 100, 100)
    assert to_signed(got["s_sat_add"], 8) == 127
    got = run(sw, 0, 0, -100, 100)
    assert to_signed(got["s_sat_sub"], 8) == -128


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 255), st.integers(0, 255), st.integers(-128, 127), st.integers(-128, 127))
def test_ops_match_reference(a: int, b: int, sa: int, sb: int) -> None:
    sw = _shared()
    assert run(sw, a, b, sa, sb) == reference(a, b, sa, sb)


_SW: list[Switch] = []


def _shared() -> Switch:
    if not _SW:
        _SW.append(Switch.from_file(str(PROG), target="p4sim"))
    return _SW[0]
