"""Code generation: a type-checked P4 program → one Python module, compiled once.

Example::

    comp = Compiler(program, trace=False)
    prog = comp.compile()          # CompiledProgram (see program.py)
    print(prog.source)             # the generated Python

Every parser, control, action, table and function *instance* becomes a Python function;
packets then run that code with no AST walking. Layout of the generated functions:

* parser: one function, a ``while`` loop over state numbers, locals as Python locals;
* control: ``ctl_N(params...)`` holding params and control-level locals in a frame object
  ``F`` (``__slots__``) shared with its actions ``act_N_x(F, args...)`` and tables
  ``tbl_N_t(F) -> (hit, action_name)``;
* functions called with out/inout parameters return the final values of those
  parameters (copy-out), which the caller assigns back.
"""

from __future__ import annotations

import itertools
from typing import Any

from p4sim.compiler.cg_base import CtlInst, Fn, fq_name
from p4sim.compiler.cg_call import CallMixin
from p4sim.compiler.cg_expr import EV, NOCONST, ExprMixin, lit, power_of_two, pyname
from p4sim.compiler.cg_extern import ExternMixin
from p4sim.compiler.cg_stmt import StmtMixin
from p4sim.compiler.cg_table import TableMixin
from p4sim.compiler.cg_types import TypeClasses
from p4sim.compiler.program import (
    ActionInfo,
    BlockSet,
    CompiledProgram,
    ExternInfo,
    TableInfo,
    ValueSetInfo,
)
from p4sim.compiler.typecheck import (
    GlobalEnv,
    Scope,
    Sym,
    T,
    TBit,
    TBool,
    TComposite,
    TEnum,
    TExtern,
    TObject,
    TStack,
    TTuple,
    annotation,
    type_width,
)
from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error


class Compiler(ExprMixin, StmtMixin, CallMixin, ExternMixin, TableMixin):
    """Compiles a whole ``V1Switch`` program (see the module docstring)."""

    def __init__(self, program: ast.Program, trace: bool = False) -> None:
        self.program = program
        self.trace = trace
        self.beyond_bmv2: list[P4Error] = []
        self.param_divisions: list[tuple[list[tuple[int, str]], P4Error]] = []
        self.call_arguments: dict[int, list[tuple[str, Any]]] = {}
        self.genv = GlobalEnv(program)
        self.types = TypeClasses()
        self.src: list[str] = []
        self.ids = itertools.count(1)
        self.tables: list[TableInfo] = []
        self.actions: dict[str, ActionInfo] = {}
        self.externs: list[ExternInfo] = []
        self.value_sets: list[ValueSetInfo] = []
        self.digests: dict[str, list[tuple[str, int]]] = {}
        self.field_lists: dict[int, list[str]] = {}
        self.consts: dict[str, Any] = {}
        # set from the parser's parameters before anything else is compiled
        self.meta_type: TComposite = None  # type: ignore[assignment]
        self.hdr_type: TComposite = None  # type: ignore[assignment]
        self.sm_type: TComposite = None  # type: ignore[assignment]
        self._globals_done: dict[str, str] = {}
        self._top_actions: dict[tuple[int, str], str] = {}
        self._functions: dict[int, str] = {}

    def class_of(self, t: TComposite) -> str:
        return self.types.class_of(t)

    def default(self, t: T) -> str:
        return self.types.default(t)

    # -- top level ----------------------------------------------------------------

    def compile(self) -> CompiledProgram:
        main = self.find_main()
        blocks = self.main_blocks(main)
        names = ["parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser"]
        fns: dict[str, str] = {}
        fq_blocks: dict[str, str] = {}
        self.declare_top_instances()
        for role, (decl, args) in zip(names, blocks, strict=False):
            if role == "parser" and not isinstance(decl, ast.ParserDecl):
                raise P4Error(
                    decl.loc, f"V1Switch's first argument must be a parser, got '{decl.name}'"
                )
            if role != "parser" and not isinstance(decl, ast.ControlDecl):
                raise P4Error(decl.loc, f"V1Switch's {role} argument must be a control")
            if role == "parser":
                self.set_arch_types(decl)
            fns[role] = self.instantiate(decl, decl.name, args, self.genv.scope, top=True)
            fq_blocks[role] = decl.name
        self.collect_field_lists()
        for t in (self.hdr_type, self.meta_type, self.sm_type):
            self.class_of(t)
        source = self.assemble()
        return CompiledProgram(
            source=source,
            blocks=BlockSet(**fns),
            block_names=fq_blocks,
            tables=self.tables,
            actions=self.actions,
            externs=self.externs,
            value_sets=self.value_sets,
            digests=self.digests,
            field_lists=self.field_lists,
            hdr_class=self.class_of(self.hdr_type),
            meta_class=self.class_of(self.meta_type),
            sm_class=self.class_of(self.sm_type),
            errors=list(self.genv.errors),
            trace=self.trace,
            controller_headers=self.controller_headers(),
            main_file=self.program.files[0] if self.program.files else "",
            program_ast=self.program,
            newtypes={
                n
                for n, d in self.genv.type_decls.items()
                if isinstance(d, ast.TypedefDecl) and d.is_newtype
            },
        )

    def controller_headers(self) -> list:
        """``@controller_header("packet_in")`` headers: (name, [(field, width, serializable
        enum or None)], annos, header type name)."""
        out = []
        for d in self.program.declarations:
            if not isinstance(d, ast.HeaderDecl):
                continue
            a = annotation(d.annotations, "controller_header")
            if a is None:
                continue
            name = (
                a.args[0].value
                if a.args and isinstance(a.args[0], ast.StringLit)
                else (a.raw.strip().strip('"'))
            )
            t = self.genv.resolve(ast.NamedType(d.name, loc=d.loc))
            fields = [
                (n, type_width(ft), ft if isinstance(ft, TEnum) and ft.underlying else None)
                for n, ft in t.fields  # type: ignore[attr-defined]
            ]
            out.append((name, fields, list(d.annotations), d.name))
        return out

    def find_main(self) -> ast.Instantiation:
        for d in self.genv.instantiations:
            if d.name == "main":
                return d
        files = self.program.files
        loc = ast.SourceLoc(files[0], 1, 1) if files else self.program.loc
        raise P4Error(
            loc, "the program has no 'main' package instantiation (expected 'V1Switch(...) main;')"
        )

    def main_blocks(self, main: ast.Instantiation) -> list[tuple[Any, list]]:
        t = main.type
        if not isinstance(t, ast.NamedType) or t.name != "V1Switch":
            raise P4Error(main.loc, "p4sim runs the v1model architecture: main must be a V1Switch")
        if len(main.args) != 6:
            raise P4Error(main.loc, f"V1Switch takes 6 arguments, got {len(main.args)}")
        out = []
        for a in main.args:
            out.append(self.block_arg(a.value))
        return out

    def block_arg(self, e: ast.Expr) -> tuple[Any, list]:
        """``MyParser()`` or a parser's or control's name → (declaration, ctor args)."""
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            d = self.genv.type_decls.get(e.func.name)
            if isinstance(d, (ast.ParserDecl, ast.ControlDecl)):
                return d, e.args
            raise P4Error(e.loc, f"'{e.func.name}' is not a parser or control")
        if isinstance(e, ast.Name):
            d = self.genv.type_decls.get(e.name)
            if isinstance(d, (ast.ParserDecl, ast.ControlDecl)):
                return d, []
        raise P4Error(e.loc, "expected a parser or control instantiation")

    def set_arch_types(self, decl: ast.ParserDecl) -> None:
        if len(decl.params) != 4:
            raise P4Error(
                decl.loc,
                "a v1model parser takes (packet_in, out H, inout M, inout standard_metadata_t)",
            )
        ts = [self.genv.resolve(p.type) for p in decl.params]
        comps: list[TComposite] = []
        for t, p in zip(ts[1:], decl.params[1:], strict=False):
            if not isinstance(t, TComposite) or t.kind != "struct":
                raise P4Error(p.loc, f"parameter '{p.name}' must have a struct type")
            comps.append(t)
        self.hdr_type, self.meta_type, self.sm_type = comps

    def declare_top_instances(self) -> None:
        """Top-level extern instantiations (``register<..>(..) r;`` outside controls)."""
        for inst in self.genv.instantiations:
            if inst.name == "main":
                continue
            t = self.genv.resolve(inst.type)
            if isinstance(t, TExtern):
                sym = self.extern_instance(inst, t, "", None)
                self.genv.scope.names[inst.name] = sym

    # -- parser / control instances ---------------------------------------------------

    def instantiate(self, decl: Any, path: str, args: list, outer: Scope, top: bool = False) -> str:
        ident = next(self.ids)
        pyfn = f"{'prs' if isinstance(decl, ast.ParserDecl) else 'ctl'}_{ident}"
        scope = self.genv.scope.child()
        if decl.type_params:
            raise P4Error(decl.loc, "generic parsers/controls are not supported")
        if len(args) != len(decl.ctor_params):
            raise P4Error(
                decl.loc,
                f"'{decl.name}' takes {len(decl.ctor_params)} "
                f"constructor arguments, got {len(args)}",
            )
        for p, a in zip(decl.ctor_params, args, strict=False):
            inst_arg = self.instance_ctor_arg(p, a.value, path, outer)
            if inst_arg is not None:  # `C2(c1) c2;`: c2's parameter names the instance c1
                scope.names[p.name] = inst_arg
                continue
            t = self.genv.resolve(p.type)
            dummy = Fn(outer, "function", path)
            ev = self.value(a.value, dummy, t)
            if not ev.is_const:
                raise P4Error(a.loc, "constructor arguments must be compile-time constants")
            scope.names[p.name] = Sym("const", t, value=ev.const)
        inst = CtlInst(decl, path, ident, pyfn, scope, top=top)
        if isinstance(decl, ast.ParserDecl):
            self.gen_parser(inst)
        else:
            self.gen_control(inst)
        return pyfn

    def instance_ctor_arg(self, p: ast.Param, a: ast.Expr, path: str, outer: Scope) -> Sym | None:
        """A parser/control instance passed as a constructor argument (a declared
        instance's name, or ``C()`` which makes a new one); None for other parameters."""
        td = self.genv.type_decls.get(p.type.name) if isinstance(p.type, ast.NamedType) else None
        if not isinstance(
            td, (ast.ControlTypeDecl, ast.ParserTypeDecl, ast.ControlDecl, ast.ParserDecl)
        ):
            return None
        if isinstance(a, ast.Name):
            sym = outer.lookup(a.name)
            if sym is not None and sym.kind == "instance":
                return sym
        if isinstance(a, ast.Call) and isinstance(a.func, ast.Name):
            ad = self.genv.type_decls.get(a.func.name)
            if isinstance(ad, (ast.ControlDecl, ast.ParserDecl)):
                sub = self.instantiate(ad, f"{path}.{p.name}", a.args, outer)
                return Sym("instance", TObject("instance", p.name), sub, decl=ad)
        raise P4Error(a.loc, f"'{p.name}' needs a parser or control instance")

    def param_syms(self, inst: CtlInst, params: list[ast.Param], code_of: Any) -> None:
        for p in params:
            t = self.genv.resolve(p.type)
            code = code_of(p.name)
            inst.scope.declare(
                p.name, Sym("param", t, code, direction=p.direction or "in", decl=p), p.loc
            )
            if isinstance(t, TComposite) and t is self.sm_type:
                inst.sm_code = code
            if isinstance(t, TComposite) and t is self.meta_type:
                inst.meta_code = code

    def local_decls(self, inst: CtlInst, fn: Fn, init: Fn) -> None:
        """Control/parser-level declarations, in order (P4 is declare-before-use)."""
        for d in inst.decl.locals:
            if isinstance(d, ast.ConstDecl):
                t = self.genv.resolve(d.type)
                ev = self.value(d.value, fn, t)
                if not ev.is_const:
                    raise P4Error(d.value.loc, "a constant's value must be compile-time known")
                inst.scope.declare(d.name, Sym("const", t, value=ev.const), d.loc)
            elif isinstance(d, ast.VarDecl):
                self.declare_var(d, init, inst)
            elif isinstance(d, ast.Instantiation):
                self.local_instance(d, inst)
            elif isinstance(d, ast.ActionDecl):
                self.gen_action(d, inst)
            elif isinstance(d, ast.TableDecl):
                self.gen_table(d, inst)
            elif isinstance(d, ast.ValueSetDecl):
                self.gen_value_set(d, inst)
            elif isinstance(d, ast.FunctionDecl):
                raise P4Error(d.loc, "functions inside controls are not supported")
            else:
                raise P4Error(d.loc, f"unexpected declaration {type(d).__name__}")

    def resolve_param_divisions(self) -> None:
        """The / and % by a parameter: p4c accepts one when every call binds the
        parameter to what it needs (a power-of-two divisor, a zero dividend), through
        calls that pass their own parameters on, and the callee is no table's action
        (whose parameters are control-plane data); an action never used it removes."""
        tabled = {
            id(p)
            for ti in self.tables
            for name in ti.actions
            if (info := self.actions.get(name)) is not None and info.decl is not None
            for p in info.decl.params
        }

        def holds(param: int, want: str, seen: frozenset[int]) -> bool:
            if param in tabled or param in seen:
                return False
            for kind, v in self.call_arguments.get(param, []):
                if kind == "param":
                    ok = holds(v, want, seen | {param})
                else:
                    ok = power_of_two(v) if want == "power of two" else v is not NOCONST and v == 0
                if not ok:
                    return False
            return True

        for alts, error in self.param_divisions:
            if not any(holds(p, want, frozenset()) for p, want in alts):
                self.beyond_bmv2.append(error)

    def declare_var(self, d: ast.VarDecl, init: Fn, inst: CtlInst) -> None:
        t = self.genv.resolve(d.type)
        if isinstance(inst.decl, ast.ControlDecl):
            slot = f"v_{d.name}"
            inst.frame.append(slot)
            code = f"F.{slot}"
        else:
            code = init.new(f"v_{d.name}")
        if d.init is None:
            init.emit(f"{code} = {self.default(t)}")
        else:
            ev = self.value(d.init, init, t)
            init.emit(f"{code} = {self.fresh(ev.code, t, d.init)}")
            if ev.is_const and isinstance(t, TBit):
                init.known[code] = (ev.const, object())
        inst.scope.declare(d.name, Sym("var", t, code, decl=d), d.loc)

    def local_instance(self, d: ast.Instantiation, inst: CtlInst) -> None:
        if not isinstance(d.type, ast.NamedType):
            raise P4Error(d.loc, "bad instantiation")
        td = self.genv.type_decls.get(d.type.name)
        if isinstance(td, (ast.ParserDecl, ast.ControlDecl)):
            sub = self.instantiate(td, f"{inst.path}.{d.name}", d.args, inst.scope)
            inst.scope.declare(
                d.name, Sym("instance", TObject("instance", d.name), sub, decl=td), d.loc
            )
            return
        t = self.genv.resolve(d.type)
        if not isinstance(t, TExtern):
            raise P4Error(d.loc, f"cannot instantiate '{d.type.name}'")
        inst.scope.declare(d.name, self.extern_instance(d, t, inst.path, inst), d.loc)

    # -- parsers ------------------------------------------------------------------

    def gen_parser(self, inst: CtlInst) -> None:
        decl: ast.ParserDecl = inst.decl
        inst.frame = None  # type: ignore[assignment]  # parsers use Python locals
        self.param_syms(inst, decl.params, lambda n: f"v_{n}")
        fn = Fn(inst.scope, "parser", inst.path, ctl=inst)
        self.local_decls(inst, fn, fn)
        outs = [f"v_{p.name}" for p in decl.params if p.direction in ("out", "inout")]
        if outs and not inst.top:
            fn.ret = f"return ({''.join(o + ', ' for o in outs)})"
        states = {s.name: i for i, s in enumerate(decl.states)}
        if "start" not in states:
            raise P4Error(decl.loc, f"parser '{decl.name}' has no 'start' state")
        fn.emit(f"st = {states['start']}")
        cyclic = _has_cycle(decl.states)
        if cyclic:
            fn.emit("n = 0")
        fn.emit("while True:")
        fn.ind += 1
        if cyclic:  # a state loop that never consumes anything must not hang the switch
            fn.emit("n += 1")
            fn.emit(f"if n > {MAX_PARSER_STEPS}: raise ParserErr('ParserTimeout')")
        for i, s in enumerate(decl.states):
            fn.emit(f"{'if' if i == 0 else 'elif'} st == {i}:")
            fn.ind += 1
            if self.trace:
                msg = f"Parser '{inst.path}' entering state '{s.name}'"
                fn.emit(f"LOG({msg!r})")
            sfn = fn
            sfn.scope = inst.scope.child()
            sfn.known.clear()  # p4c propagates constants within a state, not across
            for st in s.stmts:
                self.stmt(st, sfn)
            self.transition(s, states, sfn)
            sfn.scope = inst.scope
            fn.ind -= 1
        fn.ind -= 1
        params = ", ".join(f"v_{p.name}" for p in decl.params)
        head = [f"def {inst.pyfn}({params}):"]
        if self.trace:
            head.append(f"    LOG({'Parser ' + repr(inst.path) + ': start'!r})")
        body = fn.lines
        if inst.top:
            keep = self.rebound_params(decl.params)
            head += [f"    a_{n} = v_{n}" for n in keep]
            body = _written_back(body, [(f"a_{n}", f"v_{n}") for n in keep])
        self.src.append("\n".join(head + body) + "\n")

    def rebound_params(self, params: list[ast.Param]) -> list[str]:
        """The out/inout header, struct and stack parameters of a top-level parser or
        control: the pipeline passes them by reference and ignores results, so a body that
        rebinds one (an assignment to it, the copy-out of a call) writes it back."""
        return [
            p.name
            for p in params
            if p.direction in ("out", "inout")
            and isinstance(self.genv.resolve(p.type), (TComposite, TStack))
        ]

    def transition(self, s: ast.ParserState, states: dict[str, int], fn: Fn) -> None:
        tr = s.transition
        if tr is None:
            raise P4Error(s.loc, f"state '{s.name}' has no transition")
        if isinstance(tr, ast.DirectTransition):
            fn.emit(self.goto(tr.state, states, tr.loc, fn.ret))
            return
        assert isinstance(tr, ast.SelectTransition)
        keys = [self.expr(e, fn) for e in tr.exprs]
        knames = []
        for k, e in zip(keys, tr.exprs, strict=False):
            if not isinstance(k.type, (TBit, TBool, TEnum)) and not k.is_const:
                raise P4Error(e.loc, f"cannot select on a value of type {k.type.show()}")
            kn = fn.new("k")
            fn.emit(f"{kn} = {k.code}")
            knames.append(kn)
        first = True
        for case in tr.cases:
            cond = self.keyset_cond(case.keyset, keys, knames, fn)
            if cond == "True":
                fn.emit("else:" if not first else "if True:")
                fn.ind += 1
                fn.emit(self.goto(case.state, states, case.loc, fn.ret))
                fn.ind -= 1
                return
            fn.emit(f"{'if' if first else 'elif'} {cond}:")
            fn.ind += 1
            fn.emit(self.goto(case.state, states, case.loc, fn.ret))
            fn.ind -= 1
            first = False
        fn.emit("raise ParserErr('NoMatch')" if first else "else:")
        if not first:
            fn.emit("    raise ParserErr('NoMatch')")

    def goto(
        self, state: str, states: dict[str, int], loc: ast.SourceLoc, ret: str = "return"
    ) -> str:
        if state == "accept":
            return ret
        if state == "reject":
            return "raise ParserErr(None)"
        if state not in states:
            raise P4Error(loc, f"unknown parser state '{state}'")
        return f"st = {states[state]}; continue"

    def keyset_cond(self, ks: ast.Expr, keys: list[EV], knames: list[str], fn: Fn) -> str:
        if isinstance(ks, (ast.Default, ast.DontCare)):
            return "True"
        if isinstance(ks, ast.Name):
            sym = fn.scope.lookup(ks.name)
            if sym is not None and sym.kind == "value_set":
                return f"{sym.code}.match(({''.join(k + ', ' for k in knames)}))"
        if len(keys) > 1:
            elems = ks.elems if isinstance(ks, ast.ListExpr) else None
            if elems is None or len(elems) != len(keys):
                raise P4Error(ks.loc, f"keyset needs {len(keys)} elements")
            triples = zip(elems, keys, knames, strict=False)
            conds = [self.one_key(x, k, kn, fn) for x, k, kn in triples]
            conds = [c for c in conds if c != "True"]
            return " and ".join(conds) if conds else "True"
        if isinstance(ks, ast.ListExpr) and len(ks.elems) == 1:
            ks = ks.elems[0]
        return self.one_key(ks, keys[0], knames[0], fn)

    def one_key(self, ks: ast.Expr, key: EV, kn: str, fn: Fn) -> str:
        t = key.type
        if isinstance(ks, (ast.Default, ast.DontCare)):
            return "True"
        if isinstance(ks, ast.Mask):
            v = self.value(ks.value, fn, t)
            m = self.value(ks.mask, fn, t)
            if v.is_const and m.is_const:
                return f"({kn} & {m.const}) == {v.const & m.const}"
            return f"({kn} & {m.code}) == ({v.code} & {m.code})"
        if isinstance(ks, ast.Range):
            lo, hi = self.value(ks.lo, fn, t), self.value(ks.hi, fn, t)
            return f"{lo.code} <= {kn} <= {hi.code}"
        v = self.value(ks, fn, t)
        return f"{kn} == {v.code}"

    # -- controls -----------------------------------------------------------------

    def gen_control(self, inst: CtlInst) -> None:
        decl: ast.ControlDecl = inst.decl
        self.param_syms(inst, decl.params, lambda n: f"F.v_{n}")
        inst.frame = [f"v_{p.name}" for p in decl.params]
        init = Fn(inst.scope, "control", inst.path, ctl=inst)
        self.local_decls(inst, init, init)
        body = Fn(inst.scope.child(), "control", inst.path, ctl=inst)
        body.known = dict(init.known)  # p4c propagates control-level initial values too
        outs = [f"F.v_{p.name}" for p in decl.params if p.direction in ("out", "inout")]
        if inst.top:
            outs = []  # the pipeline passes objects by reference and ignores results
        body.ret = f"return ({''.join(o + ', ' for o in outs)})" if outs else "return"
        self.block(decl.body, body)
        frame = f"Frame_{inst.ident}"
        params = ", ".join(f"a_{p.name}" for p in decl.params)
        lines = [
            f"class {frame}:",
            f"    __slots__ = {tuple(inst.frame)!r}",
            f"def {inst.pyfn}({params}):",
            f"    F = {frame}()",
        ]
        lines += [f"    F.v_{p.name} = a_{p.name}" for p in decl.params]
        if self.trace:
            lines.append(f"    LOG({'Pipeline ' + repr(inst.path) + ': start'!r})")
        if inst.top:
            keep = [(f"a_{n}", f"F.v_{n}") for n in self.rebound_params(decl.params)]
            lines += _written_back(init.lines + body.lines, keep)
        else:
            lines += init.lines + body.lines
        if outs:
            lines.append("    " + body.ret)
        self.src.append("\n".join(lines) + "\n")

    # -- actions ------------------------------------------------------------------

    def gen_action(self, d: ast.ActionDecl, inst: CtlInst | None) -> str:
        """Compile an action for a control instance (top-level actions: once per control
        instance that uses them); returns the Python function name."""
        path = inst.path if inst is not None and any(x is d for x in inst.decl.locals) else ""
        fq = fq_name(path, d.name, d.annotations)
        ident = next(self.ids)
        pyfn = f"act_{ident}_{pyname(d.name)}"
        outer = inst.scope if (inst is not None and path) else self.genv.scope
        scope = outer.child()
        params = []
        infos = []
        for p in d.params:
            t = self.genv.resolve(p.type)
            code = f"v_{p.name}"
            scope.declare(
                p.name, Sym("param", t, code, direction=p.direction or "in", decl=p), p.loc
            )
            params.append(code)
            if not p.direction:
                width = (
                    t.width
                    if isinstance(t, TBit)
                    else (
                        1
                        if isinstance(t, TBool)
                        else getattr(getattr(t, "underlying", None), "width", 0)
                    )
                )
                infos.append((p.name, width, p))
        fn = Fn(scope, "action", path or (inst.path if inst else ""), ctl=inst)
        outs = [f"v_{p.name}" for p in d.params if p.direction in ("out", "inout")]
        fn.ret = f"return ({''.join(o + ', ' for o in outs)})" if outs else "return"
        if self.trace:
            fn.emit(
                f"LOG('Action ' + {fq!r}"
                + "".join(
                    f" + ' {n}=' + hex({c})" for (n, _, _), c in zip(infos, params, strict=False)
                )
                + ")"
            )
        self.block(d.body, fn)
        if outs:
            fn.emit(fn.ret)
            # `exit` still copies out/inout parameters out (p4c, BMv2): hand their values
            # to the call site on the ExitSignal (see call_with_dirs)
            fn.lines = (
                ["    try:"]
                + ["    " + line for line in fn.lines]
                + ["    except ExitSignal as _x:", f"        _x.outs = ({', '.join(outs)},)"]
                + ["        raise"]
            )
        head = f"def {pyfn}(F{''.join(', ' + p for p in params)}):"
        self.src.append(head + "\n" + ("\n".join(fn.lines) or "    pass") + "\n")
        if fq not in self.actions:
            self.actions[fq] = ActionInfo(
                fq,
                [(n, w) for n, w, _ in infos],
                d,
                annotations=d.annotations,
                owner=inst.path.split(".")[0] if inst is not None else "",
                top_level=not path,
            )
        if inst is not None:
            inst.actions[d.name] = (pyfn, fq)
            if path:  # control-local actions are names of the control's scope
                inst.scope.declare(
                    d.name,
                    Sym("action", TObject("action", d.name), pyfn, decl=d, extra={"fq": fq}),
                    d.loc,
                )
        return pyfn

    def action_ref(self, name: str, inst: CtlInst, loc: ast.SourceLoc) -> tuple[str, str, Any]:
        """(python function, fq name, decl) of an action visible in ``inst``."""
        if name in inst.actions:
            py, fq = inst.actions[name]
            sym = inst.scope.lookup(name)
            return py, fq, sym.decl if sym is not None else None
        d = self.genv.actions.get(name)
        if d is None:
            raise P4Error(loc, f"unknown action '{name}'")
        py = self.gen_action(d, inst)
        return py, inst.actions[name][1], d

    def fresh(self, code: str, t: T, e: ast.Node) -> str:
        """A copy of a composite value unless the code already builds a new one."""
        if isinstance(t, (TComposite, TStack)):
            if code.startswith(("mk_", "C_", "Stack(")) or code.endswith(".copy()"):
                return code
            return f"{code}.copy()"
        if isinstance(t, TTuple) and not code.startswith("("):
            return f"_copy_tuple({code})"
        return code

    # -- module assembly ----------------------------------------------------------

    def collect_field_lists(self) -> None:
        """``@field_list(N)`` annotations on the user metadata fields → paths."""

        def walk(t: TComposite, prefix: str) -> None:
            annos_all = t.field_annotations or [()] * len(t.fields)
            for (n, ft), annos in zip(t.fields, annos_all, strict=False):
                path = f"{prefix}.{pyname(n)}"
                a = annotation(list(annos), "field_list")
                if a is not None:
                    for arg in a.args:
                        idx = self.genv.const_int(arg)
                        self.field_lists.setdefault(idx, []).append(path)
                if isinstance(ft, TComposite) and ft.kind == "struct":
                    walk(ft, path)

        if self.meta_type is not None:
            walk(self.meta_type, "")

    def assemble(self) -> str:
        fl = ["def _fl_save(i, m):"]
        fl_r = ["def _fl_restore(i, m, vals):"]
        for idx, paths in sorted(self.field_lists.items()):
            fl.append(f"    if i == {idx}: return ({''.join('m' + p + ', ' for p in paths)})")
            fl_r.append(f"    if i == {idx}:")
            for k, p in enumerate(paths):
                fl_r.append(f"        m{p} = vals[{k}]")
            fl_r.append("        return")
        fl.append("    return ()")
        fl_r.append("    return")
        parts = (
            [PRELUDE] + self.types.src + self.src + ["\n".join(fl) + "\n", "\n".join(fl_r) + "\n"]
        )
        return "\n".join(parts)


MAX_PARSER_STEPS = 4096


def _written_back(body: list[str], pairs: list[tuple[str, str]]) -> list[str]:
    """``body`` (lines of a function, indented once) run so that on every way out each
    (argument, variable) pair whose variable was rebound writes its value into the
    argument object."""
    pairs = [(a, v) for a, v in pairs if any(ln.lstrip().startswith(v + " = ") for ln in body)]
    if not pairs:
        return body
    back = [f"        if {v} is not {a}: _write_back({a}, {v})" for a, v in pairs]
    return ["    try:"] + ["    " + line for line in body or ["    pass"]] + ["    finally:"] + back


def _has_cycle(states: list[ast.ParserState]) -> bool:
    """True when the parser's state graph has a loop (header stacks, TLV options ...)."""
    succ: dict[str, set[str]] = {}
    for s in states:
        tr = s.transition
        if isinstance(tr, ast.DirectTransition):
            succ[s.name] = {tr.state}
        elif isinstance(tr, ast.SelectTransition):
            succ[s.name] = {c.state for c in tr.cases}
        else:
            succ[s.name] = set()
    seen: dict[str, int] = {}

    def visit(n: str) -> bool:
        seen[n] = 1
        for m in succ.get(n, ()):
            if seen.get(m) == 1 or (m not in seen and m in succ and visit(m)):
                return True
        seen[n] = 2
        return False

    return any(visit(n) for n in succ if n not in seen)


PRELUDE = """\
# Generated by p4sim.compiler.codegen - do not edit.
from p4sim.compiler.rt import (ParserErr, ExitSignal, P4AssertionError, Stack, signed,
                               sat_add, sat_sub, format_log, csum16_int,
                               sdiv as _sdiv, smod as _smod)
import random as _random
import struct as _struct
_new = object.__new__

def _write_back(obj, val):
    for s in type(obj).__slots__:
        setattr(obj, s, getattr(val, s))

def _copy_tuple(t):
    return tuple(x.copy() if hasattr(x, "copy") else x for x in t)

def _stack_at(s, i):
    if 0 <= i < s.size:
        return s.h[i]
    return type(s.h[0])()  # out of bounds: reads see an invalid header

def _stack_next(s):
    if s.nextIndex >= s.size:
        raise ParserErr("StackOutOfBounds")
    return s.h[s.nextIndex]

def _stack_last(s):
    if s.nextIndex == 0:
        raise ParserErr("StackOutOfBounds")
    return s.h[s.nextIndex - 1]

def _stack_lastc(s):
    return _stack_at(s, s.nextIndex - 1)

def _stack_set(s, i, v):
    if 0 <= i < s.size:  # out-of-bounds writes have no effect
        s.h[i] = v

def _randint(lo, hi):
    return _random.randint(lo, hi) if lo <= hi else lo
"""


def compile_program(
    program: ast.Program, trace: bool = False, target: str = "bmv2"
) -> CompiledProgram:
    """Type-check and compile ``program`` (P4Error on a mistake in it). ``target`` "bmv2"
    also refuses what p4c's BMv2 back end refuses (``bmv2_target``); "p4sim" runs every
    program p4sim itself can."""
    from p4sim.compiler.bmv2_target import TARGETS, check_bmv2

    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
    compiler = Compiler(program, trace)
    compiled = compiler.compile()
    if target == "bmv2":
        blocks = [decl for decl, _ in compiler.main_blocks(compiler.find_main())]
        compiler.resolve_param_divisions()
        check_bmv2(program, blocks, (compiler.hdr_type, compiler.meta_type), compiler.beyond_bmv2)
    return compiled


__all__ = ["Compiler", "Fn", "CtlInst", "compile_program", "fq_name", "lit"]
