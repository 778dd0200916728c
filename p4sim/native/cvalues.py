"""What the C generator's parts share: compiled values and the error that sends a program
to the Python back end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Unsupported(Exception):
    """A construct the C generator does not cover (the program runs on Python)."""


def _mask(w: int) -> int:
    return (1 << w) - 1


def _lit(v: int) -> str:
    if v >= 1 << 64:  # bit<65..128>: an unsigned __int128 (u128) made of two halves
        return f"(((u128){v >> 64:#x}ULL << 64) | {v & ((1 << 64) - 1):#x}ULL)"
    return f"{v:#x}ULL" if v > 9 else f"{v}ULL"


@dataclass
class V:
    """A compiled expression: C code and P4 type; ``const`` for compile-time values."""

    code: str
    type: Any
    const: int | None = None
    obj: Any = None  # non-values: ("table", TableGen) | ("extern", ...) | ("instance", ...)


#: Marks C code with side effects (a call with out/inout arguments, as a GNU statement
#: expression): C leaves the order of operands open, so code around it fixes the order.
FX = "/*fx*/"


def has_fx(code: str) -> bool:
    return FX in code


def in_order(codes: list[str], ctypes: list[str], new: Any) -> tuple[list[str], list[str]]:
    """(statements, codes): when any of ``codes`` has side effects, each is evaluated into
    a fresh local in order (P4 evaluates left to right); else the codes as they are."""
    if not any(has_fx(c) for c in codes):
        return [], codes
    lines, names = [], []
    for c, ct in zip(codes, ctypes, strict=True):
        n = new("sq")
        lines.append(f"{ct} {n} = {c};")
        names.append(n)
    return lines, names


@dataclass
class Ctl:
    """One parser/control instance being generated."""

    decl: Any
    path: str
    ident: int
    scope: dict[str, V] = field(default_factory=dict)
    actions: dict[str, tuple[str, str, Any]] = field(default_factory=dict)  # name→(cfn,fq,decl)
    fn: str = ""
