"""Tests of p4sim.frontend.diagnostics: error text, rendering with caret, exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.frontend.ast import SourceLoc
from p4sim.frontend.diagnostics import P4Error, P4ErrorList, report_and_exit


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    path = tmp_path / "prog.p4"
    path.write_text("header h_t {\n    bit<8> f;\n\tbit<4>  g;\n}\n")
    return path


def test_str_is_file_line_col_error_message() -> None:
    err = P4Error(SourceLoc("a.p4", 3, 7), "undeclared name 'x'")
    assert str(err) == "a.p4:3:7: error: undeclared name 'x'"
    assert err.loc == SourceLoc("a.p4", 3, 7)
    assert err.message == "undeclared name 'x'"


def test_render_shows_source_line_and_caret_under_column(prog: Path) -> None:
    err = P4Error(SourceLoc(str(prog), 2, 12), "bad field")
    lines = err.render().split("\n")
    assert lines == [f"{prog}:2:12: error: bad field", "    bit<8> f;", "           ^"]


def test_render_caret_in_column_one(prog: Path) -> None:
    lines = P4Error(SourceLoc(str(prog), 1, 1), "m").render().split("\n")
    assert lines[1:] == ["header h_t {", "^"]


def test_render_keeps_tabs_so_caret_lines_up(prog: Path) -> None:
    lines = P4Error(SourceLoc(str(prog), 3, 10), "m").render().split("\n")
    assert lines[1] == "\tbit<4>  g;"
    assert lines[2] == "\t        ^"


def test_render_caret_past_end_of_line(prog: Path) -> None:
    lines = P4Error(SourceLoc(str(prog), 4, 3), "m").render().split("\n")
    assert lines[1:] == ["}", "  ^"]


def test_render_of_unreadable_file_is_just_the_message(tmp_path: Path) -> None:
    err = P4Error(SourceLoc(str(tmp_path / "missing.p4"), 1, 1), "oops")
    assert err.render() == f"{tmp_path / 'missing.p4'}:1:1: error: oops"


def test_render_of_line_beyond_end_of_file_is_just_the_message(prog: Path) -> None:
    err = P4Error(SourceLoc(str(prog), 40, 1), "oops")
    assert err.render() == f"{prog}:40:1: error: oops"


def test_render_reads_the_file_lazily(tmp_path: Path) -> None:
    path = tmp_path / "late.p4"
    err = P4Error(SourceLoc(str(path), 1, 2), "m")
    path.write_text("xyz\n")  # written after the error was raised
    assert err.render().split("\n")[1:] == ["xyz", " ^"]


def test_notes_are_rendered_after_the_error(prog: Path) -> None:
    err = P4Error(
        SourceLoc(str(prog), 3, 2),
        "duplicate field",
        notes=[(SourceLoc(str(prog), 2, 5), "first here")],
    )
    lines = err.render().split("\n")
    assert lines[0] == f"{prog}:3:2: error: duplicate field"
    assert lines[3] == f"{prog}:2:5: note: first here"
    assert lines[4:] == ["    bit<8> f;", "    ^"]


def test_notes_default_is_not_shared_between_errors() -> None:
    a = P4Error(SourceLoc("a", 1, 1), "a")
    a.notes.append((SourceLoc("a", 1, 1), "n"))
    assert P4Error(SourceLoc("b", 1, 1), "b").notes == []


def test_error_list_renders_every_error(prog: Path) -> None:
    e1 = P4Error(SourceLoc(str(prog), 1, 8), "first")
    e2 = P4Error(SourceLoc(str(prog), 2, 5), "second")
    errs = P4ErrorList([e1, e2])
    assert isinstance(errs, P4Error)
    assert errs.loc == e1.loc and errs.message == "first"
    assert str(errs) == f"{e1}\n{e2}"
    assert errs.render() == e1.render() + "\n" + e2.render()


def test_error_list_flattens_nested_lists() -> None:
    e1, e2, e3 = (P4Error(SourceLoc("f", i, 1), str(i)) for i in (1, 2, 3))
    errs = P4ErrorList([e1, P4ErrorList([e2, e3])])
    assert errs.errors == [e1, e2, e3]


def test_error_list_needs_an_error() -> None:
    with pytest.raises(ValueError):
        P4ErrorList([])


def test_report_and_exit_prints_render_and_exits_1(
    prog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = P4Error(SourceLoc(str(prog), 2, 5), "bad")
    with pytest.raises(SystemExit) as info:
        report_and_exit(err)
    assert info.value.code == 1
    captured = capsys.readouterr()
    assert captured.err == err.render() + "\n"
    assert captured.out == ""
