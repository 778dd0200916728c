"""Interface shared by the code generator's mixins (expressions, statements, calls).

Each mixin implements part of ``codegen.Compiler``; this base declares the methods they
call on each other so that the type checker can follow them. Example::

    class StmtMixin(CompilerBase):
        def _s_If(self, s, fn):
            c = self.expr(s.cond, fn)      # provided by ExprMixin
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from p4sim.compiler.cg_expr import EV
    from p4sim.compiler.codegen import CtlInst, Fn
    from p4sim.compiler.typecheck import GlobalEnv, T, TBit, TComposite
    from p4sim.frontend import ast


class CompilerBase:
    """Method declarations only; ``codegen.Compiler`` gets the real ones from mixins."""

    genv: GlobalEnv
    trace: bool

    def expr(self, e: ast.Expr, fn: Fn, expect: T | None = None) -> EV:
        raise NotImplementedError

    def value(self, e: ast.Expr, fn: Fn, t: T) -> EV:
        raise NotImplementedError

    def coerce(self, ev: EV, t: T, e: ast.Node) -> EV:
        raise NotImplementedError

    def convert(self, ev: EV, t: TBit, e: ast.Node) -> EV:
        raise NotImplementedError

    def assign_code(self, lv: EV, val: str, target: ast.Expr, fn: Fn) -> str:
        raise NotImplementedError

    def call(self, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        raise NotImplementedError

    def block(self, b: ast.Block, fn: Fn) -> None:
        raise NotImplementedError

    def stmt(self, s: ast.Stmt, fn: Fn) -> None:
        raise NotImplementedError

    def action_ref(self, name: str, inst: CtlInst, loc: ast.SourceLoc) -> tuple[str, str, Any]:
        raise NotImplementedError

    def class_of(self, t: TComposite) -> str:
        raise NotImplementedError

    def default(self, t: T) -> str:
        raise NotImplementedError

    def fresh(self, code: str, t: T, e: ast.Node) -> str:
        raise NotImplementedError

    def slice_store(self, tgt: ast.Slice, fn: Fn, value: Callable[[int], str]) -> str:
        raise NotImplementedError

    def pin(self, ev: EV, fn: Fn, at: int) -> EV:
        raise NotImplementedError

    def reach(self, d: ast.ActionDecl, inst: Any) -> frozenset[str]:
        raise NotImplementedError

    def gen_action(self, d: ast.ActionDecl, inst: CtlInst | None) -> str:
        raise NotImplementedError

    def flat_fields(self, ev: EV, e: ast.Node) -> list[tuple[str, str, str | None]]:
        raise NotImplementedError
