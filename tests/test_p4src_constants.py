"""p4src/ and wire/header.py agree on every shared constant and on the header layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wire import header as protocol
from wire.header import FIELDS, SLOTS, AtpEvent, DropReason, Flag, Op, SyncMode

P4SRC = Path(__file__).resolve().parents[1] / "p4src"
_DEFINE = re.compile(r"^\s*#define\s+([A-Z][A-Z0-9_]*)\s+(0x[0-9a-fA-F]+|\d+)\b", re.M)
_CONST = re.compile(
    r"^\s*const\s+bit<\d+>\s+([A-Z][A-Z0-9_]*)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;", re.M
)

# Switch-only constants: sizes of tables and the serial-number bound, not on the wire.
P4_ONLY = {
    "JOB_TABLE_SIZE",
    "WORKER_TABLE_SIZE",
    "FORWARD_TABLE_SIZE",
    "SOURCE_TABLE_SIZE",
    "EPOCH_SLOT_TABLE_SIZE",
    "PSN_HALF",
    "ECN_THRESHOLD",  # switch configuration; tests/test_ecn.py reads it from here
    "IPV4_OPTION_WORDS",  # IPv4's own bound (IHL 15), not ours
    "ATP_MARKS",  # JOB_TABLE_SIZE * ATP_MARKS_PER_JOB (test_atp_marks_cover_every_job_cell)
}


def p4_constants() -> dict[str, int]:
    text = (P4SRC / "configuration.p4").read_text()
    found = _DEFINE.findall(text) + _CONST.findall(text)
    names = [n for n, _ in found]
    assert len(names) == len(set(names)), "a constant is defined twice in configuration.p4"
    return {n: int(v, 0) for n, v in found}


def expected_constants() -> dict[str, int]:
    exp = {
        "INC_UDP_PORT": protocol.INC_UDP_PORT,
        "INC_HEADER_LEN": protocol.HEADER_LEN,
        "INC_SLOTS": protocol.SLOTS,
        "INC_VALUE_BYTES": protocol.VALUE_BYTES,
        "INC_VALUE_BLOCKS": protocol.VALUE_BLOCKS,
        "MAX_WORKERS": protocol.MAX_WORKERS,
        "AGG_POOL_SIZE": protocol.AGG_POOL_SIZE,
        "AGG_VERSIONS": protocol.AGG_VERSIONS,
        "AGG_COPIES": protocol.AGG_POOL_SIZE * protocol.AGG_VERSIONS,
        "DROP_REASONS": protocol.DROP_REASONS,
        "DROP_STRIDE": protocol.DROP_STRIDE,
        "JOB_DROP_JOBS": protocol.JOB_DROP_JOBS,
        "JOB_DROP_CELLS": protocol.JOB_DROP_JOBS * protocol.DROP_STRIDE,
        "SYNC_JOBS": protocol.SYNC_JOBS,
        "SYNC_RING": protocol.SYNC_RING,
        "ASYNC_UNSET": protocol.ASYNC_UNSET,
        "SYNC_CLOCKS": protocol.SYNC_JOBS * protocol.MAX_WORKERS,
        "SYNC_REACHED": protocol.SYNC_JOBS * protocol.SYNC_RING,
        "ATP_POOL_SIZE": protocol.ATP_POOL_SIZE,
        "ATP_EVENTS": protocol.ATP_EVENTS,
        "ATP_MARKS_PER_JOB": protocol.ATP_MARKS_PER_JOB,
        "ATP_PS_RID": protocol.ATP_PS_RID,
        "ETHERTYPE_IPV4": protocol.IPV4_ETHERTYPE,
        "IP_PROTO_UDP": protocol.UDP_PROTO,
        "ASK_ROWS": protocol.ASK_ROWS,
        "ASK_TUPLES": protocol.ASK_TUPLES,
        "ASK_COPIES": protocol.ASK_ROWS * protocol.AGG_VERSIONS,
        "KV_CACHE_SIZE": protocol.KV_CACHE_SIZE,
        "KV_VALUE_WORDS": protocol.KV_VALUE_WORDS,
        "KV_ANSWERED_BY_SWITCH": protocol.KV_ANSWERED_BY_SWITCH,
        "CONS_GROUPS": protocol.CONS_GROUPS,
    }
    exp |= {f"OP_{o.name}": o.value for o in Op}
    exp |= {f"FLAG_{f.name}": f.value for f in Flag if f.value}
    exp |= {f"DROP_{d.name}": d.value for d in DropReason}
    exp |= {f"SYNC_MODE_{m.name}": m.value for m in SyncMode}
    exp |= {f"ATP_EV_{e.name}": e.value for e in AtpEvent}
    return exp


@pytest.mark.parametrize("name", sorted(expected_constants()))
def test_configuration_p4_defines_the_protocol_value(name: str) -> None:
    consts = p4_constants()
    assert name in consts, f"configuration.p4 does not define {name}"
    assert consts[name] == expected_constants()[name]


def test_configuration_p4_has_no_unchecked_constant() -> None:
    unchecked = set(p4_constants()) - set(expected_constants()) - P4_ONLY
    assert not unchecked, f"add these to wire/header.py or P4_ONLY: {sorted(unchecked)}"


def header_fields(header: str) -> list[tuple[str, int]]:
    """(name, width) of the fields of `header <header> { ... }` in headers.p4, in order."""
    text = (P4SRC / "headers.p4").read_text()
    body = re.search(r"header\s+" + header + r"\s*\{(.*?)\}", text, re.S)
    assert body, f"headers.p4 declares no header {header}"
    return [(n, int(w)) for w, n in re.findall(r"bit<(\d+)>\s+(\w+)\s*;", body.group(1))]


def test_inc_header_fields_match_protocol_field_table() -> None:
    assert header_fields("inc_h") == [(f.name, f.width) for f in FIELDS]


def test_inc_values_header_has_k_slots_of_32_bits() -> None:
    fields = header_fields("inc_values_h")
    assert [w for _, w in fields] == [8 * protocol.VALUE_BYTES] * SLOTS
    assert [n for n, _ in fields] == [f"v{i:02d}" for i in range(SLOTS)]


def macro_body(text: str, head: str) -> str:
    """The body of ``#define <head>`` (continuation lines joined)."""
    m = re.search(r"#define " + re.escape(head) + r"((?:.*\\\n)*.*)", text)
    assert m, f"no #define {head}"
    return m.group(1)


def test_per_slot_primitives_cover_every_slot_once() -> None:
    text = (P4SRC / "primitives.p4").read_text()
    calls = re.findall(r"M\((v\d+), R##_(\d+)\)", macro_body(text, "PER_SLOT(M, R)"))
    assert calls == [(f"v{i:02d}", f"{i:02d}") for i in range(SLOTS)]
    regs = re.findall(
        r"register<bit<32>>\(SIZE\) R##_(\d+);", macro_body(text, "SLOT_REGISTERS(R, SIZE)")
    )
    assert regs == [f"{i:02d}" for i in range(SLOTS)]


def test_aggregator_updates_and_reads_every_slot_of_every_block_once() -> None:
    text = (P4SRC / "aggregator.p4").read_text()
    blocks = [""] + [f"_b{b}" for b in range(1, protocol.VALUE_BLOCKS)]
    for b in blocks:
        assert f"SLOT_REGISTERS(agg_value{b}, AGG_COPIES)" in text
        for macro in ("ACCUMULATE", "READ_RESULT"):
            call = r"PER_SLOT\(" + macro + b.upper() + r", agg_value" + b + r"\)"
            assert len(re.findall(call, text)) == 1, (macro, b)
    headers = (P4SRC / "headers.p4").read_text()
    assert [f"inc_values{b}" for b in blocks] == re.findall(
        r"inc_values_h\s+(inc_values\w*);", headers
    )


def test_inc_p4_includes_every_p4_file_of_p4src() -> None:
    included = set(re.findall(r'#include\s+"([^"]+)"', (P4SRC / "inc.p4").read_text()))
    on_disk = {p.name for p in P4SRC.glob("*.p4")} - {"inc.p4"}
    assert included == on_disk


def test_atp_held_cells_are_the_job_table_size() -> None:
    """The controller zeroes a removed job's cell of ``atp_held`` at job_id % JOB_TABLE_SIZE."""
    from controller.systems.atp import JOB_CELLS

    assert p4_constants()["JOB_TABLE_SIZE"] == JOB_CELLS


def test_atp_marks_cover_every_job_cell() -> None:
    """atp.p4 marks psn p of job j at (j % JOB_TABLE_SIZE) * ATP_MARKS_PER_JOB + p % it,
    and keeps p's other bits with bit 0 set: a power of two above 1."""
    c = p4_constants()
    assert c["ATP_MARKS"] == c["JOB_TABLE_SIZE"] * c["ATP_MARKS_PER_JOB"]
    per_job = c["ATP_MARKS_PER_JOB"]
    assert per_job > 1 and per_job & (per_job - 1) == 0
