"""C code generation for the native back end: a v1model program → one C source file.

Example::

    gen = CGen(program_ast, compiled)      # compiled: the Python back end's CompiledProgram
    src = gen.generate()                   # Unsupported("...") for constructs not covered

Covers what the repository's aggregation and forwarding programs use: fixed-width headers
(values of up to 128 bits; header fields wider than that only parsed, copied, compared
and emitted, as 64-bit chunks), header stacks and structs, parsers with extract/select/verify,
controls with locals, actions, exact/lpm/ternary/optional/range tables (direct counters),
registers, indexed
counters, sub-control instances (constructor parameters too), mark_to_drop, checksums
(also with the payload), multicast
and ``exit``. Anything else raises :class:`Unsupported`, and the switch runs the program
on the Python back end instead (one line says why).

Every scalar is a ``uint64_t`` (bit<65..128>: ``unsigned __int128``) masked to its P4
width (``bool`` is 0/1; ``int<W>`` is its W-bit two's-complement pattern, sign-extended
where an operation reads it as signed), so that the arithmetic is the Python back end's
(which keeps ints masked) modulo 2**64 (2**128). Headers and
structs are C structs of such fields; headers add ``valid_``.

This module holds the program, its instances, parsers, controls, tables, statements and
the assembly of the C file; ``cg_cexpr`` (expressions), ``cg_cmethods`` (methods and
extern calls), ``clayout`` (bit layout and widths) and the other ``cg_*`` mixins (loops,
functions, action profiles, replication, meters and digests, varbit) hold the rest.
"""

from __future__ import annotations

import re
from typing import Any

from p4sim.compiler.codegen import fq_name
from p4sim.compiler.program import CompiledProgram
from p4sim.compiler.typecheck import (
    GlobalEnv,
    T,
    TBit,
    TBool,
    TComposite,
    TEnum,
    TError,
    TExtern,
    TStack,
    TTuple,
    TVarbit,
)
from p4sim.frontend import ast
from p4sim.native.cg_cexpr import ExprMixin
from p4sim.native.cg_cmethods import MethodsMixin
from p4sim.native.cg_functions import FunctionsMixin, run_time_index
from p4sim.native.cg_loops import LoopsMixin
from p4sim.native.cg_pipeline import PIPELINE, SIMPLE
from p4sim.native.cg_profiles import RUNTIME as PROFILES
from p4sim.native.cg_profiles import ProfilesMixin
from p4sim.native.cg_replication import QUEUED, REQUESTS, ReplicationMixin
from p4sim.native.cg_stateful import RUNTIME as STATEFUL
from p4sim.native.cg_stateful import StatefulMixin
from p4sim.native.cg_varbit import RUNTIME as VARBIT
from p4sim.native.cg_varbit import VarbitMixin
from p4sim.native.clayout import CHECKSUMS, WIDE, _chunked, _field_leaves, _walk, _width
from p4sim.native.cvalues import Ctl, Unsupported, V, _lit, _mask, has_fx
from p4sim.runtime.tables import MATCH_KINDS


class CGen(
    ExprMixin,
    MethodsMixin,
    FunctionsMixin,
    LoopsMixin,
    ProfilesMixin,
    ReplicationMixin,
    StatefulMixin,
    VarbitMixin,
):
    """Generates the C source of one program (see the module docstring)."""

    def __init__(self, program: ast.Program, compiled: CompiledProgram) -> None:
        self.program = program
        self.compiled = compiled
        self.genv = GlobalEnv(program)
        self.out: list[str] = []  # function definitions
        self.decls: list[str] = []  # globals and prototypes
        self.types: dict[int, str] = {}
        self.tuples: dict[TTuple, str] = {}
        self.aliases: dict[int, V] = {}  # AST node id → its value (compound assignment)
        self.exiting: set[int] = set()  # ids of actions that may exit (directly or by a call)
        self.meters: list[tuple[str, int]] = []  # (fq, size), index = C meter number
        self.digest_names: list[str] = []  # digest struct names, index = C digest id
        self.type_src: list[str] = []
        self.ids = 0
        self.tables: list[str] = []  # fq names, index = C table number
        self.registers: list[tuple[str, int, int]] = []  # (fq, width, size)
        self.counters: list[tuple[str, int]] = []  # (fq, size)
        self.global_scope: dict[str, V] = {}  # top-level registers and counters
        self.vsets: list[str] = []  # parser value sets: fq names, index = C value set
        self.errors = list(self.genv.errors)
        self.table_names = {t.name: t for t in compiled.tables}
        self.extern_names = {e.name: e for e in compiled.externs}
        self.cur: Ctl | None = None
        self.locals: list[dict[str, V]] = []
        self.hdr_t: TComposite | None = None
        self.meta_t: TComposite | None = None
        self.stacks: dict[tuple[int, int], tuple[str, str]] = {}
        self.stack_err: str | None = None  # p4n_stkerr once a parser can raise it
        self.sm_t: TComposite | None = None

    # -- helpers --------------------------------------------------------------------

    def new(self, base: str) -> str:
        self.ids += 1
        return f"{base}_{self.ids}"

    def ctype(self, t: Any) -> str:
        if isinstance(t, (TBit, TBool, TError, TEnum)):  # a plain enum: its member's index
            if isinstance(t, TBit) and t.width > 64:
                if t.width > WIDE:
                    raise Unsupported(f"type {t.show()} (wider than {WIDE} bits)")
                if t.signed:
                    raise Unsupported(f"type {t.show()} (signed, wider than 64 bits)")
                return "u128"
            return "u64"
        if isinstance(t, TComposite):
            return self.struct(t)
        if isinstance(t, TStack):
            return self.stack_struct(t)[0]
        if isinstance(t, TTuple):
            return self.tuple_struct(t)
        if isinstance(t, TVarbit):
            return self.varbit_struct(t)
        raise Unsupported(f"type {t.show()}")

    def tuple_struct(self, t: TTuple) -> str:
        """A tuple as a C struct of its elements ``e0``, ``e1``, ... (one per tuple type)."""
        got = self.tuples.get(t)
        if got is not None:
            return got
        members = [f"{self.ctype(et)} e{i};" for i, et in enumerate(t.elems)]
        name = f"tup_{len(self.tuples)}"
        self.tuples[t] = name
        self.type_src.append(
            f"typedef struct {name} {{ {' '.join(members) or 'u64 empty_;'} }} {name};"
        )
        return name

    def stack_struct(self, t: TStack) -> tuple[str, str]:
        """(C struct, scratch element) of a header stack: ``e[size]`` and ``next_`` (the
        P4 nextIndex); the scratch element is what an out-of-range index reads (zeroed,
        invalid) and writes (lost), as the Python back end's ``_stack_at``/``_stack_set``."""
        key = (id(t.elem), t.size)
        got = self.stacks.get(key)
        if got is not None:
            return got
        if not (isinstance(t.elem, TComposite) and t.elem.kind in ("header", "union")):
            raise Unsupported(f"stack of {t.elem.show()}")
        et = self.ctype(t.elem)
        name = f"stk_{et}_{t.size}"
        self.type_src.append(
            f"typedef struct {name} {{ {et} e[{t.size}]; u64 next_; }} {name};\n"
            f"static {et} {name}_oob;"
        )
        self.stacks[key] = (name, f"{name}_oob")
        return self.stacks[key]

    def stack_at(self, b: V, idx: str) -> V:
        """Element ``idx`` (a C expression without side effects) of the stack ``b``."""
        t: TStack = b.type
        oob = self.stack_struct(t)[1]
        return V(
            f"(*(({idx}) < {t.size} ? &{b.code}.e[{idx}] : "
            f"(memset(&{oob}, 0, sizeof {oob}), &{oob})))",
            t.elem,
        )

    def stack_error(self, b: V, cond: str, idx: str) -> V:
        """In a parser: element ``idx`` of ``b``, or StackOutOfBounds when ``cond``."""
        t: TStack = b.type
        et = self.ctype(t.elem)
        if self.stack_err is None:
            self.stack_err = "p4n_stkerr"
            code = self.error_code("StackOutOfBounds")
            self.decls.append(
                f"static void *p4n_stkerr(void) {{ p4n_perr = {code}; longjmp(p4n_pjmp, 1); "
                "return NULL; }"
            )
        return V(f"(*({cond} ? ({et} *)p4n_stkerr() : &{b.code}.e[{idx}]))", t.elem)

    def struct(self, t: TComposite) -> str:
        """A header (fields and ``valid_``), struct or header union (its member headers,
        whose ``valid_`` say which one is valid) as a C struct."""
        if t.kind == "union" and not all(
            isinstance(ft, TComposite) and ft.kind == "header" for _, ft in t.fields
        ):
            raise Unsupported(f"header union {t.name} of non-headers")
        got = self.types.get(id(t))
        if got is not None:
            return got
        name = "s_" + re.sub(r"\W", "_", t.name) + f"_{len(self.types)}"
        self.types[id(t)] = name
        lines = [f"typedef struct {name} {{"]
        for n, ft in t.fields:
            if t.kind == "header" and _chunked(ft):  # only extracted, emitted and copied
                lines += [f"    u64 {c};" for c, _ in _field_leaves("", n, ft)]
                continue
            lines.append(f"    {self.ctype(ft)} f_{n};")
        if t.kind == "header":
            fixed = [ft for _, ft in t.fields if not isinstance(ft, TVarbit)]
            if sum(_width(ft) for ft in fixed) % 8:
                if len(fixed) < len(t.fields):
                    raise Unsupported(f"header {t.name} with a varbit, not of whole bytes")
                # p4c's BMv2 `_padding`: the bits up to a whole byte, read and written back
                lines.append("    u64 pad_;")
            lines.append("    u64 valid_;")
        if len(lines) == 1:
            lines.append("    u64 empty_;")
        lines.append(f"}} {name};")
        self.type_src.append("\n".join(lines))
        return name

    def lookup(self, name: str) -> V | None:
        for sc in reversed(self.locals):
            if name in sc:
                return sc[name]
        if self.cur is not None and name in self.cur.scope:
            return self.cur.scope[name]
        if name in self.global_scope:
            return self.global_scope[name]
        sym = self.genv.const_sym(name)
        if sym is not None and sym.kind == "const":
            v = sym.value
            if isinstance(v, bool):
                return V("1ULL" if v else "0ULL", sym.type, int(v))
            if isinstance(v, int):
                t = sym.type
                if isinstance(t, TBit):
                    v &= _mask(t.width)
                return V(_lit(v) if v >= 0 else str(v), t, v)
            raise Unsupported(f"constant {name} of type {sym.type.show()}")
        return None

    # -- program --------------------------------------------------------------------

    def generate(self) -> str:
        main = next((d for d in self.genv.instantiations if d.name == "main"), None)
        if main is None or len(main.args) != 6:
            raise Unsupported("no V1Switch main")
        # top-level registers and counters: one instance each, shared by every control
        top = Ctl(decl=None, path="", ident=-1, scope=self.global_scope)
        for inst in self.genv.instantiations:
            if inst.name == "main" or self.block_decl(inst.type) is not None:
                continue  # parsers and controls: instantiated where main or a block uses them
            if not isinstance(inst.type, ast.NamedType) or inst.type.name not in (
                "register",
                "counter",
            ):
                raise Unsupported("top-level instances other than registers and counters")
            self.local_instance(inst, top)
        roles = [self.main_block(a.value) for a in main.args]
        prs: Any = roles[0][0]
        ts = [self.genv.resolve(p.type) for p in prs.params[1:]]
        self.hdr_t, self.meta_t, self.sm_t = ts  # type: ignore[assignment]
        hn, mn, sn = (self.ctype(t) for t in ts)
        names = ["parser", "verify", "ingress", "egress", "compute", "deparser"]
        fns = {}
        for role, (d, args) in zip(names, roles, strict=True):
            fns[role] = self.instantiate(d, d.name, args)
        return self.assemble(hn, mn, sn, fns)

    def block_decl(self, t: Any) -> Any:
        """The parser/control declaration a type names, or None."""
        d = self.genv.type_decls.get(t.name) if isinstance(t, ast.NamedType) else None
        return d if isinstance(d, (ast.ControlDecl, ast.ParserDecl)) else None

    def main_block(self, e: ast.Expr) -> tuple[Any, list]:
        """An argument of V1Switch, ``Block(args)`` → (declaration, constructor arguments),
        as the Python back end reads it (a parser or control is never a top-level instance:
        the type checker refuses that, as p4c does)."""
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            d = self.genv.type_decls.get(e.func.name)
            if isinstance(d, (ast.ControlDecl, ast.ParserDecl)):
                return d, e.args
        raise Unsupported("a V1Switch argument other than a parser/control instance")

    def instantiate(self, decl: Any, path: str, args: list) -> Ctl:
        if decl.type_params:
            raise Unsupported("generic parsers/controls")
        if len(args) != len(decl.ctor_params):
            raise Unsupported(f"{decl.name}: constructor arguments")
        # constructor arguments in the instantiating block's scope: constants, or
        # parser/control instances (a name, or `C()` making one of the parameter's own)
        bound = {
            p.name: self.ctor_arg(p, a.value, path)
            for p, a in zip(decl.ctor_params, args, strict=True)
        }
        self.ids += 1
        c = Ctl(decl, path, self.ids, scope=bound)
        saved, saved_locals = self.cur, self.locals
        self.cur, self.locals = c, []
        try:
            if isinstance(decl, ast.ParserDecl):
                self.gen_parser(c)
            else:
                self.gen_control(c)
        finally:
            self.cur, self.locals = saved, saved_locals
        return c

    def ctor_arg(self, p: ast.Param, a: ast.Expr, path: str) -> V:
        td = self.genv.type_decls.get(p.type.name) if isinstance(p.type, ast.NamedType) else None
        if isinstance(
            td, (ast.ControlTypeDecl, ast.ParserTypeDecl, ast.ControlDecl, ast.ParserDecl)
        ):
            if isinstance(a, ast.Name):
                v = self.lookup(a.name)
                if v is not None and v.obj is not None and v.obj[0] == "instance":
                    return v
            if isinstance(a, ast.Call) and isinstance(a.func, ast.Name):
                ad = self.genv.type_decls.get(a.func.name)
                if isinstance(ad, (ast.ControlDecl, ast.ParserDecl)):
                    sub = self.instantiate(ad, f"{path}.{p.name}", a.args)
                    return V("", None, obj=("instance", sub))
            raise Unsupported(f"constructor argument {p.name}")
        t = self.genv.resolve(p.type)
        v = self.value(a, t)
        if v.const is None:
            raise Unsupported(f"constructor argument {p.name} not a constant")
        c = v.const & _mask(t.width) if isinstance(t, TBit) else v.const
        return V(_lit(c) if c >= 0 else str(c), t, c)

    def params(self, c: Ctl, params: list[ast.Param]) -> list[str | None]:
        """Control/parser parameters become globals of the instance (pointers) set on
        entry; None for the packet_in/packet_out parameter."""
        sets: list[str | None] = []
        for p in params:
            t = self.genv.resolve(p.type)
            if isinstance(t, TExtern) or (
                isinstance(p.type, ast.NamedType)
                and p.type.name
                in (
                    "packet_in",
                    "packet_out",
                )
            ):
                c.scope[p.name] = V("", t, obj=("packet",))
                sets.append(None)
                continue
            g = f"P{c.ident}_{p.name}"
            ct = self.ctype(t)
            self.decls.append(f"static {ct} *{g};")
            c.scope[p.name] = V(f"(*{g})", t)
            sets.append(g)
        return sets

    def local_decls(self, c: Ctl, init: list[str]) -> None:
        for d in c.decl.locals:
            if isinstance(d, ast.ConstDecl):
                t = self.genv.resolve(d.type)
                v = self.expr(d.value, t)
                if v.const is None:
                    raise Unsupported("non-constant const")
                c.scope[d.name] = V(_lit(v.const), t, v.const)
            elif isinstance(d, ast.VarDecl):
                t = self.genv.resolve(d.type)
                g = f"L{c.ident}_{d.name}"
                self.decls.append(f"static {self.ctype(t)} {g};")
                c.scope[d.name] = V(g, t)
                init.extend(self.var_init(g, t, d.init))
            elif isinstance(d, ast.Instantiation):
                self.local_instance(d, c)
            elif isinstance(d, ast.ValueSetDecl):
                t = self.genv.resolve(d.elem_type)
                fields = t.fields if isinstance(t, TComposite) else [("", t)]
                if not all(isinstance(ft, TBit) and ft.width <= 64 for _, ft in fields):
                    raise Unsupported(f"value set of {t.show()}")
                fq = fq_name(c.path, d.name, d.annotations)
                c.scope[d.name] = V("", None, obj=("vset", len(self.vsets), len(fields)))
                self.vsets.append(fq)
            elif isinstance(d, ast.ActionDecl):
                self.gen_action(d, c)
            elif isinstance(d, ast.TableDecl):
                self.gen_table(d, c)
            else:
                raise Unsupported(f"declaration {type(d).__name__}")

    def var_init(self, code: str, t: T, e: ast.Expr | None) -> list[str]:
        if e is None:
            if isinstance(t, (TComposite, TStack, TTuple, TVarbit)):
                return [f"memset(&{code}, 0, sizeof {code});"]
            return [f"{code} = 0;"]
        v = self.value(e, t)
        return [f"{code} = {v.code};"]

    def local_instance(self, d: ast.Instantiation, c: Ctl) -> None:
        if not isinstance(d.type, ast.NamedType):
            raise Unsupported("instantiation")
        td = self.genv.type_decls.get(d.type.name)
        if isinstance(td, ast.ControlDecl) or (
            isinstance(td, ast.ParserDecl) and isinstance(c.decl, ast.ParserDecl)
        ):
            sub = self.instantiate(td, f"{c.path}.{d.name}", d.args)
            c.scope[d.name] = V("", None, obj=("instance", sub))
            return
        kind = d.type.name
        fq = fq_name(c.path, d.name, d.annotations)
        info = self.extern_names.get(fq)
        if info is None:
            raise Unsupported(f"extern {fq}")
        if kind == "register":
            w = info.width
            if w > 64:
                raise Unsupported("registers wider than 64 bits")
            n = len(self.registers)
            self.registers.append((fq, w, info.size))
            self.decls.append(f"static u64 *R{n};")
            c.scope[d.name] = V(f"R{n}", None, obj=("register", n, w, info.size))
        elif kind == "counter":
            n = len(self.counters)
            self.counters.append((fq, info.size))
            self.decls.append(f"static u64 *K{n};")
            c.scope[d.name] = V(f"K{n}", None, obj=("counter", n, info.size))
        elif kind == "direct_counter":
            c.scope[d.name] = V("", None, obj=("direct_counter",))
        elif kind == "direct_meter":
            c.scope[d.name] = V("", None, obj=("direct_meter",))
        elif kind == "meter":
            c.scope[d.name] = self.meter_instance(fq, info)
        elif kind in ("action_profile", "action_selector"):  # laid out with their tables
            c.scope[d.name] = V("", None, obj=("profile",))
        else:
            raise Unsupported(f"extern {kind}")

    # -- parser ---------------------------------------------------------------------

    def gen_parser(self, c: Ctl) -> None:
        d: ast.ParserDecl = c.decl
        sets = self.params(c, d.params)
        init: list[str] = []
        body: list[str] = []
        self.locals = [{}]
        self.local_decls(c, init)
        states = {s.name: i for i, s in enumerate(d.states)}
        if "start" not in states:
            raise Unsupported("parser without start")
        for s in d.states:
            body.append(f"st_{s.name}: ;")
            self.locals.append({})
            for st in s.stmts:
                body.extend(self.stmt(st))
            body.extend(self.transition(s))
            self.locals.pop()
        c.fn = f"prs_{c.ident}"
        ps = ", ".join(f"void *a{i}" for i in range(len(sets))) or "void"
        lines = [f"static void {c.fn}({ps}) {{"]
        lines += [f"    {g} = a{i};" for i, g in enumerate(sets) if g]
        lines += ["    " + x for x in init]
        lines += ["    goto st_start;"] + ["    " + x for x in body]
        lines += ["p_accept: return;", "}"]
        self.out.append("\n".join(lines))

    def transition(self, s: ast.ParserState) -> list[str]:
        tr = s.transition
        if isinstance(tr, ast.DirectTransition):
            return [self.goto(tr.state)]
        if not isinstance(tr, ast.SelectTransition):
            raise Unsupported("transition")
        keys = [self.expr(e) for e in tr.exprs]
        out = []
        kn = []
        for k in keys:
            n = self.new("k")
            out.append(
                f"{{ {self.ctype(k.type) if isinstance(k.type, TBit) else 'u64'} {n} = {k.code};"
            )
            kn.append(n)
        for case in tr.cases:
            cond = self.keyset(case.keyset, keys, kn)
            out.append(f"if ({cond}) {self.goto(case.state)}")
        out.append(f"p4n_perr = {self.error_code('NoMatch')}; return;")
        out.append("}" * len(keys))
        return out

    def goto(self, state: str) -> str:
        if state == "accept":
            return "goto p_accept;"
        if state == "reject":
            return "{ p4n_rej = 1; return; }"
        return f"goto st_{state};"

    def keyset(self, ks: ast.Expr, keys: list[V], kn: list[str]) -> str:
        if isinstance(ks, (ast.Default, ast.DontCare)):
            return "1"
        vs = self.lookup(ks.name) if isinstance(ks, ast.Name) else None
        if vs is not None and vs.obj is not None and vs.obj[0] == "vset":
            if vs.obj[2] != len(keys):
                raise Unsupported("value set of another shape than its select key")
            return f"p4n_vset_match({vs.obj[1]}, (const u64[]){{{', '.join(kn)}}})"
        if len(keys) > 1:
            if not isinstance(ks, ast.ListExpr) or len(ks.elems) != len(keys):
                raise Unsupported("keyset")
            conds = [self.one_key(x, k, n) for x, k, n in zip(ks.elems, keys, kn, strict=True)]
            return " && ".join(conds)
        if isinstance(ks, ast.ListExpr) and len(ks.elems) == 1:
            ks = ks.elems[0]
        return self.one_key(ks, keys[0], kn[0])

    def one_key(self, ks: ast.Expr, k: V, n: str) -> str:
        if isinstance(ks, (ast.Default, ast.DontCare)):
            return "1"
        if isinstance(ks, ast.Mask):
            v, m = self.value(ks.value, k.type), self.value(ks.mask, k.type)
            return f"(({n} & {m.code}) == ({v.code} & {m.code}))"
        if isinstance(ks, ast.Range):
            lo, hi = self.value(ks.lo, k.type), self.value(ks.hi, k.type)
            return f"({lo.code} <= {n} && {n} <= {hi.code})"
        if isinstance(ks, ast.Name) and self.lookup(ks.name) is None:
            raise Unsupported("parser value sets")
        v = self.value(ks, k.type)
        return f"({n} == {v.code})"

    def error_code(self, name: str) -> str:
        if name not in self.errors:
            self.errors.append(name)
        return str(self.errors.index(name))

    # -- controls -------------------------------------------------------------------

    def gen_control(self, c: Ctl) -> None:
        d: ast.ControlDecl = c.decl
        sets = self.params(c, d.params)
        init: list[str] = []
        self.locals = [{}]
        self.local_decls(c, init)
        body = self.block(d.body)
        c.fn = f"ctl_{c.ident}"
        ps = ", ".join(f"void *a{i}" for i in range(len(sets))) or "void"
        lines = [f"static void {c.fn}({ps}) {{"]
        lines += [f"    {g} = a{i};" for i, g in enumerate(sets) if g]
        lines += ["    " + x for x in init + body]
        lines.append("}")
        self.out.append("\n".join(lines))

    def gen_action(self, d: ast.ActionDecl, c: Ctl) -> tuple[str, str, Any]:
        local = any(x is d for x in c.decl.locals)
        path = c.path if local else ""
        fq = fq_name(path, d.name, d.annotations)
        cfn = self.new(f"act_{re.sub(r'[^A-Za-z0-9_]', '_', d.name)}")
        self.locals.append({})
        ps = []
        if any(
            isinstance(x, ast.Exit)
            or (
                isinstance(x, ast.CallStmt)
                and isinstance(x.call.func, ast.Name)
                and (x.call.func.name in self.genv.actions or x.call.func.name in c.actions)
            )
            for x in _walk(d.body)
        ):  # its callers copy out on an exit too (exit_guard)
            self.exiting.add(id(d))
        for p in d.params:
            t = self.genv.resolve(p.type)
            if p.direction in ("out", "inout") or (
                p.direction == "in" and isinstance(t, (TComposite, TStack))
            ):  # the caller passes a copy (out/inout: written back after the call)
                n = f"p_{p.name}"
                ps.append(f"{self.ctype(t)} *{n}")
                self.locals[-1][p.name] = V(f"(*{n})", t)
                continue
            self.ctype(t)
            if isinstance(t, TComposite):
                raise Unsupported("composite action parameters")
            if isinstance(t, TBit) and (t.signed or t.width > 64):
                raise Unsupported(f"action parameters of type {t.show()}")
            n = f"a_{p.name}"
            ps.append(f"u64 {n}")
            self.locals[-1][p.name] = V(n, t)
        body = self.block(d.body)
        self.locals.pop()
        self.decls.append(f"static void {cfn}({', '.join(ps) or 'void'});")
        self.out.append(
            f"static void {cfn}({', '.join(ps) or 'void'}) {{\n"
            + "\n".join("    " + x for x in body)
            + "\n}"
        )
        c.actions[d.name] = (cfn, fq, d)
        return c.actions[d.name]

    def action_ref(self, name: str) -> tuple[str, str, Any]:
        c = self.cur
        assert c is not None
        if name in c.actions:
            return c.actions[name]
        d = self.genv.actions.get(name)
        if d is None:
            raise Unsupported(f"action {name}")
        saved = self.locals
        self.locals = []
        try:
            return self.gen_action(d, c)
        finally:
            self.locals = saved

    def gen_table(self, d: ast.TableDecl, c: Ctl) -> None:
        fq = fq_name(c.path, d.name, d.annotations)
        info = self.table_names.get(fq)
        if info is None:
            raise Unsupported(f"table {fq}")
        for p in d.properties:
            if p.name not in ("size", "counters", "meters", "support_timeout", "implementation"):
                raise Unsupported(f"table property {p.name}")
        keys = []
        matched = [k for k in d.keys if k.match_kind != "selector"]
        for k, kf in zip(matched, info.keys, strict=True):
            wide = kf.width > 64
            if (
                kf.match_kind not in MATCH_KINDS
                or kf.width > WIDE
                or (wide and kf.match_kind == "range")
            ):
                raise Unsupported(f"table {fq}: {kf.match_kind} key of {kf.width} bits")
            v = self.expr(k.expr)
            if isinstance(v.type, TBool):
                v = V(v.code, TBit(1))
            if isinstance(v.type, TError):  # p4c's error number: declaration order from 1
                v = V(f"({v.code} + 1)", TBit(32))
            if not isinstance(v.type, TBit) or v.type.signed:
                raise Unsupported(f"table {fq}: key of type {v.type.show()}")
            if wide:  # two key words (the Python side lays out the entries alike)
                if has_fx(v.code):
                    raise Unsupported(f"table {fq}: a wide key with side effects")
                keys += [f"(u64)(({v.code}) >> 64)", f"(u64)({v.code})"]
                continue
            keys.append(v.code)
        acts: list[tuple[str, Any] | None] = []
        listed = [self.action_ref(ref.name) for ref in d.actions]
        for i, afq in enumerate(info.actions):
            if i < len(listed) and listed[i][1] == afq:
                acts.append((listed[i][0], listed[i][2]))
            elif i >= len(listed) and afq == "NoAction":  # the compiler's implicit default
                acts.append(None)
            else:
                raise Unsupported(f"table {fq}: action {afq} not where the table lists it")
        n = len(self.tables)
        self.tables.append(fq)
        cases = []
        for i, act in enumerate(acts):
            if act is None:
                continue
            params = act[1].params
            bound = [a.value for a in d.actions[i].args] if i < len(d.actions) else []
            if any(p.direction for p in params[len(bound) :]):
                raise Unsupported(f"table {fq}: action {act[1].name} with unbound directions")
            # bound arguments as a direct call binds them; action data from the entry
            vals, pre, post = self.bind_args(params[: len(bound)], bound)
            vals += [f"A[{j}]" for j in range(len(params) - len(bound))]
            call = " ".join(self.exit_guard(act[1], pre, f"{act[0]}({', '.join(vals)});", post))
            cases.append(f"    case {i}: {{ {call} }} break;")
        kcode = ", ".join(keys)
        fn = f"tbl_{n}"
        lookup = "-1" if info.implementation and not keys else "p4n_lookup(T, key)"
        if info.implementation:  # the entry names a member or a group (cg_profiles.py)
            found = self.indirect_lookup(d, info)
        else:
            found = [
                "    if (e < 0) { a = T->def_action; A = T->def_args; }",
                "    else { a = T->action[e]; A = T->args + e * T->nargs;"
                + (
                    " T->counters[2 * e] += 1; T->counters[2 * e + 1] += p4n_pktlen;"
                    if info.direct_counter
                    else ""
                )
                + (f" {self.direct_meter_hit(info)}" if info.direct_meter else "")
                + " }",
            ]
            if info.direct_meter:  # a miss is not metered: GREEN
                found.append("    if (e < 0) p4n_color = 0;")
        src = [
            f"static int {fn}(void) {{",
            f"    u64 key[{max(1, len(keys))}] = {{{kcode or '0'}}};",
            f"    p4n_table *T = &p4n_tables[{n}];",
            f"    int64_t e = {lookup};",
            "    int64_t a = -1; const u64 *A = NULL;",
            *found,
            "    p4n_run = a;",
            "    switch (a) {",
            *cases,
            "    default: break;",
            "    }",
            "    return e >= 0;",
            "}",
        ]
        self.decls.append(f"static int {fn}(void);")
        self.out.append("\n".join(src))
        c.scope[d.name] = V("", None, obj=("table", fn, fq))

    # -- statements -----------------------------------------------------------------

    def block(self, b: ast.Stmt) -> list[str]:
        """A block, or a branch's single statement, as one braced C statement (a P4
        statement can become several C ones, and a nested ``if`` must keep its ``else``)."""
        self.locals.append({})
        out = []
        for s in b.stmts if isinstance(b, ast.Block) else [b]:
            out.extend(self.stmt(s))
        self.locals.pop()
        return ["{"] + ["    " + x for x in out] + ["}"]

    def stmt(self, s: ast.Stmt) -> list[str]:
        if isinstance(s, ast.Block):
            return self.block(s)
        called = self.function_stmt(s)  # a user function with out/inout parameters
        if called is not None:
            return called
        if isinstance(s, ast.Return):
            returned = self.return_stmt(s)
            if returned is not None:
                return returned
        if isinstance(s, ast.Empty):
            return []
        looped = self.loop_stmt(s)
        if looped is not None:
            return looped
        if isinstance(s, ast.Assign) and isinstance(s.target, ast.Slice):
            hi, lo = self.genv.const_int(s.target.hi), self.genv.const_int(s.target.lo)
            v = self.value(s.value, TBit(hi - lo + 1))
            return [self.store_slice(s.target, v.code)]
        if isinstance(s, ast.Assign):
            if isinstance(s.target, ast.Member) and s.target.name in ("next", "last"):
                raise Unsupported(f"assignment to a stack's {s.target.name}")
            tgt = self.expr(s.target)
            v = self.value(s.value, tgt.type)
            if not (has_fx(tgt.code) or has_fx(v.code)):
                return [f"{tgt.code} = {v.code};"]
            # the target's place first, then the value (P4's order), the target once:
            # `a op= b` reads it through the same pointer
            ct, lp = self.ctype(tgt.type), self.new("lp")
            if s.compound and isinstance(s.value, ast.Binary):
                self.aliases[id(s.value.left)] = V(f"(*{lp})", tgt.type)
                try:
                    v = self.value(s.value, tgt.type)
                finally:
                    del self.aliases[id(s.value.left)]
            tmp = self.new("rv")
            return [f"{{ {ct} *{lp} = &{tgt.code}; {ct} {tmp} = {v.code}; *{lp} = {tmp}; }}"]
        if isinstance(s, ast.If):
            c = self.value(s.cond, TBool())
            out = [f"if ({c.code})"] + self.block(s.then)
            if s.other is not None:
                out += ["else"] + self.block(s.other)
            return out
        if isinstance(s, ast.VarDeclStmt):
            d = s.decl
            t = self.genv.resolve(d.type)
            n = self.new(f"v_{d.name}")
            lines = [f"{self.ctype(t)} {n};"] + self.var_init(n, t, d.init)
            self.locals[-1][d.name] = V(n, t)
            return lines
        if isinstance(s, ast.ConstDeclStmt):
            cd = s.decl
            t = self.genv.resolve(cd.type)
            v = self.value(cd.value, t)
            if v.const is None:
                raise Unsupported("non-constant const")
            self.locals[-1][cd.name] = V(_lit(v.const), t, v.const)
            return []
        if isinstance(s, ast.CallStmt):
            return self.call_stmt(s.call)
        if isinstance(s, ast.Exit):
            return ["longjmp(p4n_exit, 1);"]
        if isinstance(s, ast.Return) and s.value is None:
            if self.cur is None or isinstance(self.cur.decl, ast.ParserDecl):
                raise Unsupported("return outside a control or action")
            return ["return;"]  # actions and control bodies are C functions of their own
        if isinstance(s, ast.Switch):
            return self.switch(s)
        raise Unsupported(f"statement {type(s).__name__}")

    def store_slice(self, target: ast.Slice, code: str) -> str:
        """C statement writing the value ``code`` into the bits ``target`` names (a slice,
        also of a slice), the other bits kept."""
        hi, lo = self.genv.const_int(target.hi), self.genv.const_int(target.lo)
        w = hi - lo + 1
        inner = target.expr
        while isinstance(inner, ast.Slice):  # x[7:4][3:0] = v: bits [7:4] of x
            ilo = self.genv.const_int(inner.lo)
            hi, lo, inner = hi + ilo, lo + ilo, inner.expr
        base = self.expr(inner)
        if not isinstance(base.type, TBit):
            raise Unsupported("assignment to a slice of a non-bit value")
        keep = _lit(_mask(base.type.width) & ~(_mask(w) << lo))
        ct = self.ctype(base.type)
        return (
            f"{base.code} = ({base.code} & {keep}) | ((({ct})({code}) & {_lit(_mask(w))}) << {lo});"
        )

    def store(self, target: ast.Expr, code: str) -> str:
        """C statement writing ``code`` (a C value of the target's type) into ``target``."""
        if isinstance(target, ast.Slice):
            return self.store_slice(target, code)
        return f"{self.expr(target).code} = {code};"

    def bind_args(
        self,
        params: list[ast.Param],
        args: list[ast.Expr],
        types: list[Any] | None = None,
        composites_by_ref: bool = True,
        plain_targets: bool = False,
    ) -> tuple[list, list, list]:
        """(C arguments, copy-in statements, copy-out statements) of a call: directionless
        parameters by value, out/inout ones through copies written back after the call, in
        argument order. ``types``: the parameters' resolved types (a generic function's
        binding); ``composites_by_ref``: in headers/structs through a copy too (actions);
        ``plain_targets``: an out/inout argument at a run-time index through a pointer to
        its place, taken once (functions)."""
        if types is None:
            types = [self.genv.resolve(p.type) for p in params]
        vals: list[str] = []
        pre: list[str] = []
        post: list[str] = []
        fx = any(
            has_fx(self.expr(a, t).code)
            for t, a in zip(types, args, strict=True)
            if not isinstance(a, ast.DontCare)
        )
        for p, t, a in zip(params, types, args, strict=True):
            composite_in = (
                composites_by_ref and p.direction == "in" and isinstance(t, (TComposite, TStack))
            )
            if p.direction not in ("out", "inout") and not composite_in:
                code = self.value(a, t).code
                if fx:  # arguments in order, into locals (C leaves it open)
                    n = self.new("sq")
                    pre.append(f"{self.ctype(t)} {n} = {code};")
                    code = n
                vals.append(code)
                continue
            tmp = self.new("arg")
            self.decls.append(f"static {self.ctype(t)} {tmp};")
            vals.append(f"&{tmp}")
            place = None
            if plain_targets and not composite_in and run_time_index(a):
                # the argument's place once (P4 evaluates an l-value once): its address,
                # the scratch element when out of range (read zeroed, written to no effect)
                if isinstance(a, ast.Slice):
                    raise Unsupported("an out/inout slice at a run-time index")
                place = self.new("lv")
                pre.append(f"{self.ctype(t)} *{place} = &{self.expr(a).code};")
            if p.direction == "out" or isinstance(a, ast.DontCare):
                pre.append(f"memset(&{tmp}, 0, sizeof {tmp});")
            elif place is not None:
                pre.append(f"{tmp} = *{place};")
            else:
                pre.append(f"{tmp} = {self.value(a, t).code};")
            if place is not None:
                post.append(f"*{place} = {tmp};")
            elif not composite_in and not isinstance(a, ast.DontCare):
                post.append(self.store(a, tmp))
        return vals, pre, post

    def exit_guard(self, decl: Any, pre: list[str], call: str, post: list[str]) -> list[str]:
        """An action call: copy-in, the call, copy-out. When the action may ``exit``, the
        copy-out runs on that way out too (as Python's try/finally), then the exit goes on."""
        if id(decl) not in self.exiting or not post:
            return [*pre, call, *post]
        back = " ".join(post)
        return [
            "{ jmp_buf sv_; memcpy(sv_, p4n_exit, sizeof sv_);",
            *pre,
            f"if (setjmp(p4n_exit) == 0) {{ {call} memcpy(p4n_exit, sv_, sizeof sv_); }}",
            f"else {{ memcpy(p4n_exit, sv_, sizeof sv_); {back} longjmp(p4n_exit, 1); }}",
            *post,
            "}",
        ]

    def switch(self, s: ast.Switch) -> list[str]:
        """``switch (t.apply().action_run)`` (labels: the table's actions, by their index in
        its action list) or ``switch (value)`` (constant labels), as an if/else chain."""
        e = s.expr
        out: list[str] = []
        if isinstance(e, ast.Member) and e.name == "action_run" and isinstance(e.expr, ast.Call):
            call = e.expr
            if not (isinstance(call.func, ast.Member) and call.func.name == "apply"):
                raise Unsupported("switch on action_run of a non-apply")
            base = call.func.expr
            sym = self.lookup(base.name) if isinstance(base, ast.Name) else None
            if sym is None or sym.obj is None or sym.obj[0] != "table":
                raise Unsupported("switch on action_run of a non-table")
            actions = self.table_names[sym.obj[2]].actions
            out.append(f"{self.method(call.func, [a.value for a in call.args])};")
            var, t = "p4n_run", None
        else:
            v = self.expr(e)
            if not isinstance(v.type, (TBit, TEnum)) or getattr(v.type, "width", 0) > 64:
                raise Unsupported(f"switch on {v.type.show()}")
            var, t = self.new("sw"), v.type
            out.append(f"u64 {var} = {v.code};")
        pending: list[str] = []
        first = True
        for case in s.cases:
            conds: list[str] = []
            default = False
            for lab in case.labels:
                if isinstance(lab, ast.Default):
                    default = True
                elif t is None:
                    if not isinstance(lab, ast.Name):
                        raise Unsupported("switch label")
                    fq = self.action_ref(lab.name)[1]
                    if fq not in actions:
                        raise Unsupported(f"switch label {lab.name}")
                    conds.append(f"{var} == {actions.index(fq)}")
                else:
                    lv = self.value(lab, t)
                    if lv.const is None:
                        raise Unsupported("non-constant switch label")
                    conds.append(f"{var} == {lv.code}")
            if case.body is None:
                pending += conds
                continue
            conds, pending = pending + conds, []
            if default:
                head = "else" if not first else "if (1)"
            else:
                head = f"{'if' if first else 'else if'} ({' || '.join(conds) or '0'})"
            out += [head] + self.block(case.body)
            first = False
        return ["{"] + ["    " + x for x in out] + ["}"]

    def call_stmt(self, call: ast.Call) -> list[str]:
        f = call.func
        args = [a.value for a in call.args]
        if isinstance(f, ast.Name):
            if f.name == "mark_to_drop":
                sm = self.expr(args[0])
                return [f"{sm.code}.f_egress_spec = 511; {sm.code}.f_mcast_grp = 0;"]
            if f.name == "truncate" and len(args) == 1:  # cut the frame when it leaves
                return [f"p4n_trunc = {self.value(args[0], TBit(32)).code};"]
            replicating = self.replication_call(f.name, args)
            if replicating is not None:
                return replicating
            if f.name in CHECKSUMS:
                return self.checksum(f.name, args)
            if f.name == "hash":
                return self.hash_call(args)
            if f.name == "random":
                return self.random_call(args)
            if f.name == "digest":
                return self.digest_call(call)
            if (
                f.name == "verify"
                and self.cur is not None
                and isinstance(self.cur.decl, ast.ParserDecl)
            ):
                c = self.value(args[0], TBool())
                e = args[1]
                if not isinstance(e, ast.ErrorMember):
                    raise Unsupported("verify with a non-constant error")
                return [f"if (!({c.code})) {{ p4n_perr = {self.error_code(e.name)}; return; }}"]
            sym = self.lookup(f.name)
            if sym is None and (
                f.name in self.genv.actions or (self.cur is not None and f.name in self.cur.actions)
            ):
                cfn, _, decl = self.action_ref(f.name)
                vals, pre, post = self.bind_args(decl.params, args)
                return self.exit_guard(decl, pre, f"{cfn}({', '.join(vals)});", post)
            raise Unsupported(f"call of {f.name}")
        if isinstance(f, ast.Member):
            if f.name == "extract" and len(args) == 1 and isinstance(args[0], ast.DontCare):
                return [self.skip_header(call)]
            looked = self.lookahead(call)
            if looked is not None:  # its value unused: the packet must still hold it
                return [looked[2]]
            return [self.method(f, args) + ";"]
        raise Unsupported("call")

    # -- assembly -------------------------------------------------------------------

    def assemble(self, hn: str, mn: str, sn: str, fns: dict[str, Ctl]) -> str:
        smf = {n for n, _ in self.sm_t.fields}  # type: ignore[union-attr]
        need = {
            "ingress_port",
            "egress_spec",
            "egress_port",
            "instance_type",
            "packet_length",
            "mcast_grp",
            "egress_rid",
            "checksum_error",
            "parser_error",
        }
        if not need <= smf:
            raise Unsupported(f"standard_metadata_t lacks {sorted(need - smf)}")
        has = lambda f: f in smf  # noqa: E731
        ts = "p4n_sm->f_ingress_global_timestamp = now;" if has("ingress_global_timestamp") else ""
        ets = "s->f_egress_global_timestamp = now;" if has("egress_global_timestamp") else ""
        enq = "s->f_enq_timestamp = now & 0xFFFFFFFFULL;" if has("enq_timestamp") else ""
        p, v, i, eg, c, d = (
            fns[k].fn for k in ("parser", "verify", "ingress", "egress", "compute", "deparser")
        )
        nerr = self.error_code("NoError")
        head = [
            "/* Generated by p4sim.native.cgen - do not edit. */",
            RUNTIME,
            VARBIT,
            PROFILES,
            *self.type_src,
            f"static p4n_table p4n_tables[{max(1, len(self.tables))}];",
            f"static p4n_table p4n_vsets[{max(1, len(self.vsets))}];  /* value sets */",
            "p4n_table *p4n_vset_at(int n) { return &p4n_vsets[n]; }",
            "static inline int p4n_vset_match(int n, const u64 *k) {",
            "    return p4n_lookup(&p4n_vsets[n], k) >= 0; }",
            "static p4n_group *p4n_groups; static int64_t p4n_ngroups;",
            "static const uint8_t *p4n_in; static u64 p4n_inlen, p4n_off, p4n_perr;",
            "static uint8_t *p4n_out; static u64 p4n_ooff;",
            "static const uint8_t *p4n_pl; static u64 p4n_pllen;  /* the unparsed payload */",
            "static u64 p4n_pktlen;",
            "static int p4n_rej;  /* a parser took `transition reject` */",
            "static u64 p4n_trunc;  /* truncate(): bytes to keep of the frame, 0 = all */",
            "static int64_t p4n_run;  /* the action the last table ran (action_run) */",
            "static jmp_buf p4n_exit, p4n_pjmp;  /* exit; a parser's stack error */",
            f"static {sn} *p4n_sm;",
            REQUESTS,
            STATEFUL,
            *self.decls,
        ]
        queued = self.field_lists is not None  # the program clones, resubmits or recirculates
        st = "st->" if queued else "p4n_ing."  # p4n_parse_into's state, or the one
        parse = f"{p}(NULL, &{st}h, &{st}m, s0);"
        fmt = dict(
            H=hn,
            M=mn,
            S=sn,
            parse_call=f"if (setjmp(p4n_pjmp) == 0) {parse}" if self.stack_err else parse,
            verify=v,
            ingress=i,
            egress=eg,
            compute=c,
            deparser=d,
            noerror=nerr,
            ingress_ts=ts,
            egress_ts=ets,
            enq_ts=enq,
            nregs=len(self.registers),
            ncounters=len(self.counters),
        )
        fmt["fl_restore"] = self.field_list_restore(mn) if queued else ""
        process = (QUEUED if queued else SIMPLE).format(**fmt)
        pipeline = PIPELINE.format(process=process, **fmt)
        meters = "".join(
            f" if (n == {n}) {{ M{n} = cells; MO{n} = origin; }}" for n in range(len(self.meters))
        )
        pipeline += f"void p4n_set_meter(int n, double *cells, int64_t *origin) {{{meters} }}\n"
        regs = ", ".join(f"&R{n}" for n in range(len(self.registers))) or "NULL"
        cnts = ", ".join(f"&K{n}" for n in range(len(self.counters))) or "NULL"
        pipeline = pipeline.replace("REGS_", regs).replace("CNTS_", cnts)
        return "\n".join(head + self.out + [pipeline]) + "\n"


#: the widest bit<W> the generator covers: bit<65..128> are unsigned __int128 (u128)
def _runtime() -> str:
    from pathlib import Path

    return (Path(__file__).with_name("runtime.h")).read_text()


RUNTIME = _runtime()
