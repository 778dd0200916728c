"""How the C generator lays P4 values out: bit access into the packet, field widths and
the leaves of headers and structs (chunks for fields wider than ``WIDE``), the storage
an argument names (to order copy-in/copy-out), hash and checksum algorithm codes and the
folding of constant operators.

Example: ``_field_leaves("hdr.", "addr", TBit(336))`` → ``[("hdr.w0_addr", bit<16>),
("hdr.w1_addr", bit<64>), ...]``, most significant chunk first.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from p4sim.compiler.typecheck import T, TBit, TBool, TComposite, TEnum
from p4sim.frontend import ast
from p4sim.native.cvalues import Unsupported, V

WIDE = 128


def _get_bits(off: str, w: int) -> str:
    """C value of ``w`` bits of the input packet at bit ``off``."""
    fn = "p4n_get_wide" if w > 64 else "p4n_get_bits"
    return f"{fn}(p4n_in, {off}, {w})"


def _put_bits(off: str, v: str, w: int) -> str:
    """C statement writing ``v``'s ``w`` bits into the output packet at bit ``off``."""
    fn = "p4n_put_wide" if w > 64 else "p4n_put_bits"
    return f"{fn}(p4n_out, {off}, {v}, {w})"


def _wide(code: str, w: int) -> str:
    """``code`` as a u128 when a value of ``w`` bits needs one (shifts, concatenation)."""
    return f"((u128)({code}))" if w > 64 else code


#: v1model's checksum externs
CHECKSUMS = (
    "verify_checksum",
    "update_checksum",
    "verify_checksum_with_payload",
    "update_checksum_with_payload",
)

#: HashAlgorithm → p4n_algo's code; custom CRCs with their BMv2 default parameters
#: (CRC-32 and CRC-16/ARC), as on the Python back end
ALGOS = {"crc32": 0, "crc16": 1, "csum16": 2, "identity": 3, "xor16": 4}
ALGOS.update(crc32_custom=0, crc16_custom=1)


def _algo(e: ast.Expr) -> int:
    if not (isinstance(e, ast.Member) and e.name in ALGOS):
        raise Unsupported(f"hash algorithm {getattr(e, 'name', '?')}")
    return ALGOS[e.name]


def _seq(pre: list[str], v: V) -> V:
    """``v`` after the statements ``pre`` (a GNU statement expression)."""
    if not pre:
        return v
    return V(f"({{ {' '.join(pre)} {v.code}; }})", v.type, v.const)


def _width(t: T) -> int:
    if isinstance(t, TBit):
        return t.width
    if isinstance(t, TBool):
        return 1
    if isinstance(t, TEnum) and t.underlying is not None:
        return t.underlying.width  # type: ignore[no-any-return]
    if isinstance(t, TComposite) and t.kind == "struct":
        return sum(_width(ft) for _, ft in t.fields)
    raise Unsupported(f"header field of type {t.show()}")


def _padding(t: TComposite) -> list[tuple[str, T]]:
    """The ``pad_`` member of a header not of whole bytes (p4c's BMv2 ``_padding``)."""
    pad = -sum(_width(ft) for _, ft in t.fields) % 8
    return [("pad_", TBit(pad))] if pad else []


def _leaves(t: TComposite, prefix: str = "") -> list[tuple[str, T]]:
    """(C member path, type) of every scalar field of a header, in wire order: a struct
    field's own fields in place of it (``f_row.f_e``)."""
    out: list[tuple[str, T]] = []
    for n, ft in t.fields:
        if isinstance(ft, TComposite) and ft.kind == "struct":
            out += _leaves(ft, f"{prefix}f_{n}.")
        else:
            out += _field_leaves(prefix, n, ft)
    return out


def _chunked(t: T) -> bool:
    """A header field wider than ``WIDE`` bits: C holds it as 64-bit chunks, which the
    parser and deparser move and header copies and comparisons carry; an expression that
    reads it as a number is not covered."""
    return isinstance(t, TBit) and t.width > WIDE and not t.signed


def _field_leaves(prefix: str, name: str, t: T) -> list[tuple[str, T]]:
    """(C member path, type) of a header field in wire order: the field itself, or for a
    chunked one its chunks, most significant first (the first holds the odd bits)."""
    if not _chunked(t):
        return [(f"{prefix}f_{name}", t)]
    w: int = t.width  # type: ignore[attr-defined]
    sizes = ([w % 64] if w % 64 else []) + [64] * (w // 64)
    return [(f"{prefix}w{i}_{name}", TBit(cw)) for i, cw in enumerate(sizes)]


def _walk(n: Any) -> Any:
    """Every AST node under ``n`` (``n`` included)."""
    yield n
    if dataclasses.is_dataclass(n):
        for f in dataclasses.fields(n):
            v = getattr(n, f.name)
            for x in v if isinstance(v, list) else [v]:
                if isinstance(x, ast.Node):
                    yield from _walk(x)


def _path(e: ast.Expr) -> tuple[str, ...] | None:
    """The storage an argument names, as a path (``hdr.h.a`` → (hdr, h, a); a run-time
    index or a slice ends the path there); None for values that name no storage."""
    parts: list[str] = []
    while isinstance(e, (ast.Member, ast.Index, ast.Slice)):
        if isinstance(e, ast.Member):
            parts.append(e.name)
        elif isinstance(e, ast.Index) and isinstance(e.index, ast.IntLit):
            parts.append(f"[{e.index.value}]")
        else:
            parts.clear()  # a run-time index or a slice: all of the base, conservatively
        e = e.expr
    return (e.name, *reversed(parts)) if isinstance(e, ast.Name) else None


def _overlap(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    """Whether two argument paths can share storage (one is a prefix of the other)."""
    if a is None or b is None:
        return False
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _lookahead_width(t: T) -> int:
    """Bits a lookahead of ``t`` reads: bit/bool/serializable enum up to 64 bits, headers
    of whole bytes and structs of those."""
    if isinstance(t, TComposite) and t.kind in ("header", "struct"):
        w = sum(_lookahead_width(ft) for _, ft in t.fields)
        if t.kind == "header" and w % 8:
            raise Unsupported(f"lookahead of header {t.name}, not a whole number of bytes")
        return w
    w = _width(t)
    if w > 64:
        raise Unsupported(f"lookahead of {t.show()}")
    return w


def _fold(op: str, a: int, b: int) -> int:
    ops: dict[str, Any] = {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "&": lambda: a & b,
        "|": lambda: a | b,
        "^": lambda: a ^ b,
        "<<": lambda: a << b,
        ">>": lambda: a >> b,
        "<": lambda: int(a < b),
        "<=": lambda: int(a <= b),
        ">": lambda: int(a > b),
        ">=": lambda: int(a >= b),
        "==": lambda: int(a == b),
        "!=": lambda: int(a != b),
        "/": lambda: a // b,
        "%": lambda: a % b,
    }
    if op not in ops:
        raise Unsupported(f"constant operator {op}")
    return int(ops[op]())
