"""A C-style preprocessor for P4_16 sources, with a map back to the original files.

Example::

    src = preprocess("basic.p4", include_dirs=["inc"], defines={"PORTS": "4"})
    tree = parse(src.text)
    src.location(12, 5)     # SourceLoc("basic.p4", 12, 5), or a line of an included file

Supported: ``#include "f"`` / ``#include <f>`` (``<core.p4>`` and ``<v1model.p4>`` resolve
to p4sim's own declarations in ``p4sim/frontend/include``), ``#pragma once``, object-like
and function-like ``#define`` (with ``#`` and ``##``), ``#undef``, ``#if`` / ``#elif`` /
``#ifdef`` / ``#ifndef`` / ``#else`` / ``#endif``, ``#line``, ``#error``, ``#warning``,
backslash line continuations, ``__FILE__`` and ``__LINE__``.

The output keeps one output line per physical source line wherever it can: directive lines,
skipped lines, continuation lines and comments become blank (comments are replaced by
spaces, so columns are unchanged). An ``#include`` line is replaced by the included file's
lines. Tokens produced by a macro body map to the position of the macro use; tokens of
macro arguments keep their own positions.
"""

from __future__ import annotations

import bisect
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from p4sim.frontend.ast import SourceLoc
from p4sim.frontend.diagnostics import P4Error, P4ErrorList

__all__ = [
    "BUILTIN_INCLUDE_DIR",
    "PREDEFINED_MACROS",
    "PreprocessedSource",
    "preprocess",
    "preprocess_text",
]

BUILTIN_INCLUDE_DIR = str(Path(__file__).resolve().parent / "include")

# Defined before the user's -D macros, as p4c-bm2-ss does for programs compiled for BMv2.
PREDEFINED_MACROS: Mapping[str, str] = {"__TARGET_BMV2__": "1"}

MAX_INCLUDE_DEPTH = 100
MAX_MACRO_DEPTH = 100
# Total expansions allowed on one line; stops exponential blow-ups of nested macros.
MAX_EXPANSIONS_PER_LINE = 100_000

_TOKEN_RE = re.compile(
    r"""(?P<ws>\s+)
      | (?P<str>"(?:[^"\\\n]|\\.)*"?)
      | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<num>\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.])*)
      | (?P<op>\#\#|&&|\|\||==|!=|<=|>=|<<|>>|\.\.\.|.)
    """,
    re.VERBOSE | re.DOTALL,
)


# --------------------------------------------------------------------------- output


@dataclass(frozen=True)
class _Seg:
    """Output columns from ``out_start`` map to ``line``/``col`` (linearly when ``exact``)."""

    out_start: int
    line: int
    col: int
    exact: bool


@dataclass(frozen=True)
class _OutLine:
    file: str
    line: int
    segs: tuple[_Seg, ...] = ()


@dataclass
class PreprocessedSource:
    """Preprocessed text plus the map from output positions to original positions."""

    text: str
    files: list[str]
    _lines: list[_OutLine] = field(repr=False)

    def location(self, line: int, col: int) -> SourceLoc:
        """Original file, line and column of 1-based ``line``/``col`` of ``self.text``.

        Columns inside a macro expansion map to the start of the macro use.
        """
        if not self._lines:
            return SourceLoc(self.files[0] if self.files else "<input>", line, col)
        out = self._lines[min(max(line, 1), len(self._lines)) - 1]
        if not out.segs:
            return SourceLoc(out.file, out.line, col)
        starts = [s.out_start for s in out.segs]
        i = max(bisect.bisect_right(starts, col - 1) - 1, 0)
        seg = out.segs[i]
        if seg.exact:
            return SourceLoc(out.file, seg.line, seg.col + max(col - 1 - seg.out_start, 0))
        return SourceLoc(out.file, seg.line, seg.col)


# --------------------------------------------------------------------------- source lines


@dataclass
class _Logical:
    """One logical line (physical lines joined at backslash-newlines).

    ``pieces`` maps offsets in ``text`` to physical positions: (offset, phys line, col).
    """

    text: str
    pieces: list[tuple[int, int, int]]
    first: int  # first physical line, 1-based
    count: int  # physical lines covered

    def phys(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right([p[0] for p in self.pieces], offset) - 1
        start, line, col = self.pieces[max(i, 0)]
        return line, col + offset - start

    def join(self, other: _Logical) -> _Logical:
        """This line, a space, then ``other`` (for macro calls spanning lines)."""
        base = len(self.text) + 1
        pieces = self.pieces + [(base + o, ln, c) for o, ln, c in other.pieces]
        return _Logical(self.text + " " + other.text, pieces, self.first, self.count + other.count)


def _split_logical(text: str) -> list[_Logical]:
    phys = text.split("\n")
    if phys and phys[-1] == "":
        phys.pop()
    out: list[_Logical] = []
    cur: _Logical | None = None
    for n, raw in enumerate(phys, start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        stripped = line.rstrip()
        cont = stripped.endswith("\\")
        body = stripped[:-1] if cont else line
        if cur is None:
            cur = _Logical(body, [(0, n, 1)], n, 1)
        else:
            cur.pieces.append((len(cur.text), n, 1))
            cur.text += body
            cur.count += 1
        if not cont:
            out.append(cur)
            cur = None
    if cur is not None:
        out.append(cur)
    return out


def _blank_comments(lines: list[_Logical], filename: str) -> None:
    """Replace comments by spaces in place (columns and lines stay put)."""
    in_block: tuple[int, int] | None = None  # position where the open comment started
    for lg in lines:
        chars = list(lg.text)
        i, n, in_str = 0, len(chars), False
        while i < n:
            c = chars[i]
            if in_block is not None:
                if c == "*" and i + 1 < n and chars[i + 1] == "/":
                    chars[i] = chars[i + 1] = " "
                    in_block = None
                    i += 2
                    continue
                chars[i] = " "
            elif in_str:
                if c == "\\":
                    i += 1
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "/" and i + 1 < n and chars[i + 1] == "/":
                chars[i:] = " " * (n - i)
                break
            elif c == "/" and i + 1 < n and chars[i + 1] == "*":
                in_block = lg.phys(i)
                chars[i] = chars[i + 1] = " "
                i += 2
                continue
            i += 1
        lg.text = "".join(chars)
    if in_block is not None:
        raise P4Error(SourceLoc(filename, *in_block), "unterminated /* comment")


# --------------------------------------------------------------------------- tokens


@dataclass
class _Tok:
    kind: str  # ws | str | id | num | op
    text: str
    off: int  # offset in the logical line (of the macro use when not exact)
    exact: bool = True
    hide: frozenset[str] = frozenset()


def _tokenize(text: str, base: int = 0, exact: bool = True) -> list[_Tok]:
    return [
        _Tok(m.lastgroup or "op", m.group(), base + m.start() if exact else base, exact)
        for m in _TOKEN_RE.finditer(text)
    ]


def _strip_ws(toks: list[_Tok]) -> list[_Tok]:
    i, j = 0, len(toks)
    while i < j and toks[i].kind == "ws":
        i += 1
    while j > i and toks[j - 1].kind == "ws":
        j -= 1
    return toks[i:j]


@dataclass
class _Macro:
    name: str
    params: list[str] | None  # None: object-like
    body: list[_Tok]
    variadic: bool = False


class _NeedMore(Exception):
    """A function-like macro call is not closed on this line."""


class _Error(Exception):
    """An error at an offset of the current logical line; turned into a P4Error."""

    def __init__(self, off: int, message: str) -> None:
        super().__init__(message)
        self.off = off
        self.message = message


# --------------------------------------------------------------------------- macro expansion


def _stringize(toks: list[_Tok]) -> str:
    """``#x``: the argument's text with whitespace runs collapsed, quoted."""
    text = "".join(" " if t.kind == "ws" else t.text for t in _strip_ws(toks))
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _paste(toks: list[_Tok]) -> list[_Tok]:
    """Apply the ``##`` operators (tokens of kind ``paste``) of a substituted body."""
    out: list[_Tok] = []
    pending = False
    for t in toks:
        if t.kind == "paste":
            while out and out[-1].kind == "ws":
                out.pop()
            pending = True
        elif pending and t.kind == "ws":
            continue
        elif pending:
            pending = False
            if not out:
                out.append(t)
                continue
            left = out.pop()
            glued = _tokenize(left.text + t.text, base=left.off, exact=False)
            out.extend(_Tok(g.kind, g.text, left.off, False, left.hide) for g in glued)
        else:
            out.append(t)
    return out


class _Expander:
    """Expands macros in a token list (hide sets stop self-reference, as in C)."""

    def __init__(self, macros: dict[str, _Macro]) -> None:
        self.macros = macros
        self.file = ""
        self.line = 0
        self.count = 0

    def expand(
        self, toks: list[_Tok], more_name: bool = False, more_args: bool = False
    ) -> list[_Tok]:
        """Expand ``toks``; raise ``_NeedMore`` when a call may continue on the next line."""
        stack = list(reversed(toks))
        out: list[_Tok] = []
        while stack:
            t = stack.pop()
            if t.kind != "id" or t.text in t.hide:
                out.append(t)
                continue
            builtin = self._builtin(t)
            if builtin is not None:
                out.append(builtin)
                continue
            m = self.macros.get(t.text)
            if m is None:
                out.append(t)
                continue
            if len(t.hide) >= MAX_MACRO_DEPTH:
                raise _Error(t.off, f"macro expansion of '{t.text}' nested too deeply")
            self.count += 1
            if self.count > MAX_EXPANSIONS_PER_LINE:
                raise _Error(t.off, "too many macro expansions on one line")
            if m.params is None:
                hide = t.hide | {m.name}
                body = [_Tok(b.kind, b.text, t.off, False, hide) for b in m.body]
                stack.extend(reversed(_paste(body)))
                continue
            j = len(stack) - 1
            while j >= 0 and stack[j].kind == "ws":
                j -= 1
            if j < 0 and more_name:
                raise _NeedMore("name")
            if j < 0 or stack[j].text != "(":
                out.append(t)  # a function-like macro name without arguments stays as is
                continue
            del stack[j:]
            args, close = self._collect_args(t, stack, more_args)
            hide = (t.hide & close.hide) | {m.name}
            stack.extend(reversed(self._substitute(m, args, t, hide)))
        return out

    def _builtin(self, t: _Tok) -> _Tok | None:
        if t.text == "__LINE__" and "__LINE__" not in self.macros:
            return _Tok("num", str(self.line), t.off, False, t.hide)
        if t.text == "__FILE__" and "__FILE__" not in self.macros:
            quoted = '"' + self.file.replace("\\", "\\\\").replace('"', '\\"') + '"'
            return _Tok("str", quoted, t.off, False, t.hide)
        return None

    def _collect_args(
        self, name: _Tok, stack: list[_Tok], more: bool
    ) -> tuple[list[list[_Tok]], _Tok]:
        """Pop the arguments of a call (the ``(`` is already consumed) up to its ``)``."""
        args: list[list[_Tok]] = [[]]
        depth = 0
        while stack:
            t = stack.pop()
            if t.text == "(" and t.kind == "op":
                depth += 1
            elif t.text == ")" and t.kind == "op":
                if depth == 0:
                    return [_strip_ws(a) for a in args], t
                depth -= 1
            elif t.text == "," and t.kind == "op" and depth == 0:
                args.append([])
                continue
            args[-1].append(t)
        if more:
            raise _NeedMore("args")
        raise _Error(name.off, f"unterminated argument list invoking macro '{name.text}'")

    def _substitute(
        self, m: _Macro, args: list[list[_Tok]], use: _Tok, hide: frozenset[str]
    ) -> list[_Tok]:
        params = list(m.params or [])
        if m.variadic:
            fixed = len(params) - 1
            if len(args) < fixed:
                self._arity_error(m, use, len(args))
            rest: list[_Tok] = []
            for k, a in enumerate(args[fixed:]):
                if k:
                    rest += [_Tok("op", ",", use.off, False), _Tok("ws", " ", use.off, False)]
                rest.extend(a)
            args = args[:fixed] + [rest]
        elif not params:
            if len(args) > 1 or _strip_ws(args[0]):
                self._arity_error(m, use, len(args))
            args = []
        elif len(args) != len(params):
            self._arity_error(m, use, len(args))
        index = {p: k for k, p in enumerate(params)}
        body = m.body
        result: list[_Tok] = []
        i = 0
        while i < len(body):
            b = body[i]
            nxt = _next_solid(body, i)
            if b.kind == "op" and b.text == "#" and nxt is not None and body[nxt].text in index:
                arg = args[index[body[nxt].text]]
                result.append(_Tok("str", _stringize(arg), use.off, False))
                i = nxt + 1
                continue
            if b.kind == "id" and b.text in index:
                arg = args[index[b.text]]
                prv = _prev_solid(body, i)
                pasted = (nxt is not None and body[nxt].kind == "paste") or (
                    prv is not None and body[prv].kind == "paste"
                )
                # Arguments are macro-expanded on their own before substitution, except
                # operands of ##, which are pasted as written.
                result.extend(list(arg) if pasted else self.expand(list(arg)))
            else:
                result.append(_Tok(b.kind, b.text, use.off, False))
            i += 1
        return [_Tok(t.kind, t.text, t.off, t.exact, t.hide | hide) for t in _paste(result)]

    @staticmethod
    def _arity_error(m: _Macro, use: _Tok, given: int) -> None:
        need = len(m.params or []) - (1 if m.variadic else 0)
        what = f"at least {need}" if m.variadic else str(need)
        raise _Error(use.off, f"macro '{m.name}' requires {what} arguments, but {given} given")


def _next_solid(toks: list[_Tok], i: int) -> int | None:
    j = i + 1
    while j < len(toks) and toks[j].kind == "ws":
        j += 1
    return j if j < len(toks) else None


def _prev_solid(toks: list[_Tok], i: int) -> int | None:
    j = i - 1
    while j >= 0 and toks[j].kind == "ws":
        j -= 1
    return j if j >= 0 else None


# --------------------------------------------------------------------------- #if expressions

_PREC = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}  # fmt: skip


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _apply(op: str, a: int, b: int, live: bool) -> int:
    if op in ("/", "%") and b == 0:
        if live:
            raise ValueError("division by zero in #if")
        return 0
    if op in ("<<", ">>") and b < 0:
        op, b = (">>" if op == "<<" else "<<"), -b
    funcs = {
        "||": lambda: int(bool(a) or bool(b)), "&&": lambda: int(bool(a) and bool(b)),
        "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b,
        "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
        ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
        "<<": lambda: a << min(b, 64), ">>": lambda: a >> b, "+": lambda: a + b,
        "-": lambda: a - b, "*": lambda: a * b, "/": lambda: _c_div(a, b),
        "%": lambda: a - b * _c_div(a, b),
    }  # fmt: skip
    return funcs[op]()


def _parse_int(text: str) -> int:
    digits = re.sub(r"[uUlL]+$", "", text)
    if re.fullmatch(r"0[0-7]+", digits):
        return int(digits, 8)
    try:
        return int(digits, 0)
    except ValueError:
        raise ValueError(f"invalid integer constant '{text}' in #if") from None


class _CondExpr:
    """Evaluates a macro-expanded ``#if`` expression (C semantics, identifiers are 0).

    Example: ``_CondExpr(tokens).value()`` → 1 for ``1 + 2 == 3``.
    ``live`` is False in branches that short-circuit, where division by zero is allowed.
    """

    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = [t for t in toks if t.kind != "ws"]
        self.pos = 0

    def value(self) -> int:
        if not self.toks:
            raise ValueError("#if with no expression")
        v = self._ternary(True)
        if self.pos < len(self.toks):
            raise ValueError(f"unexpected '{self.toks[self.pos].text}' in #if expression")
        return v

    def _peek(self) -> str | None:
        return self.toks[self.pos].text if self.pos < len(self.toks) else None

    def _expect(self, text: str) -> None:
        if self._peek() != text:
            got = self._peek()
            raise ValueError(f"expected '{text}' in #if expression, got {got or 'end of line'!r}")
        self.pos += 1

    def _ternary(self, live: bool) -> int:
        cond = self._binary(1, live)
        if self._peek() != "?":
            return cond
        self.pos += 1
        a = self._ternary(live and bool(cond))
        self._expect(":")
        b = self._ternary(live and not cond)
        return a if cond else b

    def _binary(self, min_prec: int, live: bool) -> int:
        lhs = self._unary(live)
        while (op := self._peek()) in _PREC and _PREC[op] >= min_prec:
            self.pos += 1
            short = (op == "&&" and not lhs) or (op == "||" and bool(lhs))
            rhs = self._binary(_PREC[op] + 1, live and not short)
            lhs = _apply(op, lhs, rhs, live and not short)
        return lhs

    def _unary(self, live: bool) -> int:
        if self.pos >= len(self.toks):
            raise ValueError("#if expression ends unexpectedly")
        t = self.toks[self.pos]
        self.pos += 1
        if t.kind == "op" and t.text in ("!", "~", "-", "+"):
            v = self._unary(live)
            return {"!": int(not v), "~": ~v, "-": -v, "+": v}[t.text]
        if t.text == "(":
            v = self._ternary(live)
            self._expect(")")
            return v
        if t.kind == "num":
            return _parse_int(t.text)
        if t.kind == "id":
            return 0  # undefined identifiers are 0, as in C
        raise ValueError(f"unexpected '{t.text}' in #if expression")


def _replace_defined(toks: list[_Tok], macros: Mapping[str, _Macro]) -> list[_Tok]:
    """Turn ``defined X`` / ``defined(X)`` into 1 or 0 (before macro expansion)."""
    out: list[_Tok] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind != "id" or t.text != "defined":
            out.append(t)
            i += 1
            continue
        j = _next_solid(toks, i)
        paren = j is not None and toks[j].text == "("
        k = _next_solid(toks, j) if paren and j is not None else j
        if k is None or toks[k].kind != "id":
            raise ValueError("operator 'defined' requires an identifier")
        end = k
        if paren:
            close = _next_solid(toks, k)
            if close is None or toks[close].text != ")":
                raise ValueError("missing ')' after 'defined'")
            end = close
        name = toks[k].text
        known = name in macros or name in ("__FILE__", "__LINE__")
        out.append(_Tok("num", "1" if known else "0", t.off, t.exact))
        i = end + 1
    return out


# --------------------------------------------------------------------------- driver


@dataclass
class _Cond:
    """One open #if group: whether its parent is active, this branch is, one was taken."""

    directive: str
    loc: SourceLoc
    parent: bool
    active: bool
    taken: bool
    seen_else: bool = False


@dataclass
class _FileState:
    path: str  # where the file is on disk (for "..." includes)
    name: str  # name reported in locations (changed by #line)
    delta: int = 0  # reported line = physical line + delta (changed by #line)
    conds: list[_Cond] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.conds[-1].active if self.conds else True


_DIRECTIVE_RE = re.compile(r"\s*#\s*([A-Za-z_][A-Za-z0-9_]*|[0-9]+)?")
_CONDITIONALS = ("if", "ifdef", "ifndef", "elif", "else", "endif")


class _Preprocessor:
    def __init__(self, include_dirs: Sequence[str], defines: Mapping[str, str] | None) -> None:
        self.include_dirs = [str(d) for d in include_dirs]
        self.macros: dict[str, _Macro] = {}
        self.expander = _Expander(self.macros)
        self.text: list[str] = []
        self.lines: list[_OutLine] = []
        self.files: list[str] = []
        self.once: set[str] = set()
        cli = SourceLoc("<command line>", 0, 0)
        for name, value in {**PREDEFINED_MACROS, **(defines or {})}.items():
            self._define(f"{name} {value}", cli)

    # ---- output

    def _blank(self, f: _FileState, lg: _Logical, skip_first: bool = False) -> None:
        for k in range(1 if skip_first else 0, lg.count):
            self.text.append("")
            self.lines.append(_OutLine(f.name, lg.first + k + f.delta))

    def _emit(self, f: _FileState, lg: _Logical, toks: list[_Tok]) -> None:
        segs: list[_Seg] = []
        col = 0
        for t in toks:
            line, c = lg.phys(t.off)
            line += f.delta
            prev = segs[-1] if segs else None
            same = prev is not None and prev.exact == t.exact and prev.line == line
            if t.exact and not (same and prev and prev.col + col - prev.out_start == c):
                segs.append(_Seg(col, line, c, True))
            elif not t.exact and not (same and prev and prev.col == c):
                segs.append(_Seg(col, line, c, False))
            col += len(t.text)
        self.text.append("".join(t.text for t in toks).rstrip())
        self.lines.append(_OutLine(f.name, lg.first + f.delta, tuple(segs)))
        self._blank(f, lg, skip_first=True)

    def loc(self, f: _FileState, lg: _Logical, off: int) -> SourceLoc:
        line, col = lg.phys(off)
        return SourceLoc(f.name, line + f.delta, col)

    # ---- files

    def run_file(self, path: str, text: str, depth: int) -> None:
        if path not in self.files:
            self.files.append(path)
        f = _FileState(path, path)
        lines = _split_logical(text)
        _blank_comments(lines, path)
        i = 0
        while i < len(lines):
            lg = lines[i]
            i += 1
            if lg.text.lstrip().startswith("#"):
                self._directive(f, lg, depth)
            elif not f.active:
                self._blank(f, lg)
            else:
                lg, i = self._source_line(f, lg, lines, i)
        if f.conds:
            errs = [P4Error(c.loc, f"unterminated #{c.directive}") for c in f.conds]
            raise errs[0] if len(errs) == 1 else P4ErrorList(errs)

    def _source_line(
        self, f: _FileState, lg: _Logical, lines: list[_Logical], i: int
    ) -> tuple[_Logical, int]:
        """Expand and emit one line, joining following lines for multi-line macro calls."""
        more_name = True
        while True:
            nxt = lines[i] if i < len(lines) else None
            joinable = nxt is not None and not nxt.text.lstrip().startswith("#")
            self.expander.file, self.expander.line = f.name, lg.first + f.delta
            self.expander.count = 0
            try:
                toks = self.expander.expand(
                    _tokenize(lg.text), more_name=more_name and joinable, more_args=joinable
                )
            except _NeedMore as need:
                assert nxt is not None
                if str(need) == "name" and not nxt.text.lstrip().startswith("("):
                    more_name = False  # the name is not a call after all
                    continue
                lg, i = lg.join(nxt), i + 1
                continue
            except _Error as err:
                raise P4Error(self.loc(f, lg, err.off), err.message) from None
            self._emit(f, lg, toks)
            return lg, i

    # ---- directives

    def _directive(self, f: _FileState, lg: _Logical, depth: int) -> None:
        m = _DIRECTIVE_RE.match(lg.text)
        assert m is not None
        hash_off = lg.text.index("#")
        loc = self.loc(f, lg, hash_off)
        name = m.group(1) or ""
        args_off = m.end()
        args = lg.text[args_off:]
        if name in _CONDITIONALS:
            self._conditional(f, lg, name, loc, args_off)
            self._blank(f, lg)
            return
        if not f.active:
            self._blank(f, lg)
            return
        try:
            if name == "include":
                self._include(f, lg, args, args_off, loc, depth)
                self._blank(f, lg, skip_first=True)
                return
            self._simple_directive(f, lg, name, args, args_off, loc)
        except _Error as err:
            raise P4Error(loc, err.message) from None
        self._blank(f, lg)

    def _simple_directive(
        self, f: _FileState, lg: _Logical, name: str, args: str, args_off: int, loc: SourceLoc
    ) -> None:
        if name == "define":
            self._define(args, loc)
        elif name == "undef":
            ident = _macro_name(args)
            if ident is None:
                raise P4Error(loc, "#undef expects a macro name")
            self.macros.pop(ident, None)
        elif name == "line" or name.isdigit():
            self._line(f, lg, args if name == "line" else name + args, args_off, loc)
        elif name == "error":
            raise P4Error(loc, f"#error {args.strip()}".rstrip())
        elif name == "warning":
            print(f"{loc}: warning: #warning {args.strip()}".rstrip(), file=sys.stderr)
        elif name == "pragma":
            if args.split() == ["once"]:
                self.once.add(os.path.realpath(f.path))
        elif name:
            raise P4Error(loc, f"unknown preprocessor directive '#{name}'")

    def _define(self, args: str, loc: SourceLoc) -> None:
        m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", args)
        if m is None:
            raise P4Error(loc, "macro names must be identifiers")
        name, rest = m.group(1), args[m.end() :]
        if name == "defined":
            raise P4Error(loc, "'defined' cannot be used as a macro name")
        params: list[str] | None = None
        variadic = False
        if rest.startswith("("):
            close = rest.find(")")
            if close < 0:
                raise P4Error(loc, f"missing ')' in parameter list of macro '{name}'")
            params = [p.strip() for p in rest[1:close].split(",")]
            if params == [""]:
                params = []
            variadic = bool(params) and params[-1] == "..."
            if variadic:
                params[-1] = "__VA_ARGS__"
            for p in params:
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p):
                    raise P4Error(loc, f"invalid parameter '{p}' in macro '{name}'")
            rest = rest[close + 1 :]
        body = _strip_ws(_tokenize(rest))
        for t in body:
            if t.kind == "op" and t.text == "##":
                t.kind = "paste"
        if body and (body[0].kind == "paste" or body[-1].kind == "paste"):
            raise P4Error(loc, "'##' cannot appear at either end of a macro body")
        self.macros[name] = _Macro(name, params, body, variadic)

    def _line(self, f: _FileState, lg: _Logical, args: str, args_off: int, loc: SourceLoc) -> None:
        toks = [t for t in self._expand_directive(f, lg, args, args_off) if t.kind != "ws"]
        if not toks or toks[0].kind != "num" or not toks[0].text.isdigit():
            raise P4Error(loc, "#line expects a line number")
        if len(toks) > 1 and toks[1].kind == "str":
            f.name = toks[1].text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        # The physical line after the directive gets the given number.
        f.delta = int(toks[0].text) - (lg.first + lg.count)

    def _expand_directive(self, f: _FileState, lg: _Logical, args: str, off: int) -> list[_Tok]:
        self.expander.file, self.expander.line = f.name, lg.first + f.delta
        self.expander.count = 0
        return self.expander.expand(_tokenize(args, base=off))

    def _conditional(
        self, f: _FileState, lg: _Logical, name: str, loc: SourceLoc, args_off: int
    ) -> None:
        args = lg.text[args_off:]
        if name in ("if", "ifdef", "ifndef"):
            parent = f.active
            cond = parent and self._condition(f, lg, name, args, args_off, loc)
            # In a skipped parent no branch may be taken: mark it taken already.
            f.conds.append(_Cond(name, loc, parent, cond, cond or not parent))
            return
        if not f.conds:
            raise P4Error(loc, f"#{name} without #if")
        top = f.conds[-1]
        if name == "endif":
            f.conds.pop()
        elif top.seen_else:
            raise P4Error(loc, f"#{name} after #else", notes=[(top.loc, "the #if is here")])
        elif name == "else":
            top.active, top.taken, top.seen_else = not top.taken, True, True
        else:  # elif
            top.active = not top.taken and self._condition(f, lg, name, args, args_off, loc)
            top.taken = top.taken or top.active

    def _condition(
        self, f: _FileState, lg: _Logical, name: str, args: str, args_off: int, loc: SourceLoc
    ) -> bool:
        if name in ("ifdef", "ifndef"):
            ident = _macro_name(args)
            if ident is None:
                raise P4Error(loc, f"#{name} expects a macro name")
            return (ident in self.macros) == (name == "ifdef")
        try:
            toks = _replace_defined(_tokenize(args, base=args_off), self.macros)
            self.expander.file, self.expander.line = f.name, lg.first + f.delta
            self.expander.count = 0
            toks = _replace_defined(self.expander.expand(toks), self.macros)
            return bool(_CondExpr(toks).value())
        except _Error as err:
            raise P4Error(loc, err.message) from None
        except ValueError as err:
            raise P4Error(loc, f"{err} (in #{name})") from None

    def _include(
        self, f: _FileState, lg: _Logical, args: str, args_off: int, loc: SourceLoc, depth: int
    ) -> None:
        target = _include_target(args)
        if target is None:  # #include MACRO
            expanded = "".join(t.text for t in self._expand_directive(f, lg, args, args_off))
            target = _include_target(expanded)
        if target is None:
            raise P4Error(loc, '#include expects "FILENAME" or <FILENAME>')
        name, angled = target
        dirs = ([] if angled else [os.path.dirname(f.path) or "."]) + self.include_dirs
        dirs.append(BUILTIN_INCLUDE_DIR)
        path = _find_include(name, dirs)
        if path is None:
            searched = ", ".join(dirs)
            raise P4Error(loc, f"cannot find include file '{name}' (searched: {searched})")
        if depth + 1 > MAX_INCLUDE_DEPTH:
            raise P4Error(
                loc, f"#include nested more than {MAX_INCLUDE_DEPTH} deep (include cycle?)"
            )
        if os.path.realpath(path) in self.once:
            return
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            raise P4Error(loc, f"cannot read include file '{path}': {err.strerror}") from None
        self.run_file(path, text, depth + 1)


def _macro_name(args: str) -> str | None:
    """The macro name that starts ``args``; extra tokens after it are ignored, as cpp does."""
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\b", args)
    return m.group(1) if m else None


def _include_target(args: str) -> tuple[str, bool] | None:
    m = re.match(r'\s*(?:"([^"]*)"|<([^>]*)>)', args)
    if m is None:
        return None
    return (m.group(1), False) if m.group(1) is not None else (m.group(2), True)


def _find_include(name: str, dirs: Sequence[str]) -> str | None:
    if os.path.isabs(name):
        return name if os.path.isfile(name) else None
    for d in dirs:
        cand = os.path.join(d, name)
        if os.path.isfile(cand):
            return os.path.normpath(cand)
    return None


# --------------------------------------------------------------------------- API


def preprocess_text(
    text: str,
    filename: str = "<input>",
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
) -> PreprocessedSource:
    """Preprocess ``text`` as if read from ``filename`` (used in locations and for
    ``#include "..."`` relative to its directory).

    Example::

        src = preprocess_text("#define N 4\\nconst bit<8> n = N;\\n", "t.p4")
        src.text   # '\\nconst bit<8> n = 4;\\n'
    """
    pp = _Preprocessor(include_dirs, defines)
    pp.run_file(filename, text, 0)
    out = "\n".join(pp.text) + ("\n" if pp.text else "")
    return PreprocessedSource(out, pp.files, pp.lines)


def preprocess(
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
) -> PreprocessedSource:
    """Preprocess the P4 file at ``path``; P4Error for any problem in the sources.

    ``defines`` maps macro names to bodies as ``-D`` does (``{"DEBUG": "1"}``); a key may
    carry parameters: ``{"SQ(x)": "((x) * (x))"}``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise P4Error(SourceLoc(str(path), 0, 0), f"cannot read file: {err.strerror}") from None
    return preprocess_text(text, str(path), include_dirs, defines)
