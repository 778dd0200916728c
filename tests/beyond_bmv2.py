"""The repository's P4 programs that use what p4sim runs beyond BMv2 (p4c's BMv2 back end
refuses them), each with what p4c refuses. Tests load these with ``target="p4sim"``; every
other program must pass the BMv2 check (``p4sim.compiler.bmv2_target``), and
tests/test_bmv2_target.py checks that each one here is refused by it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BEYOND_BMV2: dict[str, str] = {
    "tests/p4/conformance/regressions/unaligned_header.p4": "headers of 12 and 3 bits",
}


def target_of(program: str | Path) -> str:
    """``"p4sim"`` for a program listed above, else ``"bmv2"``."""
    path = Path(program).resolve()
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    return "p4sim" if rel in BEYOND_BMV2 else "bmv2"
