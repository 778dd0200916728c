"""The repository's P4 programs that use what p4sim runs beyond BMv2 (p4c's BMv2 back end
refuses them), each with what p4c refuses. Tests load these with ``target="p4sim"``; every
other program must pass the BMv2 check (``p4sim.compiler.bmv2_target``), and
tests/test_bmv2_target.py checks that each one here is refused by it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BEYOND_BMV2: dict[str, str] = {
    "tests/p4/conformance/regressions/unaligned_header.p4": "headers of 12 and 3 bits",
    "tests/p4/conformance/regressions/accepted_constructs.p4": "error values as entry keys",
    "tests/p4/conformance/regressions/for_loops.p4": "a for loop without a condition",
    "tests/p4/conformance/regressions/priority_annotation.p4": "a field named out",
    "tests/p4/native/error_keys.p4": "a field named out",
    "tests/p4/native/signed_ops.p4": "/ and % of signed values at run time",
    "tests/p4/native/stacks_and_ranges.p4": "a stack's last, lastIndex and nextIndex",
    "tests/compiler_programs/lang.p4": "a field named out",
    "tests/compiler_programs/misc.p4": "a field named out",
    "tests/compiler_programs/ops.p4": "/ and % of values known at run time",
    "tests/compiler_programs/parse.p4": "a stack's nextIndex",
    "tests/parser_programs/stacks_pvs.p4": "a stack's lastIndex outside the parser",
    "tests/p4/conformance/regressions/generic_functions.p4": "a cast to a type variable",
    "tests/p4/conformance/regressions/table_empty_parens.p4": "table t() { ... }",
}


def target_of(program: str | Path) -> str:
    """``"p4sim"`` for a program listed above, else ``"bmv2"``."""
    path = Path(program).resolve()
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    return "p4sim" if rel in BEYOND_BMV2 else "bmv2"
