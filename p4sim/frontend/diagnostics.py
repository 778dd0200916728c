"""User-facing errors of the P4 front end and compiler.

Example::

    err = P4Error(SourceLoc("prog.p4", 12, 5), "undeclared name 'hdrs'")
    str(err)        # 'prog.p4:12:5: error: undeclared name 'hdrs''
    print(err.render())
    # prog.p4:12:5: error: undeclared name 'hdrs'
    #     hdrs.ipv4.ttl = 0;
    #     ^

Every stage (preprocessor, parser, type checker, code generator) raises ``P4Error`` for a
mistake in the user's program, so the command line can print it and exit with status 1
instead of showing a Python traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

from p4sim.frontend.ast import SourceLoc

__all__ = ["P4Error", "P4ErrorList", "report_and_exit", "source_line"]


def source_line(path: str, line: int) -> str | None:
    """Return line ``line`` (1-based) of file ``path`` without its newline, or None.

    The file is read when a diagnostic is rendered (not when it is raised) because most
    errors raised in tests are never rendered.
    """
    if line < 1:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, text in enumerate(f, start=1):
                if i == line:
                    return text.rstrip("\r\n")
    except OSError:
        return None
    return None


def _caret_line(text: str, col: int) -> str:
    """Spaces up to 1-based ``col`` then ``^``; tabs are kept so the caret lines up."""
    prefix = text[: max(col - 1, 0)]
    pad = "".join("\t" if ch == "\t" else " " for ch in prefix)
    # A column past the end of the line still gets a caret, just after the text.
    pad += " " * max(col - 1 - len(prefix), 0)
    return pad + "^"


def _where(loc: SourceLoc) -> str:
    """``file:line:col``; just ``file`` for a whole-file problem (line 0: unreadable file)."""
    return str(loc) if loc.line >= 1 else loc.file


def _render_one(loc: SourceLoc, kind: str, message: str) -> list[str]:
    lines = [f"{_where(loc)}: {kind}: {message}"]
    text = source_line(loc.file, loc.line)
    if text is not None:
        lines.append(text)
        if loc.col >= 1:
            lines.append(_caret_line(text, loc.col))
    return lines


class P4Error(Exception):
    """An error in the user's P4 program, located at ``loc``.

    ``notes`` are extra locations printed after the error (``note:`` lines), e.g. the
    previous declaration of a duplicated name.
    """

    def __init__(
        self,
        loc: SourceLoc,
        message: str,
        *,
        notes: Sequence[tuple[SourceLoc, str]] = (),
    ) -> None:
        super().__init__(loc, message)
        self.loc = loc
        self.message = message
        self.notes: list[tuple[SourceLoc, str]] = list(notes)

    def __str__(self) -> str:
        return f"{_where(self.loc)}: error: {self.message}"

    def render(self) -> str:
        """The error line, the offending source line and a caret under the column."""
        lines = _render_one(self.loc, "error", self.message)
        for note_loc, note in self.notes:
            lines.extend(_render_one(note_loc, "note", note))
        return "\n".join(lines)


class P4ErrorList(P4Error):
    """Several errors reported together; ``loc`` and ``message`` are the first one's.

    Example::

        raise P4ErrorList([err1, err2])
    """

    errors: list[P4Error]

    def __init__(self, errors: Iterable[P4Error]) -> None:
        flat: list[P4Error] = []
        for err in errors:
            # Nested lists are flattened so render() never repeats a header.
            flat.extend(err.errors if isinstance(err, P4ErrorList) else [err])
        if not flat:
            raise ValueError("P4ErrorList needs at least one error")
        super().__init__(flat[0].loc, flat[0].message, notes=flat[0].notes)
        self.errors = flat

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)


def report_and_exit(err: P4Error) -> NoReturn:
    """Print ``err.render()`` to stderr and exit with status 1."""
    print(err.render(), file=sys.stderr)
    sys.exit(1)
