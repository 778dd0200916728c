"""User functions (``bit<8> max8(in bit<8> a, in bit<8> b) { ... }``) as C functions.

A function's ``in`` parameters are passed by value (headers and structs too: C copies
them), its ``out`` and ``inout`` parameters as pointers to temporaries that the caller
fills before the call (``inout``) and copies back after it, in argument order, as P4's
copy-in/copy-out says. A call with out/inout arguments is a statement, the whole right
side of an assignment or a variable's initialiser, or, inside a larger expression, a GNU
statement expression marked with ``cvalues.FX``: C does not fix the order in which it
evaluates operands, so the code around a marked one evaluates its operands, arguments
and initialisers into locals left to right (P4's order), and an assignment takes the
target's place before the value. Calls of functions with only ``in`` parameters have no
side effects and go anywhere.

A generic function becomes one C function per binding of its type parameters (written
at the call or inferred from the arguments, as the Python back end infers them).

Example: ``h.x = max8(h.a, h.b);`` → ``h.f_x = fun_3_max8(h.f_a, h.f_b);``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from p4sim.compiler.typecheck import TInfInt
from p4sim.frontend import ast
from p4sim.native.cvalues import FX, Unsupported, V

if TYPE_CHECKING:
    from p4sim.compiler.typecheck import GlobalEnv

#: (pre statements, the C call, copy-out statements after it)
Call = tuple[list[str], str, list[str]]


class FunctionsMixin:
    """The C generator's user functions (see the module docstring)."""

    fn_ret: list[Any]  # return types of the functions being generated, innermost last

    if TYPE_CHECKING:  # the C generator's own (p4sim/native/cgen.py)
        genv: GlobalEnv
        out: list[str]
        decls: list[str]
        locals: list[dict[str, V]]

        def lookup(self, name: str) -> V | None: ...
        def new(self, base: str) -> str: ...
        def ctype(self, t: Any) -> str: ...
        def block(self, b: ast.Stmt) -> list[str]: ...
        def value(self, e: ast.Expr, t: Any) -> V: ...
        def expr(self, e: ast.Expr, expect: Any = None) -> V: ...
        def coerce(self, v: V, t: Any) -> V: ...
        def store(self, target: ast.Expr, code: str) -> str: ...

    def user_function(self, e: ast.Expr) -> ast.FunctionDecl | None:
        """The declaration of the user function ``e`` calls, None for anything else."""
        if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Name)):
            return None
        if self.lookup(e.func.name) is not None:
            return None
        decls = [d for d in self.genv.functions.get(e.func.name, []) if d.body is not None]
        if not decls:
            return None
        if len(decls) > 1:
            raise Unsupported(f"overloaded function {e.func.name}")
        if any(a.name is not None for a in e.args) or len(e.args) != len(decls[0].params):
            raise Unsupported(f"call of {e.func.name} with named or default arguments")
        return decls[0]

    def type_args(self, d: ast.FunctionDecl, e: ast.Call) -> dict[str, Any]:
        """A generic function's type arguments at a call: written, or the types of the
        arguments whose parameter type is a type parameter (as the Python back end)."""
        if not d.type_params:
            return {}
        if e.type_args:
            if len(e.type_args) != len(d.type_params):
                raise Unsupported(f"type arguments of {d.name}")
            return {
                p: self.genv.resolve(a) for p, a in zip(d.type_params, e.type_args, strict=True)
            }
        bound: dict[str, Any] = {}
        for p, a in zip(d.params, e.args, strict=True):
            if isinstance(p.type, ast.NamedType) and p.type.name in d.type_params:
                if p.type.name not in bound and not isinstance(a.value, ast.DontCare):
                    at = self.expr(a.value).type
                    if not isinstance(at, TInfInt):
                        bound[p.type.name] = at
        if any(t not in bound for t in d.type_params):
            raise Unsupported(f"type parameters of {d.name} not inferred")
        return bound

    def resolve_in(self, t: Any, tvars: dict[str, Any]) -> Any:
        """``t`` with a generic function's type parameters bound (the enclosing
        function's own when ``tvars`` is empty)."""
        return self.genv.resolve(t, tvars or None)

    def function_ref(self, d: ast.FunctionDecl, tvars: dict[str, Any] | None = None) -> str:
        """The C function of ``d`` (of one binding of its type parameters), generated on
        first use."""
        tvars = tvars or {}
        memo: dict[Any, str] = self.__dict__.setdefault("_functions", {})
        key = (id(d), tuple(sorted((k, v.show()) for k, v in tvars.items())))
        if key in memo:
            return memo[key]
        cfn = self.new(f"fun_{re.sub(r'[^A-Za-z0-9_]', '_', d.name)}")
        memo[key] = cfn
        outer = getattr(self.genv, "fn_tvars", None)
        self.genv.fn_tvars = tvars  # type: ignore[attr-defined]
        try:
            return self._function_def(d, cfn)
        finally:
            self.genv.fn_tvars = outer  # type: ignore[attr-defined]

    def _function_def(self, d: ast.FunctionDecl, cfn: str) -> str:
        ret = self.genv.resolve(d.return_type)
        cret = "void" if _is_void(d) else self.ctype(ret)
        params, scope = [], {}
        for p in d.params:
            t = self.genv.resolve(p.type)
            ct = self.ctype(t)
            if p.direction in ("out", "inout"):
                params.append(f"{ct} *p_{p.name}")
                scope[p.name] = V(f"(*p_{p.name})", t)
            else:
                params.append(f"{ct} a_{p.name}")
                scope[p.name] = V(f"a_{p.name}", t)
        sig = f"static {cret} {cfn}({', '.join(params) or 'void'})"
        self.decls.append(sig + ";")
        saved, self.locals = self.locals, [scope]
        self.__dict__.setdefault("fn_ret", []).append(None if _is_void(d) else ret)
        try:
            assert d.body is not None
            body = self.block(d.body)
        finally:
            self.locals = saved
            self.fn_ret.pop()
        self.out.append(sig + " {\n" + "\n".join("    " + x for x in body) + "\n}")
        return cfn

    def function_call(self, d: ast.FunctionDecl, e: ast.Call) -> Call:
        """Copy-in, the call and copy-out of a user function (module docstring)."""
        tvars = self.type_args(d, e)
        cfn = self.function_ref(d, tvars)
        vals, pre, post = self.bind_args(  # type: ignore[attr-defined]
            d.params,
            [x.value for x in e.args],
            [self.resolve_in(p.type, tvars) for p in d.params],
            composites_by_ref=False,
            plain_targets=True,
        )
        return pre, f"{cfn}({', '.join(vals)})", post

    def function_value(self, d: ast.FunctionDecl, e: ast.Call) -> V:
        """A call inside an expression. With out/inout parameters: a GNU statement
        expression (copy-in, call, copy-out, the result) marked as having side effects,
        which the code around it evaluates in P4's order."""
        if _is_void(d):
            raise Unsupported(f"value of void function {d.name}")
        t = self.resolve_in(d.return_type, self.type_args(d, e))
        pre, call, post = self.function_call(d, e)
        if not any(p.direction in ("out", "inout") for p in d.params) and not pre:
            return V(call, t)
        r = self.new("ret")
        body = " ".join([*pre, f"{self.ctype(t)} {r} = {call};", *post])
        return V(f"({{ {FX} {body} {r}; }})", t)

    def function_stmt(self, s: ast.Stmt) -> list[str] | None:
        """``f(...);``, ``x = f(...);`` or ``T x = f(...);`` of a user function with
        out/inout parameters, else None (the statement is compiled as any other)."""
        if isinstance(s, ast.CallStmt):
            d = self.user_function(s.call)
            if d is None:
                return None
            pre, call, post = self.function_call(d, s.call)
            return pre + [f"{call};"] + post
        if isinstance(s, ast.Assign) and not isinstance(s.target, ast.Slice):
            target, value = s.target, s.value
        elif isinstance(s, ast.VarDeclStmt) and s.decl.init is not None:
            target, value = None, s.decl.init
        else:
            return None
        d = self.user_function(value)
        if d is None or not any(p.direction in ("out", "inout") for p in d.params):
            return None
        assert isinstance(value, ast.Call)
        if target is not None and run_time_index(target):
            return None  # the target's place first: the assignment with side effects
        t = self.resolve_in(d.return_type, self.type_args(d, value))
        pre, call, post = self.function_call(d, value)
        r = self.new("ret")
        lines = [f"{self.ctype(t)} {r};", *pre, f"{r} = {call};", *post]
        if target is None:  # a declaration: the variable is declared after the call
            assert isinstance(s, ast.VarDeclStmt)
            vt = self.genv.resolve(s.decl.type)
            n = self.new(f"v_{s.decl.name}")
            lines += [f"{self.ctype(vt)} {n};", f"{n} = {self.coerce(V(r, t), vt).code};"]
            self.locals[-1][s.decl.name] = V(n, vt)
            return lines
        tgt = self.expr(target)
        return lines + [f"{tgt.code} = {self.coerce(V(r, t), tgt.type).code};"]

    def return_stmt(self, s: ast.Return) -> list[str] | None:
        """``return`` inside a function, else None."""
        if not self.__dict__.get("fn_ret"):
            return None
        ret = self.fn_ret[-1]
        if s.value is None or ret is None:
            return ["return;"]
        return [f"return {self.value(s.value, ret).code};"]


def _is_void(d: ast.FunctionDecl) -> bool:
    return isinstance(d.return_type, ast.VoidType)


def run_time_index(e: ast.Expr) -> bool:
    """Whether the l-value ``e`` indexes a stack by something other than a literal."""
    while isinstance(e, (ast.Member, ast.Index, ast.Slice)):
        if isinstance(e, ast.Index) and not isinstance(e.index, ast.IntLit):
            return True
        e = e.expr
    return False
