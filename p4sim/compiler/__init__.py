"""p4sim.compiler: P4_16 v1model programs → Python code compiled once at load time.

Example::

    from p4sim.compiler import compile_file
    prog = compile_file("basic.p4")          # CompiledProgram; P4Error on a bad program
    print(prog.tables[0].name)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from p4sim.compiler.program import CompiledProgram


def compile_file(
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
    trace: bool = False,
    target: str = "bmv2",
) -> CompiledProgram:
    """Parse and compile a P4 file (``trace`` generates the logging calls; ``target``
    "bmv2" refuses what BMv2 cannot run, "p4sim" accepts all that p4sim runs)."""
    from p4sim.compiler.codegen import compile_program
    from p4sim.frontend.parser import parse_program

    return compile_program(parse_program(path, include_dirs, defines), trace, target)


def compile_text(
    text: str,
    filename: str = "<string>",
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
    trace: bool = False,
    target: str = "bmv2",
) -> CompiledProgram:
    """Like ``compile_file`` for P4 source text."""
    from p4sim.compiler.codegen import compile_program
    from p4sim.frontend.parser import parse_text

    return compile_program(parse_text(text, filename, include_dirs, defines), trace, target)


__all__ = ["CompiledProgram", "compile_file", "compile_text"]
