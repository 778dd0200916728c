"""The native back end against the Python back end on mutated programs.

tests/test_native.py runs every program of the repository on both back ends; this one
runs programs the repository never had: each mutant is one of the repository's programs
that have an STF script (and call no random()), with one small systematic change to its
syntax tree (a constant changed, an operator swapped for another, two adjacent statements
swapped, the branches of an ``if`` swapped). Only mutants that p4sim compiles and that
the native back end covers are run (with ``target="p4sim"``: a mutant need not be a BMv2
program); for each, the STF script's control-plane commands and packets, then fuzzed
frames, go through both back ends, which must give the same outputs, registers and
counters.

The choice is fixed (``random.Random(SEED)``). ``make test`` runs ``DEFAULT_MUTANTS`` of
them (a few seconds once the native builds are cached); a larger run, by hand::

    P4SIM_MUTANTS=300 .venv/bin/python -m pytest tests/test_native_mutants.py -q
"""

from __future__ import annotations

import copy
import os
import random
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from p4sim.compiler.codegen import compile_program
from p4sim.compiler.program import CompiledProgram
from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error
from p4sim.frontend.parser import parse_program
from p4sim.stf import run_stf
from p4sim.stf_format import PacketIn, parse_stf
from p4sim.switch import Switch
from tests.test_native import fuzz_frames, run_both, state

ROOT = Path(__file__).resolve().parents[1]
SEED = 29
DEFAULT_MUTANTS = 8
FRAMES = 120
#: each operator and the one a mutant puts in its place
SWAPS = {
    "+": "-", "-": "+", "*": "+", "&": "|", "|": "^", "^": "&", "==": "!=", "!=": "==",
    "<": ">=", ">=": "<", ">": "<=", "<=": ">", "<<": ">>", ">>": "<<", "&&": "||",
    "||": "&&", "|+|": "|-|", "|-|": "|+|",
}  # fmt: skip


def stf_programs() -> list[tuple[Path, Path]]:
    """The repository's v1model programs that have an STF script beside them, but those
    that call random(): each back end draws its own numbers, which a mutant can expose."""
    listed = subprocess.run(
        ["git", "ls-files", "*.stf"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    pairs = []
    for stf in sorted(listed):
        p4 = (ROOT / stf).with_suffix(".p4")
        text = p4.read_text() if p4.exists() else ""
        if "V1Switch(" in text and "random(" not in text:
            pairs.append((p4, ROOT / stf))
    return pairs


@dataclass(frozen=True)
class Site:
    """One place a mutation can change: ``kind`` and where (the node, or a block and the
    index of the first of two statements)."""

    kind: str  # constant | operator | swap | branches
    node: Any
    index: int = 0


def _children(node: Any) -> Iterator[Any]:
    for value in vars(node).values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.Node) and not isinstance(item, ast.Type):
                yield item


def sites(program: ast.Program) -> list[Site]:
    """Every mutation site in the bodies of the program's parsers, controls, actions and
    functions, in a fixed order (so the same index names the same site in a copy)."""
    found: list[Site] = []

    def walk(node: Any) -> None:
        if isinstance(node, ast.IntLit):
            found.append(Site("constant", node))
        elif isinstance(node, ast.Binary) and node.op in SWAPS:
            found.append(Site("operator", node))
        elif isinstance(node, ast.If) and node.other is not None:
            found.append(Site("branches", node))
        if isinstance(node, ast.Block):
            found.extend(Site("swap", node, i) for i in range(len(node.stmts) - 1))
        for child in _children(node):
            walk(child)

    bodies = (ast.ParserDecl, ast.ControlDecl, ast.ActionDecl, ast.FunctionDecl)
    for decl in program.declarations:
        if isinstance(decl, bodies) and not decl.loc.file.endswith(("core.p4", "v1model.p4")):
            walk(decl)
    return found


def mutate(site: Site, rng: random.Random) -> str:
    """Apply ``site``'s mutation in place; says what changed."""
    n = site.node
    if site.kind == "constant":
        old = n.value
        new = rng.choice([old + 1, old - 1 if old else 2, old ^ 0xFF, 0, 1])
        if n.width is not None:
            new &= (1 << n.width) - 1
        n.value = new if new != old else old + 1
        n.text = ""
        return f"{n.loc}: constant {old} -> {n.value}"
    if site.kind == "operator":
        old, n.op = n.op, SWAPS[n.op]
        return f"{n.loc}: '{old}' -> '{n.op}'"
    if site.kind == "branches":
        n.then, n.other = n.other, n.then
        return f"{n.loc}: if branches swapped"
    i = site.index
    n.stmts[i], n.stmts[i + 1] = n.stmts[i + 1], n.stmts[i]
    return f"{n.stmts[i].loc}: statements swapped"


@dataclass
class Mutant:
    name: str
    what: str
    program: CompiledProgram
    native: Switch
    stf: Path


def mutants(count: int) -> Iterator[Mutant]:
    """``count`` mutants both back ends accept, chosen by ``SEED``."""
    rng = random.Random(SEED)
    stfs = dict(stf_programs())
    parsed: dict[Path, ast.Program] = {}
    made = tries = 0
    while made < count and tries < 20 * count:
        tries += 1
        p4 = rng.choice(sorted(stfs))
        if p4 not in parsed:
            parsed[p4] = parse_program(str(p4), (str(p4.parent),))
        tree = copy.deepcopy(parsed[p4])
        places = sites(tree)
        if not places:
            continue
        what = mutate(rng.choice(places), rng)
        try:
            compiled = compile_program(tree, target="p4sim")
        except P4Error:
            continue  # the mutant is not a P4 program p4sim accepts
        native = Switch(compiled, backend="native")
        if native.backend != "native":  # nor one the C generator covers
            notice = native.backend_notice
            assert notice.startswith("p4sim: native back end unavailable"), notice
            continue
        made += 1
        yield Mutant(p4.relative_to(ROOT).as_posix(), what, compiled, native, stfs[p4])


COUNT = int(os.environ.get("P4SIM_MUTANTS", DEFAULT_MUTANTS))


@pytest.fixture(scope="module")
def accepted() -> list[Mutant]:
    return list(mutants(COUNT))


def test_enough_mutants_compile(accepted: list[Mutant]) -> None:
    assert len(accepted) == COUNT, "too few mutants compile: the mutations are too crude"


@pytest.mark.parametrize("index", range(COUNT))
def test_native_matches_python_on_a_mutated_program(accepted: list[Mutant], index: int) -> None:
    m = accepted[index]
    nat, py = m.native, Switch(m.program)
    commands = parse_stf(m.stf.read_text(), str(m.stf))
    clock = [0]
    py.pipeline.clock = nat.pipeline.clock = lambda: clock[0]
    a, b = run_stf(py, commands), run_stf(nat, commands)
    assert a.outputs == b.outputs and a.errors == b.errors, f"{m.name} ({m.what})"
    rng = random.Random(SEED + index)
    seeds = [c.data for c in commands if isinstance(c, PacketIn)]
    frames = [(rng.randrange(0, 8), f) for f in fuzz_frames(rng, FRAMES, seeds)]
    run_both(py, nat, frames)
    assert state(py) == state(nat), f"{m.name} ({m.what})"
