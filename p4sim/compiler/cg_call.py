"""Calls: methods (isValid, extract, emit, apply ...), actions, functions, v1model externs,
and the generation of tables, extern instances and value sets.

Example::

    compiler.call(ast.Call(ast.Member(ast.Name("ipv4_lpm"), "apply")), fn, stmt=True)
    # -> EV('tbl_7(F)', ...): tbl_7 looks up the key and runs the chosen action
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from p4sim.compiler.cg_base import CompilerBase, CtlInst, Fn, fq_name
from p4sim.compiler.cg_expr import EV, lit, mask, p4c_value, pyname
from p4sim.compiler.cg_types import byte_codes, header_pad
from p4sim.compiler.program import ExternInfo, ValueSetInfo
from p4sim.compiler.typecheck import (
    BOOL,
    VOID,
    Sym,
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
    TTypeVar,
    TVarbit,
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
    externs: list
    value_sets: list
    digests: dict
    field_lists: dict

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

    # -- packet_in / packet_out and stateful externs ---------------------------------

    def extern_method(self, base: EV, t: TExtern, name: str, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        h = getattr(self, f"_m_{t.name}_{name}", None)
        if h is None:
            if not any(m.name == name for m in t.decl.methods):
                raise P4Error(e.loc, f"extern {t.name} has no method '{name}'")
            raise P4Error(e.loc, f"p4sim does not implement {t.name}.{name}()")
        return h(base, t, e, fn)

    def _m_packet_in_extract(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1, 2)
        target = e.args[0].value
        if isinstance(target, ast.DontCare) and len(e.type_args) == 1:
            # extract<H>(_): the bits are read and checked as for an H, then dropped
            dropped = self.genv.resolve(e.type_args[0])
            hv = EV(self.default(dropped), dropped)
        else:
            hv = self.expr(target, fn)
        ht = hv.type
        if not (isinstance(ht, TComposite) and ht.kind == "header"):
            raise P4Error(target.loc, f"extract needs a header, got {ht.show()}")
        has_var = any(isinstance(ft, TVarbit) for _, ft in ht.fields)
        pk = base.code
        h = fn.new("h")
        stack = None
        if hv.code.startswith("_stack_next("):
            # `stack.next` or, in a stack of header unions, `stack.next.member`
            stack = _call_argument(hv.code, len("_stack_next"))
        fn.emit(f"{h} = {hv.code}")
        o, end = fn.new("o"), fn.new("e")
        fn.emit(f"{o} = {pk}.off")
        if has_var:
            if len(e.args) != 2:
                raise P4Error(e.loc, "extracting a header with a varbit field needs its size")
            maxw = next(ft.max_width for _, ft in ht.fields if isinstance(ft, TVarbit))
            n = fn.new("n")
            fn.emit(f"{n} = {self.value(e.args[1].value, fn, TBit(32)).code}")
            # BMv2 handles whole bytes only; more than the declared maximum is too long
            fn.emit(f"if {n} & 7: raise ParserErr('ParserInvalidArgument')")
            fn.emit(f"if {n} > {maxw}: raise ParserErr('HeaderTooShort')")
            width = f"({ht.width} + {n})"
        else:
            if len(e.args) == 2:
                raise P4Error(e.loc, "the two-argument extract needs a header with a varbit")
            width = str(ht.width + header_pad(ht))
        fn.emit(f"{end} = {o} + {width}")
        fn.emit(f"if {end} > {pk}.nbits: raise ParserErr('PacketTooShort')")
        raw = f"int.from_bytes({pk}.data[{o} >> 3:({end} + 7) >> 3], 'big') >> (-{end} & 7)"
        if byte_codes(ht) is not None:  # whole-byte fields: one struct call when aligned
            fn.emit(f"if {o} & 7: {h}._ext({raw})")
            fn.emit(f"else: {h}._extb({pk}.data, {o} >> 3)")
        else:
            fn.emit(f"{h}._ext({raw}{', ' + n if has_var else ''})")
        fn.emit(f"{pk}.off = {end}")
        for sib in self.union_siblings(target, fn):
            fn.emit(f"{sib}._v = False")
        if stack is not None:
            fn.emit(f"{stack}.nextIndex += 1")
        if self.trace:
            fn.emit(f"LOG({'Extracting header ' + repr(expr_text(target))!r})")
        return EV("", VOID)

    def _m_packet_in_lookahead(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 0)
        if len(e.type_args) != 1:
            raise P4Error(e.loc, "lookahead needs a type argument: lookahead<T>()")
        lt = self.genv.resolve(e.type_args[0])
        w = type_width(lt)
        pk = base.code
        v = fn.new("la")
        fn.emit(f"if {pk}.off + {w} > {pk}.nbits: raise ParserErr('PacketTooShort')")
        fn.emit(
            f"{v} = (int.from_bytes({pk}.data[{pk}.off >> 3:({pk}.off + {w} + 7) >> 3], "
            f"'big') >> (-({pk}.off + {w}) & 7)) & {mask(w)}"
        )
        if isinstance(lt, TBit):
            return EV(v, lt)
        if isinstance(lt, TBool):
            return EV(f"({v} == 1)", lt)
        if isinstance(lt, TComposite) and lt.kind == "header":
            hh = fn.new("lh")
            fn.emit(f"{hh} = {self.class_of(lt)}()")  # type: ignore[attr-defined]
            fn.emit(f"{hh}._ext({v} << {header_pad(lt)})")
            return EV(hh, lt)
        if isinstance(lt, TComposite) and lt.kind == "struct":
            return EV(self.unpack_struct(v, lt, e, fn), lt)
        raise P4Error(e.loc, f"lookahead<{lt.show()}> is not supported")

    def unpack_struct(self, v: str, st: TComposite, e: ast.Call, fn: Fn) -> str:
        """Emit code that builds a struct of type ``st`` from the bits in ``v`` (first
        field in the high bits, as the packet lays them out); returns its variable.

        Example: ``struct { bit<8> x; bool y; }`` from ``v`` → ``x = (v >> 1) & 255``,
        ``y = bool(v & 1)``.
        """
        sv = fn.new("ls")
        fn.emit(f"{sv} = {self.class_of(st)}()")  # type: ignore[attr-defined]
        shift = type_width(st)
        for name, ft in st.fields:
            w = type_width(ft)
            shift -= w
            bits = f"(({v} >> {shift}) & {mask(w)})"
            dst = f"{sv}.{pyname(name)}"
            if isinstance(ft, TBool):
                fn.emit(f"{dst} = bool{bits}")
            elif isinstance(ft, TBit) or (isinstance(ft, TEnum) and ft.underlying is not None):
                fn.emit(f"{dst} = {bits}")
            elif isinstance(ft, TComposite) and ft.kind == "header":
                fn.emit(f"{dst}._ext({bits} << {header_pad(ft)})")
            elif isinstance(ft, TComposite) and ft.kind == "struct":
                fn.emit(f"{dst} = {self.unpack_struct(bits, ft, e, fn)}")
            else:
                raise P4Error(e.loc, f"lookahead of a struct with a {ft.show()} field")
        return sv

    def _m_packet_in_advance(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1)
        n = self.value(e.args[0].value, fn, TBit(32))
        pk = base.code
        fn.emit(f"if {pk}.off + {n.code} > {pk}.nbits: raise ParserErr('PacketTooShort')")
        return EV(f"{pk}.off += {n.code}", VOID)

    def _m_packet_in_length(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 0)
        return EV(f"len({base.code}.data)", TBit(32))

    def _m_packet_out_emit(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1)
        v = self.expr(e.args[0].value, fn)
        if isinstance(v.type, TComposite):
            return EV(f"{v.code}._emit({base.code})", VOID)
        if isinstance(v.type, TStack):
            return EV(f"for _e in {v.code}.h: _e._emit({base.code})", VOID)
        raise P4Error(e.loc, f"emit needs a header, stack, struct or union, got {v.type.show()}")

    def index(self, a: ast.Expr, fn: Fn) -> EV:
        """An extern index: any bit<W> (v1model's newer externs take a generic index
        type), unsized literals become bit<32>."""
        ev = self.expr(a, fn)
        if isinstance(ev.type, TInfInt):
            return self.convert(ev, TBit(32), a)  # type: ignore[attr-defined]
        if not isinstance(ev.type, TBit):
            raise P4Error(a.loc, f"an index must be a bit<W> value, got {ev.type.show()}")
        return ev

    def _m_register_read(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 2)
        vt = t.args[0] if t.args else TBit(32)
        lv = self.expr(e.args[0].value, fn, vt)
        if not lv.lval:
            raise P4Error(e.args[0].loc, "register read needs an assignable destination")
        self.coerce(lv, vt, e.args[0].value)
        idx = self.index(e.args[1].value, fn)
        # in range (the packet path's common case): the list cell, no method call; out of
        # range: Register.read logs and keeps the destination, as BMv2 does
        i = fn.new("ri")
        cells, size = self.register_cells(base)
        code = (
            f"({cells}[{i}] if 0 <= ({i} := {idx.code}) < {size} "
            f"else {base.code}.read({i}, {lv.code}))"
        )
        return EV(self.assign_code(lv, code, e.args[0].value, fn), VOID)

    def register_cells(self, base: EV) -> tuple[str, str]:
        """(list of cells, size) of a register for the packet path: the instance binds the
        ``Register.values`` list as ``<register>_v`` (it is never replaced) and the size is
        known here; an unknown register (a future kind of reference) goes through
        attributes."""
        info = next((x for x in self.externs if x.pyname == base.code), None)
        if info is None or info.kind != "register":
            return f"{base.code}.values", f"{base.code}.size"
        return f"{base.code}_v", str(int(info.size))

    def _m_register_write(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 2)
        vt = t.args[0] if t.args else TBit(32)
        idx = self.index(e.args[0].value, fn)
        v = self.value(e.args[1].value, fn, vt)
        val = f"(1 if {v.code} else 0)" if isinstance(vt, TBool) else v.code
        # the value already fits the register's width (it has the register's type)
        i = fn.new("ri")
        cells, size = self.register_cells(base)
        fn.emit(f"if 0 <= ({i} := {idx.code}) < {size}: {cells}[{i}] = {val}")
        fn.emit(f"else: {base.code}.write({i}, {val})")
        return EV("", VOID)

    def _m_counter_count(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1)
        idx = self.index(e.args[0].value, fn)
        return EV(f"{base.code}.count({idx.code}, CTX.sm.packet_length)", VOID)

    def _m_direct_counter_count(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 0)
        return EV("", VOID)  # counted by the table on a hit, as BMv2 does

    def _m_meter_execute_meter(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 2)
        idx = self.index(e.args[0].value, fn)
        lv = self.expr(e.args[1].value, fn)
        if not lv.lval:
            raise P4Error(e.args[1].loc, "execute_meter needs an assignable destination")
        code = f"{base.code}.execute({idx.code}, CTX.sm.packet_length, CTX.now, {lv.code})"
        return EV(self.assign_code(lv, code, e.args[1].value, fn), VOID)

    def _m_direct_meter_read(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1)
        lv = self.expr(e.args[0].value, fn)
        if not lv.lval:
            raise P4Error(e.args[0].loc, "direct_meter.read needs an assignable destination")
        return EV(self.assign_code(lv, "CTX.color", e.args[0].value, fn), VOID)

    # -- extern functions -----------------------------------------------------------

    def extern_function(
        self, name: str, decls: list[ast.FunctionDecl], e: ast.Call, fn: Fn, stmt: bool
    ) -> EV:
        if not any(len(d.params) == len(e.args) for d in decls):
            counts = sorted({len(d.params) for d in decls})
            raise P4Error(
                e.loc,
                f"{name} takes {' or '.join(map(str, counts))} argument(s), got {len(e.args)}",
            )
        h = getattr(self, f"_f_{name}", None)
        if h is None:
            raise P4Error(e.loc, f"p4sim does not implement the extern function '{name}'")
        decl = next(d for d in decls if len(d.params) == len(e.args))
        self.check_extern_args(decl, e, fn)
        return h(e, fn)

    def check_extern_args(self, d: ast.FunctionDecl, e: ast.Call, fn: Fn) -> None:
        """Type-check arguments against the non-generic parameters of an extern."""

        scratch = Fn(fn.scope, fn.kind, fn.path, ctl=fn.ctl)  # its lines are dropped
        scratch.known = dict(fn.known)
        for p, a in zip(d.params, e.args, strict=False):
            if _mentions(p.type, set(d.type_params)):
                continue
            t = self.genv.resolve(p.type)
            if p.direction in ("out", "inout"):
                ev = self.expr(a.value, scratch, t)
                if not ev.lval:
                    raise P4Error(
                        a.loc, f"argument for {p.direction} parameter '{p.name}' must be assignable"
                    )
                self.coerce(ev, t, a.value)
            else:
                self.value(a.value, scratch, t)

    def _arg(self, e: ast.Call, i: int) -> ast.Expr:
        return e.args[i].value

    def sm_code(self, fn: Fn) -> str:
        return "CTX.sm"

    def _f_mark_to_drop(self, e: ast.Call, fn: Fn) -> EV:
        sm = self.expr(self._arg(e, 0), fn).code if e.args else "CTX.sm"
        return EV(f"{sm}.egress_spec = {DROP_PORT}; {sm}.mcast_grp = 0", VOID)

    def _f_verify(self, e: ast.Call, fn: Fn) -> EV:
        if fn.kind != "parser":
            raise P4Error(e.loc, "verify() can only be called in a parser")
        c = self.value(self._arg(e, 0), fn, BOOL)
        err = self.value(self._arg(e, 1), fn, TError())
        return EV(f"if not {c.code}: raise ParserErr({err.code})", VOID)

    def fields_code(self, data: ast.Expr, fn: Fn) -> str:
        """``[(value, width), ...]`` for hash/checksum inputs; fields of invalid headers
        are ``None`` (skipped, as BMv2 does)."""
        ev = self.expr(data, fn)
        flat = self.flat_fields(ev, data)  # type: ignore[attr-defined]
        valids = {v for _, _, v in flat}
        if len(valids) == 1 and None not in valids:
            (vc,) = valids
            ok = "[" + ", ".join(f"({c}, {w})" for c, w, _ in flat) + "]"
            bad = "[" + ", ".join(f"(None, {w})" for _, w, _ in flat) + "]"
            return f"({ok} if {vc} else {bad})"
        items = [f"({c}, {w})" if v is None else f"({c} if {v} else None, {w})" for c, w, v in flat]
        return "[" + ", ".join(items) + "]"

    def algo(self, a: ast.Expr, fn: Fn) -> str:
        ev = self.expr(a, fn)
        if not (isinstance(ev.type, TEnum) and ev.is_const):
            raise P4Error(a.loc, "expected a HashAlgorithm member")
        return repr(ev.const)

    def _f_hash(self, e: ast.Call, fn: Fn) -> EV:
        lv = self.expr(self._arg(e, 0), fn)
        if not lv.lval or not isinstance(lv.type, TBit):
            raise P4Error(e.args[0].loc, "hash needs an assignable bit<W> destination")
        algo = self.algo(self._arg(e, 1), fn)
        base = self.expr(self._arg(e, 2), fn)
        mx = self.expr(self._arg(e, 4), fn)
        fields = self.fields_code(self._arg(e, 3), fn)
        code = f"v1model_hash({algo}, {base.code}, {fields}, {mx.code}, {lv.type.width})"
        return EV(self.assign_code(lv, code, self._arg(e, 0), fn), VOID)

    def _f_random(self, e: ast.Call, fn: Fn) -> EV:
        lv = self.expr(self._arg(e, 0), fn)
        if not lv.lval or not isinstance(lv.type, TBit):
            raise P4Error(e.args[0].loc, "random needs an assignable bit<W> destination")
        lo = self.value(self._arg(e, 1), fn, lv.type)
        hi = self.value(self._arg(e, 2), fn, lv.type)
        code = f"_randint({lo.code}, {hi.code})"
        return EV(self.assign_code(lv, code, self._arg(e, 0), fn), VOID)

    def _checksum(self, e: ast.Call, fn: Fn, verify: bool, payload: bool) -> EV:
        c = self.value(self._arg(e, 0), fn, BOOL)
        algo = self.algo(self._arg(e, 3), fn)
        fast = None if payload else self.csum16_code(self._arg(e, 1), algo, fn)
        fields = self.fields_code(self._arg(e, 1), fn) if fast is None else ""
        cs = self.expr(self._arg(e, 2), fn)
        if not isinstance(cs.type, TBit):
            raise P4Error(e.args[2].loc, "the checksum field must be a bit<W>")
        pl = ", CTX.payload" if payload else ""
        if verify:
            calc = f"verify_checksum({algo}, {fields}, {cs.code}{pl})"
            if fast is not None:
                calc = f"{fast} == {cs.code}"
            return EV(f"if {c.code} and not {calc}: CTX.sm.checksum_error = 1", VOID)
        if not cs.lval:
            raise P4Error(e.args[2].loc, "update_checksum needs an assignable field")
        val = fast if fast is not None else f"checksum({algo}, {fields}{pl})"
        val = f"{val} & {mask(cs.type.width)}"
        return EV(f"if {c.code}: " + self.assign_code(cs, val, self._arg(e, 2), fn), VOID)

    def csum16_code(self, data: ast.Expr, algo: str, fn: Fn) -> str | None:
        """The internet checksum of a field list whose fields belong to one header (or to
        none), computed on one integer instead of a serialised list (``rt.csum16_int``);
        None when another algorithm or mixed validity needs the general path."""
        if algo != repr("csum16"):
            return None
        flat = self.flat_fields(self.expr(data, fn), data)  # type: ignore[attr-defined]
        valids = {v for _, _, v in flat}
        if len(valids) > 1 or not flat or not all(w.isdigit() for _, w, _ in flat):
            return None  # mixed validity, nothing, or a varbit (run-time width)
        total = sum(int(w) for _, w, _ in flat)
        shift = total + (-total % 16)  # BMv2 zero-pads to bytes, csum16 to 16-bit words
        parts = []
        for code, w, _ in flat:
            shift -= int(w)
            parts.append(f"({code} << {shift})" if shift else code)
        (valid,) = valids
        value = " | ".join(parts)
        if valid is None:
            return f"csum16_int({value})"
        return f"(csum16_int({value}) if {valid} else 0xFFFF)"

    def _f_verify_checksum(self, e: ast.Call, fn: Fn) -> EV:
        return self._checksum(e, fn, True, False)

    def _f_verify_checksum_with_payload(self, e: ast.Call, fn: Fn) -> EV:
        return self._checksum(e, fn, True, True)

    def _f_update_checksum(self, e: ast.Call, fn: Fn) -> EV:
        return self._checksum(e, fn, False, False)

    def _f_update_checksum_with_payload(self, e: ast.Call, fn: Fn) -> EV:
        return self._checksum(e, fn, False, True)

    def _f_digest(self, e: ast.Call, fn: Fn) -> EV:
        data = self._arg(e, 1)
        if e.type_args:
            ev = self.value(data, fn, self.genv.resolve(e.type_args[0]))
        else:
            ev = self.expr(data, fn)
        flat = self.flat_fields(ev, data)  # type: ignore[attr-defined]
        if isinstance(ev.type, TComposite):
            name = ev.type.name
            fnames = [n for n, _ in ev.type.fields]
        else:
            name = f"digest_{len(self.digests)}"
            elems = data.elems if isinstance(data, ast.ListExpr) else [data]
            fnames = [expr_text(x) for x in elems]
        if len(fnames) != len(flat):
            fnames = [f"f{i}" for i in range(len(flat))]
        fields = [(n, int(w)) for n, (_, w, _) in zip(fnames, flat, strict=False)]
        self.digests.setdefault(name, fields)
        vals = "".join(f"{c}, " for c, _, _ in flat)
        # BMv2 keeps one learn request per packet (the last call) and sends it at the end
        # of ingress; the values are taken here, when digest() is called.
        return EV(f"CTX.digest = ({name!r}, ({vals}))", VOID)

    def data_field_list(self, data: ast.Expr, fn: Fn) -> int:
        """A field list id for the deprecated ``resubmit(data)`` forms: the metadata
        fields named in ``data`` (fields outside the user metadata are not kept)."""
        meta = fn.ctl.meta_code if fn.ctl is not None else None
        ev = self.expr(data, fn)
        paths: list[str] = []
        elems = ev.sym if isinstance(ev.type, TList) else [ev]
        for sub in elems or []:
            if meta and sub.code == meta and isinstance(sub.type, TComposite):
                paths += [f".{pyname(n)}" for n, _ in sub.type.fields]
            elif meta and sub.code.startswith(meta + "."):
                paths.append(sub.code[len(meta) :])
        idx = -(len([k for k in self.field_lists if k < 0]) + 1)
        self.field_lists[idx] = paths
        return idx

    def _f_clone(self, e: ast.Call, fn: Fn) -> EV:
        s = self.value(self._arg(e, 1), fn, TBit(32))
        return EV(f"CTX.clone = ({s.code}, 0)", VOID)

    def _f_clone3(self, e: ast.Call, fn: Fn) -> EV:
        s = self.value(self._arg(e, 1), fn, TBit(32))
        fl = self.data_field_list(self._arg(e, 2), fn)
        return EV(f"CTX.clone = ({s.code}, {fl})", VOID)

    def _f_clone_preserving_field_list(self, e: ast.Call, fn: Fn) -> EV:
        s = self.value(self._arg(e, 1), fn, TBit(32))
        fl = self.genv.const_int(self._arg(e, 2))
        return EV(f"CTX.clone = ({s.code}, {fl})", VOID)

    def _f_resubmit(self, e: ast.Call, fn: Fn) -> EV:
        return EV(f"CTX.resubmit = {self.data_field_list(self._arg(e, 0), fn)}", VOID)

    def _f_resubmit_preserving_field_list(self, e: ast.Call, fn: Fn) -> EV:
        return EV(f"CTX.resubmit = {self.genv.const_int(self._arg(e, 0))}", VOID)

    def _f_recirculate(self, e: ast.Call, fn: Fn) -> EV:
        return EV(f"CTX.recirc = {self.data_field_list(self._arg(e, 0), fn)}", VOID)

    def _f_recirculate_preserving_field_list(self, e: ast.Call, fn: Fn) -> EV:
        return EV(f"CTX.recirc = {self.genv.const_int(self._arg(e, 0))}", VOID)

    def _f_truncate(self, e: ast.Call, fn: Fn) -> EV:
        n = self.value(self._arg(e, 0), fn, TBit(32))
        return EV(f"CTX.truncate = {n.code}", VOID)

    def _f_assert(self, e: ast.Call, fn: Fn) -> EV:
        c = self.value(self._arg(e, 0), fn, BOOL)
        msg = f"{e.loc}: assertion failed"
        return EV(f"if not {c.code}: raise P4AssertionError({msg!r})", VOID)

    _f_assume = _f_assert

    def _f_log_msg(self, e: ast.Call, fn: Fn) -> EV:
        msg = self.expr(self._arg(e, 0), fn)
        if not msg.is_const:
            raise P4Error(e.args[0].loc, "log_msg needs a string literal")
        if not self.trace:
            return EV("", VOID)
        vals = "()"
        if len(e.args) == 2:
            ev = self.expr(self._arg(e, 1), fn)
            flat = self.flat_fields(ev, self._arg(e, 1))  # type: ignore[attr-defined]
            vals = "(" + "".join(f"{c}, " for c, _, _ in flat) + ")"
        return EV(f"LOG(format_log({msg.const!r}, {vals}))", VOID)

    # -- instances of externs -----------------------------------------------------------

    def extern_instance(
        self, d: ast.Instantiation, t: TExtern, path: str, inst: CtlInst | None
    ) -> Sym:

        fq = fq_name(path, d.name, d.annotations)
        py = f"X_{next(self.ids)}_{pyname(d.name)}"
        scope = inst.scope if inst is not None else self.genv.scope
        dummy = Fn(scope, "function", path)
        args = [self.expr(a.value, dummy) for a in d.args]
        for a, ev in zip(d.args, args, strict=False):
            if not ev.is_const:
                raise P4Error(a.loc, "extern constructor arguments must be constants")
        kind = t.name
        if kind == "register":
            if not args or not t.args or not isinstance(t.args[0], (TBit, TBool)):
                raise P4Error(d.loc, "register<T>(size): T must be bit<W>/int<W>")
            width = type_width(t.args[0])
            self.externs.append(
                ExternInfo(
                    "register", fq, py, args[0].const, width, annotations=list(d.annotations)
                )
            )
        elif kind in ("counter", "meter"):
            self.externs.append(
                ExternInfo(
                    kind, fq, py, args[0].const, 0, args[1].const, annotations=list(d.annotations)
                )
            )
        elif kind in ("direct_counter", "direct_meter"):
            self.externs.append(
                ExternInfo(kind, fq, py, 0, 0, args[0].const, annotations=list(d.annotations))
            )
        elif kind in ("action_profile", "action_selector"):
            self.externs.append(profile_info(kind, fq, py, args, list(d.annotations)))
        elif kind == "Checksum16":
            pass  # accepted; using it reports an error
        else:
            raise P4Error(d.loc, f"p4sim does not implement extern '{kind}'")
        return Sym("extern", t, py, decl=d, extra={"fq": fq})

    def gen_value_set(self, d: ast.ValueSetDecl, inst: CtlInst) -> None:

        t = self.genv.resolve(d.elem_type)
        if isinstance(t, TComposite):
            widths = [type_width(ft) for _, ft in t.fields]
            names = [n for n, _ in t.fields]
        else:
            widths = [type_width(t)]
            names = [""]
        fq = fq_name(inst.path, d.name, d.annotations)
        py = f"VS_{next(self.ids)}_{pyname(d.name)}"
        self.value_sets.append(
            ValueSetInfo(fq, py, widths, self.genv.const_int(d.size), names, list(d.annotations))
        )
        inst.scope.declare(d.name, Sym("value_set", t, py, decl=d), d.loc)


def profile_info(kind: str, fq: str, py: str, args: list, annos: list) -> ExternInfo:
    """ExternInfo of an ``action_profile(size)`` or ``action_selector(algo, size, width)``:
    ``unit`` holds the selector's hash algorithm, ``width`` its output width."""
    if kind == "action_profile":
        return ExternInfo(kind, fq, py, int(args[0].const), annotations=annos)
    algo = str(args[0].const)
    return ExternInfo(kind, fq, py, int(args[1].const), int(args[2].const), algo, None, annos)


def _mentions(t: ast.Type, names: set[str]) -> bool:
    """True when the type refers to one of the type parameters ``names``."""
    if isinstance(t, ast.NamedType):
        return t.name in names or any(_mentions(x, names) for x in t.type_args)
    if isinstance(t, ast.HeaderStackType):
        return _mentions(t.elem, names)
    if isinstance(t, ast.TupleType):
        return any(_mentions(x, names) for x in t.elems)
    return False


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


def _call_argument(code: str, at: int) -> str:
    """The text between the parenthesis at ``code[at]`` and the one that closes it."""
    depth = 0
    for i in range(at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return code[at + 1 : i]
    raise ValueError(f"unbalanced generated code: {code}")
