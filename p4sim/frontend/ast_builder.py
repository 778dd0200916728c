"""lark's parse tree → ``ast`` nodes (``AstBuilder``, a lark transformer): literals
decoded, table properties sorted into ``TableDecl``'s fields, each node located at its
first token's original file, line and column. ``parser.py`` runs it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Transformer_NonRecursive, v_args

from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error

Locator = Callable[[int, int], ast.SourceLoc]
# An annotation body parsed from the grammar's start rule (``annotation_args`` or
# ``annotation_kv``), or None when it is not one.
BodyParser = Callable[[str, str, Locator], Any]


@dataclass
class _Proto:
    """A function prototype before it becomes a FunctionDecl or MethodDecl."""

    return_type: ast.Type
    name: str
    type_params: list[str]
    params: list[ast.Param]
    loc: ast.SourceLoc = ast.NO_LOC


@dataclass
class _Prop:
    """A table property before it is sorted into TableDecl's fields."""

    kind: str
    value: Any
    is_const: bool = False
    loc: ast.SourceLoc = ast.NO_LOC
    annotations: list[ast.Annotation] = field(default_factory=list)


def _annos(x: Any) -> list[ast.Annotation]:
    return list(x) if x else []


def _present(items: Sequence[Any]) -> list[Any]:
    """Children of an optional list rule without lark's ``None`` placeholders."""
    return [x for x in items if x is not None]


_INT_RE = re.compile(r"(?:(\d+)([ws]))?(.*)\Z", re.S)
_BASES = {"x": 16, "X": 16, "b": 2, "B": 2, "o": 8, "O": 8, "d": 10, "D": 10}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "0": "\0"}


def _parse_int(text: str) -> tuple[int, int | None, bool]:
    """Value, width and signedness of a literal.

    ``'8w0x0A'`` → (10, 8, False); ``'8s127'`` → (127, 8, True); ``'1_0'`` → (10, None, False)
    """
    m = _INT_RE.match(text)
    assert m is not None
    width = int(m.group(1)) if m.group(1) else None
    digits = m.group(3).replace("_", "")
    base = 10
    if len(digits) > 2 and digits[0] == "0" and digits[1] in _BASES:
        base, digits = _BASES[digits[1]], digits[2:]
    return int(digits, base), width, m.group(2) == "s"


def _unescape(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


@v_args(meta=True)
class AstBuilder(Transformer_NonRecursive):
    """lark tree → ``ast`` nodes; each node's ``loc`` is its first token's position."""

    def __init__(self, locate: Locator, parse_body: BodyParser) -> None:
        super().__init__(visit_tokens=False)
        self._locate = locate
        self._parse_body = parse_body

    def _loc(self, meta: Any) -> ast.SourceLoc:
        if getattr(meta, "empty", True):
            return ast.NO_LOC
        return self._locate(meta.line, meta.column)

    def _tloc(self, tok: Token) -> ast.SourceLoc:
        return self._locate(tok.line or 1, tok.column or 1)

    # ----------------------------------------------------------------- names, annotations

    def name(self, meta: Any, ch: list) -> str:
        return str(ch[0])

    nontype_name = non_table_kw_name = member = name

    def annotations(self, meta: Any, ch: list) -> list[ast.Annotation]:
        return [self._annotation(tok) for tok in ch]

    def _annotation(self, tok: Token) -> ast.Annotation:
        raw = str(tok)
        m = re.match(r"@\s*([A-Za-z_][A-Za-z0-9_]*)\s*", raw)
        assert m is not None
        name, rest, loc = m.group(1), raw[m.end() :], self._tloc(tok)
        if name == "pragma" or not rest:
            return ast.Annotation(name, raw=rest.strip(), loc=loc)
        body = rest[1:-1]
        body_locate = self._body_locator(tok, raw, m.end() + 1)
        if rest[0] == "[":
            kv = self._parse_body(body, "annotation_kv", body_locate)
            return ast.Annotation(name, raw=body, kv=dict(kv or []), loc=loc)
        args = self._parse_body(body, "annotation_args", body_locate)
        return ast.Annotation(name, args=list(args or []), raw=body, loc=loc)

    def _body_locator(self, tok: Token, raw: str, offset: int) -> Locator:
        """Map positions inside an annotation body (parsed on its own) to the file."""
        before = raw[:offset]
        line0 = (tok.line or 1) + before.count("\n")
        col0 = (tok.column or 1) + offset if "\n" not in before else offset - before.rfind("\n")

        def locate(line: int, col: int) -> ast.SourceLoc:
            if line == 1:
                return self._locate(line0, col0 + col - 1)
            return self._locate(line0 + line - 1, col)

        return locate

    def annotation_args(self, meta: Any, ch: list) -> list[ast.Expr]:
        return _present(ch)

    def annotation_kv(self, meta: Any, ch: list) -> list[tuple[str, ast.Expr]]:
        return _present(ch)

    # ----------------------------------------------------------------- types

    def type_name(self, meta: Any, ch: list) -> ast.NamedType:
        return ast.NamedType(str(ch[0]), loc=self._loc(meta))

    def dot_type_name(self, meta: Any, ch: list) -> ast.NamedType:
        return ast.NamedType(str(ch[0]), dot_prefix=True, loc=self._loc(meta))

    def ident_type(self, meta: Any, ch: list) -> ast.NamedType:
        return ast.NamedType(str(ch[0]), loc=self._loc(meta))

    def specialized_type(self, meta: Any, ch: list) -> ast.NamedType:
        base, args = ch
        return ast.NamedType(base.name, list(args), base.dot_prefix, loc=self._loc(meta))

    def header_stack_type(self, meta: Any, ch: list) -> ast.HeaderStackType:
        return ast.HeaderStackType(ch[0], ch[1], loc=self._loc(meta))

    def tuple_type(self, meta: Any, ch: list) -> ast.TupleType:
        return ast.TupleType(list(ch[0]), loc=self._loc(meta))

    def bool_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.BoolType(loc=self._loc(meta))

    def error_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.ErrorType(loc=self._loc(meta))

    def string_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.StringType(loc=self._loc(meta))

    def match_kind_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.MatchKindType(loc=self._loc(meta))

    def void_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.VoidType(loc=self._loc(meta))

    def dontcare_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.DontCareType(loc=self._loc(meta))

    def bit_plain_type(self, meta: Any, ch: list) -> ast.Type:
        loc = self._loc(meta)
        return ast.BitType(ast.IntLit(1, text="1", loc=loc), loc=loc)

    def bit_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.BitType(ch[0], loc=self._loc(meta))

    def int_plain_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.IntType(None, loc=self._loc(meta))

    def int_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.IntType(ch[0], loc=self._loc(meta))

    def varbit_type(self, meta: Any, ch: list) -> ast.Type:
        return ast.VarbitType(ch[0], loc=self._loc(meta))

    def type_args(self, meta: Any, ch: list) -> list[ast.Type]:
        return list(ch)

    def type_params(self, meta: Any, ch: list) -> list[str]:
        return list(ch)

    # ----------------------------------------------------------------- declarations

    def program(self, meta: Any, ch: list) -> ast.Program:
        decls = [d for d in ch if d is not None]
        loc = decls[0].loc if decls else ast.NO_LOC
        return ast.Program(decls, loc=loc)

    def empty_declaration(self, meta: Any, ch: list) -> None:
        return None

    def constant_declaration(self, meta: Any, ch: list) -> ast.ConstDecl:
        annos, typ, name, value = ch
        return ast.ConstDecl(name, typ, value, annotations=_annos(annos), loc=self._loc(meta))

    def variable_declaration(self, meta: Any, ch: list) -> ast.VarDecl:
        annos, typ, name, init = ch
        return ast.VarDecl(name, typ, init, annotations=_annos(annos), loc=self._loc(meta))

    def instantiation(self, meta: Any, ch: list) -> ast.Instantiation:
        annos, typ, args, name = ch[:4]
        init = ch[4] if len(ch) > 4 else []
        return ast.Instantiation(
            name, typ, args, list(init), annotations=_annos(annos), loc=self._loc(meta)
        )

    def object_initializer(self, meta: Any, ch: list) -> list[ast.Decl]:
        return list(ch)

    def parameters(self, meta: Any, ch: list) -> list[ast.Param]:
        return _present(ch)

    def ctor_params(self, meta: Any, ch: list) -> list[ast.Param]:
        return list(ch[0])

    def parameter(self, meta: Any, ch: list) -> ast.Param:
        annos, direction, typ, name, default = ch
        return ast.Param(direction or "", typ, name, default, _annos(annos), loc=self._loc(meta))

    def direction(self, meta: Any, ch: list) -> str:
        return str(ch[0])

    def struct_field(self, meta: Any, ch: list) -> ast.StructField:
        annos, typ, name = ch
        return ast.StructField(typ, name, _annos(annos), loc=self._loc(meta))

    def _struct_like(self, cls: type, meta: Any, ch: list) -> Any:
        annos, name, tparams, *fields = ch
        return cls(
            name,
            list(fields),
            list(tparams or []),
            annotations=_annos(annos),
            loc=self._loc(meta),
        )

    def header_declaration(self, meta: Any, ch: list) -> ast.HeaderDecl:
        return self._struct_like(ast.HeaderDecl, meta, ch)

    def header_union_declaration(self, meta: Any, ch: list) -> ast.HeaderUnionDecl:
        return self._struct_like(ast.HeaderUnionDecl, meta, ch)

    def struct_declaration(self, meta: Any, ch: list) -> ast.StructDecl:
        return self._struct_like(ast.StructDecl, meta, ch)

    def enum_declaration(self, meta: Any, ch: list) -> ast.EnumDecl:
        annos, name, *members = ch
        return ast.EnumDecl(
            name, [(m, None) for m in members], annotations=_annos(annos), loc=self._loc(meta)
        )

    def serializable_enum(self, meta: Any, ch: list) -> ast.EnumDecl:
        annos, typ, name, *members = ch
        return ast.EnumDecl(
            name, list(members), typ, annotations=_annos(annos), loc=self._loc(meta)
        )

    def specified_id(self, meta: Any, ch: list) -> tuple[str, ast.Expr]:
        return (ch[0], ch[1])

    def error_declaration(self, meta: Any, ch: list) -> ast.ErrorDecl:
        return ast.ErrorDecl("error", list(ch), loc=self._loc(meta))

    def match_kind_declaration(self, meta: Any, ch: list) -> ast.MatchKindDecl:
        return ast.MatchKindDecl("match_kind", list(ch), loc=self._loc(meta))

    def typedef_declaration(self, meta: Any, ch: list) -> ast.TypedefDecl:
        annos, typ, name = ch
        return ast.TypedefDecl(name, typ, annotations=_annos(annos), loc=self._loc(meta))

    def newtype_declaration(self, meta: Any, ch: list) -> ast.TypedefDecl:
        annos, typ, name = ch
        return ast.TypedefDecl(
            name, typ, is_newtype=True, annotations=_annos(annos), loc=self._loc(meta)
        )

    def function_prototype(self, meta: Any, ch: list) -> _Proto:
        ret, name, tparams, params = ch
        return _Proto(ret, name, list(tparams or []), params, self._loc(meta))

    def extern_object(self, meta: Any, ch: list) -> ast.ExternDecl:
        annos, name, tparams, *methods = ch
        return ast.ExternDecl(
            str(name),
            list(methods),
            list(tparams or []),
            annotations=_annos(annos),
            loc=self._loc(meta),
        )

    def extern_function(self, meta: Any, ch: list) -> ast.FunctionDecl:
        annos, proto = ch
        return ast.FunctionDecl(
            proto.name,
            proto.return_type,
            proto.params,
            None,
            proto.type_params,
            is_extern=True,
            annotations=_annos(annos),
            loc=self._loc(meta),
        )

    def constructor_prototype(self, meta: Any, ch: list) -> ast.MethodDecl:
        annos, name, params = ch
        return ast.MethodDecl(
            str(name), None, params, annotations=_annos(annos), loc=self._loc(meta)
        )

    def method_prototype(self, meta: Any, ch: list) -> ast.MethodDecl:
        annos, *rest = ch
        proto = rest[-1]
        return ast.MethodDecl(
            proto.name,
            proto.return_type,
            proto.params,
            proto.type_params,
            is_abstract=len(rest) == 2,
            annotations=_annos(annos),
            loc=self._loc(meta),
        )

    def function_declaration(self, meta: Any, ch: list) -> ast.FunctionDecl:
        annos, proto, body = ch
        return ast.FunctionDecl(
            proto.name,
            proto.return_type,
            proto.params,
            body,
            proto.type_params,
            annotations=_annos(annos),
            loc=self._loc(meta),
        )

    def package_type_declaration(self, meta: Any, ch: list) -> ast.PackageTypeDecl:
        annos, name, tparams, params = ch
        return ast.PackageTypeDecl(
            name, params, list(tparams or []), annotations=_annos(annos), loc=self._loc(meta)
        )

    def action_declaration(self, meta: Any, ch: list) -> ast.ActionDecl:
        annos, name, params, body = ch
        return ast.ActionDecl(name, params, body, annotations=_annos(annos), loc=self._loc(meta))

    # ----------------------------------------------------------------- parsers

    def parser_type_declaration(self, meta: Any, ch: list) -> ast.ParserTypeDecl:
        annos, name, tparams, params = ch
        return ast.ParserTypeDecl(
            name, params, list(tparams or []), annotations=_annos(annos), loc=self._loc(meta)
        )

    def parser_declaration(self, meta: Any, ch: list) -> ast.ParserDecl:
        annos, name, tparams, params, ctor, *body = ch
        states = [x for x in body if isinstance(x, ast.ParserState)]
        local = [x for x in body if not isinstance(x, ast.ParserState)]
        return ast.ParserDecl(
            name,
            params,
            local,
            states,
            list(tparams or []),
            list(ctor or []),
            annotations=_annos(annos),
            loc=self._loc(meta),
        )

    def value_set_declaration(self, meta: Any, ch: list) -> ast.ValueSetDecl:
        annos, typ, size, name = ch
        return ast.ValueSetDecl(name, typ, size, annotations=_annos(annos), loc=self._loc(meta))

    def parser_state(self, meta: Any, ch: list) -> ast.ParserState:
        annos, name, *stmts, trans = ch
        return ast.ParserState(
            name, [self._stmt(s) for s in stmts], trans, _annos(annos), loc=self._loc(meta)
        )

    def transition_statement(self, meta: Any, ch: list) -> ast.Transition:
        trans = ch[0]
        trans.loc = self._loc(meta)
        return trans

    def direct_transition(self, meta: Any, ch: list) -> ast.DirectTransition:
        return ast.DirectTransition(ch[0], loc=self._loc(meta))

    def select_expression(self, meta: Any, ch: list) -> ast.SelectTransition:
        exprs, *cases = ch
        return ast.SelectTransition(exprs, list(cases), loc=self._loc(meta))

    def select_case(self, meta: Any, ch: list) -> ast.SelectCase:
        return ast.SelectCase(ch[0], ch[1], loc=self._loc(meta))

    def tuple_keyset(self, meta: Any, ch: list) -> ast.Expr:
        if len(ch) == 1:
            return ch[0]
        return ast.ListExpr(list(ch), loc=self._loc(meta))

    def mask(self, meta: Any, ch: list) -> ast.Mask:
        return ast.Mask(ch[0], ch[1], loc=self._loc(meta))

    def range(self, meta: Any, ch: list) -> ast.Range:
        return ast.Range(ch[0], ch[1], loc=self._loc(meta))

    def default_keyset(self, meta: Any, ch: list) -> ast.Default:
        return ast.Default(loc=self._loc(meta))

    def dontcare_keyset(self, meta: Any, ch: list) -> ast.DontCare:
        return ast.DontCare(loc=self._loc(meta))

    # ----------------------------------------------------------------- controls, tables

    def control_type_declaration(self, meta: Any, ch: list) -> ast.ControlTypeDecl:
        annos, name, tparams, params = ch
        return ast.ControlTypeDecl(
            name, params, list(tparams or []), annotations=_annos(annos), loc=self._loc(meta)
        )

    def control_declaration(self, meta: Any, ch: list) -> ast.ControlDecl:
        annos, name, tparams, params, ctor, *local, body = ch
        return ast.ControlDecl(
            name,
            params,
            list(local),
            body,
            list(tparams or []),
            list(ctor or []),
            annotations=_annos(annos),
            loc=self._loc(meta),
        )

    def empty_params(self, meta: Any, ch: list) -> ast.SourceLoc:
        return self._loc(meta)

    def table_declaration(self, meta: Any, ch: list) -> ast.TableDecl:
        annos, name, parens, *props = ch
        table = ast.TableDecl(name, [], [], annotations=_annos(annos), loc=self._loc(meta))
        table.empty_params = parens
        for prop in props:
            self._add_table_property(table, prop)
        return table

    def _add_table_property(self, table: ast.TableDecl, prop: _Prop) -> None:
        if prop.kind == "key":
            table.keys = prop.value
        elif prop.kind == "actions":
            table.actions = prop.value
        elif prop.kind == "entries":
            table.entries, table.entries_const = prop.value, prop.is_const
        elif prop.kind == "default_action":
            table.default_action = self._action_ref_of(prop.value)
            table.default_action_const = prop.is_const
        else:
            table.properties.append(
                ast.TableProperty(
                    prop.kind, prop.value, prop.is_const, prop.annotations, loc=prop.loc
                )
            )

    def _action_ref_of(self, expr: ast.Expr) -> ast.ActionRef:
        """``default_action = a(1, 2)`` is parsed as an expression; turn it into an ActionRef."""
        args: list[ast.Argument] = []
        if isinstance(expr, ast.Call) and not expr.type_args:
            args, expr = expr.args, expr.func
        if isinstance(expr, ast.Name):
            return ast.ActionRef(expr.name, args, loc=expr.loc)
        raise P4Error(expr.loc, "default_action must name an action, e.g. 'drop()'")

    def key_property(self, meta: Any, ch: list) -> _Prop:
        return _Prop("key", list(ch), loc=self._loc(meta))

    def actions_property(self, meta: Any, ch: list) -> _Prop:
        return _Prop("actions", list(ch), loc=self._loc(meta))

    def entries_property(self, meta: Any, ch: list) -> _Prop:
        annos, const, *entries = ch
        return _Prop("entries", list(entries), const is not None, self._loc(meta), _annos(annos))

    def custom_property(self, meta: Any, ch: list) -> _Prop:
        annos, const, name, value = ch
        return _Prop(name, value, const is not None, self._loc(meta), _annos(annos))

    def key_element(self, meta: Any, ch: list) -> ast.KeyElement:
        expr, kind, annos = ch
        return ast.KeyElement(expr, kind, _annos(annos), loc=self._loc(meta))

    def action_list_item(self, meta: Any, ch: list) -> ast.ActionRef:
        annos, ref = ch
        ref.annotations = _annos(annos) + ref.annotations
        if annos:
            ref.loc = self._loc(meta)
        return ref

    def action_ref(self, meta: Any, ch: list) -> ast.ActionRef:
        name, args = ch
        return ast.ActionRef(name.name, list(args or []), loc=self._loc(meta))

    def table_entry(self, meta: Any, ch: list) -> ast.TableEntry:
        annos, const, prio, keyset, action, post_annos = ch
        keys = keyset.elems if isinstance(keyset, ast.ListExpr) else [keyset]
        return ast.TableEntry(
            list(keys),
            action,
            prio,
            const is not None,
            _annos(annos) + _annos(post_annos),
            loc=self._loc(meta),
        )

    def entry_priority(self, meta: Any, ch: list) -> ast.Expr:
        return ch[0]

    # ----------------------------------------------------------------- statements

    def _stmt(self, item: Any) -> ast.Stmt:
        """Declarations inside blocks become statements."""
        if isinstance(item, ast.VarDecl):
            return ast.VarDeclStmt(item, loc=item.loc)
        if isinstance(item, ast.ConstDecl):
            return ast.ConstDeclStmt(item, loc=item.loc)
        if isinstance(item, ast.Instantiation):
            raise P4Error(
                item.loc,
                f"instantiation '{item.name}' is not allowed inside a block; "
                "declare it in the enclosing parser or control",
            )
        return item

    def block(self, meta: Any, ch: list) -> ast.Block:
        return ast.Block([self._stmt(s) for s in ch], loc=self._loc(meta))

    def block_statement(self, meta: Any, ch: list) -> ast.Block:
        annos, block = ch
        block.annotations = _annos(annos)
        block.loc = self._loc(meta)
        return block

    def assignment_statement(self, meta: Any, ch: list) -> ast.Assign:
        return ast.Assign(ch[0], ch[1], loc=self._loc(meta))

    def compound_assignment(self, meta: Any, ch: list) -> ast.Assign:
        """``a += b`` is kept as ``a = a + b`` (the AST has no compound assignment)."""
        target, op, value = ch
        loc = self._loc(meta)
        left = copy.deepcopy(target)
        binary = ast.Binary(str(op)[:-1], left, value, loc=loc)
        return ast.Assign(target, binary, compound=True, loc=loc)

    def call_statement(self, meta: Any, ch: list) -> ast.CallStmt:
        loc = self._loc(meta)
        return ast.CallStmt(ast.Call(ch[0], ch[1], loc=loc), loc=loc)

    def generic_call_statement(self, meta: Any, ch: list) -> ast.CallStmt:
        loc = self._loc(meta)
        return ast.CallStmt(ast.Call(ch[0], ch[2], list(ch[1]), loc=loc), loc=loc)

    def conditional_statement(self, meta: Any, ch: list) -> ast.If:
        cond, then, other = ch
        return ast.If(cond, then, other, loc=self._loc(meta))

    def empty_statement(self, meta: Any, ch: list) -> ast.Empty:
        return ast.Empty(loc=self._loc(meta))

    def exit_statement(self, meta: Any, ch: list) -> ast.Exit:
        return ast.Exit(loc=self._loc(meta))

    def return_statement(self, meta: Any, ch: list) -> ast.Return:
        return ast.Return(ch[0], loc=self._loc(meta))

    def for_statement(self, meta: Any, ch: list) -> ast.For:
        init, cond, update, body = ch
        inits = [self._stmt(s) for s in init or []]
        return ast.For(inits, cond, list(update or []), body, loc=self._loc(meta))

    def for_inits(self, meta: Any, ch: list) -> list:
        return list(ch)

    def for_updates(self, meta: Any, ch: list) -> list:
        return list(ch)

    def for_var_decl(self, meta: Any, ch: list) -> ast.VarDecl:
        typ, name, init = ch
        return ast.VarDecl(name, typ, init, loc=self._loc(meta))

    def for_in_statement(self, meta: Any, ch: list) -> ast.ForIn:
        typ, name, _in, coll, body = ch
        return ast.ForIn(typ, name, coll, None, body, loc=self._loc(meta))

    def for_range_statement(self, meta: Any, ch: list) -> ast.ForIn:
        typ, name, _in, lo, hi, body = ch
        return ast.ForIn(typ, name, lo, hi, body, loc=self._loc(meta))

    def break_statement(self, meta: Any, ch: list) -> ast.Break:
        return ast.Break(loc=self._loc(meta))

    def continue_statement(self, meta: Any, ch: list) -> ast.Continue:
        return ast.Continue(loc=self._loc(meta))

    def switch_case(self, meta: Any, ch: list) -> ast.SwitchCase:
        return ast.SwitchCase([ch[0]], ch[1], loc=self._loc(meta))

    def switch_fallthrough(self, meta: Any, ch: list) -> ast.SwitchCase:
        return ast.SwitchCase([ch[0]], None, loc=self._loc(meta))

    def switch_statement(self, meta: Any, ch: list) -> ast.Switch:
        expr, *cases = ch
        folded: list[ast.SwitchCase] = []
        pending: ast.SwitchCase | None = None
        for case in cases:
            if pending is None:
                pending = case
            else:
                pending.labels.extend(case.labels)
                pending.body = case.body
            if pending.body is not None:
                folded.append(pending)
                pending = None
        if pending is not None:  # trailing labels without a block of their own
            folded.append(pending)
        return ast.Switch(expr, folded, loc=self._loc(meta))

    # ----------------------------------------------------------------- expressions

    def expression_list(self, meta: Any, ch: list) -> list[ast.Expr]:
        return _present(ch)

    def ternary_expr(self, meta: Any, ch: list) -> ast.Ternary:
        return ast.Ternary(ch[0], ch[1], ch[2], loc=self._loc(meta))

    def binop(self, meta: Any, ch: list) -> ast.Binary:
        return ast.Binary(str(ch[1]), ch[0], ch[2], loc=self._loc(meta))

    def lt_expr(self, meta: Any, ch: list) -> ast.Binary:
        return ast.Binary("<", ch[0], ch[1], loc=self._loc(meta))

    def gt_expr(self, meta: Any, ch: list) -> ast.Binary:
        return ast.Binary(">", ch[0], ch[1], loc=self._loc(meta))

    def shr_expr(self, meta: Any, ch: list) -> ast.Binary:
        return ast.Binary(">>", ch[0], ch[1], loc=self._loc(meta))

    def _unary(self, op: str, meta: Any, ch: list) -> ast.Unary:
        return ast.Unary(op, ch[0], loc=self._loc(meta))

    def not_expr(self, meta: Any, ch: list) -> ast.Unary:
        return self._unary("!", meta, ch)

    def bnot_expr(self, meta: Any, ch: list) -> ast.Unary:
        return self._unary("~", meta, ch)

    def neg_expr(self, meta: Any, ch: list) -> ast.Unary:
        return self._unary("-", meta, ch)

    def pos_expr(self, meta: Any, ch: list) -> ast.Unary:
        return self._unary("+", meta, ch)

    def cast_expr(self, meta: Any, ch: list) -> ast.Expr:
        typ, expr = ch
        if isinstance(expr, ast.StructInit) and expr.type is None:
            expr.type = typ  # (T){ f = 1 } is a typed struct initialiser
            expr.loc = self._loc(meta)
            return expr
        return ast.Cast(typ, expr, loc=self._loc(meta))

    def member_expr(self, meta: Any, ch: list) -> ast.Member:
        return ast.Member(ch[0], ch[1], loc=self._loc(meta))

    def index_expr(self, meta: Any, ch: list) -> ast.Index:
        return ast.Index(ch[0], ch[1], loc=self._loc(meta))

    def slice_expr(self, meta: Any, ch: list) -> ast.Slice:
        return ast.Slice(ch[0], ch[1], ch[2], loc=self._loc(meta))

    def call_expr(self, meta: Any, ch: list) -> ast.Call:
        return ast.Call(ch[0], ch[1], loc=self._loc(meta))

    def generic_call_expr(self, meta: Any, ch: list) -> ast.Call:
        return ast.Call(ch[0], ch[2], list(ch[1]), loc=self._loc(meta))

    def ctor_call(self, meta: Any, ch: list) -> ast.Call:
        typ, args = ch
        loc = self._loc(meta)
        func = ast.Name(typ.name, typ.dot_prefix, loc=loc)
        return ast.Call(func, args, list(typ.type_args), loc=loc)

    def int_lit(self, meta: Any, ch: list) -> ast.IntLit:
        text = str(ch[0])
        try:
            value, width, signed = _parse_int(text)
        except ValueError:
            raise P4Error(self._loc(meta), f"malformed integer literal '{text}'") from None
        if width is not None and width == 0 and value != 0:
            raise P4Error(self._loc(meta), f"integer literal '{text}' has width 0")
        return ast.IntLit(value, width, signed, text, loc=self._loc(meta))

    def string_lit(self, meta: Any, ch: list) -> ast.StringLit:
        return ast.StringLit(_unescape(str(ch[0])[1:-1]), loc=self._loc(meta))

    def true_lit(self, meta: Any, ch: list) -> ast.BoolLit:
        return ast.BoolLit(True, loc=self._loc(meta))

    def false_lit(self, meta: Any, ch: list) -> ast.BoolLit:
        return ast.BoolLit(False, loc=self._loc(meta))

    def this_expr(self, meta: Any, ch: list) -> ast.Name:
        return ast.Name("this", loc=self._loc(meta))

    def name_expr(self, meta: Any, ch: list) -> ast.Name:
        return ast.Name(ch[0], loc=self._loc(meta))

    def dot_name_expr(self, meta: Any, ch: list) -> ast.Name:
        return ast.Name(ch[0], dot_prefix=True, loc=self._loc(meta))

    def list_expr(self, meta: Any, ch: list) -> ast.ListExpr:
        return ast.ListExpr(list(ch), loc=self._loc(meta))

    def struct_init(self, meta: Any, ch: list) -> ast.StructInit:
        return ast.StructInit(list(ch), loc=self._loc(meta))

    def kv_pair(self, meta: Any, ch: list) -> tuple[str, ast.Expr]:
        return (ch[0], ch[1])

    def type_member(self, meta: Any, ch: list) -> ast.Member:
        typ, member = ch
        loc = self._loc(meta)
        return ast.Member(ast.Name(typ.name, typ.dot_prefix, loc=loc), member, loc=loc)

    def error_member(self, meta: Any, ch: list) -> ast.ErrorMember:
        return ast.ErrorMember(ch[0], loc=self._loc(meta))

    def arguments(self, meta: Any, ch: list) -> list[ast.Argument]:
        return [
            a if isinstance(a, ast.Argument) else ast.Argument(a, loc=a.loc) for a in _present(ch)
        ]

    def type_expr(self, meta: Any, ch: list) -> ast.TypeExpr:
        return ast.TypeExpr(ch[0], loc=self._loc(meta))

    def named_arg(self, meta: Any, ch: list) -> ast.Argument:
        return ast.Argument(ch[1], ch[0], loc=self._loc(meta))

    def dontcare_arg(self, meta: Any, ch: list) -> ast.Argument:
        loc = self._loc(meta)
        return ast.Argument(ast.DontCare(loc=loc), loc=loc)

    def named_dontcare_arg(self, meta: Any, ch: list) -> ast.Argument:
        loc = self._loc(meta)
        return ast.Argument(ast.DontCare(loc=loc), ch[0], loc=loc)
