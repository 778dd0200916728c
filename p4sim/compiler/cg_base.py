"""Interface shared by the code generator's mixins (expressions, statements, calls).

Each mixin implements part of ``codegen.Compiler``; this base declares the methods they
call on each other so that the type checker can follow them. Example::

    class StmtMixin(CompilerBase):
        def _s_If(self, s, fn):
            c = self.expr(s.cond, fn)      # provided by ExprMixin
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from p4sim.compiler.typecheck import Scope, T, TExtern, name_annotation
from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error

if TYPE_CHECKING:
    from p4sim.compiler.typecheck import GlobalEnv, TBit, TComposite

NOCONST = object()  # an expression's value when it is not a compile-time constant


@dataclass
class EV:
    """A compiled expression: Python source, P4 type, constant value, assignability."""

    code: str
    type: T
    const: Any = NOCONST
    lval: bool = False
    sym: Any = None  # for names of non-values (tables, actions, instances)
    owner: str | None = None  # validity flag code of the header owning this field
    #: the value p4c's BMv2 mid end reduces a non-constant expression to (``x - x``,
    #: ``x * 0``, a local known to hold a constant ...); only its check of / and % reads it
    p4c_const: Any = NOCONST

    @property
    def is_const(self) -> bool:
        return self.const is not NOCONST


@dataclass
class Fn:
    """The function being generated: its scope, lines and what ``return`` means."""

    scope: Scope
    kind: str  # parser | control | action | function
    path: str
    ctl: Any = None  # the CtlInst of the enclosing control / parser
    lines: list[str] = field(default_factory=list)
    ind: int = 1
    ret: str = "return"
    ret_type: T | None = None
    names: itertools.count = field(default_factory=lambda: itertools.count(1))
    #: the l-values (by their Python code) that hold a constant here, as p4c's BMv2 mid
    #: end (LocalCopyPropagation, constant folding) knows them; only the BMv2 check of
    #: ``/`` and ``%`` reads it. Value → (constant, a token naming the assignment).
    known: dict[str, tuple[int, object]] = field(default_factory=dict)

    def emit(self, s: str) -> None:
        self.lines.append("    " * self.ind + s)

    def new(self, base: str) -> str:
        return f"{base}_{next(self.names)}"

    def forget(self, code: str) -> None:
        """``code`` (an l-value) is written: it and its fields hold no known constant."""
        if "(" in code or "[" in code:  # an element chosen at run time: could be any
            self.known.clear()
            return
        for k in [k for k in self.known if k == code or k.startswith(code + ".")]:
            del self.known[k]

    def forget_shared(self) -> None:
        """A call ran: an action or a table's actions may have written any field or
        control-level variable; only this body's own locals (``v_x_N``) keep theirs
        (arguments to out/inout parameters are forgotten where they are written back)."""
        self.known = {k: v for k, v in self.known.items() if k.startswith("v_") and "." not in k}


@dataclass
class CtlInst:
    """One instance of a parser or control."""

    decl: Any
    path: str
    ident: int
    pyfn: str
    scope: Scope
    frame: list[str] = field(default_factory=list)
    actions: dict[str, tuple[str, str]] = field(default_factory=dict)  # local → (py, fq)
    sm_code: str | None = None
    meta_code: str | None = None
    top: bool = False


def fq_name(path: str, name: str, annos: list[ast.Annotation]) -> str:
    """P4Info-style fully-qualified name, honouring ``@name`` (leading dot = global)."""
    n = name_annotation(annos) or name
    if n.startswith("."):
        return n[1:]
    return f"{path}.{n}" if path else n


class CompilerBase:
    """Method declarations only; ``codegen.Compiler`` gets the real ones from mixins."""

    genv: GlobalEnv
    trace: bool
    #: what p4sim runs but p4c refuses for BMv2, found while generating code; raised by
    #: ``compile_program`` for target bmv2 (``bmv2_target``), ignored for target p4sim
    beyond_bmv2: list[P4Error]
    #: / and % that p4c accepts or refuses depending on what a parameter is bound to at
    #: the call sites (p4c inlines functions, actions called by name and sub-controls):
    #: ([(id of the ast.Param, "power of two" | "zero"), ...] any of which will do, error)
    param_divisions: list[tuple[list[tuple[int, str]], P4Error]]
    #: what each call passes to each in-parameter (by id of the ast.Param): ("value",
    #: the constant p4c knows or NOCONST) or ("param", id of the caller's ast.Param)
    call_arguments: dict[int, list[tuple[str, Any]]]

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

    def nargs(self, e: ast.Call, *counts: int) -> None:
        raise NotImplementedError

    def union_siblings(self, hexpr: ast.Expr, fn: Fn) -> list[str]:
        raise NotImplementedError

    def extern_method(self, base: EV, t: TExtern, name: str, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        raise NotImplementedError

    def extern_function(
        self, name: str, decls: list[ast.FunctionDecl], e: ast.Call, fn: Fn, stmt: bool
    ) -> EV:
        raise NotImplementedError
