"""What BMv2 cannot run: the checks of p4c's BMv2 back end that p4sim's compiler does not
need, so that a program p4sim accepts by default also compiles with
``p4c --target bmv2 --arch v1model``.

Example::

    prog = compile_file("inc.p4")                   # target="bmv2": these checks run
    prog = compile_file("loop.p4", target="p4sim")  # p4sim's own language only

Each refusal is a ``P4Error`` at the construct, saying what p4c says and how to get past
it. The classes, each found by compiling programs with real p4c:

- a table whose applications continue differently (p4c: "table T has multiple
  successors"): BMv2 places a table at one node of the control flow. p4c inlines every
  application of a control instance, so a control holding a table, applied at two places,
  puts that table at two nodes; they merge only when both go on to the same next steps.
- two top-level declarations with one name (p4c: "X duplicates X."), except overloads of
  a function or extern function;
- a header whose fields total a width that is not a multiple of 8 bits;
- a control with actions and the user metadata among its parameters, applied at two
  places: p4c's JSON then names a copy of the metadata that simple_switch cannot load
  ("No field 'userMetadata.x' can be found");
- what p4c's front end refuses that p4sim's grammar and types let through: in/out/inout as
  names, a for loop without a condition, '/' and '%' of values known only at run time,
  header stack members outside a parser, error values as entry keys.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error, P4ErrorList

#: ``target`` values of the compiler: what BMv2 runs, or all that p4sim itself runs.
TARGETS = ("bmv2", "p4sim")
BEYOND_BMV2 = "pass --target p4sim to run it on p4sim alone"


def add_target_flag(parser: argparse.ArgumentParser) -> None:
    """``--target bmv2|p4sim`` for the commands that compile a program."""
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default="bmv2",
        help="bmv2 (default): refuse what p4c's BMv2 back end refuses, so the program "
        "also runs on simple_switch; p4sim: accept every program p4sim runs",
    )


def check_bmv2(
    program: ast.Program,
    main_blocks: Iterable[ast.Decl],
    types: Iterable[Any],
    found: Iterable[P4Error] = (),
) -> None:
    """Raise ``P4ErrorList`` with every construct of ``program`` that p4c's BMv2 back end
    refuses. ``main_blocks`` are the parser and controls given to ``V1Switch``; ``types``
    the resolved types of their parameters (headers, metadata); ``found`` what the code
    generator met on the way (division at run time, header stack members)."""
    errors = [
        *_duplicate_declarations(program),
        *_keywords_as_names(program),
        *_loops_without_a_condition(program),
        *_error_values_in_entries(program),
        *_tables_with_parameter_lists(program),
        *_operations_on_type_variables(program),
        *_unaligned_headers(program, types),
        *_tables_with_several_successors(program, main_blocks),
        *found,
    ]
    if errors:
        errors.sort(key=lambda e: (e.loc.file, e.loc.line, e.loc.col))
        raise P4ErrorList(errors)


# ---- what p4c's front end reads differently -------------------------------------------

#: Words of P4_16 that p4c's lexer takes as keywords wherever they stand; p4sim's grammar
#: lets some of them name a field or a variable.
KEYWORDS = frozenset({"in", "out", "inout"})


def _nodes(node: Any) -> Iterator[ast.Node]:
    if isinstance(node, ast.Node):
        yield node
        for value in vars(node).values():
            for item in value if isinstance(value, list) else [value]:
                yield from _nodes(item)


def _keywords_as_names(program: ast.Program) -> Iterator[P4Error]:
    for decl in program.declarations:
        if decl.loc.file.endswith(("core.p4", "v1model.p4")):
            continue
        for n in _nodes(decl):
            name = getattr(n, "name", None)
            if isinstance(n, (ast.StructField, ast.Param, ast.Decl)) and name in KEYWORDS:
                yield P4Error(
                    n.loc,
                    f"'{name}' is a keyword of P4_16 (p4c: \"syntax error, unexpected "
                    f'{name.upper()}"); choose another name',
                )


def _loops_without_a_condition(program: ast.Program) -> Iterator[P4Error]:
    for n in _nodes(program):
        if isinstance(n, ast.For) and n.cond is None:
            yield P4Error(
                n.loc,
                'a for loop without a condition (p4c: "syntax error, unexpected ;"): P4_16 '
                "asks for one; write true and leave the loop with break",
            )


def _tables_with_parameter_lists(program: ast.Program) -> Iterator[P4Error]:
    for n in _nodes(program):
        if isinstance(n, ast.TableDecl) and n.empty_params is not None:
            yield P4Error(
                n.empty_params,
                f'table {n.name}: P4_16 gives a table no parameter list (p4c: "syntax '
                'error, unexpected (, expecting {"); write `table NAME {`',
            )


def _operations_on_type_variables(program: ast.Program) -> Iterator[P4Error]:
    """p4c checks a generic function's body once, with its type variables unknown: a
    value of a type variable may be copied, passed and returned, nothing more."""
    for fn in program.declarations:
        if not isinstance(fn, ast.FunctionDecl) or not fn.type_params or fn.body is None:
            continue
        tvars = set(fn.type_params)
        names = {p.name for p in fn.params if _of_type_variable(p.type, tvars)}
        names |= {
            d.name
            for d in _nodes(fn.body)
            if isinstance(d, ast.VarDecl) and _of_type_variable(d.type, tvars)
        }
        for n in _nodes(fn.body):
            if isinstance(n, ast.Cast) and _of_type_variable(n.type, tvars):
                what = f"a cast to the type variable {n.type.name}"  # type: ignore[attr-defined]
            elif isinstance(n, (ast.Binary, ast.Unary, ast.Slice, ast.Member, ast.Cast)):
                operands = [n.left, n.right] if isinstance(n, ast.Binary) else [n.expr]
                used = [o.name for o in operands if isinstance(o, ast.Name) and o.name in names]
                if not used:
                    continue
                what = f"{_operation(n)} on {used[0]}, a value of a type variable"
            else:
                continue
            yield P4Error(
                n.loc,
                f"{what} in the generic function {fn.name}: p4c type-checks its body once, "
                "with the type variables unknown, and refuses it (p4sim runs it with "
                "--target p4sim)",
            )


def _of_type_variable(t: Any, tvars: set[str]) -> bool:
    return isinstance(t, ast.NamedType) and t.name in tvars and not t.type_args


def _operation(n: ast.Node) -> str:
    if isinstance(n, (ast.Binary, ast.Unary)):
        return f"'{n.op}'"
    return {ast.Slice: "a bit slice", ast.Member: "a member access", ast.Cast: "a cast"}[type(n)]


def _error_values_in_entries(program: ast.Program) -> Iterator[P4Error]:
    for n in _nodes(program):
        if not isinstance(n, ast.TableEntry):
            continue
        for key in n.keyset:
            if isinstance(key, ast.ErrorMember) or (
                isinstance(key, ast.Member)
                and isinstance(key.expr, ast.Name)
                and key.expr.name == "error"
            ):
                yield P4Error(
                    key.loc,
                    'an error value as a key of a table entry (p4c: "unsupported exact key '
                    'expression"): BMv2 has no entries keyed by error',
                )


# ---- duplicate declarations ----------------------------------------------------------


def _duplicate_declarations(program: ast.Program) -> Iterator[P4Error]:
    seen: dict[str, ast.Decl] = {}
    for decl in program.declarations:
        if isinstance(decl, (ast.ErrorDecl, ast.MatchKindDecl)):
            continue  # several declarations merge
        first = seen.setdefault(decl.name, decl)
        if first is decl:
            continue
        overload = (
            isinstance(decl, ast.FunctionDecl)
            and isinstance(first, ast.FunctionDecl)
            and decl.is_extern == first.is_extern
        )
        if not overload:
            yield P4Error(
                decl.loc,
                f"'{decl.name}' is declared twice (p4c: \"{decl.name} duplicates "
                f'{first.name}."); rename one',
                notes=[(first.loc, f"'{first.name}' is first declared here")],
            )


# ---- header widths ---------------------------------------------------------------------


def _unaligned_headers(program: ast.Program, types: Iterable[Any]) -> Iterator[P4Error]:
    from p4sim.compiler.typecheck import TComposite, TStack, type_width

    seen: set[int] = set()
    todo = list(types)
    while todo:
        t = todo.pop()
        if isinstance(t, TStack):
            t = t.elem
        if not isinstance(t, TComposite) or id(t) in seen:
            continue
        seen.add(id(t))
        if t.kind == "header":
            width = type_width(t)
            if width % 8:
                decl = next(
                    (d for d in program.declarations if d.name == t.name),
                    None,
                )
                yield P4Error(
                    decl.loc if decl is not None else ast.NO_LOC,
                    f"header {t.name}'s fields total {width} bits: BMv2 runs only headers "
                    "of whole bytes (a multiple of 8 bits); add padding bits",
                )
        else:
            todo.extend(ft for _, ft in t.fields)


# ---- tables applied at several places ---------------------------------------------------


@dataclass(eq=False)
class _Node:
    """A node of the control-flow graph as p4c's BMv2 back end draws it: a table
    application, a condition, or straight-line code (which p4c moves into an action)."""

    table: str | None
    loc: ast.SourceLoc
    site: ast.SourceLoc  # where the top control applies it (or the control holding it)
    succ: list[_Node] = field(default_factory=list)


@dataclass
class _Scope:
    """A control being inlined: its declarations, the instance path that prefixes its
    tables' names, the constant arguments of its parameters, its pending returns."""

    control: ast.ControlDecl
    path: str
    consts: dict[str, bool]
    tables: dict[str, ast.TableDecl]
    instances: dict[str, ast.ControlDecl]
    site: ast.SourceLoc | None
    returns: list[_Node] = field(default_factory=list)


class _Graph:
    def __init__(self, program: ast.Program) -> None:
        self.controls = {d.name: d for d in program.declarations if isinstance(d, ast.ControlDecl)}
        self.global_instances = {
            d.name: self.controls[t.name]
            for d in program.declarations
            if isinstance(d, ast.Instantiation)
            and isinstance(t := d.type, ast.NamedType)
            and t.name in self.controls
        }
        self.nodes: list[_Node] = []
        #: instance path -> (its control, where the top control applies it, each time)
        self.applied: dict[str, tuple[ast.ControlDecl, list[ast.SourceLoc]]] = {}

    def node(self, live: list[_Node], table: str | None, loc: ast.SourceLoc, sc: _Scope) -> _Node:
        n = _Node(table, loc, sc.site or loc)
        for p in live:
            p.succ.append(n)
        self.nodes.append(n)
        return n

    def control(
        self,
        decl: ast.ControlDecl,
        path: str,
        consts: dict[str, bool],
        live: list[_Node],
        site: ast.SourceLoc | None = None,
    ) -> list[_Node]:
        instances = dict(self.global_instances)
        tables = {}
        for d in decl.locals:
            if isinstance(d, ast.TableDecl):
                tables[d.name] = d
            elif (
                isinstance(d, ast.Instantiation)
                and isinstance(d.type, ast.NamedType)
                and d.type.name in self.controls
            ):
                instances[d.name] = self.controls[d.type.name]
        scope = _Scope(decl, path, consts, tables, instances, site)
        live = self.stmt(decl.body, live, scope)
        return live + scope.returns

    # -- statements
    def stmt(self, s: ast.Stmt, live: list[_Node], sc: _Scope) -> list[_Node]:
        if isinstance(s, ast.Block):
            for inner in s.stmts:
                live = self.stmt(inner, live, sc)
            return live
        if isinstance(s, ast.If):
            return self.if_(s, live, sc)
        if isinstance(s, ast.Switch):
            return self.switch(s, live, sc)
        if isinstance(s, ast.Return):
            sc.returns.extend(live)
            return []
        if isinstance(s, ast.Exit):
            return []  # to the end of the pipeline: no next step in this control
        if isinstance(s, (ast.Empty, ast.ConstDeclStmt)):
            return live
        if isinstance(s, (ast.For, ast.ForIn)):
            cond = self.node(live, None, s.loc, sc)
            return [cond, *self.stmt(s.body, [cond], sc)]
        if isinstance(s, ast.CallStmt):
            call = s.call
            if isinstance(call.func, ast.Member) and call.func.name == "apply":
                target = call.func.expr
                if isinstance(target, ast.Name) and target.name in sc.tables:
                    return [self.node(live, self.table_name(sc, target.name), s.loc, sc)]
                inlined = self.inline(call, live, sc)
                if inlined is not None:
                    return inlined
        if isinstance(s, ast.VarDeclStmt) and s.decl.init is None:
            return live
        live = self.tables_in(s, live, sc)
        return [self.node(live, None, s.loc, sc)]

    def if_(self, s: ast.If, live: list[_Node], sc: _Scope) -> list[_Node]:
        known = self.constant(s.cond, sc)
        if known is not None:  # p4c folds a condition on a constant argument away
            branch = s.then if known else s.other
            return self.stmt(branch, live, sc) if branch is not None else live
        live = self.tables_in(s.cond, live, sc)
        if not _table_of(s.cond, sc):
            live = [self.node(live, None, s.loc, sc)]
        then = self.stmt(s.then, live, sc)
        other = self.stmt(s.other, live, sc) if s.other is not None else live
        return then + other

    def switch(self, s: ast.Switch, live: list[_Node], sc: _Scope) -> list[_Node]:
        live = self.tables_in(s.expr, live, sc)
        if not _table_of(s.expr, sc):
            live = [self.node(live, None, s.loc, sc)]
        out: list[_Node] = []
        has_default = False
        for case in s.cases:
            has_default |= any(isinstance(lab, ast.Default) for lab in case.labels)
            out += self.stmt(case.body, live, sc) if case.body is not None else live
        return out if has_default else out + live

    def inline(self, call: ast.Call, live: list[_Node], sc: _Scope) -> list[_Node] | None:
        """``c.apply(args)`` of a control instance (or of a control type, directly):
        its body at this place, its tables named by the instance."""
        target = call.func.expr if isinstance(call.func, ast.Member) else None
        if not isinstance(target, ast.Name):
            return None
        if target.name in sc.instances:
            decl, path = sc.instances[target.name], f"{sc.path}.{target.name}"
            self.applied.setdefault(path, (decl, []))[1].append(sc.site or call.loc)
        elif target.name in self.controls:  # MyControl.apply(...): an instance of its own
            decl, path = self.controls[target.name], f"{sc.path}.{target.name}@{call.loc}"
        else:
            return None
        consts = {}
        for param, arg in zip(decl.params, call.args, strict=False):
            value = self.constant(arg.value, sc)
            if value is not None:
                consts[param.name] = value
        return self.control(decl, path, consts, live, sc.site or call.loc)

    def tables_in(self, node: Any, live: list[_Node], sc: _Scope) -> list[_Node]:
        """Tables applied inside an expression (``t.apply().hit``), in evaluation order."""
        for name, loc in _applied_tables(node, sc):
            live = [self.node(live, self.table_name(sc, name), loc, sc)]
        return live

    def constant(self, e: ast.Expr, sc: _Scope) -> bool | None:
        if isinstance(e, ast.BoolLit):
            return bool(e.value)
        if isinstance(e, ast.Name) and e.name in sc.consts:
            return sc.consts[e.name]
        if isinstance(e, ast.Unary) and e.op == "!":
            inner = self.constant(e.expr, sc)
            return None if inner is None else not inner
        return None

    @staticmethod
    def table_name(sc: _Scope, name: str) -> str:
        return f"{sc.path}.{name}"


def _table_of(e: Any, sc: _Scope) -> str | None:
    """The table of ``t.apply().hit``/``.miss``/``.action_run`` (or ``!`` of one)."""
    if isinstance(e, ast.Unary) and e.op == "!":
        return _table_of(e.expr, sc)
    if (
        isinstance(e, ast.Member)
        and e.name in ("hit", "miss", "action_run")
        and isinstance(e.expr, ast.Call)
        and isinstance(e.expr.func, ast.Member)
        and e.expr.func.name == "apply"
        and isinstance(e.expr.func.expr, ast.Name)
        and e.expr.func.expr.name in sc.tables
    ):
        return e.expr.func.expr.name
    return None


def _applied_tables(node: Any, sc: _Scope) -> Iterator[tuple[str, ast.SourceLoc]]:
    if isinstance(node, ast.Call):
        for arg in node.args:
            yield from _applied_tables(arg, sc)
        f = node.func
        if (
            isinstance(f, ast.Member)
            and f.name == "apply"
            and isinstance(f.expr, ast.Name)
            and f.expr.name in sc.tables
        ):
            yield f.expr.name, node.loc
            return
        yield from _applied_tables(f, sc)
        return
    if isinstance(node, (ast.Type, ast.Block)) or not isinstance(node, ast.Node):
        return
    for value in vars(node).values():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, ast.Node):
                yield from _applied_tables(item, sc)


def _same_next_steps(a: _Node, b: _Node) -> bool:
    """p4c merges two nodes of one table when each goes on to the same set of nodes
    (a node of the same table counting as the same)."""

    def has(node: _Node, where: list[_Node]) -> bool:
        return any(w is node or (w.table is not None and w.table == node.table) for w in where)

    return (
        len(a.succ) == len(b.succ)
        and all(has(n, b.succ) for n in a.succ)
        and all(has(n, a.succ) for n in b.succ)
    )


def _tables_with_several_successors(
    program: ast.Program, main_blocks: Iterable[ast.Decl]
) -> Iterator[P4Error]:
    for block in main_blocks:
        if not isinstance(block, ast.ControlDecl):
            continue
        graph = _Graph(program)
        graph.control(block, block.name, {}, [])
        # v1model's ingress and egress take the user metadata second
        meta = block.params[1].type if len(block.params) > 1 else None
        for path, (decl, sites) in graph.applied.items():
            actions = [d.name for d in decl.locals if isinstance(d, ast.ActionDecl)]
            takes_meta = any(p.type == meta for p in decl.params if isinstance(meta, ast.NamedType))
            if len(sites) > 1 and actions and takes_meta:
                yield P4Error(
                    sites[1],
                    f"{path}, a control with actions ({', '.join(actions)}), is applied here "
                    f"and at {sites[0]}: p4c then writes a BMv2 JSON whose actions name a "
                    "copy of the control's parameters that BMv2 cannot load (simple_switch: "
                    "\"No field 'userMetadata....' can be found\"); apply it at one place, "
                    f"or split it, or {BEYOND_BMV2}",
                    notes=[(sites[0], f"{path} is also applied here")],
                )
        by_table: dict[str, list[_Node]] = {}
        for n in graph.nodes:
            if n.table is not None:
                by_table.setdefault(n.table, []).append(n)
        for table, nodes in by_table.items():
            first = nodes[0]
            other = next((n for n in nodes[1:] if not _same_next_steps(first, n)), None)
            if other is None:
                continue
            yield P4Error(
                other.site,
                f"table {table} is applied here and at {first.site}, and the two go on "
                f'differently (p4c: "table {table} has multiple successors"): BMv2 places '
                "a table at one point of the control flow; apply it (or the control "
                f"holding it) at one place, or {BEYOND_BMV2}",
                notes=[(first.site, f"table {table} is also applied here")],
            )
