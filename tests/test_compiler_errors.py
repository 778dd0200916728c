"""Semantic errors in P4 programs are reported as P4Error with file:line:col."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from p4sim import P4Error, Switch

BASE = (Path(__file__).parent / "compiler_programs" / "basic.p4").read_text()

CASES = [
    ("hdr.ipv4.ttl = hdr.ipv4.ttl - 1;", "hdr.ipv4.tll = hdr.ipv4.ttl - 1;", "has no field 'tll'"),
    (
        "hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
        "hdr.ipv4.ttl = hdr.ipv4.totalLen;",
        "expected bit<8>, got bit<16>",
    ),
    (
        "hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
        "hdr.ipv4.ttl = hdr.ipv4.ttl + hdr.ipv4.totalLen;",
        "different types bit<8> and bit<16>",
    ),
    (
        "actions = { ipv4_forward; drop; NoAction; }",
        "actions = { ipv4_forward; dropp; NoAction; }",
        "unknown action 'dropp'",
    ),
    ("            drop();\n", "            drop(1);\n", "takes 0 argument"),
    ("ipv4_lpm.apply();", "ipv4_lmp.apply();", "undeclared name 'ipv4_lmp'"),
    ("transition accept;\n    }\n}", "transition acept;\n    }\n}", "unknown parser state"),
    ("if (hdr.ipv4.isValid()) {", "if (hdr.ipv4.ttl) {", "condition must be bool"),
    ("sm.egress_spec = port;", "sm.egress_spec = prt;", "undeclared name 'prt'"),
    ("hdr.ethernet.dst = dstAddr;", "dstAddr = 1;", "cannot assign"),
    ("    bit<8> seen;", "    bit8_t seen;", "unknown type 'bit8_t'"),
    ("mark_to_drop(sm);", "mark_to_drop(sm, sm);", "takes 0 or 1 argument"),
    ("hdr.ipv4.ttl = hdr.ipv4.ttl - 1;", "hdr.ipv4.ttl = hdr.ipv4.ttl << 8w1 ++ 1;", "known width"),
    ("mark_to_drop(sm);", "mark_to_drop(meta);", "expected standard_metadata_t"),
    (
        "hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
        "hdr.ipv4.ttl = hdr.ethernet;",
        "expected bit<8>, got ethernet_t",
    ),
    (  # sign and width in one cast: p4c refuses it (P4_16 8.11.1)
        "hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
        "hdr.ipv4.ttl = (bit<8>)(int<16>)hdr.ipv4.totalLen;",
        "not both",
    ),
    (  # a control instantiated at top level: p4c refuses it
        "V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;",
        "Ing() ing;\nV1Switch(P(), VC(), ing, Eg(), CC(), Dep()) main;",
        "cannot be instantiated at top level",
    ),
]


@pytest.mark.parametrize("old,new,message", CASES)
def test_semantic_error_has_location_and_message(old: str, new: str, message: str) -> None:
    assert old in BASE
    text = BASE.replace(old, new, 1)
    with pytest.raises(P4Error) as info:
        Switch.from_source(text, "prog.p4")
    err = info.value
    assert message in err.message
    assert err.loc.file == "prog.p4"
    # the error points at the line that was changed
    line = text.splitlines()[err.loc.line - 1]
    assert new.strip().split("\n")[0].strip()[:8] in line or message == "unknown parser state"
    assert re.match(r"prog\.p4:\d+:\d+: error: ", str(err))


def test_missing_main_is_reported_in_the_main_file() -> None:
    text = BASE.replace("V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;", "")
    with pytest.raises(P4Error, match="no 'main'") as info:
        Switch.from_source(text, "prog.p4")
    assert info.value.loc.file == "prog.p4"


def test_non_v1switch_main_is_rejected() -> None:
    text = BASE.replace(
        "V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;", "package Other(); Other() main;"
    )
    with pytest.raises(P4Error, match="V1Switch"):
        Switch.from_source(text, "prog.p4")
