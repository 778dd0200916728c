"""Expressions in the C generator: literals, names, members (header and stack fields,
``isValid``, ``size``, ``lastIndex``), indexing, slices, casts, unary, ternary and binary
operators (P4's wrap-around at the type's width, saturating ``|+|``/``|-|``, ``++``
concatenation, comparisons of headers and structs), function and method calls as values
and ``lookahead``.

Example: for ``bit<8> a, b``, ``a + b`` → ``V("((a + b) & 0xffULL)", bit<8>)``; with both
constant the value is folded (``V("0x2aULL", bit<8>, const=42)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.compiler.typecheck import (
    GlobalEnv,
    T,
    TBit,
    TBool,
    TComposite,
    TEnum,
    TError,
    TInfInt,
    TStack,
    TTuple,
    TVarbit,
    type_width,
)
from p4sim.frontend import ast
from p4sim.native.clayout import (
    WIDE,
    _chunked,
    _field_leaves,
    _fold,
    _get_bits,
    _lookahead_width,
    _seq,
    _wide,
    _width,
)
from p4sim.native.cvalues import Ctl, Unsupported, V, _lit, _mask, has_fx, in_order

#: the ordering comparisons (signed operands compare sign-extended)
_CMP = ("<", "<=", ">", ">=")


class ExprMixin:
    """The C generator's part named in the module docstring; mixed into ``cgen.CGen``."""

    if TYPE_CHECKING:  # the C generator's own (p4sim/native/cgen.py)
        aliases: dict[int, V]
        cur: Ctl | None
        genv: GlobalEnv

        def ctype(self, t: Any) -> str: ...
        def error_code(self, name: str) -> str: ...
        def function_value(self, d: ast.FunctionDecl, e: ast.Call) -> V: ...
        def lookup(self, name: str) -> V | None: ...
        def method(self, f: ast.Member, args: list[ast.Expr]) -> str: ...
        def new(self, base: str) -> str: ...
        def stack_at(self, b: V, idx: str) -> V: ...
        def stack_error(self, b: V, cond: str, idx: str) -> V: ...
        def user_function(self, e: ast.Expr) -> ast.FunctionDecl | None: ...
        @staticmethod
        def varbit_equal(a: str, b: str) -> str: ...

    # -- expressions ----------------------------------------------------------------

    def value(self, e: ast.Expr, t: T) -> V:
        v = self.expr(e, t)
        return self.coerce(v, t)

    def coerce(self, v: V, t: T) -> V:
        if isinstance(t, TBit) and isinstance(v.type, TInfInt):
            c = v.const & _mask(t.width)  # type: ignore[operator]
            return V(_wide(_lit(c), t.width), t, c)
        if isinstance(t, TBool) and isinstance(v.type, TBool):
            return v
        if isinstance(t, TInfInt) and isinstance(v.type, TInfInt):  # `const int x = 3;`
            return v
        if isinstance(t, TBit) and isinstance(v.type, TBit):
            if t.width != v.type.width:
                raise Unsupported(f"implicit width change {v.type.show()} → {t.show()}")
            return v
        if isinstance(t, TEnum) and isinstance(v.type, (TEnum, TBit)):
            return v
        if isinstance(t, TBit) and isinstance(v.type, TEnum) and v.type.underlying == t:
            return V(v.code, t, v.const)  # a serializable enum's value (an action's data)
        if isinstance(t, TError) and isinstance(v.type, TError):
            return v
        if isinstance(t, TComposite) and v.type is t:
            return v
        if isinstance(t, TTuple) and v.type == t:
            return v
        if isinstance(t, TVarbit) and isinstance(v.type, TVarbit):
            if t.max_width == v.type.max_width:
                return v
        if isinstance(t, TStack) and isinstance(v.type, TStack):  # the same C struct
            if v.type.size == t.size and v.type.elem is t.elem:
                return v
        raise Unsupported(f"conversion {v.type.show()} → {t.show()}")

    def expr(self, e: ast.Expr, expect: T | None = None) -> V:
        alias = self.aliases.get(id(e))
        if alias is not None:  # the target of `a op= b`, evaluated once
            return alias
        m = getattr(self, "_e_" + type(e).__name__, None)
        if m is None:
            raise Unsupported(f"expression {type(e).__name__}")
        v = m(e, expect)
        if isinstance(v.type, TBit) and v.type.width > 64:
            self.ctype(v.type)  # up to 128 bits, unsigned
        return v

    def _e_ListExpr(self, e: ast.ListExpr, expect: T | None) -> V:
        """``{a, b}`` for a header, struct or tuple: a C compound literal (a header is
        valid)."""
        if isinstance(expect, TTuple) and len(e.elems) == len(expect.elems):
            codes = [self.value(x, et).code for x, et in zip(e.elems, expect.elems, strict=True)]
            pre, codes = in_order(codes, [self.ctype(et) for et in expect.elems], self.new)
            parts = [f".e{i} = {c}" for i, c in enumerate(codes)]
            return _seq(pre, V(f"(({self.ctype(expect)}){{ {', '.join(parts)} }})", expect))
        if not (isinstance(expect, TComposite) and expect.kind in ("header", "struct")):
            raise Unsupported("a list expression other than a header or struct initialiser")
        if len(e.elems) != len(expect.fields):
            raise Unsupported("an initialiser of the wrong length")
        return self.composite_literal(
            expect, list(zip([n for n, _ in expect.fields], e.elems, strict=True))
        )

    def _e_StructInit(self, e: ast.StructInit, expect: T | None) -> V:
        t = self.genv.resolve(e.type) if e.type is not None else expect
        if not (isinstance(t, TComposite) and t.kind in ("header", "struct")):
            raise Unsupported("a struct initialiser of an unknown type")
        return self.composite_literal(t, e.fields)

    def composite_literal(self, t: TComposite, given: list[tuple[str, ast.Expr]]) -> V:
        types = dict(t.fields)
        codes = [self.value(x, types[n]).code for n, x in given]  # in written order
        pre, codes = in_order(codes, [self.ctype(types[n]) for n, _ in given], self.new)
        parts = [f".f_{n} = {c}" for (n, _), c in zip(given, codes, strict=True)]
        if t.kind == "header":
            parts.append(".valid_ = 1")
        return _seq(pre, V(f"(({self.ctype(t)}){{ {', '.join(parts)} }})", t))

    def _e_IntLit(self, e: ast.IntLit, expect: T | None) -> V:
        if e.width is not None:  # int<W> values are W-bit two's-complement patterns
            c = e.value & _mask(e.width)
            return V(_wide(_lit(c), e.width), TBit(e.width, e.signed), c)
        if isinstance(expect, TBit):
            c = e.value & _mask(expect.width)
            return V(_wide(_lit(c), expect.width), expect, c)
        return V(_lit(e.value) if e.value >= 0 else str(e.value), TInfInt(), e.value)

    def _e_BoolLit(self, e: ast.BoolLit, expect: T | None) -> V:
        return V("1ULL" if e.value else "0ULL", TBool(), int(e.value))

    def _e_ErrorMember(self, e: ast.ErrorMember, expect: T | None) -> V:
        return V(self.error_code(e.name), TError())

    def _e_Name(self, e: ast.Name, expect: T | None) -> V:
        v = self.lookup(e.name)
        if v is None:
            raise Unsupported(f"name {e.name}")
        return v

    def _e_Member(self, e: ast.Member, expect: T | None) -> V:
        if isinstance(e.expr, ast.Name):
            d = self.genv.type_decls.get(e.expr.name)
            if isinstance(d, ast.EnumDecl) and self.lookup(e.expr.name) is None:
                t = self.genv.resolve(ast.NamedType(e.expr.name))
                if isinstance(t, TEnum) and t.underlying is None:  # compared, never seen
                    i = list(t.members).index(e.name)
                    return V(_lit(i), t, i)
                if not isinstance(t, TEnum) or t.underlying is None:
                    raise Unsupported(f"enum {e.expr.name}")
                val = self.genv.const_value(e, t)
                return V(_lit(int(val)), t.underlying, int(val))
        if isinstance(e.expr, ast.Call) and self.lookahead(e.expr) is not None:
            la = self.lookahead(e.expr)
            assert la is not None
            t, _, check = la
            if not isinstance(t, TComposite) or t.field_type(e.name) is None:
                raise Unsupported(f"member {e.name} of a lookahead")
            off = 0
            for n, before in t.fields:
                if n == e.name:
                    break
                off += _lookahead_width(before)
            lt: Any = t.field_type(e.name)
            if isinstance(lt, TEnum):
                lt = lt.underlying
            if not isinstance(lt, (TBit, TBool)):
                raise Unsupported(f"member {e.name} of a lookahead")
            code = f"({{ {check} {_get_bits(f'p4n_off + {off}', _width(lt))}; }})"
            return V(code, lt)
        if isinstance(e.expr, ast.Call):  # t.apply().hit / .miss
            call = e.expr
            if (
                isinstance(call.func, ast.Member)
                and call.func.name == "apply"
                and e.name in ("hit", "miss")
            ):
                code = self.method(call.func, [a.value for a in call.args])
                return V(f"({code})" if e.name == "hit" else f"(!{code})", TBool())
            raise Unsupported(f"member {e.name} of a call")
        b = self.expr(e.expr)
        if isinstance(b.type, TStack):
            return self.stack_member(b, e.name)
        if isinstance(b.type, TComposite):
            ft = b.type.field_type(e.name)
            if ft is None:
                raise Unsupported(f"field {e.name}")
            if isinstance(ft, TEnum) and ft.underlying is not None:
                ft = ft.underlying
            if _chunked(ft):
                raise Unsupported(f"type {ft.show()} (wider than {WIDE} bits) in an expression")
            return V(f"{b.code}.f_{e.name}", ft)
        raise Unsupported(f"member {e.name} of {b.type}")

    def stack_member(self, b: V, name: str) -> V:
        t: TStack = b.type
        in_parser = self.cur is not None and isinstance(self.cur.decl, ast.ParserDecl)
        if name == "size":
            return V(_lit(t.size), TBit(32), t.size)
        if name == "nextIndex":
            return V(f"{b.code}.next_", TBit(32))
        if name == "lastIndex":
            return V(f"(({b.code}.next_ - 1) & 0xffffffffULL)", TBit(32))
        if name == "last" and in_parser:
            return self.stack_error(b, f"({b.code}.next_ == 0)", f"{b.code}.next_ - 1")
        if name == "last":  # elsewhere an empty stack's last is out of range
            return self.stack_at(b, f"{b.code}.next_ - 1")
        if name == "next" and in_parser:
            return self.stack_error(b, f"({b.code}.next_ >= {t.size})", f"{b.code}.next_")
        raise Unsupported(f"stack member {name}" + ("" if in_parser else " outside a parser"))

    def _e_Index(self, e: ast.Index, expect: T | None) -> V:
        b = self.expr(e.expr)
        if isinstance(b.type, TTuple):  # a constant index (the type checker's rule)
            k = self.genv.const_int(e.index)
            return V(f"{b.code}.e{k}", b.type.elems[k])
        if not isinstance(b.type, TStack):
            raise Unsupported(f"index into {b.type.show()}")
        i = self.expr(e.index, TBit(32))
        if i.const is not None:
            if not 0 <= i.const < b.type.size:
                raise Unsupported("constant stack index out of range")
            return V(f"{b.code}.e[{i.const}]", b.type.elem)
        if not isinstance(i.type, TBit):
            raise Unsupported(f"stack index of type {i.type.show()}")
        if has_fx(i.code):  # the index once, into a local (stack_at reads it twice)
            ix = self.new("ix")
            at = self.stack_at(b, ix)
            return V(f"(*({{ u64 {ix} = {i.code}; &{at.code}; }}))", at.type)
        return self.stack_at(b, i.code)

    def lookahead(self, call: ast.Call) -> tuple[T, int, str] | None:
        """For ``pk.lookahead<T>()`` in a parser: (T, its width, the C statement refusing a
        packet too short for it, which returns from the parser); None for other calls."""
        f = call.func
        if not (
            isinstance(f, ast.Member) and f.name == "lookahead" and isinstance(f.expr, ast.Name)
        ):
            return None
        sym = self.lookup(f.expr.name)
        if sym is None or sym.obj is None or sym.obj[0] != "packet":
            return None
        if not isinstance(self.cur.decl if self.cur else None, ast.ParserDecl):
            raise Unsupported("lookahead outside a parser")
        if call.args or len(call.type_args) != 1:
            raise Unsupported("lookahead arguments")
        t = self.genv.resolve(call.type_args[0])
        w = _lookahead_width(t)
        short = self.error_code("PacketTooShort")
        check = f"if (p4n_off + {w} > p4n_inlen * 8) {{ p4n_perr = {short}; return; }}"
        return t, w, check

    def unpack(self, t: T, dst: str, off: int, out: list[str]) -> None:
        """C statements setting ``dst`` (of type ``t``) from the packet bits at the
        parser's position + ``off``, as the Python back end's lookahead unpacks them."""
        if _chunked(t):
            raise Unsupported(f"lookahead of {t.show()} (wider than {WIDE} bits)")
        if isinstance(t, (TBit, TBool)) or (isinstance(t, TEnum) and t.underlying is not None):
            out.append(f"{dst} = {_get_bits(f'p4n_off + {off}', _width(t))};")
            return
        assert isinstance(t, TComposite)
        for n, ft in t.fields:
            self.unpack(ft, f"{dst}.f_{n}", off, out)
            off += _lookahead_width(ft)
        if t.kind == "header":
            out.append(f"{dst}.valid_ = 1;")

    def _e_Call(self, e: ast.Call, expect: T | None) -> V:
        la = self.lookahead(e)
        if la is not None:  # a GNU statement expression: check, unpack, its value
            t, w, check = la
            ct = self.ctype(t)
            body: list[str] = []
            self.unpack(t, "la_", 0, body)
            if isinstance(t, TComposite):
                body.insert(0, "memset(&la_, 0, sizeof la_);")
            return V(f"({{ {check} {ct} la_; {' '.join(body)} la_; }})", t)
        f = e.func
        if isinstance(f, ast.Member) and f.name == "isValid" and not e.args:
            b = self.expr(f.expr)
            if isinstance(b.type, TComposite) and b.type.kind == "header":
                return V(f"{b.code}.valid_", TBool())
            if isinstance(b.type, TComposite) and b.type.kind == "union":
                return V(self.method(f, []), TBool())
        if isinstance(f, ast.Name) and f.name in ("sizeInBits", "sizeInBytes") and len(e.args) == 1:
            a = e.args[0].value
            if isinstance(a, ast.TypeExpr) or (
                isinstance(a, ast.Name) and self.lookup(a.name) is None
            ):
                n = self.genv.size_of(e)  # of a type: the compiler's constant
                return V(_lit(n), TInfInt(), n)
            bits = type_width(self.expr(a).type)
            n = bits if f.name == "sizeInBits" else (bits + 7) // 8
            return V(_lit(n), TInfInt(), n)
        d = self.user_function(e)
        if d is not None:
            return self.function_value(d, e)
        raise Unsupported("call in an expression")

    def _e_Slice(self, e: ast.Slice, expect: T | None) -> V:
        b = self.expr(e.expr)
        if not isinstance(b.type, TBit):
            raise Unsupported("slice")
        hi, lo = self.genv.const_int(e.hi), self.genv.const_int(e.lo)
        w = hi - lo + 1
        return V(f"(({b.code} >> {lo}) & {_lit(_mask(w))})", TBit(w))

    def _e_Cast(self, e: ast.Cast, expect: T | None) -> V:
        t = self.genv.resolve(e.type)
        if isinstance(t, TEnum) and t.underlying is not None:
            t = t.underlying
        v = self.expr(e.expr, t if isinstance(t, TBit) else None)
        if isinstance(v.type, TEnum) and v.type.underlying is not None:  # its bits
            v = V(v.code, v.type.underlying, v.const)
        if isinstance(t, TBit):
            if isinstance(v.type, TInfInt):
                return self.coerce(v, t)
            if isinstance(v.type, TBool):
                return V(f"({v.code} ? 1ULL : 0ULL)", t)
            if isinstance(v.type, TBit):
                if t.width > v.type.width and v.type.signed:  # widening int<W> sign-extends
                    ct = "(u128)(__int128)" if t.width > 64 else "(u64)"
                    sx = f"{ct}p4n_sx({v.code}, {v.type.width})"
                    return V(f"({sx} & {_lit(_mask(t.width))})", t)
                if t.width >= v.type.width:
                    return V(_wide(v.code, t.width), t, v.const)
                return V(f"({v.code} & {_lit(_mask(t.width))})", t)
        if isinstance(t, TBool) and isinstance(v.type, TBit) and v.type.width == 1:
            return V(f"({v.code} != 0)", TBool())
        raise Unsupported(f"cast {v.type.show()} → {t.show()}")

    def _e_Unary(self, e: ast.Unary, expect: T | None) -> V:
        v = self.expr(e.expr, expect)
        if e.op == "!":
            return V(f"(!{v.code})", TBool())
        if isinstance(v.type, TInfInt) and v.const is not None:
            c = {"-": -v.const, "~": ~v.const, "+": v.const}.get(e.op)
            if c is None:
                raise Unsupported(f"unary {e.op}")
            return V(str(c), TInfInt(), c)
        if not isinstance(v.type, TBit):
            raise Unsupported(f"unary {e.op}")
        m = _lit(_mask(v.type.width))
        if e.op == "~":
            return V(f"((~{v.code}) & {m})", v.type)
        if e.op == "-":
            return V(f"((0ULL - {v.code}) & {m})", v.type)
        if e.op == "+":
            return v
        raise Unsupported(f"unary {e.op}")

    def _e_Ternary(self, e: ast.Ternary, expect: T | None) -> V:
        c = self.value(e.cond, TBool())
        # each branch typed on its own first: `c ? 2 : 3w1` is a bit<3>, whatever is expected
        a = self.expr(e.then)
        b = self.expr(e.other)
        if isinstance(a.type, TInfInt) and isinstance(b.type, TInfInt) and isinstance(expect, TBit):
            a, b = self.expr(e.then, expect), self.expr(e.other, expect)
        if isinstance(a.type, TInfInt) and isinstance(b.type, TBit):
            a = self.coerce(a, b.type)
        if isinstance(b.type, TInfInt) and isinstance(a.type, TBit):
            b = self.coerce(b, a.type)
        if type(a.type) is not type(b.type) or isinstance(a.type, TComposite):
            raise Unsupported("conditional expression types")
        if isinstance(a.type, TBit) and a.type.width != b.type.width:
            raise Unsupported("conditional expression of two widths")
        return V(f"({c.code} ? {a.code} : {b.code})", a.type)

    def _e_Binary(self, e: ast.Binary, expect: T | None) -> V:
        op = e.op
        if op in ("&&", "||"):
            a, b = self.value(e.left, TBool()), self.value(e.right, TBool())
            return V(f"({a.code} {op} {b.code})", TBool())
        # an untyped constant takes the other operand's type (`8 * (bit<9>)x`), and only
        # when both are untyped the type the context expects
        a = self.expr(e.left)
        shift = op in ("<<", ">>")
        b = self.expr(e.right, a.type if isinstance(a.type, TBit) and not shift else None)
        if isinstance(a.type, TInfInt) and isinstance(expect, TBit) and op not in _CMP:
            if shift or isinstance(b.type, TInfInt):
                a = self.expr(e.left, expect)
                if not shift:
                    b = self.expr(e.right, expect)
        if (has_fx(a.code) or has_fx(b.code)) and a.const is None:
            # the left operand first, into a local: C leaves the order of operands open
            if isinstance(a.type, (TComposite, TStack, TTuple)) and has_fx(b.code):
                raise Unsupported("comparison with a call with out/inout arguments")
            tmp = self.new("l")
            r = self.binary(op, V(tmp, a.type), b)
            return V(f"({{ {self.ctype(a.type)} {tmp} = {a.code}; {r.code}; }})", r.type)
        return self.binary(op, a, b)

    def binary(self, op: str, a: V, b: V) -> V:
        """``a op b`` of two compiled operands (not ``&&``/``||``)."""
        if isinstance(b.type, TBit) and isinstance(a.type, TInfInt) and op not in ("<<", ">>"):
            a = self.coerce(a, b.type)
        if a.const is not None and b.const is not None and isinstance(a.type, TInfInt):
            c = _fold(op, a.const, b.const)
            cmp = op in _CMP or op in ("==", "!=")
            return V(str(c) if c < 0 else _lit(c), TBool() if cmp else TInfInt(), c)
        if op in ("==", "!=") and isinstance(a.type, (TComposite, TStack, TTuple, TVarbit)):
            if a.type != b.type:
                raise Unsupported(f"comparison of {a.type.show()} with {b.type.show()}")
            eq = self.equal(a.code, b.code, a.type)
            return V(f"({eq})" if op == "==" else f"(!({eq}))", TBool())
        if op in ("==", "!="):
            if isinstance(a.type, TBit) and isinstance(b.type, TInfInt):
                b = self.coerce(b, a.type)
            return V(f"({a.code} {op} {b.code})", TBool())
        if not isinstance(a.type, TBit):
            raise Unsupported(f"operator {op} on {a.type.show()}")
        w = a.type.width
        m = _lit(_mask(w))
        sg = a.type.signed
        if op == ">>" and sg:  # arithmetic: the sign fills
            if isinstance(b.type, TBit) and b.type.signed:
                raise Unsupported("signed shift amount")
            if not isinstance(b.type, (TBit, TInfInt)) or (b.const is not None and b.const < 0):
                raise Unsupported("shift amount")
            return V(f"((u64)p4n_sar(p4n_sx({a.code}, {w}), {b.code}) & {m})", a.type)
        if op in ("<<", ">>"):
            if isinstance(b.type, TInfInt):
                s = b.const
                if s is None or s < 0:
                    raise Unsupported("shift")
                x = _wide(a.code, w)
                if op == "<<":
                    return V("0ULL" if s >= w else f"(({x} << {s}) & {m})", a.type)
                return V("0ULL" if s >= w else f"({x} >> {s})", a.type)
            if not isinstance(b.type, TBit) or w > 64:
                raise Unsupported(f"shift of {a.type.show()} by {b.type.show()}")
            if op == "<<":
                return V(f"p4n_shl({a.code}, {b.code}, {m})", a.type)
            return V(f"p4n_shr({a.code}, {b.code})", a.type)
        if op == "++":
            if not isinstance(b.type, TBit) or w + b.type.width > WIDE:
                raise Unsupported(f"concatenation wider than {WIDE} bits")
            t = TBit(w + b.type.width, sg)
            return V(f"(({_wide(a.code, t.width)} << {b.type.width}) | {b.code})", t)
        b = self.coerce(b, a.type)
        if sg and op in _CMP:
            return V(f"(p4n_sx({a.code}, {w}) {op} p4n_sx({b.code}, {w}))", TBool())
        if op in _CMP:
            return V(f"({a.code} {op} {b.code})", TBool())
        if sg and op in ("/", "%"):
            fn = "p4n_sdiv" if op == "/" else "p4n_smod"
            return V(f"({fn}(p4n_sx({a.code}, {w}), p4n_sx({b.code}, {w})) & {m})", a.type)
        if op in ("|+|", "|-|"):
            fn = "p4n_sat_add" if op == "|+|" else "p4n_sat_sub"
            return V(f"{fn}({a.code}, {b.code}, {w}, {int(sg)})", a.type)
        if op in ("+", "-", "*", "&", "|", "^") and a.const is not None and b.const is not None:
            c = _fold(op, a.const, b.const) & _mask(w)  # W-bit patterns: signed ones too
            return V(_lit(c), a.type, c)
        if op in ("&", "|", "^"):
            return V(f"({a.code} {op} {b.code})", a.type)
        if op in ("+", "-", "*"):
            return V(f"(({a.code} {op} {b.code}) & {m})", a.type)
        if op in ("/", "%") and w > 64:
            raise Unsupported(f"{op} of {a.type.show()}")
        if op == "/":
            return V(f"p4n_div({a.code}, {b.code})", a.type)
        if op == "%":
            return V(f"p4n_mod({a.code}, {b.code})", a.type)
        raise Unsupported(f"operator {op}")

    def equal(self, a: str, b: str, t: T) -> str:
        """C condition: ``a == b`` for values of type ``t`` (codes without side effects),
        as the Python back end compares: two headers are equal when both are invalid or
        both valid with equal fields; stacks by their elements, structs, unions and tuples
        member by member."""
        if isinstance(t, TComposite):
            parts = [
                self.equal(f"{a}.{c}", f"{b}.{c}", ct)
                for n, ft in t.fields
                for c, ct in (_field_leaves("", n, ft) if _chunked(ft) else [(f"f_{n}", ft)])
            ]
            same = " && ".join(parts) or "1"
            if t.kind == "header":
                return f"{a}.valid_ == {b}.valid_ && (!{a}.valid_ || ({same}))"
            return same
        if isinstance(t, TStack):
            return " && ".join(
                f"({self.equal(f'{a}.e[{i}]', f'{b}.e[{i}]', t.elem)})" for i in range(t.size)
            )
        if isinstance(t, TTuple):
            parts = [
                f"({self.equal(f'{a}.e{i}', f'{b}.e{i}', et)})" for i, et in enumerate(t.elems)
            ]
            return " && ".join(parts) or "1"
        if isinstance(t, TVarbit):
            return self.varbit_equal(a, b)
        return f"{a} == {b}"
