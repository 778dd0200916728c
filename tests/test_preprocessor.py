"""Tests of p4sim.frontend.preprocessor: directives, macros, includes, location map."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.frontend.ast import SourceLoc
from p4sim.frontend.diagnostics import P4Error, P4ErrorList
from p4sim.frontend.preprocessor import (
    BUILTIN_INCLUDE_DIR,
    PreprocessedSource,
    preprocess,
    preprocess_text,
)


def pp(text: str, **kw: object) -> PreprocessedSource:
    return preprocess_text(text, "main.p4", **kw)  # type: ignore[arg-type]


def lines(src: PreprocessedSource) -> list[str]:
    return src.text.split("\n")[:-1]


def solid(src: PreprocessedSource) -> list[str]:
    """Output lines that are not blank, stripped."""
    return [ln.strip() for ln in lines(src) if ln.strip()]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def raises(text: str, **kw: object) -> P4Error:
    with pytest.raises(P4Error) as info:
        pp(text, **kw)
    return info.value


# --------------------------------------------------------------------------- #define


def test_object_macro_is_replaced_and_directive_line_is_blank() -> None:
    src = pp("#define N 4\nbit<N> x;\n")
    assert lines(src) == ["", "bit<4> x;"]


def test_empty_macro_expands_to_nothing() -> None:
    assert lines(pp("#define E\na E b\n"))[1] == "a  b"


def test_macro_body_is_expanded_again_after_substitution() -> None:
    assert solid(pp("#define A B + 1\n#define B 2\nA\n")) == ["2 + 1"]


def test_function_macro_substitutes_arguments() -> None:
    assert solid(pp("#define ADD(a, b) (a + b)\nx = ADD(1, y);\n")) == ["x = (1 + y);"]


def test_function_macro_arguments_split_only_at_top_level_commas() -> None:
    src = pp("#define FIRST(a, b) a\nx = FIRST(f(1, 2), 3);\n")
    assert solid(src) == ["x = f(1, 2);"]


def test_function_macro_arguments_are_expanded_before_substitution() -> None:
    src = pp("#define N 8\n#define W(x) bit<x>\nW(N) f;\n")
    assert solid(src) == ["bit<8> f;"]


def test_function_macro_name_without_parentheses_is_left_alone() -> None:
    assert solid(pp("#define F(x) x\nint F;\n")) == ["int F;"]


def test_function_macro_call_may_span_lines_and_keeps_line_count() -> None:
    src = pp("#define ADD(a, b) (a + b)\nx = ADD(1,\n        2);\ny;\n")
    assert lines(src) == ["", "x = (1 + 2);", "", "y;"]
    assert src.location(4, 1) == SourceLoc("main.p4", 4, 1)


def test_function_macro_wrong_argument_count_is_an_error_at_the_use() -> None:
    err = raises("#define F(a, b) a\n  x = F(1);\n")
    assert err.loc == SourceLoc("main.p4", 2, 7)
    assert "requires 2 arguments" in err.message


def test_unterminated_macro_call_is_an_error() -> None:
    err = raises("#define F(a) a\nx = F(1\n")
    assert err.loc.line == 2 and "unterminated argument list" in err.message


def test_stringize_and_token_paste() -> None:
    src = pp("#define S(x) #x\n#define CAT(a, b) a ## b\nS(hello  world) CAT(foo, _t)\n")
    assert solid(src) == ['"hello world" foo_t']


def test_variadic_macro() -> None:
    src = pp("#define CALL(f, ...) f(__VA_ARGS__)\nCALL(g, 1, 2)\n")
    assert solid(src) == ["g(1, 2)"]


def test_self_referential_macro_expands_once() -> None:
    assert solid(pp("#define X X + 1\nX\n")) == ["X + 1"]


def test_mutually_recursive_macros_stop() -> None:
    assert solid(pp("#define A B\n#define B A\nA B\n")) == ["A B"]


def test_undef_removes_macro() -> None:
    assert solid(pp("#define N 1\n#undef N\nN\n")) == ["N"]


def test_macros_are_not_expanded_in_strings_or_comments() -> None:
    src = pp('#define N 4\nlog_msg("N is N"); // N\n/* N */ N\n')
    assert lines(src)[1].rstrip() == 'log_msg("N is N");'
    assert lines(src)[2] == "        4"


def test_comments_become_spaces_keeping_columns() -> None:
    src = pp("a /* c */ b // tail\n")
    assert lines(src) == ["a         b"]


def test_block_comment_hides_directives_across_lines() -> None:
    src = pp("/* start\n#define N 1\n*/ N\n")
    assert solid(src) == ["N"]


def test_unterminated_block_comment_is_an_error() -> None:
    err = raises("x\n  /* open\n")
    assert err.loc == SourceLoc("main.p4", 2, 3)


def test_defines_argument_adds_macros() -> None:
    src = pp("N SQ(3)\n", defines={"N": "7", "SQ(x)": "((x) * (x))", "EMPTY": ""})
    assert solid(src) == ["7 ((3) * (3))"]


def test_target_bmv2_is_predefined_and_can_be_overridden() -> None:
    assert solid(pp("__TARGET_BMV2__\n")) == ["1"]
    assert solid(pp("__TARGET_BMV2__\n", defines={"__TARGET_BMV2__": "2"})) == ["2"]


def test_line_and_file_builtins() -> None:
    src = pp("\n\n__LINE__ __FILE__\n")
    assert solid(src) == ['3 "main.p4"']


def test_line_continuation_joins_define_body() -> None:
    src = pp("#define LONG 1 + \\\n    2\nLONG\n")
    assert lines(src) == ["", "", "1 +     2"]


def test_line_continuation_in_code_keeps_line_count_and_columns() -> None:
    src = pp("a \\\n  b\nc\n")
    assert lines(src) == ["a   b", "", "c"]
    assert src.location(1, 5) == SourceLoc("main.p4", 2, 3)
    assert src.location(3, 1) == SourceLoc("main.p4", 3, 1)


# --------------------------------------------------------------------------- conditionals


def test_ifdef_ifndef_else() -> None:
    text = "#define A\n#ifdef A\nyes1\n#else\nno1\n#endif\n#ifndef A\nno2\n#else\nyes2\n#endif\n"
    assert solid(pp(text)) == ["yes1", "yes2"]


def test_skipped_lines_are_blank_so_line_numbers_stay() -> None:
    src = pp("#if 0\na\nb\n#endif\nc\n")
    assert lines(src) == ["", "", "", "", "c"]


def test_elif_chain_takes_first_true_branch_only() -> None:
    text = "#if 0\na\n#elif 2 > 1\nb\n#elif 1\nc\n#else\nd\n#endif\n"
    assert solid(pp(text)) == ["b"]


def test_nested_conditionals_in_skipped_group_take_no_branch() -> None:
    text = "#if 0\n#if 1\na\n#else\nb\n#endif\n#else\nc\n#endif\n"
    assert solid(pp(text)) == ["c"]


def test_nested_conditionals_in_active_group() -> None:
    text = "#define X 2\n#if X\n#if X == 1\na\n#elif X == 2\nb\n#endif\n#endif\n"
    assert solid(pp(text)) == ["b"]


@pytest.mark.parametrize(
    "expr",
    [
        "defined(A) && defined B",
        "!defined(C)",
        "A == 3 && B + 1 == 1",
        "(A * 2 - 1) % 4 == 1",
        "0x10 == 16 && 010 == 8 && 0b101 == 5 && 10UL == 10",
        "-7 / 2 == -3 && -7 % 2 == -1",
        "1 << 4 == 16 && 256 >> 4 == 16",
        "(5 & 3) == 1 && (5 | 3) == 7 && (5 ^ 3) == 6 && ~0 == -1",
        "UNDEFINED_NAME == 0",
        "A > 2 ? 1 : 0",
        "0 || 1 && 1",
        "3 >= 3 && 2 <= 3 && 2 != 3 && 2 < 3",
        "0 && 1 / 0 || 1",
    ],
)
def test_if_expression_is_true(expr: str) -> None:
    text = f"#define A 3\n#define B\n#if {expr}\nyes\n#else\nno\n#endif\n"
    assert solid(pp(text)) == ["yes"]


def test_if_expression_false_branch() -> None:
    assert solid(pp("#if 1 + 1 == 3\nyes\n#else\nno\n#endif\n")) == ["no"]


def test_skipped_group_ignores_unknown_directives_and_bad_expressions() -> None:
    text = "#if 0\n#frobnicate\n#if 1 +\n#endif\n#error nope\n#endif\nok\n"
    assert solid(pp(text)) == ["ok"]


def test_unterminated_if_is_an_error_at_the_if() -> None:
    err = raises("a\n  #ifdef X\nb\n")
    assert err.loc == SourceLoc("main.p4", 2, 3)
    assert "unterminated #ifdef" in err.message


def test_several_unterminated_ifs_are_all_reported() -> None:
    err = raises("#if 1\n#if 1\n")
    assert isinstance(err, P4ErrorList)
    assert [e.loc.line for e in err.errors] == [1, 2]


@pytest.mark.parametrize("directive", ["#else", "#endif", "#elif 1"])
def test_conditional_without_if_is_an_error(directive: str) -> None:
    err = raises(f"a\n{directive}\n")
    assert err.loc == SourceLoc("main.p4", 2, 1)
    assert "without #if" in err.message


def test_elif_after_else_is_an_error() -> None:
    err = raises("#if 0\n#else\n#elif 1\n#endif\n")
    assert err.loc.line == 3 and "after #else" in err.message


@pytest.mark.parametrize(
    ("expr", "words"),
    [("1 +", "ends unexpectedly"), ("(1", "expected ')'"), ("1 / 0", "division by zero"),
     ("", "no expression"), ('"s"', "unexpected"), ("8w3", "invalid integer"),
     ("defined", "requires an identifier"), ("1 2", "unexpected '2'")],
)  # fmt: skip
def test_bad_if_expression_is_an_error_at_the_directive(expr: str, words: str) -> None:
    err = raises(f"\n #if {expr}\n#endif\n")
    assert err.loc == SourceLoc("main.p4", 2, 2)
    assert words in err.message


# --------------------------------------------------------------------------- other directives


def test_error_directive_raises_with_its_message_and_location() -> None:
    err = raises("a\n#error no support for this\n")
    assert str(err) == "main.p4:2:1: error: #error no support for this"


def test_warning_directive_prints_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    src = pp("#warning careful\nx\n")
    assert solid(src) == ["x"]
    assert "main.p4:1:1: warning: #warning careful" in capsys.readouterr().err


def test_unknown_directive_is_an_error_at_its_column() -> None:
    err = raises("x\n   #bogus 1\n")
    assert str(err) == "main.p4:2:4: error: unknown preprocessor directive '#bogus'"


def test_null_directive_and_pragmas_are_ignored() -> None:
    assert solid(pp("#\n#pragma something\nx\n")) == ["x"]


def test_line_directive_renumbers_following_lines() -> None:
    src = pp('a\n#line 100 "gen.p4"\nb\nc\n')
    assert src.location(1, 1) == SourceLoc("main.p4", 1, 1)
    assert src.location(3, 1) == SourceLoc("gen.p4", 100, 1)
    assert src.location(4, 1) == SourceLoc("gen.p4", 101, 1)


def test_line_directive_without_file_keeps_file_name() -> None:
    src = pp("#line 50\nb\n")
    assert src.location(2, 1) == SourceLoc("main.p4", 50, 1)


def test_gcc_line_marker_is_honoured() -> None:
    src = pp('# 7 "orig.p4" 1\nb\n')
    assert src.location(2, 1) == SourceLoc("orig.p4", 7, 1)


def test_errors_after_line_directive_use_the_new_location() -> None:
    err = raises('#line 20 "gen.p4"\n#error x\n')
    assert err.loc == SourceLoc("gen.p4", 20, 1)


# --------------------------------------------------------------------------- includes


def test_quoted_include_is_relative_to_including_file_first(tmp_path: Path) -> None:
    write(tmp_path / "sub" / "h.p4", "from_sub\n")
    write(tmp_path / "inc" / "h.p4", "from_inc\n")
    write(tmp_path / "sub" / "mid.p4", '#include "h.p4"\n')
    main = write(tmp_path / "main.p4", '#include "sub/mid.p4"\n')
    src = preprocess(str(main), include_dirs=[str(tmp_path / "inc")])
    assert solid(src) == ["from_sub"]


def test_quoted_include_falls_back_to_include_dirs_in_order(tmp_path: Path) -> None:
    write(tmp_path / "i1" / "h.p4", "one\n")
    write(tmp_path / "i2" / "h.p4", "two\n")
    write(tmp_path / "i2" / "g.p4", "g2\n")
    main = write(tmp_path / "src" / "main.p4", '#include "h.p4"\n#include "g.p4"\n')
    src = preprocess(str(main), include_dirs=[str(tmp_path / "i1"), str(tmp_path / "i2")])
    assert solid(src) == ["one", "g2"]


def test_angle_include_does_not_search_the_current_directory(tmp_path: Path) -> None:
    write(tmp_path / "h.p4", "local\n")
    main = write(tmp_path / "main.p4", "#include <h.p4>\n")
    with pytest.raises(P4Error, match="cannot find include file 'h.p4'"):
        preprocess(str(main))


def test_angle_include_searches_include_dirs(tmp_path: Path) -> None:
    write(tmp_path / "inc" / "h.p4", "found\n")
    main = write(tmp_path / "main.p4", "#include <h.p4>\n")
    assert solid(preprocess(str(main), include_dirs=[str(tmp_path / "inc")])) == ["found"]


def test_core_and_v1model_resolve_to_builtin_declarations() -> None:
    src = pp("#include <core.p4>\n#include <v1model.p4>\nx\n")
    builtin = Path(BUILTIN_INCLUDE_DIR)
    assert src.files == ["main.p4", str(builtin / "core.p4"), str(builtin / "v1model.p4")]
    assert "extern packet_in {" in src.text
    assert "package V1Switch<H, M>(Parser<H, M> p," in src.text


def test_include_dirs_take_precedence_over_builtin_dir(tmp_path: Path) -> None:
    write(tmp_path / "core.p4", "my_core\n")
    src = pp("#include <core.p4>\n", include_dirs=[str(tmp_path)])
    assert solid(src) == ["my_core"]


def test_include_by_macro_name(tmp_path: Path) -> None:
    write(tmp_path / "h.p4", "h\n")
    src = pp('#define HDR "h.p4"\n#include HDR\n', include_dirs=[str(tmp_path)])
    assert solid(src) == ["h"]


def test_missing_include_lists_the_search_path(tmp_path: Path) -> None:
    main = write(tmp_path / "main.p4", 'a\n  #include "nope.p4"\n')
    with pytest.raises(P4Error) as info:
        preprocess(str(main), include_dirs=["/some/inc"])
    err = info.value
    assert err.loc == SourceLoc(str(main), 2, 3)
    assert "cannot find include file 'nope.p4'" in err.message
    assert str(tmp_path) in err.message and "/some/inc" in err.message
    assert BUILTIN_INCLUDE_DIR in err.message


def test_malformed_include_is_an_error() -> None:
    err = raises("#include nothing\n")
    assert err.loc.line == 1 and "#include expects" in err.message


def test_pragma_once_includes_a_file_once(tmp_path: Path) -> None:
    write(tmp_path / "h.p4", "#pragma once\nonce\n")
    src = pp('#include "h.p4"\n#include "h.p4"\n', include_dirs=[str(tmp_path)])
    assert solid(src) == ["once"]


def test_include_guard_includes_contents_once(tmp_path: Path) -> None:
    write(tmp_path / "h.p4", "#ifndef H\n#define H\nguarded\n#endif\n")
    src = pp('#include "h.p4"\n#include "h.p4"\n', include_dirs=[str(tmp_path)])
    assert solid(src) == ["guarded"]
    assert src.files == ["main.p4", str(tmp_path / "h.p4")]


def test_include_cycle_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "a.p4", '#include "b.p4"\n')
    write(tmp_path / "b.p4", '#include "a.p4"\n')
    main = write(tmp_path / "main.p4", '#include "a.p4"\n')
    with pytest.raises(P4Error, match="nested more than 100 deep"):
        preprocess(str(main))


def test_locations_map_back_through_includes(tmp_path: Path) -> None:
    inc = write(tmp_path / "h.p4", "// header file\nheader h_t {\n  bit<8> f;\n}\n")
    main = write(tmp_path / "main.p4", 'line1\n#include "h.p4"\n  after;\n')
    src = preprocess(str(main))
    out = lines(src)
    row = out.index("  bit<8> f;") + 1
    assert src.location(row, 3) == SourceLoc(str(inc), 3, 3)
    after = out.index("  after;") + 1
    assert src.location(after, 3) == SourceLoc(str(main), 3, 3)
    assert src.location(1, 1) == SourceLoc(str(main), 1, 1)
    assert src.files == [str(main), str(inc)]


def test_error_in_included_file_reports_that_file(tmp_path: Path) -> None:
    inc = write(tmp_path / "h.p4", "ok\n\n  #error broken header\n")
    main = write(tmp_path / "main.p4", '#include "h.p4"\n')
    with pytest.raises(P4Error) as info:
        preprocess(str(main))
    assert info.value.loc == SourceLoc(str(inc), 3, 3)
    assert info.value.render().split("\n")[1:] == ["  #error broken header", "  ^"]


def test_conditionals_must_balance_within_each_file(tmp_path: Path) -> None:
    write(tmp_path / "h.p4", "#if 1\n")
    with pytest.raises(P4Error, match="unterminated #if"):
        pp('#include "h.p4"\n#endif\n', include_dirs=[str(tmp_path)])


def test_preprocess_of_missing_file_is_a_p4error(tmp_path: Path) -> None:
    with pytest.raises(P4Error, match="cannot read file"):
        preprocess(str(tmp_path / "absent.p4"))


# --------------------------------------------------------------------------- location map


def test_macro_body_tokens_map_to_macro_use_and_arguments_keep_columns() -> None:
    src = pp("#define ADD(a, b) ((a) + (b))\nx = ADD(yy, zz);\n")
    out = lines(src)[1]
    assert out == "x = ((yy) + (zz));"
    assert src.location(2, out.index("yy") + 1) == SourceLoc("main.p4", 2, 9)
    assert src.location(2, out.index("zz") + 1) == SourceLoc("main.p4", 2, 13)
    assert src.location(2, out.index("+") + 1) == SourceLoc("main.p4", 2, 5)
    assert src.location(2, 1) == SourceLoc("main.p4", 2, 1)


def test_columns_after_a_macro_use_map_back_exactly() -> None:
    src = pp("#define LONGNAME 1\nx = LONGNAME + y;\n")
    out = lines(src)[1]
    assert out == "x = 1 + y;"
    assert src.location(2, out.index("y") + 1) == SourceLoc("main.p4", 2, 16)


def test_location_clamps_lines_outside_the_output() -> None:
    src = pp("a\nb\n")
    assert src.location(99, 2) == SourceLoc("main.p4", 2, 2)
    assert src.location(0, 1) == SourceLoc("main.p4", 1, 1)


def test_output_line_count_matches_source_without_includes() -> None:
    text = "#define A 1\n/* c\n c */\n#if A\nx \\\n y\n#endif\nz\n"
    src = pp(text)
    assert len(lines(src)) == text.count("\n")
    assert src.location(8, 1) == SourceLoc("main.p4", 8, 1)


# --------------------------------------------------------------------------- v1model.p4


def test_v1model_default_version_has_bit32_indices() -> None:
    src = pp("#include <v1model.p4>\n")
    assert "const bit<32> __v1model_version = 20180101;" in src.text
    assert "extern register<T> {" in src.text
    assert "void read(out T result, in bit<32> index);" in src.text
    assert "PortId_t" not in src.text


def test_v1model_20200408_has_index_type_parameters() -> None:
    src = pp("#define V1MODEL_VERSION 20200408\n#include <v1model.p4>\n")
    assert "const bit<32> __v1model_version = 20200408;" in src.text
    assert "extern register<T, I> {" in src.text
    assert "extern counter<I> {" in src.text
    assert "typedef bit<9> PortId_t;" in src.text
    assert "PortId_t ingress_port;" in src.text


def test_v1model_standard_metadata_fields_in_order() -> None:
    text = pp("#include <v1model.p4>\n").text
    body = text[text.index("struct standard_metadata_t {") :]
    body = body[: body.index("}")]
    fields = [ln.split()[-1].rstrip(";") for ln in body.split("\n")[1:] if ln.strip().endswith(";")]
    assert fields == [
        "ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
        "enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth",
        "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
        "checksum_error", "parser_error", "priority",
    ]  # fmt: skip


def test_v1model_meter_colour_macros_are_available() -> None:
    src = pp("#include <v1model.p4>\nV1MODEL_METER_COLOR_RED\n")
    assert solid(src)[-1] == "2"


def test_macro_expansion_nested_too_deeply_is_an_error() -> None:
    chain = "".join(f"#define M{i} M{i + 1}\n" for i in range(150))
    err = raises(chain + "x = M0;\n")
    assert err.loc == SourceLoc("main.p4", 151, 5)
    assert "nested too deeply" in err.message


def test_ifdef_ignores_extra_tokens_after_the_name() -> None:
    assert solid(pp("#define A\n#ifdef A extra\nyes\n#endif\n")) == ["yes"]
