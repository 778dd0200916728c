"""Expression compilation: P4 expression AST → Python expression source + type.

Example::

    ev = compiler.expr(ast.Binary("+", x, ast.IntLit(1)), fn)
    ev.code    # '((F.v_x + 1) & 255)'
    ev.type    # TBit(8)

Values follow docs/p4sim-design.md: ``bit<W>``/``int<W>`` are Python ints masked to W
bits (``int<W>`` as its two's-complement pattern), ``bool`` is a Python bool, plain enums
and errors are member-name strings, serializable enums are ints.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from p4sim.compiler import rt
from p4sim.compiler.cg_base import EV, NOCONST, CompilerBase, Fn
from p4sim.compiler.typecheck import (
    BOOL,
    ERROR,
    INFINT,
    STRING,
    T,
    TBit,
    TBool,
    TComposite,
    TDontCare,
    TEnum,
    TError,
    TExtern,
    TInfInt,
    TList,
    TObject,
    TStack,
    TString,
    TTuple,
    TVarbit,
    same_type,
)
from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error

_FOLD_NS: dict[str, Any] = {
    "signed": rt.signed,
    "sat_add": rt.sat_add,
    "sat_sub": rt.sat_sub,
    "_sdiv": rt.sdiv,
    "_smod": rt.smod,
}


def _is_value(ev: EV) -> bool:
    """A run-time value (a variable or parameter included), not the name of a table,
    action, instance or type."""
    return ev.sym is None or getattr(ev.sym, "kind", None) in ("var", "param")


def p4c_value(ev: EV, fn: Fn) -> Any:
    """The constant p4c's BMv2 mid end knows ``ev`` to be, else NOCONST."""
    if ev.is_const:
        return ev.const
    if ev.p4c_const is not NOCONST:
        return ev.p4c_const
    known = fn.known.get(ev.code)
    return known[0] if known is not None else NOCONST


def power_of_two(v: Any) -> bool:
    return isinstance(v, int) and v > 0 and v & (v - 1) == 0


def _in_param(ev: EV) -> list[int]:
    """[id of the ast.Param] when ``ev`` is an in (or directionless) parameter, else []."""
    sym = ev.sym
    if getattr(sym, "kind", None) != "param" or not isinstance(sym.decl, ast.Param):
        return []
    return [] if sym.decl.direction in ("out", "inout") else [id(sym.decl)]


def mask(w: int) -> int:
    return (1 << w) - 1


def lit(value: Any, t: T) -> EV:
    """A constant of type ``t`` as an EV."""
    if isinstance(value, bool) or isinstance(value, (str, tuple)):
        return EV(repr(value), t, value)
    if isinstance(value, int):
        code = str(value) if value < 1 << 16 else hex(value)
        return EV(code, t, value)
    return EV(repr(value), t, value)


def is_int(t: T) -> bool:
    return isinstance(t, (TBit, TInfInt))


class ExprMixin(CompilerBase):
    """Expression compilation; mixed into ``codegen.Compiler``."""

    # -- entry points -------------------------------------------------------------

    def expr(self, e: ast.Expr, fn: Fn, expect: T | None = None) -> EV:
        """Compile ``e``; ``expect`` gives unsized literals and lists their type."""
        known = self.__dict__.get("_known")
        if known and id(e) in known:  # the target of `a op= b`, evaluated once
            return known[id(e)]  # type: ignore[no-any-return]
        meth = getattr(self, "_e_" + type(e).__name__, None)
        if meth is None:
            raise P4Error(e.loc, f"unsupported expression {type(e).__name__}")
        ev = meth(e, fn, expect)
        if expect is not None and isinstance(ev.type, TInfInt) and isinstance(expect, TBit):
            ev = self.convert(ev, expect, e)
        return ev

    def value(self, e: ast.Expr, fn: Fn, t: T) -> EV:
        """Compile ``e`` for a destination of type ``t`` (implicit casts of literals)."""
        ev = self.expr(e, fn, t)
        return self.coerce(ev, t, e)

    def coerce(self, ev: EV, t: T, e: ast.Node) -> EV:
        if isinstance(t, (TDontCare,)) or same_type(ev.type, t):
            return ev
        if isinstance(ev.type, TInfInt) and isinstance(t, TBit):
            return self.convert(ev, t, e)
        if isinstance(ev.type, TList) and isinstance(t, (TComposite, TTuple)):
            return ev
        if isinstance(t, TEnum) and isinstance(ev.type, TEnum) and t.name == ev.type.name:
            return ev
        if isinstance(t, TVarbit) and isinstance(ev.type, TVarbit):
            return ev
        raise P4Error(e.loc, f"type mismatch: expected {t.show()}, got {ev.type.show()}")

    def convert(self, ev: EV, t: TBit, e: ast.Node) -> EV:
        """An unsized ``int`` value given the width of its context."""
        if ev.is_const:
            v = ev.const
            if isinstance(v, bool):
                raise P4Error(e.loc, f"cannot use bool where {t.show()} is expected")
            return lit(v & mask(t.width), t)
        return EV(f"(({ev.code}) & {mask(t.width)})", t)

    # -- leaves -------------------------------------------------------------------

    def _e_IntLit(self, e: ast.IntLit, fn: Fn, expect: T | None) -> EV:
        if e.width is None:
            return lit(e.value, INFINT)
        if e.width <= 0:
            raise P4Error(e.loc, "literal width must be positive")
        return lit(e.value & mask(e.width), TBit(e.width, e.signed))

    def _e_BoolLit(self, e: ast.BoolLit, fn: Fn, expect: T | None) -> EV:
        return lit(e.value, BOOL)

    def _e_StringLit(self, e: ast.StringLit, fn: Fn, expect: T | None) -> EV:
        return lit(e.value, STRING)

    def _e_ErrorMember(self, e: ast.ErrorMember, fn: Fn, expect: T | None) -> EV:
        if e.name not in self.genv.errors:
            raise P4Error(e.loc, f"unknown error 'error.{e.name}'")
        return lit(e.name, ERROR)

    def _e_DontCare(self, e: ast.DontCare, fn: Fn, expect: T | None) -> EV:
        return EV("None", TDontCare())

    def _e_TypeExpr(self, e: ast.TypeExpr, fn: Fn, expect: T | None) -> EV:
        raise P4Error(e.loc, "a type is not allowed here")

    def _e_Name(self, e: ast.Name, fn: Fn, expect: T | None) -> EV:
        sym = None if e.dot_prefix else fn.scope.lookup(e.name)
        if sym is None:
            sym = self.genv.const_sym(e.name)
        if sym is None:
            if e.name in self.genv.type_decls:
                return EV("", TObject("type", e.name), sym=e.name)
            raise P4Error(e.loc, f"undeclared name '{e.name}'")
        if sym.kind == "const":
            if sym.value is None:
                folded = self.genv.const_sym(e.name)
                assert folded is not None
                sym = folded
            return lit(sym.value, sym.type)
        if sym.kind in ("var", "param"):
            writable = sym.kind == "var" or sym.direction in ("out", "inout")
            return EV(sym.code, sym.type, lval=writable, sym=sym)
        return EV(sym.code, sym.type, sym=sym)

    # -- members, indexes, slices ---------------------------------------------------

    def _e_Member(self, e: ast.Member, fn: Fn, expect: T | None) -> EV:
        if isinstance(e.expr, ast.Name) and e.expr.name == "error":
            return self._e_ErrorMember(ast.ErrorMember(e.name, loc=e.loc), fn, expect)
        base = self.expr(e.expr, fn)
        bt = base.type
        if isinstance(bt, TObject) and bt.kind == "type":
            return self.enum_member(base.sym, e)
        if isinstance(bt, TComposite):
            ft = bt.field_type(e.name)
            if ft is None:
                raise P4Error(e.loc, f"{bt.kind} {bt.name} has no field '{e.name}'")
            owner = f"{base.code}._v" if bt.kind == "header" else None
            return EV(f"{base.code}.{pyname(e.name)}", ft, lval=base.lval, owner=owner)
        if isinstance(bt, TStack):
            return self.stack_member(base, e, fn.kind == "parser")
        if isinstance(bt, TObject) and bt.kind == "apply_result":
            if e.name == "hit":
                return EV(f"{base.code}[0]", BOOL)
            if e.name == "miss":
                return EV(f"(not {base.code}[0])", BOOL)
            if e.name == "action_run":
                return EV(f"{base.code}[1]", TObject("action_run", bt.name), sym=base.sym)
        raise P4Error(e.loc, f"{bt.show()} has no member '{e.name}'")

    def enum_member(self, tname: str, e: ast.Member) -> EV:
        t = self.genv.resolve(ast.NamedType(tname, loc=e.loc))
        if not isinstance(t, TEnum):
            raise P4Error(e.loc, f"'{tname}.{e.name}': {tname} is not an enum")
        if e.name not in t.members:
            raise P4Error(e.loc, f"enum {t.name} has no member '{e.name}'")
        if t.underlying is not None:
            return lit(dict(t.values)[e.name], t)
        return lit(e.name, t)

    def stack_member(self, base: EV, e: ast.Member, in_parser: bool) -> EV:
        st: TStack = base.type  # type: ignore[assignment]
        if e.name == "size":
            return lit(st.size, TBit(32))
        if e.name == "nextIndex":
            self.beyond_bmv2.append(
                P4Error(
                    e.loc,
                    "a header stack's 'nextIndex' (p4c: \"Cannot extract field "
                    'nextIndex"): p4c knows no such member',
                )
            )
        elif e.name in ("last", "lastIndex", "next") and not in_parser:
            self.beyond_bmv2.append(
                P4Error(
                    e.loc,
                    f"a header stack's '{e.name}' outside a parser (p4c: \"'last', "
                    "and 'next' for stacks can only be used in a parser\")",
                )
            )
        if e.name == "nextIndex":
            return EV(f"{base.code}.nextIndex", TBit(32))
        if e.name == "lastIndex":
            return EV(f"(({base.code}.nextIndex - 1) & 0xffffffff)", TBit(32))
        if e.name == "last":
            # in a parser an empty stack's .last is StackOutOfBounds; elsewhere the read
            # gives an invalid header and a write is ignored
            f = "_stack_last" if in_parser else "_stack_lastc"
            return EV(f"{f}({base.code})", st.elem, lval=base.lval)
        if e.name == "next":
            return EV(f"_stack_next({base.code})", st.elem, lval=base.lval)
        raise P4Error(e.loc, f"header stack has no member '{e.name}'")

    def _e_Index(self, e: ast.Index, fn: Fn, expect: T | None) -> EV:
        base = self.expr(e.expr, fn)
        idx = self.expr(e.index, fn)
        if isinstance(base.type, TStack):
            if idx.is_const:
                if not 0 <= idx.const < base.type.size:
                    raise P4Error(
                        e.index.loc,
                        f"index {idx.const} out of bounds for stack of size {base.type.size}",
                    )
                return EV(f"{base.code}.h[{idx.const}]", base.type.elem, lval=base.lval)
            if not is_int(idx.type):
                raise P4Error(e.index.loc, "stack index must be an integer")
            return EV(f"_stack_at({base.code}, {idx.code})", base.type.elem, lval=base.lval)
        if isinstance(base.type, (TTuple, TList)):
            if not idx.is_const:
                raise P4Error(e.index.loc, "tuple index must be a constant")
            return EV(f"{base.code}[{idx.const}]", base.type.elems[idx.const])
        raise P4Error(e.loc, f"cannot index a value of type {base.type.show()}")

    def _e_Slice(self, e: ast.Slice, fn: Fn, expect: T | None) -> EV:
        base = self.expr(e.expr, fn)
        hi = self.genv.const_int(e.hi)
        lo = self.genv.const_int(e.lo)
        bt = base.type
        if isinstance(bt, TInfInt) and base.is_const:
            return lit((base.const >> lo) & mask(hi - lo + 1), TBit(hi - lo + 1))
        if not isinstance(bt, TBit):
            raise P4Error(e.loc, f"cannot slice a value of type {bt.show()}")
        if not (0 <= lo <= hi < bt.width):
            raise P4Error(e.loc, f"slice [{hi}:{lo}] out of range for {bt.show()}")
        w = hi - lo + 1
        code = f"(({base.code} >> {lo}) & {mask(w)})" if lo else f"({base.code} & {mask(w)})"
        return self.fold(EV(code, TBit(w), lval=base.lval), [base])

    # -- operators ----------------------------------------------------------------

    def fold(self, ev: EV, parts: list[EV]) -> EV:
        """Constant-fold ``ev`` when every operand is a constant."""
        if parts and all(p.is_const for p in parts):
            try:
                v = eval(ev.code, dict(_FOLD_NS))  # noqa: S307 - our own generated code
            except ZeroDivisionError:
                return ev
            return lit(v, ev.type)
        return ev

    def _e_Unary(self, e: ast.Unary, fn: Fn, expect: T | None) -> EV:
        a = self.expr(e.expr, fn, expect)
        t = a.type
        if e.op == "!":
            if not isinstance(t, TBool):
                raise P4Error(e.loc, f"'!' needs a bool, got {t.show()}")
            return self.fold(EV(f"(not {a.code})", BOOL), [a])
        if e.op == "+":
            return a
        if isinstance(t, TInfInt):
            v = -a.const if e.op == "-" else ~a.const
            return lit(v, INFINT)
        if not isinstance(t, TBit):
            raise P4Error(e.loc, f"'{e.op}' needs an integer, got {t.show()}")
        m = mask(t.width)
        code = f"((-{a.code}) & {m})" if e.op == "-" else f"({a.code} ^ {m})"
        return self.fold(EV(code, t), [a])

    def unify(self, a: EV, b: EV, e: ast.Binary) -> tuple[EV, EV]:
        """Give two operands one type (unsized literals take the other's width)."""
        ta, tb = a.type, b.type
        if isinstance(ta, TInfInt) and isinstance(tb, TBit):
            return self.convert(a, tb, e), b
        if isinstance(tb, TInfInt) and isinstance(ta, TBit):
            return a, self.convert(b, ta, e)
        if isinstance(ta, TBit) and isinstance(tb, TBit) and ta != tb:
            raise P4Error(
                e.loc,
                f"operands of '{e.op}' have different types "
                f"{ta.show()} and {tb.show()}; add a cast",
            )
        if not same_type(ta, tb) and not (isinstance(ta, TList) or isinstance(tb, TList)):
            raise P4Error(
                e.loc, f"operands of '{e.op}' have different types {ta.show()} and {tb.show()}"
            )
        return a, b

    def _e_Binary(self, e: ast.Binary, fn: Fn, expect: T | None) -> EV:
        op = e.op
        if op in ("&&", "||"):
            a = self.expr(e.left, fn)
            mark = len(fn.lines)
            b = self.expr(e.right, fn)
            pre = _take_lines(fn, mark)
            for x, n in ((a, e.left), (b, e.right)):
                if not isinstance(x.type, TBool):
                    raise P4Error(n.loc, f"'{op}' needs bool operands, got {x.type.show()}")
            py = "and" if op == "&&" else "or"
            if not pre:
                return self.fold(EV(f"({a.code} {py} {b.code})", BOOL), [a, b])
            # the right operand has side effects (out/inout calls): run them only when
            # the left one does not decide the result
            r = fn.new("sc")
            fn.emit(f"{r} = {a.code}")
            fn.emit(f"if {'not ' if op == '||' else ''}{r}:")
            fn.lines += ["    " + line for line in pre]
            fn.emit(f"    {r} = {b.code}")
            return EV(r, BOOL)
        if op == "++":
            return self.concat(e, fn)
        if op in ("<<", ">>"):
            return self.shift(e, fn, expect)
        sub = expect if op not in ("==", "!=", "<", ">", "<=", ">=") else None
        a, b = self.operands(e, fn, sub, sub)
        if isinstance(a.type, TInfInt) and isinstance(b.type, TInfInt):
            return self.fold_infint(e, a, b)
        a, b = self.unify(a, b, e)
        t = a.type
        if op in ("==", "!="):
            if isinstance(t, TList) or isinstance(b.type, TList):
                raise P4Error(e.loc, "cannot compare list expressions")
            return self.fold(EV(f"({a.code} {op} {b.code})", BOOL), [a, b])
        if not isinstance(t, TBit):
            raise P4Error(e.loc, f"operator '{op}' needs integer operands, got {t.show()}")
        ev = self.arith(op, a, b, t, e, fn)
        return self.fold(dataclasses.replace(ev, p4c_const=self.reduced(op, a, b, t, fn)), [a, b])

    def reduced(self, op: str, a: EV, b: EV, t: TBit, fn: Fn) -> Any:
        """What p4c's BMv2 mid end reduces ``a op b`` to, when it knows (else NOCONST):
        its LocalCopyPropagation, ConstantFolding and StrengthReduction run before the
        check of / and %, so what they remove p4c accepts."""
        x, y = p4c_value(a, fn), p4c_value(b, fn)
        if x is not NOCONST and y is not NOCONST:
            if op in ("/", "%") and (not y or t.signed):
                return NOCONST
            ca, cb = lit(x, t), lit(y, t)
            return self.fold(self.arith(op, ca, cb, t, ast.Node()), [ca, cb]).const
        if op in ("*", "&") and 0 in (x, y) or op in ("/", "%") and x == 0:
            return 0
        if op in ("-", "^") and a.code == b.code:
            return 0
        return NOCONST

    def check_bmv2_division(self, op: str, a: EV, b: EV, t: TBit, e: ast.Node, fn: Fn) -> None:
        """p4c's BMv2 back end divides only what its mid end turns into something else:
        constants, a power-of-two divisor (a shift, a mask), a zero dividend; the rest
        it refuses ("could not evaluate expression at compilation time"). Its type
        checker, before any of that, refuses signed operands that are not constants."""
        if a.is_const and b.is_const:
            return
        x, y = p4c_value(a, fn), p4c_value(b, fn)
        if t.signed:
            said = "Cannot operate on signed values"
        elif y == 0 and y is not NOCONST:
            said = "Division by zero" if op == "/" else "Modulo by zero"
            self.beyond_bmv2.append(P4Error(e.loc, f"'{op}' by zero (p4c: \"{said}\")"))
            return
        elif x == 0 or x is not NOCONST and y is not NOCONST:
            return
        elif power_of_two(y):
            return
        else:
            said = "could not evaluate expression at compilation time"
        error = P4Error(
            e.loc,
            f"'{op}' of values known only at run time (p4c: \"{said}\"): p4c divides "
            "only constants, by a power of two, or zero",
        )
        alts = [] if t.signed else [(p, "power of two") for p in _in_param(b)]
        alts += [] if t.signed else [(p, "zero") for p in _in_param(a)]
        if alts:  # p4c inlines the callee: what the calls pass decides
            self.param_divisions.append((alts, error))
        else:
            self.beyond_bmv2.append(error)

    def fold_infint(self, e: ast.Binary, a: EV, b: EV) -> EV:
        if not (a.is_const and b.is_const):
            raise P4Error(e.loc, "arithmetic on 'int' values must be compile-time constant")
        from p4sim.compiler.typecheck import _fold_binary

        v = _fold_binary(e, a.const, b.const)
        return lit(v, BOOL if isinstance(v, bool) else INFINT)

    def arith(self, op: str, a: EV, b: EV, t: TBit, e: ast.Node, fn: Fn | None = None) -> EV:
        """``a op b`` for operands of type ``t``; with ``fn``, checks / and % for BMv2."""
        m, w = mask(t.width), t.width
        if op in ("/", "%") and fn is not None:
            self.check_bmv2_division(op, a, b, t, e, fn)
        x, y = a.code, b.code
        if t.signed and op in ("<", ">", "<=", ">=", "/", "%"):
            x, y = f"signed({x}, {w})", f"signed({y}, {w})"
        if op in ("<", ">", "<=", ">="):
            return EV(f"({x} {op} {y})", BOOL)
        if op in ("+", "-", "*"):
            return EV(f"(({x} {op} {y}) & {m})", t)
        if op in ("&", "|", "^"):
            return EV(f"({x} {op} {y})", t)
        if op == "/":
            if t.signed:
                return EV(f"(_sdiv({x}, {y}) & {m})", t)
            return EV(f"(({x} // {y}) if {y} else 0)", t)
        if op == "%":
            if t.signed:
                return EV(f"(_smod({x}, {y}) & {m})", t)
            return EV(f"(({x} % {y}) if {y} else 0)", t)
        if op == "|+|":
            if t.signed:
                return EV(f"sat_add({x}, {y}, {w}, True)", t)
            return EV(f"min({x} + {y}, {m})", t)
        if op == "|-|":
            if t.signed:
                return EV(f"sat_sub({x}, {y}, {w}, True)", t)
            return EV(f"max({x} - {y}, 0)", t)
        raise P4Error(e.loc, f"unsupported operator '{op}'")

    def shift(self, e: ast.Binary, fn: Fn, expect: T | None) -> EV:
        a, b = self.operands(e, fn, expect, None)
        if isinstance(b.type, TBit) and b.type.signed:
            raise P4Error(e.right.loc, "shift amount must be unsigned")
        if not is_int(b.type):
            raise P4Error(e.right.loc, f"shift amount must be an integer, got {b.type.show()}")
        if isinstance(a.type, TInfInt):
            if a.is_const and b.is_const:
                v = a.const << b.const if e.op == "<<" else a.const >> b.const
                return lit(v, INFINT)
            raise P4Error(
                e.left.loc,
                "the left operand of a shift needs a known width; cast it, e.g. (bit<8>)1",
            )
        t = a.type
        if not isinstance(t, TBit):
            raise P4Error(e.left.loc, f"cannot shift a value of type {t.show()}")
        w, m = t.width, mask(t.width)
        if b.is_const:
            n = b.const
            if e.op == "<<":
                code = "0" if n >= w else f"(({a.code} << {n}) & {m})"
            elif t.signed:
                code = f"((signed({a.code}, {w}) >> {min(n, w)}) & {m})"
            else:
                code = "0" if n >= w else f"({a.code} >> {n})"
        elif e.op == "<<":
            code = f"((({a.code} << {b.code}) & {m}) if {b.code} < {w} else 0)"
        elif t.signed:
            code = f"((signed({a.code}, {w}) >> min({b.code}, {w})) & {m})"
        else:
            code = f"({a.code} >> {b.code})"
        return self.fold(EV(code, t), [a, b])

    def concat(self, e: ast.Binary, fn: Fn) -> EV:
        a, b = self.operands(e, fn, None, None)
        for x, n in ((a, e.left), (b, e.right)):
            if not isinstance(x.type, TBit):
                raise P4Error(
                    n.loc,
                    f"'++' needs bit<W>/int<W> operands with a known width, got {x.type.show()}",
                )
        ta, tb = a.type, b.type
        assert isinstance(ta, TBit) and isinstance(tb, TBit)
        t = TBit(ta.width + tb.width, ta.signed)
        return self.fold(EV(f"(({a.code} << {tb.width}) | {b.code})", t), [a, b])

    def _e_Ternary(self, e: ast.Ternary, fn: Fn, expect: T | None) -> EV:
        c = self.expr(e.cond, fn)
        if not isinstance(c.type, TBool):
            raise P4Error(e.cond.loc, f"condition must be bool, got {c.type.show()}")
        mark = len(fn.lines)
        a = self.expr(e.then, fn, expect)
        pre_a = _take_lines(fn, mark)
        b = self.expr(e.other, fn, expect)
        pre_b = _take_lines(fn, mark)
        if isinstance(a.type, TInfInt) and isinstance(b.type, TInfInt) and not c.is_const:
            raise P4Error(e.loc, "both branches of ?: are unsized integers; give one a width")
        if not same_type(a.type, b.type):
            a, b = self.unify(a, b, ast.Binary("?:", e.then, e.other, loc=e.loc))
        if c.is_const:
            fn.lines += pre_a if c.const else pre_b
            return a if c.const else b
        if not (pre_a or pre_b):
            x = p4c_value(a, fn)  # p4c reduces c ? x : x to x
            same = x if x is not NOCONST and p4c_value(b, fn) == x else NOCONST
            return EV(f"({a.code} if {c.code} else {b.code})", a.type, p4c_const=same)
        # a branch has side effects (out/inout calls): only the chosen one may run
        r = fn.new("tv")
        fn.emit(f"if {c.code}:")
        fn.lines += ["    " + line for line in pre_a]
        fn.emit(f"    {r} = {a.code}")
        fn.emit("else:")
        fn.lines += ["    " + line for line in pre_b]
        fn.emit(f"    {r} = {b.code}")
        return EV(r, a.type)

    def _e_Cast(self, e: ast.Cast, fn: Fn, expect: T | None) -> EV:
        t = self.genv.resolve(e.type)
        a = self.expr(e.expr, fn, t if isinstance(t, (TComposite, TTuple)) else None)
        return self.cast(a, t, e)

    def cast(self, a: EV, t: T, e: ast.Node) -> EV:
        s = a.type
        if same_type(s, t):
            return EV(a.code, t, a.const, sym=a.sym)
        if isinstance(t, TBit):
            if isinstance(s, TInfInt):
                return self.convert(a, t, e)
            if isinstance(s, TBool):
                if t.width != 1:
                    raise P4Error(e.loc, f"cannot cast bool to {t.show()} (only bit<1>)")
                return self.fold(EV(f"(1 if {a.code} else 0)", t), [a])
            if isinstance(s, TEnum) and s.underlying is not None:
                s = s.underlying
            if isinstance(s, TBit):
                if s.signed != t.signed and s.width != t.width:  # P4_16 8.11.1, as p4c
                    raise P4Error(
                        e.loc,
                        f"cannot cast {s.show()} to {t.show()}: a cast changes the sign or"
                        " the width, not both (cast twice)",
                    )
                return self.fold(self.bit_cast(a.code, s, t), [a])
        if isinstance(t, TBool):
            if isinstance(s, TBit) and s.width == 1:
                return self.fold(EV(f"({a.code} == 1)", BOOL), [a])
            if isinstance(s, TInfInt) and a.is_const and a.const in (0, 1):
                return lit(bool(a.const), BOOL)
        if isinstance(t, TEnum) and t.underlying is not None:
            if isinstance(s, TInfInt):
                return lit(a.const & mask(t.underlying.width), t)
            if isinstance(s, TBit):
                ev = self.bit_cast(a.code, s, t.underlying)
                return self.fold(EV(ev.code, t), [a])
        if isinstance(t, TInfInt) and a.is_const:
            return lit(a.const, INFINT)
        if isinstance(t, (TComposite, TTuple)) and isinstance(s, TList):
            return EV(a.code, t)
        raise P4Error(e.loc, f"cannot cast {s.show()} to {t.show()}")

    def bit_cast(self, code: str, s: TBit, t: TBit) -> EV:
        if s.width == t.width:
            return EV(code, t)
        if s.width > t.width:
            return EV(f"({code} & {mask(t.width)})", t)
        if s.signed:  # widening a signed value sign-extends
            return EV(f"(signed({code}, {s.width}) & {mask(t.width)})", t)
        return EV(code, t)

    # -- aggregates ---------------------------------------------------------------

    def _e_ListExpr(self, e: ast.ListExpr, fn: Fn, expect: T | None) -> EV:
        if isinstance(expect, TComposite) and expect.kind in ("struct", "header"):
            if len(e.elems) != len(expect.fields):
                raise P4Error(
                    e.loc,
                    f"{expect.name} has {len(expect.fields)} fields, the list has {len(e.elems)}",
                )
            pairs = zip(e.elems, expect.fields, strict=False)
            vals = self.in_order([(x, ft) for x, (_, ft) in pairs], fn)
            return EV(self.construct(expect, [v.code for v in vals]), expect)
        if isinstance(expect, TTuple) and len(expect.elems) == len(e.elems):
            vals = self.in_order(list(zip(e.elems, expect.elems, strict=False)), fn)
            return EV("(" + "".join(v.code + ", " for v in vals) + ")", expect)
        vals = self.in_order([(x, None) for x in e.elems], fn)
        ev = EV(
            "(" + "".join(v.code + ", " for v in vals) + ")", TList(tuple(v.type for v in vals))
        )
        if vals and all(v.is_const for v in vals):
            ev.const = tuple(v.const for v in vals)
        ev.sym = vals  # keeps element EVs (hash/digest/checksum need widths)
        return ev

    def _e_StructInit(self, e: ast.StructInit, fn: Fn, expect: T | None) -> EV:
        t = self.genv.resolve(e.type) if e.type is not None else expect
        if not isinstance(t, TComposite) or t.kind not in ("struct", "header"):
            raise P4Error(e.loc, "cannot infer the struct type of this initializer; write (T){...}")
        given = dict(e.fields)
        for n in given:
            if t.field_type(n) is None:
                raise P4Error(e.loc, f"{t.name} has no field '{n}'")
        for n, _ in t.fields:
            if n not in given:
                raise P4Error(e.loc, f"initializer of {t.name} lacks field '{n}'")
        # written order is evaluation order; the constructor takes declaration order
        evs = self.in_order([(x, t.field_type(n)) for n, x in given.items()], fn)
        vals = dict(zip(given, evs, strict=True))
        return EV(self.construct(t, [vals[n].code for n, _ in t.fields]), t)

    # -- evaluation order ----------------------------------------------------------

    def operands(self, e: ast.Binary, fn: Fn, ta: T | None, tb: T | None) -> tuple[EV, EV]:
        """Both operands of ``e``, the left one evaluated first also when the right one
        runs statements (a call with out/inout arguments that may change the left's value)."""
        a, b = self.in_order([(e.left, ta), (e.right, tb)], fn, coerce=False)
        return a, b

    def in_order(
        self, items: list[tuple[ast.Expr, T | None]], fn: Fn, coerce: bool = True
    ) -> list[EV]:
        """Expressions evaluated left to right: an operand followed by others that emit
        statements is first stored in a temporary, just where its own statements end."""
        evs: list[EV] = []
        ends: list[int] = []
        for x, t in items:
            evs.append(self.value(x, fn, t) if coerce and t is not None else self.expr(x, fn, t))
            ends.append(len(fn.lines))
        for i in range(len(evs) - 2, -1, -1):  # right to left: insertions keep marks valid
            if ends[i] < len(fn.lines) and not evs[i].is_const and _is_value(evs[i]):
                evs[i] = self.pin(evs[i], fn, ends[i])
        return evs

    def pin(self, ev: EV, fn: Fn, at: int) -> EV:
        """``ev`` stored in a new temporary by a statement inserted at ``fn.lines[at]``."""
        tmp = fn.new("o")
        val = self.fresh(ev.code, ev.type, None)  # type: ignore[arg-type]
        fn.lines.insert(at, "    " * fn.ind + f"{tmp} = {val}")
        return dataclasses.replace(ev, code=tmp, lval=False)

    def construct(self, t: TComposite, codes: list[str]) -> str:
        return f"mk_{self.class_of(t)}({', '.join(codes)})"

    # -- helpers for the code generator ----------------------------------------------

    def flat_fields(self, ev: EV, e: ast.Node) -> list[tuple[str, str, str | None]]:
        """(value code, width, validity code) of every scalar inside ``ev``, in order,
        as hash/checksum/digest inputs; validity is the owning header's flag."""
        out: list[tuple[str, str, str | None]] = []
        self._flatten(ev, e, out, None)
        return out

    def _flatten(self, ev: EV, e: ast.Node, out: list, valid: str | None) -> None:
        t = ev.type
        if isinstance(t, TList):
            for sub in ev.sym or []:
                self._flatten(sub, e, out, valid)
            return
        if isinstance(t, TInfInt):
            raise P4Error(e.loc, "unsized integer in a field list; give it a width")
        if valid is None:
            valid = ev.owner
        if isinstance(t, TBit):
            out.append((ev.code, str(t.width), valid))
        elif isinstance(t, TBool):
            out.append((f"(1 if {ev.code} else 0)", "1", valid))
        elif isinstance(t, TEnum) and t.underlying is not None:
            out.append((ev.code, str(t.underlying.width), valid))
        elif isinstance(t, TComposite):
            v = f"{ev.code}._v" if t.kind == "header" else valid
            for n, ft in t.fields:
                self._flatten(EV(f"{ev.code}.{pyname(n)}", ft), e, out, v)
        elif isinstance(t, TStack):
            for i in range(t.size):
                self._flatten(EV(f"{ev.code}.h[{i}]", t.elem), e, out, valid)
        elif isinstance(t, TTuple):
            for i, et in enumerate(t.elems):
                self._flatten(EV(f"{ev.code}[{i}]", et), e, out, valid)
        elif isinstance(t, TVarbit):
            out.append((f"{ev.code}[1]", f"{ev.code}[0]", valid))
        else:
            raise P4Error(e.loc, f"a value of type {t.show()} cannot be serialised")


_PY_RESERVED = {
    "_v",
    "copy",
    "h",
    "nextIndex",
    "size",
    "_ext",
    "_pack",
    "_packv",
    "_emit",
    "_set_valid",
    "W",
    "_S",
    "_extb",
}


def pyname(name: str) -> str:
    """Python attribute name of a P4 field (keywords and our own slots get a suffix)."""
    import keyword

    if keyword.iskeyword(name) or name in _PY_RESERVED or name.startswith("__"):
        return name + "_"
    return name


__all__ = ["EV", "ExprMixin", "lit", "mask", "pyname", "NOCONST", "TError", "TString", "TExtern"]


def _take_lines(fn: Fn, mark: int) -> list[str]:
    """Remove and return the statements emitted into ``fn`` since ``len(fn.lines) == mark``."""
    pre = fn.lines[mark:]
    del fn.lines[mark:]
    return pre
