"""Every P4 program in the repository compiles into a generated Python module that
Python accepts, and gets its P4Info, or is refused with a ``file:line:col: error``.

A traceback or a generated module that does not compile is a p4sim bug, whatever the
program says; these tests run the whole corpus (our programs, the tutorials' solutions,
the conformance and regression programs) through both steps, and then mutated copies of
the corpus's programs (statements dropped or repeated, from a fixed seed) through the
same oracle.
"""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path

import pytest

from p4sim.compiler.program import INTERNAL_ERROR
from p4sim.frontend.diagnostics import P4Error
from p4sim.p4info import build_p4info, program_info_for_file
from p4sim.switch import Switch
from tests.beyond_bmv2 import target_of

ROOT = Path(__file__).parent.parent
_MAIN = re.compile(r"\)\s*main\s*;")
PROGRAMS = sorted(
    p
    for p in ROOT.glob("**/*.p4")
    if not {".venv", "build", "include"} & set(p.parts) and _MAIN.search(p.read_text())
)
SEED = 15


def test_the_corpus_holds_our_programs() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in PROGRAMS}
    assert {"p4src/inc.p4", "tests/p4/tutorials/basic/basic.p4"} <= names
    assert len(names) >= 40


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_program_compiles_to_a_module_python_accepts_and_gets_p4info(program: Path) -> None:
    _compile(program)


def _compile(program: Path, includes: tuple[str, ...] = ()) -> None:
    sw = Switch.from_file(str(program), include_dirs=includes, target=target_of(program))
    assert sw.program.code is not None  # the generated module, compiled by Python
    build_p4info(program_info_for_file(sw, str(program), includes))


def _mutants(src: str, rng: random.Random, n: int) -> list[str]:
    """``n`` copies of ``src``, each with one statement line dropped or repeated."""
    lines = src.splitlines()
    stmts = [i for i, line in enumerate(lines) if line.rstrip().endswith(";")]
    out = []
    for _ in range(n):
        i = rng.choice(stmts)
        copy = list(lines)
        if rng.random() < 0.5:
            del copy[i]
        else:
            copy.insert(i, copy[i])
        out.append("\n".join(copy))
    return out


@pytest.mark.parametrize(
    "program",
    [p for p in PROGRAMS if "conformance" not in p.parts],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_mutated_program_compiles_or_gets_a_located_error(program: Path, tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}:{program.name}")
    print(f"seed {SEED}:{program.name}")
    for k, text in enumerate(_mutants(program.read_text(), rng, 3)):
        mutant = tmp_path / f"mutant_{k}_{program.name}"
        mutant.write_text(text)
        includes = (str(program.parent),)  # the original's own #include "..." files
        try:
            _compile(mutant, includes)
        except P4Error as err:
            assert re.match(r"^\S+:\d+:\d+: error: ", str(err)), str(err)
            assert INTERNAL_ERROR not in str(err), f"{program.name} mutant {k}:\n{text}"


def test_generated_module_python_refuses_is_a_located_internal_error() -> None:
    sw = Switch.from_file(str(ROOT / "topologies" / "basic" / "basic.p4"))
    broken = dataclasses.replace(sw.program, source=sw.program.source + "\ndef (:\n", _code=None)
    with pytest.raises(P4Error, match=rf"basic\.p4:1:1: error: {INTERNAL_ERROR}: .*line \d+"):
        broken.code()
