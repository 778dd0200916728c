"""P4_16 parser: preprocessed source text → ``ast.Program``.

Example::

    prog = parse_program("basic.p4")                 # runs the preprocessor first
    prog = parse_text("const bit<8> N = 4;")          # a program given as text
    [d.name for d in prog.declarations]               # ['N']

The grammar (``grammar.lark``) is LALR(1). P4 needs to know which identifiers name types
(``(T) x`` is a cast, ``T x;`` a declaration), so a post-lexer pass over the whole token
stream first collects the names the program declares as types and re-labels those tokens
``TYPE_IDENTIFIER`` (``token_pass.py``); ``ast_builder.py`` turns the tree into ``ast``
nodes. Every syntax error becomes a ``P4Error`` at the
offending token's original file, line and column.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import (
    LarkError,
    UnexpectedInput,
    VisitError,
)
from lark.lark import PostLex

from p4sim.frontend import ast
from p4sim.frontend.ast_builder import AstBuilder, Locator
from p4sim.frontend.diagnostics import P4Error
from p4sim.frontend.preprocessor import preprocess, preprocess_text
from p4sim.frontend.syntax_errors import syntax_error
from p4sim.frontend.token_pass import LexPassError, fix_tokens

__all__ = ["parse_program", "parse_source", "parse_text"]

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


class _P4PostLex(PostLex):
    """Runs ``_fix_tokens`` over the complete token stream of one parse."""

    # Terminals the grammar never mentions but the post-lexer consumes.
    always_accept = ("_AT", "IDENTIFIER", "_LT", "_RANGLE")

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        yield from fix_tokens(list(stream), _TEXT.get())


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
    except LexPassError as err:
        raise P4Error(locate(err.line, err.col), err.message) from None
    except UnexpectedInput as err:
        raise syntax_error(err, text, locate, _lark().terminals) from None
    except LarkError as err:  # any other lark failure is still about the program text
        raise P4Error(locate(1, 1), f"syntax error: {err}") from None
    finally:
        _TEXT.reset(token)


def _build(tree: Tree, locate: Locator) -> Any:
    try:
        return AstBuilder(locate, _parse_annotation_body).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, P4Error):
            raise err.orig_exc from None
        raise err.orig_exc from err


def _parse_annotation_body(body: str, start: str, locate: Locator) -> Any | None:
    """Parse an annotation body as expressions / key=value pairs; None when it is not."""
    token = _TEXT.set(body)
    try:
        tree = _lark().parse(body, start=start)
    except (LarkError, LexPassError):
        return None
    finally:
        _TEXT.reset(token)
    try:
        return _build(tree, locate)
    except P4Error:
        return None
