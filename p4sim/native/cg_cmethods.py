"""Methods and v1model extern calls in the C generator: ``extract``/``emit`` (varbit and
header unions included), ``setValid``/``setInvalid``, stack ``push_front``/``pop_front``,
register, counter and table methods, ``hash``, the checksum externs, and the field
lists they read.

Example: ``pkt.extract(hdr.h)`` with three ``bit<8>`` fields → ``if (p4n_off + 24 >
p4n_inlen * 8) { p4n_perr = 1; return; }`` (PacketTooShort), then each field loaded from
the packet (``p4n_ld`` at a byte boundary, ``p4n_get_bits`` elsewhere), then the header
made valid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.compiler.typecheck import (
    GlobalEnv,
    T,
    TBit,
    TBool,
    TComposite,
    TExtern,
    TInfInt,
    TStack,
    TVarbit,
)
from p4sim.frontend import ast
from p4sim.native.clayout import (
    ALGOS,
    _algo,
    _field_leaves,
    _get_bits,
    _leaves,
    _overlap,
    _padding,
    _path,
    _put_bits,
    _width,
)
from p4sim.native.cvalues import Ctl, Unsupported, V, _lit, _mask


class MethodsMixin:
    """The C generator's part named in the module docstring; mixed into ``cgen.CGen``."""

    if TYPE_CHECKING:  # the C generator's own (p4sim/native/cgen.py)
        cur: Ctl | None
        decls: list[str]
        genv: GlobalEnv

        def ctype(self, t: Any) -> str: ...
        def direct_meter_read(self, args: list[ast.Expr]) -> str: ...
        def error_code(self, name: str) -> str: ...
        def execute_meter(self, sym: V, args: list[ast.Expr]) -> str: ...
        def expr(self, e: ast.Expr, expect: T | None = None) -> V: ...
        def instantiate(self, decl: Any, path: str, args: list) -> Ctl: ...
        def lookup(self, name: str) -> V | None: ...
        def new(self, base: str) -> str: ...
        def value(self, e: ast.Expr, t: T) -> V: ...
        @staticmethod
        def varbit_emit(code: str, off: str) -> str: ...
        @staticmethod
        def varbit_extract(code: str, nbits: str, off: str) -> str: ...
        @staticmethod
        def varbit_fields(v: V, owner: str | None) -> tuple[str, int]: ...

    def skip_header(self, call: ast.Call) -> str:
        """``pk.extract<H>(_)``: the bits of an H are checked to be there and skipped."""
        t = self.genv.resolve(call.type_args[0]) if len(call.type_args) == 1 else None
        if not (isinstance(t, TComposite) and t.kind == "header"):
            raise Unsupported("extract of _ without a header type")
        w = sum(_width(ft) for _, ft in t.fields)
        w += -w % 8  # the padding bits too (header_pad)
        short = self.error_code("PacketTooShort")
        return (
            f"{{ if (p4n_off + {w} > p4n_inlen * 8) {{ p4n_perr = {short}; return; }} "
            f"p4n_off += {w}; }}"
        )

    def field_list(self, data: ast.Expr, what: str) -> str:
        """C statements filling ``u64 fv_[]; int fw_[]; int fn_`` with the fields of a
        list, leaving out fields of invalid headers (as BMv2 and the Python back end)."""
        elems = data.elems if isinstance(data, ast.ListExpr) else [data]
        lines = []
        total = entries = 0
        for e in elems:
            v = self.expr(e)
            owner = None
            if isinstance(e, ast.Member) and not isinstance(e.expr, ast.Call):
                b = self.expr(e.expr)
                if isinstance(b.type, TComposite) and b.type.kind == "header":
                    owner = f"{b.code}.valid_"
            if isinstance(v.type, TVarbit):  # its bytes, as many as it holds
                put, most = self.varbit_fields(v, owner)
                lines.append(put)
                total += v.type.max_width
                entries += most
                continue
            if isinstance(v.type, TBool):
                w = 1
            elif isinstance(v.type, TBit):
                w = v.type.width
            else:
                raise Unsupported(f"{what} over a value of type {v.type.show()}")
            total += w
            entries += 1
            put = f"{{ fv_[fn_] = {v.code}; fw_[fn_] = {w}; fn_++; }}"
            if w > 64:  # two entries: the high bits, then the low 64
                entries += 1
                put = (
                    f"{{ u128 x_ = {v.code}; fv_[fn_] = (u64)(x_ >> 64); fw_[fn_] = {w - 64}; "
                    "fv_[fn_ + 1] = (u64)x_; fw_[fn_ + 1] = 64; fn_ += 2; }"
                )
            lines.append(f"if ({owner}) {put}" if owner else put)
        if total > 2048:
            raise Unsupported(f"{what} over more than 2048 bits")
        n = max(1, entries)
        return " ".join([f"u64 fv_[{n}]; int fw_[{n}]; int fn_ = 0;", *lines])

    def hash_call(self, args: list[ast.Expr]) -> list[str]:
        if len(args) != 5:
            raise Unsupported("hash with other than 5 arguments")
        algo = _algo(args[1])
        dst = self.expr(args[0])
        if not isinstance(dst.type, TBit):
            raise Unsupported("hash into a non-bit destination")
        base = self.expr(args[2], TBit(64))
        mx = self.expr(args[4], TBit(64))
        for v in (base, mx):
            if not isinstance(v.type, (TBit, TInfInt)) or (v.const is not None and v.const < 0):
                raise Unsupported("hash base/max")
        fill = self.field_list(args[3], "hash")
        return [
            f"{{ {fill} {dst.code} = p4n_hash({algo}, {base.code}, fv_, fw_, fn_, "
            f"{mx.code}, {dst.type.width}); }}"
        ]

    def checksum(self, name: str, args: list[ast.Expr]) -> list[str]:
        if len(args) != 4:
            raise Unsupported(f"{name} with {len(args)} arguments")
        algo = _algo(args[3])
        cond = self.value(args[0], TBool())
        if not isinstance(args[1], ast.ListExpr):
            raise Unsupported(f"{name} over a non-list")
        fill = self.field_list(args[1], name)
        dst = self.expr(args[2])
        if not isinstance(dst.type, TBit):
            raise Unsupported("checksum destination")
        if algo == ALGOS["csum16"] and not name.endswith("_with_payload"):
            calc = f"{fill} u64 cs_ = p4n_csum16(fv_, fw_, fn_);"
        else:  # the payload after the fields for the _with_payload forms
            pl = "p4n_pl, p4n_pllen" if name.endswith("_with_payload") else "NULL, 0"
            calc = f"{fill} u64 cs_ = p4n_checksum({algo}, fv_, fw_, fn_, {pl});"
        if name.startswith("verify_checksum"):
            return [
                f"if ({cond.code}) {{ {calc} "
                f"if (cs_ != {dst.code}) p4n_sm->f_checksum_error = 1; }}"
            ]
        m = _mask(dst.type.width)
        return [f"if ({cond.code}) {{ {calc} {dst.code} = cs_ & {_lit(m)}; }}"]

    def method(self, f: ast.Member, args: list[ast.Expr]) -> str:
        """A method call used as a statement (or, for ``apply().hit``, an expression)."""
        base = f.expr
        name = f.name
        if isinstance(base, ast.Name):
            sym = self.lookup(base.name)
            if sym is None and name == "apply":
                sym = self.direct_instance(base.name, f)
            if sym is not None and sym.obj is not None:
                return self.obj_method(sym, name, args)
        b = self.expr(base)
        if isinstance(b.type, TComposite) and b.type.kind == "union" and name == "isValid":
            return "(" + " || ".join(f"{b.code}.f_{n}.valid_" for n, _ in b.type.fields) + ")"
        if isinstance(b.type, TStack) and name in ("push_front", "pop_front") and len(args) == 1:
            n = self.expr(args[0], TBit(32)).const
            if n is None or n < 0:
                raise Unsupported(f"{name} by a non-constant count")
            size, c = b.type.size, b.code
            el: Any = b.type.elem  # a header, or a union: each member becomes invalid
            members = [f".f_{m}" for m, _ in el.fields] if el.kind == "union" else [""]
            off = " ".join(f"{c}.e[i_]{m}.valid_ = 0;" for m in members)
            if name == "push_front":  # shift up by n; the n first become invalid
                move = f"if (i_ >= {n}) {c}.e[i_] = {c}.e[i_ - {n}]; else {{ {off} }}"
                loop = f"for (int64_t i_ = {size - 1}; i_ >= 0; i_--) {{ {move} }}"
                nxt = f"{c}.next_ = {c}.next_ + {n} < {size} ? {c}.next_ + {n} : {size};"
            else:  # shift down by n; the n last become invalid
                move = f"if (i_ + {n} < {size}) {c}.e[i_] = {c}.e[i_ + {n}]; else {{ {off} }}"
                loop = f"for (int64_t i_ = 0; i_ < {size}; i_++) {{ {move} }}"
                nxt = f"{c}.next_ = {c}.next_ > {n} ? {c}.next_ - {n} : 0;"
            return f"{{ {loop} {nxt} }}"
        if isinstance(b.type, TComposite) and b.type.kind == "header":
            if name == "isValid":
                return f"{b.code}.valid_"
            if name == "setInvalid":
                return f"{b.code}.valid_ = 0"
            if name == "setValid":  # a union member: the other members become invalid
                zero = f"memset(&{b.code}, 0, sizeof {b.code});"
                sibs = "".join(f" {x}.valid_ = 0;" for x in self.union_siblings(base))
                return f"{{ if (!{b.code}.valid_) {{ {zero} {b.code}.valid_ = 1; }}{sibs} }}"
        raise Unsupported(f"method {name}")

    def direct_instance(self, name: str, site: ast.Node) -> V | None:
        """``C.apply(...)`` of a parser/control type: an instance of its own for each call
        site, named as the Python back end names it."""
        td = self.genv.type_decls.get(name)
        if not isinstance(td, (ast.ControlDecl, ast.ParserDecl)) or self.cur is None:
            return None
        made: dict[int, V] = self.__dict__.setdefault("_direct", {})
        if id(site) not in made:
            sub = self.instantiate(td, f"{self.cur.path}.{name}", [])
            made[id(site)] = V("", None, obj=("instance", sub))
        return made[id(site)]

    def obj_method(self, sym: V, name: str, args: list[ast.Expr]) -> str:
        kind = sym.obj[0]
        if kind == "packet":
            if name == "advance" and len(args) == 1:
                n = self.value(args[0], TBit(32))
                short = self.error_code("PacketTooShort")
                return (
                    f"{{ u64 n_ = {n.code}; if (p4n_off + n_ > p4n_inlen * 8) "
                    f"{{ p4n_perr = {short}; return; }} p4n_off += n_; }}"
                )
            if name == "extract" and len(args) in (1, 2):
                h = self.expr(args[0])
                if not (isinstance(h.type, TComposite) and h.type.kind == "header"):
                    raise Unsupported("extract of a non-header")
                a = args[0]
                at = ""
                if "p4n_stkerr()" in h.code:  # stack.next: StackOutOfBounds comes before
                    hp = self.new("hp")  # PacketTooShort, as on Python and BMv2
                    at = f"{self.ctype(h.type)} *{hp} = &{h.code}; "
                    h = V(f"(*{hp})", h.type)
                if len(args) == 2:
                    ext = self.extract_varbit(h, self.value(args[1], TBit(32)).code)
                else:
                    ext = self.extract(h)
                ext = f"{{ {at}{ext} }}" if at else ext
                sibs = "".join(f" {x}.valid_ = 0;" for x in self.union_siblings(a))
                nxt = a.expr if sibs and isinstance(a, ast.Member) else a  # stack.next.member
                if isinstance(nxt, ast.Member) and nxt.name == "next":
                    st = self.expr(nxt.expr)
                    if isinstance(st.type, TStack):  # bounds checked by h, then counted
                        return f"{{ {ext}{sibs} {st.code}.next_ += 1; }}"
                if sibs:  # a union member: the other members become invalid
                    return f"{{ {ext}{sibs} }}"
                return ext
            if name == "emit" and len(args) == 1:
                h = self.expr(args[0])
                if isinstance(h.type, TComposite) and h.type.kind == "header":
                    return self.emit(h)
                return self.emit_any(h)
            raise Unsupported(f"packet {name}")
        if kind == "table":
            if name != "apply" or args:
                raise Unsupported(f"table {name}")
            return f"{sym.obj[1]}()"
        if kind == "instance":
            sub: Ctl = sym.obj[1]
            if name != "apply":
                raise Unsupported("instance method")
            # As Python's copy-in/copy-out: `in` scalars are copied first; `out` arguments
            # and `inout` scalars go through a copy written back only when the callee
            # returns normally (not on exit or a parser error); headers, structs and stacks
            # otherwise are passed by pointer, and no two pointers may reach the same
            # storage (Python would copy there).
            ptrs, pre, post = [], [], []
            params = [(p, self.genv.resolve(p.type)) for p in sub.decl.params]
            is_pkt = [
                isinstance(t, TExtern)
                or (
                    isinstance(p.type, ast.NamedType) and p.type.name in ("packet_in", "packet_out")
                )
                for p, t in params
            ]
            by_ptr = [
                not pk and (isinstance(t, (TComposite, TStack)) or p.direction in ("out", "inout"))
                for (p, t), pk in zip(params, is_pkt, strict=True)
            ]
            paths = [_path(a) if bp else None for a, bp in zip(args, by_ptr, strict=True)]
            for k, ((p, t), a) in enumerate(zip(params, args, strict=True)):
                if is_pkt[k]:
                    ptrs.append("NULL")
                    continue
                if any(j != k and _overlap(paths[k], q) for j, q in enumerate(paths)):
                    raise Unsupported(f"overlapping arguments of {sub.decl.name}.apply")
                copy = p.direction == "out" or (
                    p.direction == "inout" and not isinstance(t, (TComposite, TStack))
                )
                if by_ptr[k] and not copy:
                    ptrs.append(f"&{self.expr(a).code}")
                    continue
                tmp = self.new("arg")
                self.decls.append(f"static {self.ctype(t)} {tmp};")
                ptrs.append(f"&{tmp}")
                if p.direction == "out":
                    pre.append(f"memset(&{tmp}, 0, sizeof {tmp});")
                else:
                    pre.append(f"{tmp} = {self.value(a, t).code};")
                if copy:
                    post.append(f"{self.expr(a).code} = {tmp};")
            call = f"{sub.fn}({', '.join(ptrs)});"
            if isinstance(sub.decl, ast.ParserDecl):  # a rejection or error ends the parse
                call += f" if (p4n_rej || p4n_perr != {self.error_code('NoError')}) return;"
            return " ".join(pre + [call] + post) + " (void)0"
        if kind == "register":
            _, n, w, size = sym.obj
            if name == "read" and len(args) == 2:
                dst = self.expr(args[0])
                i = self.index(args[1])
                return f"{{ u64 ri_ = {i}; if (ri_ < {size}) {dst.code} = R{n}[ri_]; }}"
            if name == "write" and len(args) == 2:
                i = self.index(args[0])
                val = self.value(args[1], TBit(w)).code
                return f"{{ u64 ri_ = {i}; if (ri_ < {size}) R{n}[ri_] = {val}; }}"
        if kind == "meter" and name == "execute_meter":
            return self.execute_meter(sym, args)
        if kind == "direct_meter" and name == "read":
            return self.direct_meter_read(args)
        if kind == "direct_counter" and name == "count" and not args:
            return "(void)0"  # counted by the table on a hit, as BMv2 does
        if kind == "counter" and name == "count" and len(args) == 1:
            _, n, size = sym.obj
            i = self.index(args[0])
            return (
                f"{{ u64 ci_ = {i}; if (ci_ < {size}) "
                f"{{ K{n}[2 * ci_] += 1; K{n}[2 * ci_ + 1] += p4n_pktlen; }} }}"
            )
        raise Unsupported(f"{kind}.{name}")

    def index(self, e: ast.Expr) -> str:
        """An extern's index: any bit<W> value, or a constant."""
        v = self.expr(e, TBit(32))
        if isinstance(v.type, TInfInt) and v.const is not None and v.const >= 0:
            return _lit(v.const)
        if not isinstance(v.type, TBit):
            raise Unsupported(f"index of type {v.type.show()}")
        return v.code

    def extract_varbit(self, h: V, nbits: str) -> str:
        """``pk.extract(h, n)`` of a header with a varbit field of ``n`` bits, checked as
        the Python back end checks it: whole bytes, at most the maximum, in the packet."""
        t: TComposite = h.type
        var = [ft for _, ft in t.fields if isinstance(ft, TVarbit)]
        if len(var) != 1:
            raise Unsupported("a two-argument extract of a header without one varbit field")
        fixed = sum(_width(ft) for _, ft in t.fields if not isinstance(ft, TVarbit))
        err = self.error_code
        parts = [
            f"u64 n_ = {nbits};",
            f"if (n_ & 7) {{ p4n_perr = {err('ParserInvalidArgument')}; return; }}",
            f"if (n_ > {var[0].max_width}) {{ p4n_perr = {err('HeaderTooShort')}; return; }}",
            f"if (p4n_off + {fixed} + n_ > p4n_inlen * 8) "
            f"{{ p4n_perr = {err('PacketTooShort')}; return; }}",
            "u64 o_ = p4n_off;",
        ]
        for n, ft in t.fields:
            if isinstance(ft, TVarbit):
                parts.append(self.varbit_extract(f"{h.code}.f_{n}", "n_", "o_") + " o_ += n_;")
                continue
            for leaf, lt in (
                _leaves(ft, f"f_{n}.") if isinstance(ft, TComposite) else _field_leaves("", n, ft)
            ):
                w = _width(lt)
                parts.append(f"{h.code}.{leaf} = {_get_bits('o_', w)}; o_ += {w};")
        parts.append(f"{h.code}.valid_ = 1; p4n_off = o_;")
        return "{ " + " ".join(parts) + " }"

    def extract(self, h: V) -> str:
        t: TComposite = h.type
        if any(isinstance(ft, TVarbit) for _, ft in t.fields):
            raise Unsupported("extract of a header with a varbit field without its size")
        w = sum(_width(ft) for _, ft in t.fields)
        w += -w % 8  # with the padding bits (header_pad), kept in pad_
        short = self.error_code("PacketTooShort")
        parts = [f"if (p4n_off + {w} > p4n_inlen * 8) {{ p4n_perr = {short}; return; }}"]
        fast, slow = [], []
        off = 0
        for n, ft in _leaves(t) + _padding(t):
            fw = _width(ft)
            slow.append(f"{h.code}.{n} = {_get_bits(f'p4n_off + {off}', fw)};")
            if (
                off % 8 == 0 and fw % 8 == 0 and fw <= 64
            ):  # whole bytes once the header starts on one
                fast.append(f"{h.code}.{n} = p4n_ld(b_ + {off // 8}, {fw // 8});")
            else:
                fast.append(slow[-1])
            off += fw
        parts.append("if ((p4n_off & 7) == 0) { const uint8_t *b_ = p4n_in + (p4n_off >> 3); ")
        parts += fast + ["} else {"] + slow + ["}"]
        parts.append(f"{h.code}.valid_ = 1; p4n_off += {w};")
        return "{ " + " ".join(parts) + " }"

    def union_siblings(self, h: ast.Expr) -> list[str]:
        """C codes of the other members when ``h`` is a member of a header union."""
        if not isinstance(h, ast.Member):
            return []
        u = self.expr(h.expr)
        if isinstance(u.type, TComposite) and u.type.kind == "union":
            return [f"{u.code}.f_{n}" for n, _ in u.type.fields if n != h.name]
        return []

    def emit_any(self, h: V) -> str:
        """Emit a header, a stack (every element in order) or a struct (its members in
        order, nested structs and stacks included), as the Python back end's ``_emit``."""
        t = h.type
        if isinstance(t, TComposite) and t.kind == "header":
            return self.emit(h)
        if isinstance(t, TStack):
            return "; ".join(self.emit_any(V(f"{h.code}.e[{i}]", t.elem)) for i in range(t.size))
        if isinstance(t, TComposite) and t.kind in ("struct", "union"):
            parts = [
                self.emit_any(V(f"{h.code}.f_{n}", ft))
                for n, ft in t.fields
                if isinstance(ft, (TComposite, TStack))
            ]
            return "; ".join(p for p in parts if p) or "(void)0"
        raise Unsupported(f"emit of {t.show()}")

    def emit(self, h: V) -> str:
        t: TComposite = h.type
        if any(isinstance(ft, TVarbit) for _, ft in t.fields):  # bit by bit, its length
            parts = ["u64 o_ = p4n_ooff;"]
            for n, ft in t.fields:
                if isinstance(ft, TVarbit):
                    vb = f"{h.code}.f_{n}"
                    parts.append(f"{self.varbit_emit(vb, 'o_')} o_ += {vb}.n;")
                    continue
                for leaf, lt in (
                    _leaves(ft, f"f_{n}.")
                    if isinstance(ft, TComposite)
                    else _field_leaves("", n, ft)
                ):
                    w = _width(lt)
                    parts.append(f"{_put_bits('o_', f'{h.code}.{leaf}', w)}; o_ += {w};")
            return f"if ({h.code}.valid_) {{ {' '.join(parts)} p4n_ooff = o_; }}"
        fast, slow = [], []
        off = 0
        for n, ft in _leaves(t) + _padding(t):
            fw = _width(ft)
            slow.append(f"{_put_bits(f'p4n_ooff + {off}', f'{h.code}.{n}', fw)};")
            if off % 8 == 0 and fw % 8 == 0 and fw <= 64:
                fast.append(f"p4n_st(b_ + {off // 8}, {h.code}.{n}, {fw // 8});")
            else:
                fast.append(slow[-1])
            off += fw
        return " ".join(
            [f"if ({h.code}.valid_) {{ if ((p4n_ooff & 7) == 0) {{ uint8_t *b_ = p4n_out + "]
            + ["(p4n_ooff >> 3); "]
            + fast
            + ["} else {"]
            + slow
            + ["}", f"p4n_ooff += {off}; }}"]
        )
