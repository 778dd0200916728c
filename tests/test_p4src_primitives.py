"""The classes of p4src/ use the shared building blocks of primitives.p4 (docs/library.md,
"One set of switch primitives") instead of repeating them, and the macros still declare
the registers the controller reads by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from p4sim.p4info import compile_outputs
from wire.header import AGG_POOL_SIZE, AGG_VERSIONS, ATP_POOL_SIZE, SLOTS, VALUE_BLOCKS

P4SRC = Path(__file__).resolve().parents[1] / "p4src"


def code(path: Path) -> str:
    """The P4 text of a file without its // comments."""
    return re.sub(r"//[^\n]*", "", path.read_text())


def classes() -> list[Path]:
    return sorted(p for p in P4SRC.glob("*.p4") if p.name != "primitives.p4")


@pytest.mark.parametrize("path", classes(), ids=lambda p: p.name)
def test_refusals_go_through_refuse(path: Path) -> None:
    assert not re.search(r"meta\.drop\s*=\s*1", code(path)), (
        f"{path.name} marks a drop itself: use Refuse (primitives.p4)"
    )


@pytest.mark.parametrize("path", classes(), ids=lambda p: p.name)
def test_replies_go_through_turn_around(path: Path) -> None:
    text = code(path)
    for swapped in (r"hdr\.ethernet\.srcAddr\s*=\s*mac", r"hdr\.ipv4\.srcAddr\s*=\s*ip"):
        assert not re.search(swapped, text), (
            f"{path.name} turns a packet around itself: use TurnAround/ReturnToSender"
        )


@pytest.fixture(scope="module")
def registers() -> dict[str, tuple[int, int]]:
    """name -> (cells, bit width) of every register of inc.p4, from its P4Info."""
    p4info = compile_outputs(str(P4SRC / "inc.p4"))
    return {
        r.preamble.name.rsplit(".", 1)[-1]: (r.size, r.type_spec.bitstring.bit.bitwidth)
        for r in p4info.registers
    }


@pytest.mark.parametrize(
    ("pool", "cells"), [("agg", AGG_POOL_SIZE * AGG_VERSIONS), ("atp", ATP_POOL_SIZE)]
)
def test_pool_macros_declare_every_register_the_controller_reads(
    registers: dict[str, tuple[int, int]], pool: str, cells: int
) -> None:
    for i in range(SLOTS):
        assert registers[f"{pool}_value_{i:02d}"] == (cells, 32)
    assert registers[f"{pool}_job"] == (cells, 16)
    assert registers[f"{pool}_psn"] == (cells, 32)
    assert registers[f"{pool}_bitmap"] == (cells, 32)
    assert registers[f"{pool}_count"] == (cells, 8)
    assert not {n for n in registers if n.startswith(f"{pool}_value_")} - {
        f"{pool}_value{b}_{i:02d}" for b in _blocks(pool) for i in range(SLOTS)
    }
    for b in _blocks(pool):
        for i in range(SLOTS):
            assert registers[f"{pool}_value{b}_{i:02d}"] == (cells, 32)


def _blocks(pool: str) -> list[str]:
    """Register name infixes of a pool's value blocks: NetReduce's aggregator holds wide
    packets (VALUE_BLOCKS blocks of SLOTS), ATP's pool one block."""
    return [""] + [f"_b{b}" for b in range(1, VALUE_BLOCKS)] if pool == "agg" else [""]
