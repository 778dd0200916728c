"""What the C generator's parts share: compiled values and the error that sends a program
to the Python back end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Unsupported(Exception):
    """A construct the C generator does not cover (the program runs on Python)."""


def _mask(w: int) -> int:
    return (1 << w) - 1


def _lit(v: int) -> str:
    return f"{v:#x}ULL" if v > 9 else f"{v}ULL"


@dataclass
class V:
    """A compiled expression: C code and P4 type; ``const`` for compile-time values."""

    code: str
    type: Any
    const: int | None = None
    obj: Any = None  # non-values: ("table", TableGen) | ("extern", ...) | ("instance", ...)
