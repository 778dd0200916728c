"""``for`` loops (P4_16 v1.2.5) in the C generator, as the Python back end runs them.

* ``for (init; cond; update) body``: C ``for (;;)`` whose update runs at the top of every
  pass but the first (a flag), so that ``continue`` runs it too;
* ``for (T x in lo .. hi)``: both bounds included and evaluated once (signed bounds read
  as signed); ``x`` is a fresh copy of the counter in every pass, so the body may write
  it without changing the iteration;
* ``for (T x in {a, b})`` (the items evaluated once, first) and ``for (T x in stack)``
  (a copy of every element, in order).

``break`` and ``continue`` are C's: the generator emits no C loop or ``switch`` of its
own around P4 statements.

Example: ``for (bit<8> x in 1 .. n) { s = s + x; }`` →
``{ u64 lo_ = 1, hi_ = n; for (u64 i_ = lo_; i_ <= hi_; i_++) { u64 v_x = i_; ... } }``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.compiler.typecheck import TBit, TBool, TStack
from p4sim.frontend import ast
from p4sim.native.cvalues import Unsupported, V, _lit, _mask

if TYPE_CHECKING:
    from p4sim.compiler.typecheck import GlobalEnv


class LoopsMixin:
    """The C generator's loops (see the module docstring)."""

    if TYPE_CHECKING:  # the C generator's own (p4sim/native/cgen.py)
        genv: GlobalEnv
        locals: list[dict[str, V]]

        def new(self, base: str) -> str: ...
        def ctype(self, t: Any) -> str: ...
        def stmt(self, s: ast.Stmt) -> list[str]: ...
        def block(self, b: ast.Stmt) -> list[str]: ...
        def value(self, e: ast.Expr, t: Any) -> V: ...
        def expr(self, e: ast.Expr, expect: Any = None) -> V: ...

    def loop_stmt(self, s: ast.Stmt) -> list[str] | None:
        """C lines of a loop, ``break`` or ``continue``; None for other statements."""
        if isinstance(s, ast.Break):
            return ["break;"]
        if isinstance(s, ast.Continue):
            return ["continue;"]
        if isinstance(s, ast.For):
            return self._for(s)
        if isinstance(s, ast.ForIn):
            return self._for_in(s)
        return None

    def _for(self, s: ast.For) -> list[str]:
        self.locals.append({})
        try:
            out: list[str] = []
            for st in s.init:
                out += self.stmt(st)
            flag = self.new("lp")
            out.append(f"int {flag} = 0;")
            head = [f"for (;; {flag} = 1) {{"]
            if s.update:
                upd: list[str] = []
                for st in s.update:
                    upd += self.stmt(st)
                head.append(f"    if ({flag}) {{ " + " ".join(upd) + " }")
            if s.cond is not None:
                head.append(f"    if (!({self.value(s.cond, TBool()).code})) break;")
            loop = head + ["    " + b for b in self.block(s.body)] + ["}"]
            return ["{"] + ["    " + x for x in out + loop] + ["}"]
        finally:
            self.locals.pop()

    def _for_in(self, s: ast.ForIn) -> list[str]:
        t = self.genv.resolve(s.type)
        ct = self.ctype(t)
        var = self.new(f"v_{s.name}")
        pre: list[str] = []
        if s.hi is not None:
            if not isinstance(t, TBit):
                raise Unsupported(f"a range loop over {t.show()}")
            lo, hi = self.value(s.collection, t).code, self.value(s.hi, t).code
            i = self.new("i")
            if t.signed:
                w = t.width
                pre.append(f"int64_t {i}_hi = p4n_sx({hi}, {w});")
                loop = f"for (int64_t {i} = p4n_sx({lo}, {w}); {i} <= {i}_hi; {i}++)"
                first = f"{ct} {var} = (u64){i} & {_lit(_mask(w))};"
            else:
                pre.append(f"u64 {i}_hi = {hi};")
                loop = f"for (u64 {i} = {lo}; {i} <= {i}_hi; {i}++)"
                first = f"{ct} {var} = {i};"
        elif isinstance(s.collection, ast.ListExpr):
            items = [self.value(e, t).code for e in s.collection.elems]
            arr, i = self.new("items"), self.new("i")
            pre.append(f"{ct} {arr}[{max(1, len(items))}] = {{ {', '.join(items) or '0'} }};")
            loop = f"for (int64_t {i} = 0; {i} < {len(items)}; {i}++)"
            first = f"{ct} {var} = {arr}[{i}];"
        else:
            coll = self.expr(s.collection)
            if not isinstance(coll.type, TStack):
                raise Unsupported(f"a loop over {coll.type.show()}")
            i = self.new("i")
            loop = f"for (int64_t {i} = 0; {i} < {coll.type.size}; {i}++)"
            first = f"{ct} {var} = {coll.code}.e[{i}];"
        self.locals.append({s.name: V(var, t)})
        try:
            body = self.block(s.body)
        finally:
            self.locals.pop()
        inner = ["    " + x for x in [first, *body]]
        return ["{"] + ["    " + x for x in [*pre, loop + " {", *inner, "}"]] + ["}"]
