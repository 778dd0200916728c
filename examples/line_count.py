"""Lines of code of each example application, with inclib and directly against the transport.

Example::

    python -m examples.line_count

Counts the lines that hold code: blank lines, comments and docstrings are left out, so
that documentation does not count against either side. Each application is one file
written with the library (``examples/APP.py``) and one without it
(``examples/direct/APP.py``); an application not yet written on one side is shown as such.

    >>> code_lines("x = 1\\n\\n# note\\ndef f():\\n    '''doc'''\\n    return x\\n")
    3
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

HERE = Path(__file__).resolve().parent
APPS = {
    "training": "data-parallel training (PyTorch DDP)",
    "word_count": "word count (ReduceByKey)",
    "kv_client": "key-value client (get/put)",
    "replicated_counter": "replicated counter (log append/read)",
}
NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    end = body[0].end_lineno or body[0].lineno
                    lines.update(range(body[0].lineno, end + 1))
    return lines


def code_lines(source: str) -> int:
    """Lines holding at least one token of code, docstrings excluded."""
    skip = docstring_lines(ast.parse(source))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in NOT_CODE and tok.type != tokenize.ENDMARKER:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - skip)


def count(path: Path) -> int | None:
    return code_lines(path.read_text()) if path.exists() else None


def main(argv: list[str] | None = None) -> int:
    del argv
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Lines of code per example application (no blanks, comments, docstrings)")
    for col in ("application", "with inclib", "direct", "saved"):
        t.add_column(col, justify="left" if col == "application" else "right")
    for app, title in APPS.items():
        lib, direct = count(HERE / f"{app}.py"), count(HERE / "direct" / f"{app}.py")
        saved = f"{1 - lib / direct:.0%}" if lib and direct else "-"
        t.add_row(
            f"{title}\n  examples/{app}.py, examples/direct/{app}.py",
            str(lib) if lib is not None else "not written yet",
            str(direct) if direct is not None else "not written yet",
            saved,
        )
    Console(width=110).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
