"""Calls: methods (isValid, setValid, apply ...), actions, functions and their argument
directions. A method of an extern object and an extern function go to ``cg_extern``.

Example::

    compiler.call(ast.Call(ast.Member(ast.Name("ipv4_lpm"), "apply")), fn, stmt=True)
    # -> EV('tbl_7(F)', ...): tbl_7 looks up the key and runs the chosen action
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from p4sim.compiler.cg_base import CompilerBase, Fn
from p4sim.compiler.cg_expr import EV, lit, p4c_value, pyname
from p4sim.compiler.typecheck import (
    BOOL,
    VOID,
    Sym,
    T,
    TBit,
    TComposite,
    TDontCare,
    TExtern,
    TInfInt,
    TObject,
    TStack,
    TTypeVar,
    type_width,
)
from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error

DROP_PORT = 511


def expr_text(e: ast.Expr) -> str:
    """Source-like text of a key expression (P4Info names keys this way)."""
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Member):
        return f"{expr_text(e.expr)}.{e.name}"
    if isinstance(e, ast.Index):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, ast.Slice):
        return f"{expr_text(e.expr)}[{expr_text(e.hi)}:{expr_text(e.lo)}]"
    if isinstance(e, ast.IntLit):
        return e.text or str(e.value)
    if isinstance(e, ast.Call):
        return f"{expr_text(e.func)}()"
    if isinstance(e, ast.Cast):
        return expr_text(e.expr)
    if isinstance(e, ast.Binary):
        return f"{expr_text(e.left)} {e.op} {expr_text(e.right)}"
    return type(e).__name__


class CallMixin(CompilerBase):
    """Call compilation; mixed into ``codegen.Compiler``."""

    src: list[str]
    _implicit_noaction: str | None
    ids: Any
    tables: list
    actions: dict

    # -- dispatch -----------------------------------------------------------------

    def _e_Call(self, e: ast.Call, fn: Fn, expect: T | None) -> EV:
        ev = self.call(e, fn, stmt=False)
        if isinstance(ev.type, type(VOID)) and ev.type == VOID:
            raise P4Error(e.loc, "a void call cannot be used as a value")
        return ev

    def call(self, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        f = e.func
        if isinstance(f, ast.Member):
            if f.name in ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes"):
                base = self.expr(f.expr, fn)
                bits = type_width(base.type)
                return lit(bits if "Bits" in f.name else (bits + 7) // 8, TInfInt())
            direct = self.direct_instance(f, e, fn)
            if direct is not None:
                return self.apply_instance(direct, e, fn, stmt)
            base = self.expr(f.expr, fn)
            return self.method_call(base, f.name, e, fn, stmt)
        if isinstance(f, ast.Name):
            return self.function_call(f.name, e, fn, stmt)
        raise P4Error(e.loc, "cannot call this expression")

    def direct_instance(self, f: ast.Member, e: ast.Call, fn: Fn) -> Sym | None:
        """``C.apply(...)`` on a parser/control type (direct type invocation): an instance
        of its own for each call site, made when the call is first compiled."""
        if f.name != "apply" or not isinstance(f.expr, ast.Name):
            return None
        name = f.expr.name
        td = self.genv.type_decls.get(name)
        if not isinstance(td, (ast.ControlDecl, ast.ParserDecl)) or fn.scope.lookup(name):
            return None
        if td.ctor_params:
            raise P4Error(e.loc, f"'{name}' has constructor parameters: instantiate it first")
        made: dict[int, Sym] = self.__dict__.setdefault("_direct_instances", {})
        sym = made.get(id(e))
        if sym is None:
            path = f"{fn.ctl.path}.{name}" if fn.ctl is not None else name
            sub = self.instantiate(td, path, [], self.genv.scope)  # type: ignore[attr-defined]
            sym = made[id(e)] = Sym("instance", TObject("instance", name), sub, decl=td)
        return sym

    def method_call(self, base: EV, name: str, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        t = base.type
        sym = base.sym
        if isinstance(sym, Sym) and sym.kind == "table":
            if name != "apply":
                raise P4Error(e.loc, f"tables have only apply(), not '{name}'")
            self.nargs(e, 0)
            return EV(f"{sym.code}(F)", TObject("apply_result", sym.extra["fq"]), sym=sym)
        if isinstance(sym, Sym) and sym.kind == "instance":
            if name != "apply":
                raise P4Error(e.loc, f"'{name}': parsers and controls have only apply()")
            return self.apply_instance(sym, e, fn, stmt)
        if isinstance(t, TComposite) and t.kind == "header":
            return self.header_method(base, name, e, fn)
        if isinstance(t, TComposite) and t.kind == "union" and name == "isValid":
            self.nargs(e, 0)
            members = [f"{base.code}.{pyname(n)}._v" for n, _ in t.fields]
            return EV("(" + " or ".join(members) + ")", BOOL)
        if isinstance(t, TStack) and name in ("push_front", "pop_front"):
            self.nargs(e, 1)
            n = self.genv.const_int(e.args[0].value)
            return EV(f"{base.code}.{name}({n})", VOID)
        if isinstance(t, TExtern):
            return self.extern_method(base, t, name, e, fn, stmt)
        raise P4Error(e.loc, f"{t.show()} has no method '{name}'")

    def nargs(self, e: ast.Call, *counts: int) -> None:
        if len(e.args) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise P4Error(e.loc, f"expected {want} argument(s), got {len(e.args)}")

    def header_method(self, base: EV, name: str, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 0)
        if name == "isValid":
            return EV(f"{base.code}._v", BOOL)
        if name in ("setValid", "setInvalid"):
            code = f"{base.code}._set_valid()" if name == "setValid" else f"{base.code}._v = False"
            assert isinstance(e.func, ast.Member)
            union = self.union_siblings(e.func.expr, fn)
            if union and name == "setValid":
                code += "".join(f"; {u}._v = False" for u in union)
            return EV(code, VOID)
        raise P4Error(e.loc, f"headers have no method '{name}'")

    def union_siblings(self, hexpr: ast.Expr, fn: Fn) -> list[str]:
        """Codes of the other members when ``hexpr`` is a member of a header union."""
        if not isinstance(hexpr, ast.Member):
            return []
        u = self.expr(hexpr.expr, fn)
        if isinstance(u.type, TComposite) and u.type.kind == "union":
            return [f"{u.code}.{pyname(n)}" for n, _ in u.type.fields if n != hexpr.name]
        return []

    # -- argument binding -----------------------------------------------------------

    def bind(self, params: list[ast.Param], e: ast.Call, what: str) -> list[ast.Expr | None]:
        """Arguments in parameter order (named arguments, defaults)."""
        out: list[ast.Expr | None] = [None] * len(params)
        named = any(a.name for a in e.args)
        if not named and len(e.args) > len(params):
            raise P4Error(e.loc, f"{what} takes {len(params)} argument(s), got {len(e.args)}")
        for i, a in enumerate(e.args):
            if a.name:
                idx = next((k for k, p in enumerate(params) if p.name == a.name), None)
                if idx is None:
                    raise P4Error(a.loc, f"{what} has no parameter '{a.name}'")
            else:
                idx = i
            out[idx] = a.value
        for i, p in enumerate(params):
            if out[i] is None:
                if p.default is not None:
                    out[i] = p.default
                else:
                    raise P4Error(
                        e.loc,
                        f"{what} takes {len(params)} argument(s), "
                        f"got {len(e.args)} (missing '{p.name}')",
                    )
        return out

    def call_with_dirs(
        self,
        pyfn: str,
        params: list[ast.Param],
        ptypes: list[T],
        args: list[ast.Expr | None],
        fn: Fn,
        first: list[str],
        ret: T,
        stmt: bool,
        loc: ast.SourceLoc,
        exits: bool = False,
        reach: frozenset[str] | None = None,
    ) -> EV:
        """Copy-in/copy-out call of a generated function (see codegen's docstring).
        ``exits``: the callee is an action, whose ``exit`` still copies out.
        ``reach``: names the callee's body can use besides its parameters (an action's
        view of its control), None when it can reach nothing else (functions, controls).

        A header, struct or stack argument is passed by reference unless the callee could
        see it under a second name (the same variable passed twice, or used by the action
        directly): then it gets a copy, so that the parameter stays a copy of the value at
        the call and the copy-out overwrites the direct writes, as the spec says."""
        self.note_arguments(params, ptypes, args, fn, constants_only=exits)
        codes = list(first)
        outs: list[tuple[EV, ast.Expr]] = []
        roots = [_root_name(a) for a in args]
        ends: list[tuple[int, int, T]] = []  # (index in codes, len(fn.lines) after it, type)
        for i, (p, t, a) in enumerate(zip(params, ptypes, args, strict=False)):
            d = p.direction
            if a is None or isinstance(a, ast.DontCare):
                codes.append(self.default(t))
                continue
            shared = roots[i] is not None and (
                roots.count(roots[i]) > 1 or (reach is not None and roots[i] in reach)
            )
            if d in ("out", "inout"):
                lv = self.expr(a, fn, t)
                if not lv.lval:
                    raise P4Error(
                        a.loc, f"argument for {d} parameter '{p.name}' must be assignable"
                    )
                self.coerce(lv, t, a)
                outs.append((lv, a))
                if d == "out":
                    codes.append(self.default(t))
                else:
                    codes.append(self.fresh(lv.code, t, a) if shared else lv.code)
            else:
                v = self.value(a, fn, t).code
                codes.append(self.fresh(v, t, a) if shared else v)
            if d != "out":
                ends.append((len(codes) - 1, len(fn.lines), t))
        for k, end, t in reversed(ends):  # arguments are evaluated left to right
            if end < len(fn.lines) and not codes[k].isdigit():
                codes[k] = self.pin(EV(codes[k], t), fn, end).code
        call = f"{pyfn}({', '.join(codes)})"
        if not outs:
            return EV(call, ret)
        # The call runs as a statement placed just before the current one; copy-out
        # happens there and the expression uses the returned value.
        r = fn.new("r")
        k = 0 if ret == VOID else 1
        copy_out = [
            self.slice_store(a, fn, lambda _w, i=i: f"{r}[{i + k}]")  # type: ignore[misc]
            if isinstance(a, ast.Slice)
            else self.assign_code(lv, f"{r}[{i + k}]", a, fn)
            for i, (lv, a) in enumerate(outs)
        ]
        if exits:
            fn.emit("try:")
            fn.emit(f"    {r} = {call}")
            fn.emit("except ExitSignal as _x:")
            fn.emit(f"    {r} = _x.outs")
            fn.lines += ["    " * (fn.ind + 1) + c for c in copy_out]
            fn.emit("    raise")
        else:
            fn.emit(f"{r} = {call}")
        for c in copy_out:
            fn.emit(c)
        return EV(f"{r}[0]" if k else "", ret)

    # -- actions, functions, instances -----------------------------------------------

    def function_call(self, name: str, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        if name in ("sizeInBits", "sizeInBytes"):
            arg = e.args[0].value if len(e.args) == 1 else None
            if isinstance(arg, (ast.Member, ast.Index)) or (
                isinstance(arg, ast.Name) and fn.scope.lookup(arg.name) is not None
            ):
                bits = type_width(self.expr(arg, fn).type)
                return lit(bits if name == "sizeInBits" else (bits + 7) // 8, TInfInt())
            return lit(self.genv.size_of(e), TInfInt())
        sym = fn.scope.lookup(name)
        if sym is not None and sym.kind == "action" or (sym is None and name in self.genv.actions):
            return self.action_call(name, e, fn, stmt)
        if name in self.genv.functions:
            decls = self.genv.functions[name]
            body = [d for d in decls if d.body is not None]
            if body:
                return self.user_function(body[0], e, fn, stmt)
            return self.extern_function(name, decls, e, fn, stmt)
        raise P4Error(e.func.loc, f"unknown function or action '{name}'")

    def action_call(self, name: str, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        if fn.kind not in ("control", "action"):
            raise P4Error(e.loc, f"action '{name}' can only be called from a control")
        py, fq, d = self.action_ref(name, fn.ctl, e.loc)
        if fq in self.actions:
            self.actions[fq].called_directly = True
            if fn.kind == "control":
                self.actions[fq].called_from_control = True
        ptypes = [self.genv.resolve(p.type) for p in d.params]
        args = self.bind(d.params, e, f"action {name}")
        return self.call_with_dirs(
            py, d.params, ptypes, args, fn, ["F"], VOID, stmt, e.loc, True, self.reach(d, fn.ctl)
        )

    def note_arguments(
        self,
        params: list[ast.Param],
        ptypes: list[T],
        args: list[ast.Expr | None],
        fn: Fn,
        constants_only: bool,
    ) -> None:
        """Record what this call binds to each integer in-parameter, for the BMv2 check of
        / and % by a parameter (``resolve_param_divisions``). ``constants_only``: an
        action's call, whose argument p4c propagates only when it is a constant (not a
        local known to hold one, as it does for functions)."""
        for p, t, a in zip(params, ptypes, args, strict=False):
            if a is None or isinstance(a, ast.DontCare) or p.direction in ("out", "inout"):
                continue
            if not isinstance(t, TBit):
                continue
            scratch = Fn(fn.scope, fn.kind, fn.path, ctl=fn.ctl, ret=fn.ret, ret_type=fn.ret_type)
            scratch.known = dict(fn.known)
            errors = len(self.beyond_bmv2)
            ev = self.value(a, scratch, t)  # its code is dropped
            del self.beyond_bmv2[errors:]  # the call itself reports those
            facts = self.call_arguments.setdefault(id(p), [])
            sym = ev.sym
            if getattr(sym, "kind", None) == "param" and isinstance(sym.decl, ast.Param):
                facts.append(("param", id(sym.decl)))
            else:
                facts.append(("value", ev.const if constants_only else p4c_value(ev, scratch)))

    def reach(self, d: ast.ActionDecl, inst: Any) -> frozenset[str]:
        """Every name the body of action ``d`` uses, through the actions it calls too
        (a superset of the control's variables it can read or write)."""
        memo: dict[int, frozenset[str]] = self.__dict__.setdefault("_reach", {})
        if id(d) in memo:
            return memo[id(d)]
        memo[id(d)] = frozenset()  # actions do not recurse; this ends a malformed cycle
        names = set(_names_in(d.body))
        for n in list(names):
            sym = inst.scope.lookup(n) if inst is not None else None
            callee = sym.decl if sym is not None and sym.kind == "action" else None
            callee = callee or self.genv.actions.get(n)
            if isinstance(callee, ast.ActionDecl) and callee is not d:
                names |= self.reach(callee, inst)
        memo[id(d)] = frozenset(names)
        return memo[id(d)]

    def user_function(self, d: ast.FunctionDecl, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        tvars = self.function_type_args(d, e, fn) if d.type_params else {}
        key: Any = id(d)
        if tvars:  # a generic function: one Python function per list of type arguments
            key = (id(d), tuple(tvars[p].show() for p in d.type_params))
        py = self._functions.get(key)  # type: ignore[attr-defined]
        if py is None:
            py = self.gen_function(d, tvars, key)
        ptypes = [self.genv.resolve(p.type, tvars) for p in d.params]
        args = self.bind(d.params, e, f"function {d.name}")
        ret = self.genv.resolve(d.return_type, tvars)
        return self.call_with_dirs(py, d.params, ptypes, args, fn, [], ret, stmt, e.loc)

    def function_type_args(self, d: ast.FunctionDecl, e: ast.Call, fn: Fn) -> dict[str, T]:
        """The type arguments of a call to a generic function: written (``f<bit<8>>(x)``)
        or inferred from the arguments whose parameter type is a type parameter."""
        if e.type_args:
            if len(e.type_args) != len(d.type_params):
                raise P4Error(
                    e.loc, f"function {d.name} takes {len(d.type_params)} type argument(s)"
                )
            pairs = zip(d.type_params, e.type_args, strict=True)
            return {p: self.genv.resolve(a) for p, a in pairs}

        bound: dict[str, T] = {}
        args = self.bind(d.params, e, f"function {d.name}")
        for p, a in zip(d.params, args, strict=False):
            if not (isinstance(p.type, ast.NamedType) and p.type.name in d.type_params):
                continue
            if a is None or p.type.name in bound:
                continue
            scratch = Fn(fn.scope, fn.kind, fn.path, ctl=fn.ctl, ret=fn.ret, ret_type=fn.ret_type)
            scratch.known = dict(fn.known)
            at = self.expr(a, scratch).type  # only the type: the scratch code is dropped
            if not isinstance(at, (TInfInt, TDontCare)):
                bound[p.type.name] = at
        missing = [t for t in d.type_params if t not in bound]
        if missing:
            raise P4Error(
                e.loc,
                f"cannot infer type parameter {missing[0]} of {d.name}: "
                f"write it, as in {d.name}<bit<8>>(...)",
            )
        return bound

    def gen_function(
        self, d: ast.FunctionDecl, tvars: dict[str, T] | None = None, key: Any = None
    ) -> str:
        ident = next(self.ids)
        py = f"fun_{ident}_{pyname(d.name)}"
        self._functions[id(d) if key is None else key] = py  # type: ignore[attr-defined]
        outer_tvars = getattr(self.genv, "fn_tvars", None)
        self.genv.fn_tvars = tvars or {}  # type: ignore[attr-defined]
        try:
            fn, ret = self._function_body(d)
        finally:
            self.genv.fn_tvars = outer_tvars  # type: ignore[attr-defined]
        head = f"def {py}({', '.join('v_' + p.name for p in d.params)}):"
        self.src.append(head + "\n" + "\n".join(fn.lines) + "\n")
        return py

    def _function_body(self, d: ast.FunctionDecl) -> tuple[Fn, T]:

        scope = self.genv.scope.child()
        for p in d.params:
            scope.declare(
                p.name,
                Sym(
                    "param",
                    self.genv.resolve(p.type),
                    f"v_{p.name}",
                    direction=p.direction or "in",
                    decl=p,
                ),
                p.loc,
            )
        ret = self.genv.resolve(d.return_type)
        fn = Fn(scope, "function", "", ret_type=ret)
        outs = [f"v_{p.name}" for p in d.params if p.direction in ("out", "inout")]
        if outs:
            fn.ret = f"return ({''.join(o + ', ' for o in outs)})"
        self.block(d.body, fn)  # type: ignore[arg-type]
        if outs:
            fn.emit(fn.ret if ret == VOID else fn.ret.replace("return (", "return (None, "))
        return fn, ret

    def apply_instance(self, sym: Sym, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        d = sym.decl
        params = list(d.params)
        ptypes = [self.genv.resolve(p.type) for p in params]
        args = self.bind(params, e, f"{d.name}.apply")
        if isinstance(d, ast.ParserDecl):
            if fn.kind != "parser":
                raise P4Error(e.loc, "a parser can only be applied from a parser")
        elif fn.kind not in ("control",):
            raise P4Error(e.loc, "a control can only be applied from a control body")
        return self.call_with_dirs(sym.code, params, ptypes, args, fn, [], VOID, stmt, e.loc)


__all__ = ["CallMixin", "expr_text", "TDontCare", "TTypeVar", "DROP_PORT"]


def _root_name(e: ast.Expr | None) -> str | None:
    """``hdr`` for ``hdr.h.f``, ``hdr.s[i]``, ``hdr.f[3:0]``; None for other expressions."""
    while isinstance(e, (ast.Member, ast.Index, ast.Slice)):
        e = e.expr
    return e.name if isinstance(e, ast.Name) else None


def _names_in(node: Any) -> Iterator[str]:
    """Every ``ast.Name`` inside an AST node (generic walk over the dataclass fields)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, ast.Name):
            yield x.name
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x) if f.name != "loc")
