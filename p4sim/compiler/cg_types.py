"""Python classes for P4 headers, structs and unions, generated as source text.

Example (for ``header h_t { bit<4> a; bit<4> b; }``)::

    class C_h_t:
        __slots__ = ('a', 'b', '_v')
        W = 8
        def __init__(self): self.a = 0; self.b = 0; self._v = False
        def _ext(self, v): self.a = (v >> 4) & 15; self.b = v & 15; self._v = True
        def _pack(self): return (self.a << 4) | self.b

Each class also gets ``copy`` (deep copy), ``__eq__`` and ``_emit(po)`` (deparser), and a
module function ``mk_C_h_t(a, b)`` used by list/struct initialisers.
"""

from __future__ import annotations

import re

from p4sim.compiler.cg_expr import pyname
from p4sim.compiler.typecheck import (
    T,
    TBit,
    TBool,
    TComposite,
    TEnum,
    TError,
    TStack,
    TTuple,
    TVarbit,
    fixed_bits,
    type_width,
)


class TypeClasses:
    """Allocates one Python class per composite type and writes its source."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.by_name: dict[str, TComposite] = {}
        self.src: list[str] = []

    def class_of(self, t: TComposite) -> str:
        key = id(t)
        got = self.names.get(key)
        if got is not None:
            return got
        for name, other in self.by_name.items():
            if other is t or (other.name == t.name and other.fields == t.fields):
                self.names[key] = name
                return name
        base = "C_" + re.sub(r"\W", "_", t.name)
        name = base
        n = 1
        while name in self.by_name:
            n += 1
            name = f"{base}_{n}"
        self.names[key] = name
        self.by_name[name] = t
        for _, ft in t.fields:  # nested classes first so defaults can refer to them
            self._need(ft)
        self.src.append(self._gen(name, t))
        return name

    def _need(self, t: T) -> None:
        if isinstance(t, TComposite):
            self.class_of(t)
        elif isinstance(t, TStack):
            self._need(t.elem)
        elif isinstance(t, TTuple):
            for e in t.elems:
                self._need(e)

    def default(self, t: T) -> str:
        """Python source of a fresh default value of type ``t``."""
        if isinstance(t, TBool):
            return "False"
        if isinstance(t, TComposite):
            return f"{self.class_of(t)}()"
        if isinstance(t, TStack):
            cls = self.default(t.elem)
            if t.size <= 8:
                return "Stack([" + ", ".join([cls] * t.size) + "])"
            return f"Stack([{cls} for _ in range({t.size})])"
        if isinstance(t, TEnum):
            return "0" if t.underlying is not None else repr(t.members[0])
        if isinstance(t, TError):
            return "'NoError'"
        if isinstance(t, TVarbit):
            return "(0, 0)"
        if isinstance(t, TTuple):
            return "(" + "".join(self.default(e) + ", " for e in t.elems) + ")"
        return "0"

    # -- class source ----------------------------------------------------------------

    def _gen(self, name: str, t: TComposite) -> str:
        fields = [(pyname(n), ft) for n, ft in t.fields]
        slots = [f for f, _ in fields] + (["_v"] if t.kind == "header" else [])
        pad = header_pad(t)
        if pad:
            slots.append("_pad")
        out = [f"class {name}:", f"    __slots__ = {tuple(slots)!r}"]
        init = [f"self.{f} = {self.default(ft)}" for f, ft in fields]
        if t.kind == "header":
            init.append("self._v = False")
        if pad:
            init.append("self._pad = 0")
        out.append("    def __init__(self):")
        out += ["        " + s for s in init] or ["        pass"]
        out.append("    def copy(self):")
        out.append(f"        n = _new({name})")
        for f, ft in fields:
            if isinstance(ft, (TComposite, TStack)):
                out.append(f"        n.{f} = self.{f}.copy()")
            elif isinstance(ft, TTuple):
                out.append(f"        n.{f} = _copy_tuple(self.{f})")
            else:
                out.append(f"        n.{f} = self.{f}")
        if t.kind == "header":
            out.append("        n._v = self._v")
        if pad:
            out.append("        n._pad = self._pad")
        out.append("        return n")
        out += self._eq(t, fields)
        out += self._emit(t, fields)
        if t.kind == "header":
            out += self._ext_pack(t, fields)
        elif t.kind == "struct" and fixed_bits(t):
            out += self._struct_bits(fields)
        out.append("    def __repr__(self):")
        parts = " + ', ' + ".join(f"'{f}=' + repr(self.{f})" for f, _ in fields) or "''"
        valid = " + ('' if self._v else ' (invalid)')" if t.kind == "header" else ""
        out.append(f"        return '{t.name}(' + {parts} + ')'{valid}")
        args = ", ".join(f"a{i}" for i in range(len(fields)))
        out.append(f"def mk_{name}({args}):")
        out.append(f"    n = _new({name})")
        for i, (f, ft) in enumerate(fields):
            val = f"a{i}.copy()" if isinstance(ft, (TComposite, TStack)) else f"a{i}"
            out.append(f"    n.{f} = {val}")
        if t.kind == "header":
            out.append("    n._v = True")
        if pad:
            out.append("    n._pad = 0")
        out.append("    return n")
        return "\n".join(out) + "\n"

    def _eq(self, t: TComposite, fields: list[tuple[str, T]]) -> list[str]:
        cmp = " and ".join(f"self.{f} == o.{f}" for f, _ in fields) or "True"
        out = ["    __hash__ = None", "    def __eq__(self, o):"]
        if t.kind == "header":
            out.append(f"        return self._v == o._v and (not self._v or ({cmp}))")
        elif t.kind == "union":
            out.append(f"        return {cmp}")
        else:
            out.append(f"        return {cmp}")
        return out

    def _emit(self, t: TComposite, fields: list[tuple[str, T]]) -> list[str]:
        out = ["    def _emit(self, po):"]
        if t.kind == "header":
            if any(isinstance(ft, TVarbit) for _, ft in fields):
                out += [
                    "        if self._v:",
                    "            v, w = self._packv()",
                    "            po.acc = (po.acc << w) | v",
                    "            po.n += w",
                ]
            elif header_pad(t):
                # the padding bits extract kept go back out (p4c's BMv2 `_padding` field)
                w, pad = t.width, header_pad(t)
                out += [
                    "        if self._v:",
                    f"            po.acc = (po.acc << {w + pad}) | (self._pack() << {pad})"
                    " | self._pad",
                    f"            po.n += {w + pad}",
                ]
            else:
                w = t.width
                out += [
                    "        if self._v:",
                    f"            po.acc = (po.acc << {w}) | self._pack()",
                    f"            po.n += {w}",
                ]
            return out
        body = []
        for f, ft in fields:
            if isinstance(ft, TComposite):
                body.append(f"        self.{f}._emit(po)")
            elif isinstance(ft, TStack):
                body.append(f"        for e in self.{f}.h: e._emit(po)")
        return out + (body or ["        pass"])

    def _struct_bits(self, fields: list[tuple[str, T]]) -> list[str]:
        """``_ext(v)`` and ``_pack()`` of a struct that can be a header's field: its
        fields laid out in order, first field in the high bits."""
        ext, pack = ["    def _ext(self, v):"], []
        shift = sum(type_width(ft) for _, ft in fields)
        for f, ft in fields:
            w = type_width(ft)
            shift -= w
            get = f"(v >> {shift}) & {(1 << w) - 1}"
            if isinstance(ft, TComposite):
                ext.append(f"        self.{f}._ext({get})")
                pack.append(f"(self.{f}._pack() << {shift})")
            elif isinstance(ft, TBool):
                ext.append(f"        self.{f} = bool({get})")
                pack.append(f"((1 if self.{f} else 0) << {shift})")
            else:
                ext.append(f"        self.{f} = {get}")
                pack.append(f"(self.{f} << {shift})")
        if len(ext) == 1:
            ext.append("        pass")
        return ext + ["    def _pack(self):", f"        return {' | '.join(pack) or '0'}"]

    def _ext_pack(self, t: TComposite, fields: list[tuple[str, T]]) -> list[str]:
        """``_ext(v[, n])`` sets the fields from an int; ``_pack()`` builds that int.
        With a varbit field its width ``n`` shifts the fields before it."""
        widths: list[str] = []
        for _, ft in fields:
            widths.append("n" if isinstance(ft, TVarbit) else str(type_width(ft)))
        has_var = "n" in widths
        ext = ["    def _ext(self, v, n=0):" if has_var else "    def _ext(self, v):"]
        pad = header_pad(t)
        if pad:  # v holds the padding bits too, in its low end
            ext += [f"        self._pad = v & {(1 << pad) - 1}", f"        v >>= {pad}"]
        pack: list[str] = []
        for i, (f, ft) in enumerate(fields):
            after = widths[i + 1 :]
            const_after = sum(int(w) for w in after if w != "n")
            shift = f"n + {const_after}" if "n" in after else str(const_after)
            if isinstance(ft, TVarbit):
                ext.append(f"        self.{f} = (n, (v >> {shift}) & ((1 << n) - 1))")
                pack.append(f"(self.{f}[1] << {shift})")
                continue
            w = type_width(ft)
            m = (1 << w) - 1
            get = f"(v >> {shift}) & {m}" if shift != "0" else f"v & {m}"
            if isinstance(ft, TBool):
                ext.append(f"        self.{f} = bool({get})")
                pack.append(f"((1 if self.{f} else 0) << {shift})")
            elif isinstance(ft, TComposite):  # a struct of bit fields
                ext.append(f"        self.{f}._ext({get})")
                pack.append(f"(self.{f}._pack() << {shift})")
            else:
                ext.append(f"        self.{f} = {get}")
                pack.append(f"(self.{f} << {shift})" if shift != "0" else f"self.{f}")
        ext.append("        self._v = True")
        # setValid() on an invalid header zeroes its fields first (BMv2's add_header)
        zero = [f"            self.{f} = {self.default(ft)}" for f, ft in fields]
        ext += (
            ["    def _set_valid(self):", "        if not self._v:"]
            + zero
            + (["            self._pad = 0"] if pad else [])
            + ["            self._v = True"]
        )
        codes = byte_codes(t)
        if codes is not None:
            # every field is a whole 1, 2, 4 or 8 bytes: one struct call extracts them all
            # from the packet (``_extb``, at a byte offset) and packs them back
            names = "".join(f"self.{f}, " for f, _ in fields)
            ext += [
                "    def _extb(self, d, o):",
                f"        ({names}) = self._S.unpack_from(d, o)",
                "        self._v = True",
            ]
            pk = [
                "    def _pack(self):",
                f"        return int.from_bytes(self._S.pack({names}), 'big')",
            ]
            return ext + pk + [f"    W = {t.width}", f"    _S = _struct.Struct({codes!r})"]
        if has_var:
            var = next(f for f, ft in fields if isinstance(ft, TVarbit))
            wsum = sum(int(w) for w in widths if w != "n")
            pk = [
                "    def _packv(self):",
                f"        n = self.{var}[0]",
                f"        return ({' | '.join(pack) or '0'}), n + {wsum}",
            ]
        else:
            pk = ["    def _pack(self):", f"        return {' | '.join(pack) or '0'}"]
        return ext + pk + [f"    W = {t.width}"]


_STRUCT_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


def byte_codes(t: TComposite) -> str | None:
    """The ``struct`` format of a header whose fields are all unsigned-pattern bit<W>/int<W>
    of 8, 16, 32 or 64 bits (no bool, varbit or padding), else None.

    Example: ``header h { bit<16> a; bit<32> b; }`` → ``'!HI'``.
    """
    if t.kind != "header" or not t.fields or header_pad(t):
        return None
    out = []
    for _, ft in t.fields:
        if type(ft) is not TBit or ft.width not in _STRUCT_CODES:
            return None
        out.append(_STRUCT_CODES[ft.width])
    return "!" + "".join(out)


def header_pad(t: T) -> int:
    """Bits p4c's BMv2 back end appends (a ``_padding`` field) to a fixed-size header whose
    width is not a whole number of bytes: BMv2 extracts and emits whole bytes only.

    Example: ``header h { bit<8> a; bit<1> b; }`` → 7.
    """
    if not (isinstance(t, TComposite) and t.kind == "header"):
        return 0
    if any(isinstance(ft, TVarbit) for _, ft in t.fields):
        return 0
    return -t.width % 8
