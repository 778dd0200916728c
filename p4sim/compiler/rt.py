"""Run-time support used by the generated Python code of a compiled P4 program.

Example::

    pk = PacketIn(b"\\x01\\x02")
    pk.nbits            # 16 bits left to parse
    po = PacketOut(); po.put(0xAB, 8); po.bytes()   # b'\\xab'

Everything here is small on purpose: the generated code inlines the hot paths
(extract, emit, arithmetic) and only calls into this module for rare operations.
"""

from __future__ import annotations

from typing import Any


class ParserErr(Exception):
    """Raised by generated parser code; ``error`` is the P4 error name, or None for an
    explicit ``transition reject`` (which leaves ``parser_error`` unchanged)."""

    def __init__(self, error: str | None) -> None:
        super().__init__(error)
        self.error = error


class ExitSignal(Exception):
    """``exit;``: stops every control currently running (caught by the pipeline)."""


class P4AssertionError(RuntimeError):
    """``assert(false)`` / ``assume(false)`` at run time (BMv2 aborts the switch)."""


class PacketIn:
    """The ``packet_in`` of the parser: the bytes and a bit offset."""

    __slots__ = ("data", "off", "nbits")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.off = 0
        self.nbits = len(data) * 8

    def remaining(self) -> bytes:
        """The unparsed payload (from the current, byte-rounded-down, offset)."""
        return self.data[self.off >> 3 :]


class PacketOut:
    """The ``packet_out`` of the deparser: a bit accumulator."""

    __slots__ = ("acc", "n")

    def __init__(self) -> None:
        self.acc = 0
        self.n = 0

    def put(self, value: int, width: int) -> None:
        self.acc = (self.acc << width) | value
        self.n += width

    def bytes(self) -> bytes:
        pad = -self.n & 7  # a trailing partial byte is zero-padded, as BMv2 does
        return (self.acc << pad).to_bytes((self.n + pad) >> 3, "big")


class Stack:
    """A header stack: ``h`` holds the elements, ``nextIndex`` the P4 ``nextIndex``."""

    __slots__ = ("h", "nextIndex", "size")

    def __init__(self, elems: list[Any]) -> None:
        self.h = elems
        self.nextIndex = 0
        self.size = len(elems)

    def copy(self) -> Stack:
        s = Stack([e.copy() for e in self.h])
        s.nextIndex = self.nextIndex
        return s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stack) and self.h == other.h

    def push_front(self, n: int) -> None:
        """Shift elements up by ``n``; the ``n`` first become invalid (P4 spec 8.18)."""
        size = self.size
        for i in range(size - 1, -1, -1):
            if i >= n:
                self.h[i] = self.h[i - n].copy()
            else:
                self.h[i] = _invalid(self.h[i].copy())
        self.nextIndex = min(self.nextIndex + n, size)

    def pop_front(self, n: int) -> None:
        """Shift elements down by ``n``; the ``n`` last become invalid."""
        size = self.size
        for i in range(size):
            if i + n < size:
                self.h[i] = self.h[i + n].copy()
            else:
                self.h[i] = _invalid(self.h[i].copy())
        self.nextIndex = max(self.nextIndex - n, 0)


def _invalid(e: Any) -> Any:
    """``e`` made invalid: a header, or every member of a header union."""
    if hasattr(e, "_v"):
        e._v = False
    else:
        for m in e.__slots__:
            getattr(e, m)._v = False
    return e


class Ctx:
    """Per-packet state shared by the generated code and the pipeline: requests made by
    v1model externs (clone, resubmit, recirculate, truncate, digest) and the clock."""

    __slots__ = (
        "sm",
        "now",
        "clone",
        "resubmit",
        "recirc",
        "truncate",
        "digests",
        "digest",
        "payload",
        "log",
        "color",
    )

    def __init__(self) -> None:
        self.sm: Any = None
        self.now = 0
        self.clone: tuple[int, int] | None = None  # (session, field list id)
        self.resubmit: int | None = None
        self.recirc: int | None = None
        self.truncate = 0
        self.digests: list[tuple[str, tuple]] = []
        self.digest: tuple[str, tuple] | None = None  # the pending one (last call wins)
        self.payload = b""
        self.log: Any = None
        self.color = 0

    def reset_requests(self) -> None:
        self.clone = None
        self.resubmit = None
        self.recirc = None
        self.truncate = 0
        self.digest = None


def signed(v: int, width: int) -> int:
    """Two's-complement reading of a ``width``-bit pattern."""
    h = 1 << (width - 1)
    return (v ^ h) - h


def sat_add(a: int, b: int, width: int, is_signed: bool) -> int:
    """``a |+| b`` on ``width``-bit patterns."""
    if is_signed:
        r = signed(a, width) + signed(b, width)
        lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        return max(lo, min(hi, r)) & ((1 << width) - 1)
    return min(a + b, (1 << width) - 1)


def sat_sub(a: int, b: int, width: int, is_signed: bool) -> int:
    """``a |-| b`` on ``width``-bit patterns."""
    if is_signed:
        r = signed(a, width) - signed(b, width)
        lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        return max(lo, min(hi, r)) & ((1 << width) - 1)
    return max(a - b, 0)


def sdiv(a: int, b: int) -> int:
    """Signed division truncating toward zero (P4's), 0 for a zero divisor."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def smod(a: int, b: int) -> int:
    """The remainder that goes with ``sdiv``."""
    if b == 0:
        return 0
    return a - b * sdiv(a, b)


def csum16_int(v: int) -> int:
    """The internet checksum (RFC 1071, BMv2 ``csum16``) of ``v``'s 16-bit words, ``v``
    left-aligned on a word boundary. The ones'-complement sum of the words is ``v``
    modulo 0xFFFF (2**16 is 1 modulo 0xFFFF), except that a non-zero sum folds to 0xFFFF.

        >>> hex(csum16_int(0x4500_0073_0000_4000_4011_0000_c0a8_0001_c0a8_00c7))
        '0xb861'
    """
    r = v % 0xFFFF
    return 0xFFFF - (r if r else (0xFFFF if v else 0))


def format_log(msg: str, values: tuple) -> str:
    """``log_msg("x={}", {x})``: each ``{}`` takes the next value, in decimal."""
    out = []
    it = iter(values)
    parts = msg.split("{}")
    for i, p in enumerate(parts):
        out.append(p)
        if i < len(parts) - 1:
            out.append(str(next(it, "")))
    return "".join(out)
