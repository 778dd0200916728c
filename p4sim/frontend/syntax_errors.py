"""A syntax error as a person would say it: ``file:line:col: expected ';', found 'x'``,
naming the token most likely forgotten when many would do (``syntax_error``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from p4sim.frontend.ast_builder import Locator
from p4sim.frontend.diagnostics import P4Error

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


def _describe_terminal(name: str, terminals: Iterable[Any]) -> str:
    if name in _TOKEN_NAMES:
        return _TOKEN_NAMES[name]
    for term in terminals:
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


def _expected_phrase(expected: set[str], terminals: Iterable[Any]) -> str | None:
    if "IDENTIFIER" in expected:
        # keywords usable as names and type names are all just "a name" to a reader
        expected = (expected - _NAME_KEYWORDS - {"TYPE_IDENTIFIER"}) | {"IDENTIFIER"}
    shown = sorted({_describe_terminal(t, terminals) for t in expected})
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


def syntax_error(
    err: UnexpectedInput, text: str, locate: Locator, terminals: Iterable[Any]
) -> P4Error:
    """The P4Error for lark's ``err`` in ``text``; ``terminals`` are the grammar's (lark's
    ``TerminalDef``s), to name a literal token by its text."""
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
        want = _expected_phrase(_acceptable(err), terminals)
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
