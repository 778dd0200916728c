"""P4_16 parser: preprocessed source text → ``ast.Program``.

Example::

    prog = parse_program("basic.p4")                 # runs the preprocessor first
    prog = parse_text("const bit<8> N = 4;")          # a program given as text
    [d.name for d in prog.declarations]               # ['N']

The grammar (``grammar.lark``) is LALR(1). P4 needs to know which identifiers name types
(``(T) x`` is a cast, ``T x;`` a declaration), so a post-lexer pass over the whole token
stream first collects the names the program declares as types and re-labels those tokens
``TYPE_IDENTIFIER`` (see ``_fix_tokens``). Every syntax error becomes a ``P4Error`` at the
offending token's original file, line and column.
"""

from __future__ import annotations

import contextvars
import copy
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)
from lark.lark import PostLex

from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error
from p4sim.frontend.preprocessor import preprocess, preprocess_text

__all__ = ["parse_program", "parse_source", "parse_text"]

Locator = Callable[[int, int], ast.SourceLoc]

_GRAMMAR = Path(__file__).with_name("grammar.lark")
# Text of the parse in progress: the post-lexer needs it to cut out annotation bodies.
_TEXT: contextvars.ContextVar[str] = contextvars.ContextVar("p4sim_parse_text", default="")


# --------------------------------------------------------------------------- public API


def parse_program(
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
) -> ast.Program:
    """Preprocess and parse the P4 file at ``path``; P4Error on any mistake in it."""
    src = preprocess(path, include_dirs, defines)
    return parse_source(src.text, src.location, src.files)


def parse_text(
    text: str,
    filename: str = "<string>",
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
) -> ast.Program:
    """Preprocess and parse ``text`` as if read from ``filename``."""
    src = preprocess_text(text, filename, include_dirs, defines)
    return parse_source(src.text, src.location, src.files)


def parse_source(text: str, locate: Locator, files: Sequence[str] = ()) -> ast.Program:
    """Parse already-preprocessed ``text``; ``locate(line, col)`` maps its positions back
    to the original files (the preprocessor's ``PreprocessedSource.location``)."""
    tree = _run(text, "program", locate)
    prog = _build(tree, locate)
    assert isinstance(prog, ast.Program)
    prog.files = list(files)
    return prog


# --------------------------------------------------------------------------- lark driver


class _LexPassError(Exception):
    def __init__(self, tok: Token, message: str) -> None:
        super().__init__(message)
        self.line = tok.line or 1
        self.col = tok.column or 1
        self.message = message


class _P4PostLex(PostLex):
    """Runs ``_fix_tokens`` over the complete token stream of one parse."""

    # Terminals the grammar never mentions but the post-lexer consumes.
    always_accept = ("_AT", "IDENTIFIER", "_LT", "_RANGLE")

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        yield from _fix_tokens(list(stream), _TEXT.get())


_LARK: Lark | None = None


def _lark() -> Lark:
    """The LALR parser, built once per process and reused."""
    global _LARK
    if _LARK is None:
        _LARK = Lark(
            _GRAMMAR.read_text(encoding="utf-8"),
            parser="lalr",
            lexer="basic",
            postlex=_P4PostLex(),
            start=["program", "annotation_args", "annotation_kv"],
            propagate_positions=True,
            maybe_placeholders=True,
            # lark keeps the LALR tables in the temp directory, keyed by a hash of the
            # grammar and options: later processes load them in ~50 ms instead of ~500 ms.
            cache=True,
        )
    return _LARK


def _run(text: str, start: str, locate: Locator) -> Tree:
    token = _TEXT.set(text)
    try:
        return _lark().parse(text, start=start)
    except _LexPassError as err:
        raise P4Error(locate(err.line, err.col), err.message) from None
    except UnexpectedInput as err:
        raise _syntax_error(err, text, locate) from None
    except LarkError as err:  # any other lark failure is still about the program text
        raise P4Error(locate(1, 1), f"syntax error: {err}") from None
    finally:
        _TEXT.reset(token)


def _build(tree: Tree, locate: Locator) -> Any:
    try:
        return _AstBuilder(locate).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, P4Error):
            raise err.orig_exc from None
        raise err.orig_exc from err


def _parse_annotation_body(body: str, start: str, locate: Locator) -> Any | None:
    """Parse an annotation body as expressions / key=value pairs; None when it is not."""
    token = _TEXT.set(body)
    try:
        tree = _lark().parse(body, start=start)
    except (LarkError, _LexPassError):
        return None
    finally:
        _TEXT.reset(token)
    try:
        return _build(tree, locate)
    except P4Error:
        return None


# --------------------------------------------------------------------------- token pass

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TYPE_DECL_KWS = frozenset({"header", "header_union", "struct", "parser", "control", "package"})
# Tokens after which `Ident1 Ident2` starts a declaration, making Ident1 a type.
_DECL_PRECEDERS = frozenset(
    {
        "(",
        ",",
        ";",
        "{",
        "}",
        "in",
        "out",
        "inout",
        "const",
        "typedef",
        "type",
        "extern",
        "abstract",
    }
)
# Tokens that may appear inside the type arguments of a call: f<bit<8>, T[2]>(...).
_TYPEISH = frozenset(
    {
        ",",
        ".",
        "[",
        "]",
        "bit",
        "int",
        "varbit",
        "bool",
        "string",
        "error",
        "tuple",
        "void",
        "_",
        "match_kind",
    }
)
_WORDISH = frozenset({"IDENTIFIER", "TYPE_IDENTIFIER", "INTEGER"})


def _fix_tokens(toks: list[Token], text: str) -> list[Token]:
    """Fold annotations, mark type names, type-argument '<' and '>>' (see grammar.lark)."""
    toks = _fold_annotations(toks, text)
    _mark_type_names(toks)
    _mark_type_arg_angles(toks)
    return _mark_right_shifts(toks)


def _mark_right_shifts(toks: list[Token]) -> list[Token]:
    """'>' glued to a following '>' becomes _RSHIFT; '>' glued to '>=' is ``>>=``."""
    out: list[Token] = []
    i, n = 0, len(toks)
    while i < n:
        tok = toks[i]
        nxt = toks[i + 1] if i + 1 < n else None
        if tok.type == "_RANGLE" and nxt is not None and nxt.start_pos == tok.end_pos:
            if nxt.type == "_RANGLE":
                tok = Token.new_borrow_pos("_RSHIFT", str(tok), tok)
            elif nxt.type == "GE":
                tok = Token(
                    "COMPOUND_ASSIGN",
                    ">>=",
                    tok.start_pos,
                    tok.line,
                    tok.column,
                    nxt.end_line,
                    nxt.end_column,
                    nxt.end_pos,
                )
                i += 1
        out.append(tok)
        i += 1
    return out


def _mark_type_names(toks: list[Token]) -> None:
    """Re-label identifiers that name types as TYPE_IDENTIFIER.

    Declared type names (header, struct, typedef, extern, parser, ...) are types
    everywhere; type parameters (``<H, M>``) only inside their own declaration, so that
    v1model's ``T`` or ``H`` do not stop a program from naming a variable ``T``.
    """
    scopes = _type_param_scopes(toks)
    in_scope: list[frozenset[str]] = [frozenset()] * len(toks)
    for names, start, end in scopes:
        for j in range(start, end):
            in_scope[j] = in_scope[j] | names
    types = _collect_type_names(toks, in_scope)
    for i, tok in enumerate(toks):
        if tok.type == "IDENTIFIER" and (tok in types or tok in in_scope[i]):
            toks[i] = Token.new_borrow_pos("TYPE_IDENTIFIER", str(tok), tok)


def _fold_annotations(toks: list[Token], text: str) -> list[Token]:
    """Replace each ``@name``, ``@name(...)``, ``@name[...]``, ``@pragma ...`` by one
    ANNOTATION token whose value is the annotation's source text."""
    if not any(t.type == "_AT" for t in toks):
        return toks
    out: list[Token] = []
    i, n = 0, len(toks)
    while i < n:
        at = toks[i]
        if at.type != "_AT":
            out.append(at)
            i += 1
            continue
        if i + 1 >= n or not _NAME_RE.match(str(toks[i + 1])):
            raise _LexPassError(at, "expected an annotation name after '@'")
        last = i + 1
        name = toks[last]
        if str(name) == "pragma":
            while last + 1 < n and toks[last + 1].line == name.line:
                last += 1
        elif last + 1 < n and str(toks[last + 1]) in ("(", "["):
            last = _matching_close(toks, last + 1, at)
        end = toks[last]
        out.append(
            Token(
                "ANNOTATION",
                text[at.start_pos : end.end_pos],
                at.start_pos,
                at.line,
                at.column,
                end.end_line,
                end.end_column,
                end.end_pos,
            )
        )
        i = last + 1
    return out


def _matching_close(toks: list[Token], i: int, at: Token) -> int:
    """Index of the bracket closing ``toks[i]`` ('(' or '[')."""
    opener = str(toks[i])
    closer = ")" if opener == "(" else "]"
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].type == "STRING_LITERAL":
            continue
        val = str(toks[j])
        if val == opener:
            depth += 1
        elif val == closer:
            depth -= 1
            if depth == 0:
                return j
    raise _LexPassError(at, f"unterminated annotation: missing '{closer}'")


def _tok_val(toks: list[Token], i: int) -> str:
    return str(toks[i]) if 0 <= i < len(toks) and toks[i].type != "STRING_LITERAL" else ""


def _collect_type_names(toks: list[Token], in_scope: list[frozenset[str]]) -> set[str]:
    """Names the program declares as types, as one flat set (P4 programs rarely reuse a
    type name for a variable, and the grammar accepts type names wherever a name is
    declared)."""
    n = len(toks)
    names: set[str] = set()

    def val(i: int) -> str:
        return _tok_val(toks, i)

    def ident(i: int) -> bool:
        return 0 <= i < n and toks[i].type == "IDENTIFIER"

    def find(i: int, target: str, limit: int) -> int:
        for j in range(i, min(n, i + limit)):
            if val(j) == target:
                return j
        return -1

    for i, tok in enumerate(toks):
        kind, word = tok.type, val(i)
        if kind == "IDENTIFIER":
            # `Ident1 Ident2` at the start of a declaration: Ident1 is a type.
            prev = toks[i - 1] if i > 0 else None
            if (
                (ident(i + 1) or _stack_type_then_name(toks, i))
                and word not in in_scope[i]
                and (prev is None or prev.type == "ANNOTATION" or val(i - 1) in _DECL_PRECEDERS)
            ):
                names.add(word)
        elif kind in ("STRING_LITERAL", "INTEGER", "ANNOTATION"):
            continue
        elif word in _TYPE_DECL_KWS:
            if ident(i + 1):
                names.add(val(i + 1))
        elif word == "extern":
            if ident(i + 1) and val(i + 2) in ("<", "{"):
                names.add(val(i + 1))
        elif word == "enum":
            j = find(i, "{", 16)
            if ident(j - 1):
                names.add(val(j - 1))
        elif word == "typedef" or (
            word == "type"
            and (i == 0 or val(i - 1) in (";", "}") or toks[i - 1].type == "ANNOTATION")
        ):
            j = find(i, ";", 64)
            if ident(j - 1):
                names.add(val(j - 1))
    return names


def _stack_type_then_name(toks: list[Token], i: int) -> bool:
    """``T[4] name`` at ``i``: a header stack declaration of (so far unknown) type T."""
    if _tok_val(toks, i + 1) != "[":
        return False
    for j in range(i + 2, min(len(toks) - 1, i + 12)):
        if _tok_val(toks, j) == "]":
            return toks[j + 1].type == "IDENTIFIER"
    return False


def _type_param_scopes(toks: list[Token]) -> list[tuple[frozenset[str], int, int]]:
    """``(names, start, end)`` for each ``name<A, B>`` followed by '(' or '{': the type
    parameters of a generic declaration (or the type arguments of a call, which are types
    anyway), valid from the start of that declaration to its end."""
    scopes = []
    for i, tok in enumerate(toks):
        if tok.type == "_LT" and i > 0 and toks[i - 1].type == "IDENTIFIER":
            params, close = _type_params_at(toks, i)
            if params:
                scopes.append((frozenset(params), _decl_start(toks, i), _decl_end(toks, close + 1)))
    return scopes


def _type_params_at(toks: list[Token], i: int) -> tuple[list[str], int]:
    """``<A, B>`` followed by '(' or '{' at ``i``: the names and the index of '>'."""
    params: list[str] = []
    j = i + 1
    while j < len(toks) and toks[j].type == "IDENTIFIER":
        params.append(str(toks[j]))
        if _tok_val(toks, j + 1) == ",":
            j += 2
        elif _tok_val(toks, j + 1) == ">" and _tok_val(toks, j + 2) in ("(", "{"):
            return params, j + 1
        else:
            break
    return [], i


def _decl_start(toks: list[Token], i: int) -> int:
    """Index after the ';', '{' or '}' that precedes ``toks[i]``'s declaration."""
    while i > 0 and _tok_val(toks, i - 1) not in (";", "{", "}"):
        i -= 1
    return i


def _decl_end(toks: list[Token], i: int) -> int:
    """Index just past the ';' or the body '}' that ends the declaration continuing at i."""
    depth = 0
    for j in range(i, len(toks)):
        word = _tok_val(toks, j)
        if word in ("(", "{", "["):
            depth += 1
        elif word in (")", "]"):
            depth -= 1
        elif word == "}":
            depth -= 1
            if depth <= 0:
                return j + 1
        elif word == ";" and depth <= 0:
            return j + 1
    return len(toks)


def _mark_type_arg_angles(toks: list[Token]) -> None:
    """Re-label '<' after a name as ``_TARGS_LT`` when it opens ``<types>(``: the grammar
    then tells ``f<T>(x)`` from ``a < b``."""
    n = len(toks)
    for i in range(1, n):
        if toks[i].type != "_LT" or toks[i - 1].type not in ("IDENTIFIER", "TYPE_IDENTIFIER"):
            continue
        depth, j = 1, i + 1
        while j < n and j - i < 64:
            tok = toks[j]
            if tok.type == "_LT":
                depth += 1
            elif tok.type == "_RANGLE":
                depth -= 1
                if depth == 0:
                    break
            elif tok.type not in _WORDISH and str(tok) not in _TYPEISH:
                break
            j += 1
        if depth == 0 and j + 1 < n and str(toks[j + 1]) == "(":
            toks[i] = Token.new_borrow_pos("_TARGS_LT", str(toks[i]), toks[i])


# --------------------------------------------------------------------------- AST builder


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
class _AstBuilder(Transformer_NonRecursive):
    """lark tree → ``ast`` nodes; each node's ``loc`` is its first token's position."""

    def __init__(self, locate: Locator) -> None:
        super().__init__(visit_tokens=False)
        self._locate = locate

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
            kv = _parse_annotation_body(body, "annotation_kv", body_locate)
            return ast.Annotation(name, raw=body, kv=dict(kv or []), loc=loc)
        args = _parse_annotation_body(body, "annotation_args", body_locate)
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


# --------------------------------------------------------------------------- errors

_TOKEN_NAMES = {
    "IDENTIFIER": "a name",
    "TYPE_IDENTIFIER": "a type name",
    "INTEGER": "an integer",
    "STRING_LITERAL": "a string",
    "ANNOTATION": "an annotation",
    "_LT": "'<'",
    "_TARGS_LT": "'<'",
    "_RANGLE": "'>'",
    "_RSHIFT": "'>'",
    "COMPOUND_ASSIGN": "an assignment operator",
    "$END": "end of file",
}

# When the parser would accept many tokens, name the one a person most likely forgot.
_LIKELY_MISSING = ("';'", "')'", "'}'", "']'", "'>'", "':'", "'='", "'{'", "'('")


def _describe_terminal(name: str) -> str:
    if name in _TOKEN_NAMES:
        return _TOKEN_NAMES[name]
    for term in _lark().terminals:
        if term.name == name and term.pattern.type == "str":
            return f"'{term.pattern.value}'"
    return name.lower()


# Token sets that mark "a declaration / statement / expression may start here".
_CATEGORIES = (
    ("a declaration", frozenset({"CONTROL", "HEADER", "STRUCT"})),
    ("a statement or '}'", frozenset({"IF", "EXIT", "RBRACE"})),
    ("a statement", frozenset({"IF", "EXIT"})),
    ("an expression", frozenset({"INTEGER", "LPAR", "STRING_LITERAL"})),
)
_NAME_KEYWORDS = frozenset(
    {"APPLY", "KEY", "ACTIONS", "STATE", "ENTRIES", "TYPE", "PRIORITY", "IN", "OUT", "INOUT"}
)


def _expected_phrase(expected: set[str]) -> str | None:
    if "IDENTIFIER" in expected:
        # keywords usable as names and type names are all just "a name" to a reader
        expected = (expected - _NAME_KEYWORDS - {"TYPE_IDENTIFIER"}) | {"IDENTIFIER"}
    shown = sorted({_describe_terminal(t) for t in expected})
    if not shown:
        return None
    for category, members in _CATEGORIES:
        if members <= expected and len(shown) > 4:
            return category
    if len(shown) <= 4:
        return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
    for cand in _LIKELY_MISSING:
        if cand in shown:
            return cand
    return None


def _syntax_error(err: UnexpectedInput, text: str, locate: Locator) -> P4Error:
    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream or 0
        if text.startswith("/*", pos):
            msg = "unterminated comment"
        elif pos < len(text) and text[pos] == '"':
            msg = "unterminated string literal"
        else:
            msg = f"unexpected character {text[pos : pos + 1]!r}"
        return P4Error(locate(err.line, err.column), msg)
    if isinstance(err, UnexpectedToken) and err.token.type != "$END":
        tok = err.token
        if tok.type in ("IDENTIFIER", "TYPE_IDENTIFIER") and _follows_digit(text, tok):
            return P4Error(locate(tok.line or 1, tok.column or 1), "malformed integer literal")
        want = _expected_phrase(_acceptable(err))
        found = _show_token(tok)
        msg = f"expected {want} but found {found}" if want else f"unexpected {found}"
        return P4Error(locate(tok.line or 1, tok.column or 1), msg)
    line, col = _end_position(text)
    return P4Error(locate(line, col), "unexpected end of file")


def _acceptable(err: UnexpectedToken) -> set[str]:
    """Terminals the parser could really take here. ``err.expected`` comes from one LALR
    state and may list tokens that a following reduction would reject; the interactive
    parser tries each one."""
    try:
        return set(err.interactive_parser.accepts())
    except Exception:  # noqa: BLE001 - fall back to lark's coarser set
        return set(err.expected)


def _follows_digit(text: str, tok: Token) -> bool:
    """``0xZZ`` lexes as ``0`` then the name ``xZZ``: report a bad number instead."""
    pos = tok.start_pos or 0
    return 0 < pos <= len(text) and text[pos - 1].isdigit()


def _show_token(tok: Token) -> str:
    text = str(tok)
    if tok.type == "ANNOTATION":
        text = re.split(r"[(\[\s]", text, maxsplit=1)[0]
    if len(text) > 40:
        text = text[:37] + "..."
    return f"'{text}'" if "'" not in text else f'"{text}"'


def _end_position(text: str) -> tuple[int, int]:
    """Line/column just after the last non-blank character of ``text``."""
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    col = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, col
