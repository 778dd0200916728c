"""Statement compilation (assignments, if/switch, locals, exit/return, call statements).

Example::

    compiler.stmt(ast.Assign(ttl, ast.Binary("-", ttl, ast.IntLit(1))), fn)
    fn.lines[-1]    # '    F.v_hdr.ipv4.ttl = ((F.v_hdr.ipv4.ttl - 1) & 255)'
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from p4sim.compiler.cg_base import CompilerBase, Fn
from p4sim.compiler.cg_expr import EV
from p4sim.compiler.typecheck import (
    Sym,
    TBit,
    TBool,
    TComposite,
    TObject,
    TStack,
    TVoid,
)
from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error


class StmtMixin(CompilerBase):
    """Statement compilation; mixed into ``codegen.Compiler``."""

    def block(self, b: ast.Block, fn: Fn) -> None:
        outer = fn.scope
        fn.scope = outer.child()
        n = len(fn.lines)
        for s in b.stmts:
            self.stmt(s, fn)
        if len(fn.lines) == n:
            fn.emit("pass")
        fn.scope = outer

    def body(self, s: ast.Stmt, fn: Fn) -> None:
        """An indented sub-statement (if/else branch, switch case)."""
        fn.ind += 1
        n = len(fn.lines)
        if isinstance(s, ast.Block):
            self.block(s, fn)
        else:
            outer = fn.scope
            fn.scope = outer.child()
            self.stmt(s, fn)
            fn.scope = outer
        if len(fn.lines) == n:
            fn.emit("pass")
        fn.ind -= 1

    def stmt(self, s: ast.Stmt, fn: Fn) -> None:
        meth = getattr(self, "_s_" + type(s).__name__, None)
        if meth is None:
            raise P4Error(s.loc, f"unsupported statement {type(s).__name__}")
        meth(s, fn)

    def _s_Block(self, s: ast.Block, fn: Fn) -> None:
        self.block(s, fn)

    def _s_Empty(self, s: ast.Empty, fn: Fn) -> None:
        pass

    def _s_Exit(self, s: ast.Exit, fn: Fn) -> None:
        if fn.kind == "parser":
            raise P4Error(s.loc, "'exit' is not allowed in a parser")
        fn.emit("raise ExitSignal()")

    def _s_Return(self, s: ast.Return, fn: Fn) -> None:
        if fn.kind == "parser":
            raise P4Error(s.loc, "'return' is not allowed in a parser")
        if s.value is None:
            if fn.ret_type is not None and not isinstance(fn.ret_type, TVoid):
                raise P4Error(s.loc, "this function must return a value")
            fn.emit(fn.ret)
            return
        if fn.ret_type is None or isinstance(fn.ret_type, TVoid):
            raise P4Error(s.loc, "cannot return a value here")
        v = self.value(s.value, fn, fn.ret_type)
        if fn.ret == "return":
            fn.emit(f"return {v.code}")
        else:  # functions with out params return (value, outs...)
            fn.emit(fn.ret.replace("return (", f"return ({v.code}, ", 1))

    def _s_VarDeclStmt(self, s: ast.VarDeclStmt, fn: Fn) -> None:
        d = s.decl
        t = self.genv.resolve(d.type)
        code = fn.new(f"v_{d.name}")
        if d.init is not None:
            v = self.value(d.init, fn, t)
            val = self.fresh(v.code, t, d.init)
        else:
            val = self.default(t)
        fn.emit(f"{code} = {val}")
        if d.init is not None and _calls(d.init):
            fn.forget_shared()
        if d.init is not None and v.is_const and isinstance(t, TBit):
            fn.known[code] = (v.const, object())
        fn.scope.declare(d.name, Sym("var", t, code, decl=d), d.loc)

    def _s_ConstDeclStmt(self, s: ast.ConstDeclStmt, fn: Fn) -> None:
        d = s.decl
        t = self.genv.resolve(d.type)
        v = self.value(d.value, fn, t)
        if not v.is_const:
            raise P4Error(d.value.loc, "a constant's value must be compile-time known")
        fn.scope.declare(d.name, Sym("const", t, value=v.const), d.loc)

    def _s_If(self, s: ast.If, fn: Fn) -> None:
        fn.emit(f"if {self.condition(s.cond, fn)}:")
        if _calls(s.cond):
            fn.forget_shared()
        before, ends = dict(fn.known), []
        self.body(s.then, fn)
        ends.append(fn.known)
        other = s.other
        # `else if` chains become `elif` (Python limits indentation depth to 100) when
        # the condition needs no statements of its own before it
        while isinstance(other, ast.If) and self.is_pure(other.cond, fn):
            fn.known = dict(before)
            fn.emit(f"elif {self.condition(other.cond, fn)}:")
            if _calls(other.cond):
                fn.forget_shared()
                before = {k: v for k, v in before.items() if k in fn.known}
            self.body(other.then, fn)
            ends.append(fn.known)
            other = other.other
        fn.known = dict(before)
        if other is not None:
            fn.emit("else:")
            self.body(other, fn)
        ends.append(fn.known)
        fn.known = _joined(before, ends)

    def _s_For(self, s: ast.For, fn: Fn) -> None:
        """``for (init; cond; update)`` as ``while True:``; the update runs at the top of
        every pass but the first, so a P4 ``continue`` (Python ``continue``) runs it too."""
        outer = fn.scope
        fn.scope = outer.child()
        for st in s.init:
            self.stmt(st, fn)
        fn.known.clear()  # the condition and the body see each pass's values
        flag = fn.new("lp") if s.update else None
        if flag:
            fn.emit(f"{flag} = False")
        fn.emit("while True:")
        fn.ind += 1
        if flag:
            fn.emit(f"if {flag}:")
            fn.ind += 1
            for st in s.update:
                self.stmt(st, fn)
            fn.ind -= 1
            fn.emit(f"{flag} = True")
        if s.cond is not None:
            fn.emit(f"if not ({self.condition(s.cond, fn)}):")
            fn.emit("    break")
        fn.ind -= 1
        self.loop_body(s.body, fn)
        fn.scope = outer

    def _s_ForIn(self, s: ast.ForIn, fn: Fn) -> None:
        """``for (T x in lo..hi)`` (inclusive bounds, evaluated once), ``for (T x in {..})``
        and ``for (T x in stack)`` (x takes a copy of each element)."""
        t = self.genv.resolve(s.type)
        var = fn.new(f"v_{s.name}")
        if s.hi is not None:
            if not isinstance(t, TBit):
                raise P4Error(s.loc, f"a range loop needs a bit<W> or int<W>, got {t.show()}")
            lo, hi = self.value(s.collection, fn, t), self.value(s.hi, fn, t)
            if t.signed:
                w, mask = t.width, (1 << t.width) - 1
                fn.emit(
                    f"for {var} in (_x & {mask} for _x in "
                    f"range(signed({lo.code}, {w}), signed({hi.code}, {w}) + 1)):"
                )
            else:
                fn.emit(f"for {var} in range({lo.code}, {hi.code} + 1):")
        elif isinstance(s.collection, ast.ListExpr):
            items = "".join(
                f"{self.fresh(self.value(e, fn, t).code, t, e)}, " for e in s.collection.elems
            )
            fn.emit(f"for {var} in ({items}):")
        else:
            coll = self.expr(s.collection, fn)
            if not isinstance(coll.type, TStack):
                raise P4Error(
                    s.collection.loc,
                    f"cannot iterate over {coll.type.show()}: use a range lo..hi, "
                    "a list {a, b} or a header stack",
                )
            elem = fn.new("el")
            fn.emit(f"for {elem} in ({coll.code}).h:")
            fn.emit(f"    {var} = {self.fresh(elem, t, s)}")
        outer = fn.scope
        fn.scope = outer.child()
        decl = ast.VarDecl(s.name, s.type, None, loc=s.loc)
        fn.scope.declare(s.name, Sym("var", t, var, decl=decl), s.loc)
        self.loop_body(s.body, fn)
        fn.scope = outer

    def loop_body(self, body: ast.Stmt, fn: Fn) -> None:
        """The body of a loop; ``break``/``continue`` are allowed inside it."""
        depth = getattr(fn, "loop_depth", 0)
        fn.loop_depth = depth + 1  # type: ignore[attr-defined]
        fn.known.clear()
        try:
            self.body(body, fn)
        finally:
            fn.loop_depth = depth  # type: ignore[attr-defined]
            fn.known.clear()

    def _s_Break(self, s: ast.Break, fn: Fn) -> None:
        if not getattr(fn, "loop_depth", 0):
            raise P4Error(s.loc, "'break' is only allowed inside a for loop")
        fn.emit("break")

    def _s_Continue(self, s: ast.Continue, fn: Fn) -> None:
        if not getattr(fn, "loop_depth", 0):
            raise P4Error(s.loc, "'continue' is only allowed inside a for loop")
        fn.emit("continue")

    def condition(self, e: ast.Expr, fn: Fn) -> str:
        c = self.expr(e, fn)
        if not isinstance(c.type, TBool):
            raise P4Error(e.loc, f"if condition must be bool, got {c.type.show()}")
        return c.code

    def is_pure(self, e: ast.Expr, fn: Fn) -> bool:
        """True when compiling ``e`` emits no statement (no out-argument calls ...)."""

        scratch = Fn(fn.scope, fn.kind, fn.path, ctl=fn.ctl, ret=fn.ret, ret_type=fn.ret_type)
        scratch.known = dict(fn.known)
        self.expr(e, scratch)
        return not scratch.lines

    def _s_CallStmt(self, s: ast.CallStmt, fn: Fn) -> None:
        ev = self.call(s.call, fn, stmt=True)
        if ev is not None and ev.code:
            fn.emit(ev.code)
        fn.forget_shared()

    def _s_Assign(self, s: ast.Assign, fn: Fn) -> None:
        if isinstance(s.target, ast.Slice):
            self.assign_slice(s, fn)
            return
        lv = self.expr(s.target, fn)
        if not lv.lval:
            raise P4Error(
                s.target.loc,
                "cannot assign to this expression (not a variable, field or out/inout parameter)",
            )
        mark = len(fn.lines)
        if s.compound and isinstance(s.value, ast.Binary):
            # `a[g(i)].f |= v`: the value reads the target already evaluated, g runs once
            known = self.__dict__.setdefault("_known", {})
            known[id(s.value.left)] = dataclasses.replace(lv, lval=False)
            try:
                v = self.value(s.value, fn, lv.type)
            finally:
                del known[id(s.value.left)]
        else:
            v = self.value(s.value, fn, lv.type)
        if len(fn.lines) > mark and "_stack_at(" in lv.code:
            # the value emitted statements (calls with out/inout arguments): the target's
            # run-time stack indices were computed first, as p4c orders `a[i] = f(i)`
            code, pre = _hoist_indices(lv.code, fn)
            ind = "    " * fn.ind
            fn.lines[mark:mark] = [ind + line for line in pre]
            lv = dataclasses.replace(lv, code=code)
        fn.emit(self.assign_code(lv, self.fresh(v.code, lv.type, s.value), s.target, fn))
        if _calls(s.value):
            fn.forget_shared()
        if v.is_const and isinstance(lv.type, TBit):
            fn.known[lv.code] = (v.const, object())

    def assign_code(self, lv: EV, val: str, target: ast.Expr, fn: Fn) -> str:
        """A Python statement storing ``val`` into the l-value ``lv``."""
        code = lv.code
        fn.forget(code)
        m = re.match(r"^(_stack_\w+)\((.*)\)$", code)
        if m and _balanced(code[len(m.group(1)) :]):
            fname, inner = m.group(1), m.group(2)
            if fname == "_stack_at":
                return f"_stack_set({inner}, {val})"
            idx = "nextIndex" if fname == "_stack_next" else "nextIndex - 1"
            return f"_stack_set({inner}, ({inner}).{idx}, {val})"
        return f"{code} = {val}"

    def assign_slice(self, s: ast.Assign, fn: Fn) -> None:
        tgt: ast.Slice = s.target  # type: ignore[assignment]
        fn.emit(self.slice_store(tgt, fn, lambda sw: self.value(s.value, fn, TBit(sw)).code))

    def slice_store(self, tgt: ast.Slice, fn: Fn, value: Callable[[int], str]) -> str:
        """The statement storing ``value(slice width)`` into the bits ``tgt`` names."""
        hi, lo = self.genv.const_int(tgt.hi), self.genv.const_int(tgt.lo)
        inner = tgt.expr
        while isinstance(inner, ast.Slice):  # x[7:4][3:0] = v: bits [7:4] of x
            ihi, ilo = self.genv.const_int(inner.hi), self.genv.const_int(inner.lo)
            if not (0 <= lo <= hi <= ihi - ilo):
                raise P4Error(tgt.loc, f"slice [{hi}:{lo}] out of range for bit<{ihi - ilo + 1}>")
            hi, lo, inner = hi + ilo, lo + ilo, inner.expr
        base = self.expr(inner, fn)
        if not base.lval or not isinstance(base.type, TBit):
            raise P4Error(tgt.loc, "cannot assign to a slice of this expression")
        w = base.type.width
        if not (0 <= lo <= hi < w):
            raise P4Error(tgt.loc, f"slice [{hi}:{lo}] out of range for {base.type.show()}")
        sw = hi - lo + 1
        v = value(sw)
        keep = ((1 << w) - 1) ^ (((1 << sw) - 1) << lo)
        new = f"({base.code} & {keep}) | (({v} & {(1 << sw) - 1}) << {lo})"
        return self.assign_code(base, new, inner, fn)

    def _s_Switch(self, s: ast.Switch, fn: Fn) -> None:
        e = self.expr(s.expr, fn)
        if _calls(s.expr):
            fn.forget_shared()
        before, ends = dict(fn.known), []
        var = fn.new("sw")
        fn.emit(f"{var} = {e.code}")
        is_action = isinstance(e.type, TObject) and e.type.kind == "action_run"
        first = True
        pending: list[str] = []
        seen: set = set()
        had_default = False
        for case in s.cases:
            if had_default:
                raise P4Error(case.loc, "the 'default' label must be the last one of a switch")
            conds: list[str] = []
            default = False
            for lab in case.labels:
                if isinstance(lab, ast.Default):
                    default = True
                    continue
                if is_action:
                    conds.append(f"{var} == {self.action_label(lab, e, fn)!r}")
                else:
                    v = self.value(lab, fn, e.type)
                    if not v.is_const:
                        raise P4Error(lab.loc, "switch labels must be compile-time constants")
                    if v.const in seen:
                        raise P4Error(lab.loc, "duplicate switch label")
                    seen.add(v.const)
                    conds.append(f"{var} == {v.code}")
            if case.body is None:
                pending += conds
                continue
            conds = pending + conds
            pending = []
            if default:
                had_default = True
                fn.emit("else:" if not first else "if True:")
            else:
                fn.emit(f"{'if' if first else 'elif'} {' or '.join(conds) or 'False'}:")
            fn.known = dict(before)
            self.body(case.body, fn)
            ends.append(fn.known)
            first = False
        if not had_default:
            ends.append(before)
        fn.known = _joined(before, ends)

    def action_label(self, lab: ast.Expr, e: EV, fn: Fn) -> str:
        if not isinstance(lab, ast.Name):
            raise P4Error(lab.loc, "a switch on action_run needs action names as labels")
        table = e.sym
        fq = table.extra["action_fq"].get(lab.name) if table is not None else None
        if fq is None:
            raise P4Error(
                lab.loc,
                f"'{lab.name}' is not an action of table {table.extra['fq'] if table else '?'}",
            )
        return fq


def _hoist_indices(code: str, fn: Fn) -> tuple[str, list[str]]:
    """Replace each non-literal index of ``_stack_at(base, index)`` in ``code`` by a new
    variable; returns the new code and the statements that compute the variables.

    Example: ``_stack_at(F.v_h, f_1(F.v_i))`` → ``_stack_at(F.v_h, ix_3)``, ``["ix_3 = ..."]``.
    """
    pre: list[str] = []
    out, pos = "", 0
    while (start := code.find("_stack_at(", pos)) >= 0:
        depth, comma, i = 0, -1, start
        for i in range(start + len("_stack_at"), len(code)):
            ch = code[i]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
                if depth == 0:
                    break
            elif ch == "," and depth == 1:
                comma = i
        idx = code[comma + 1 : i].strip()
        if comma < 0 or idx.isdigit():
            out += code[pos : i + 1]
        else:
            var = fn.new("ix")
            pre.append(f"{var} = {idx}")
            out += code[pos : comma + 1] + f" {var})"
        pos = i + 1
    return out + code[pos:], pre


def _balanced(s: str) -> bool:
    """True when ``s`` is one parenthesised group ``(...)`` spanning the whole string."""
    depth = 0
    for i, ch in enumerate(s):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and i != len(s) - 1:
                return False
    return depth == 0


__all__ = ["StmtMixin", "TComposite", "TStack"]


def _calls(e: ast.Node) -> bool:
    """Whether evaluating ``e`` calls something (which may write any l-value)."""
    if isinstance(e, ast.Call):
        return True
    return any(
        _calls(item)
        for value in vars(e).values()
        for item in (value if isinstance(value, list) else [value])
        if isinstance(item, ast.Node)
    )


def _joined(before: dict[str, tuple[int, object]], ends: list[dict]) -> dict:
    """What is known after branches that started knowing ``before``: what no branch
    wrote (p4c does not merge equal constants assigned in two branches)."""
    return {k: v for k, v in before.items() if all(end.get(k) is v for end in ends)}
