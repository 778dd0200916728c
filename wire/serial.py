"""Serial-number arithmetic (RFC 1982) on the 32-bit counters of the protocol: PSNs,
epochs, sessions, request ids. They wrap, so "after" means "less than half the circle
ahead", the comparison the switch makes on the same fields. One copy for every module.

Example:
    >>> newer(1, MASK), newer(MASK, 1)      # 1 comes two steps after 2**32 - 1
    (True, False)
    >>> distance(1, MASK), distance(MASK, 1), wrap(MASK + 1)
    (2, -2, 0)
    >>> oldest([3, MASK, 0])                # the slowest clock, across the wrap
    4294967295
"""

from __future__ import annotations

from collections.abc import Iterable

BITS = 32
MOD = 1 << BITS
HALF = 1 << (BITS - 1)
MASK = MOD - 1


def wrap(n: int) -> int:
    """``n`` as a serial number (``wrap(s + 1)`` is the one after ``s``)."""
    return n & MASK


def distance(a: int, b: int) -> int:
    """How far ``a`` is after ``b``, in ``[-HALF, HALF)`` (negative: before it)."""
    d = (a - b) & MASK
    return d - MOD if d >= HALF else d


def newer(a: int, b: int) -> bool:
    """``a`` comes after ``b`` (and is not ``b``)."""
    return 0 < (a - b) & MASK < HALF


def oldest(values: Iterable[int]) -> int:
    """The earliest of serial numbers that lie within half the circle of each other."""
    vs = list(values)
    if not vs:
        raise ValueError("oldest() of no serial numbers")
    return wrap(vs[0] + min(distance(v, vs[0]) for v in vs))
