"""The post-lexer's pass over one parse's whole token stream (``fix_tokens``): annotation
bodies folded into one token, identifiers that name types re-labelled ``TYPE_IDENTIFIER``,
the ``<`` of type arguments and the ``>>`` of a right shift marked, so that the LALR(1)
grammar (``grammar.lark``) can tell a cast from a declaration and ``f<T>(x)`` from ``f < T``.
``parser.py`` runs it.
"""

from __future__ import annotations

import re

from lark import Token


class LexPassError(Exception):
    """A mistake the token pass finds (an annotation without a name or its closing
    bracket), at the offending token."""

    def __init__(self, tok: Token, message: str) -> None:
        super().__init__(message)
        self.line = tok.line or 1
        self.col = tok.column or 1
        self.message = message


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


def fix_tokens(toks: list[Token], text: str) -> list[Token]:
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
            raise LexPassError(at, "expected an annotation name after '@'")
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
    raise LexPassError(at, f"unterminated annotation: missing '{closer}'")


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
