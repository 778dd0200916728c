"""Regressions found by running p4c's BMv2 sample programs (testdata/p4_16_samples/*-bmv2)
through p4sim. Each test uses a small program of its own under
tests/p4/conformance/regressions/ (its .stf holds the packets) or an inline script.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.frontend.diagnostics import P4Error
from p4sim.stf import run_stf
from p4sim.stf_format import StfError, parse_stf
from p4sim.switch import Switch
from tests.beyond_bmv2 import target_of

REG_DIR = Path(__file__).parent / "p4" / "conformance" / "regressions"


@pytest.fixture(params=["python", "native"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each STF regression runs on both back ends (native runs Python where it says so)."""
    return request.param


def _run(name: str, backend: str) -> None:
    """Run ``name.stf`` against ``name.p4`` and fail with the runner's report."""
    p4 = REG_DIR / f"{name}.p4"
    stf = REG_DIR / f"{name}.stf"
    switch = Switch.from_file(str(p4), target=target_of(p4), backend=backend)
    result = run_stf(switch, parse_stf(stf.read_text(), str(stf)))
    assert result.passed, f"{switch.backend}: {result.report}"


def test_core_and_v1model_define_p4c_guard_macros(backend: str) -> None:
    _run("guard_macros", backend)


def test_table_declaration_accepts_empty_parentheses(backend: str) -> None:
    _run("table_empty_parens", backend)


def test_unaligned_header_is_extracted_and_emitted_as_whole_bytes(backend: str) -> None:
    _run("unaligned_header", backend)


def test_action_list_binds_directional_parameters(backend: str) -> None:
    _run("bound_action_args", backend)


def test_lhs_index_is_evaluated_before_rhs_side_effects_and_short_circuit_skips_calls(
    backend: str,
) -> None:
    _run("eval_order", backend)


def test_priority_annotation_on_const_entries_lowest_value_wins(backend: str) -> None:
    _run("priority_annotation", backend)


def test_assignment_to_slice_of_slice_sets_the_composed_bits(backend: str) -> None:
    _run("nested_slice_assign", backend)


def test_exit_in_action_still_copies_out_inout_parameters(backend: str) -> None:
    _run("exit_copy_out", backend)


def test_inout_and_in_parameters_are_copies_also_when_the_callee_writes_the_argument(
    backend: str,
) -> None:
    _run("copy_in_copy_out", backend)


def test_operands_and_arguments_are_evaluated_left_to_right_around_inout_calls(
    backend: str,
) -> None:
    _run("eval_order_calls", backend)


def test_compound_assignment_evaluates_its_target_once(backend: str) -> None:
    _run("compound_assign_once", backend)


def test_bit_slice_as_out_or_inout_argument_is_written_back_to_its_bits(backend: str) -> None:
    _run("inout_slice_argument", backend)


def test_push_and_pop_of_a_stack_with_invalid_elements_through_a_sub_control(
    backend: str,
) -> None:
    _run("stack_push_pop", backend)


def test_direct_writes_to_an_inout_argument_are_undone_by_its_copy_out(backend: str) -> None:
    _run("indirect_header_assign", backend)


def test_operand_and_initialiser_reads_come_before_a_later_calls_side_effects(
    backend: str,
) -> None:
    _run("eval_order_side_effects", backend)


def test_extract_into_dont_care_skips_a_header_and_checks_its_length(backend: str) -> None:
    _run("extract_dont_care", backend)


def test_serializable_enum_members_with_a_mask_in_const_entries(backend: str) -> None:
    _run("enum_mask_entries", backend)


def test_header_fields_of_struct_and_typedef_types_extract_match_and_emit(backend: str) -> None:
    _run("struct_in_header", backend)


def test_a_conditional_takes_its_width_from_its_branches_not_from_a_cast(backend: str) -> None:
    _run("ternary_width", backend)


def test_newtype_fields_error_keys_enum_entry_keys_and_dont_care_arguments_are_accepted(
    backend: str,
) -> None:
    _run("accepted_constructs", backend)


def test_header_unions_in_a_stack_extract_validate_and_assign(backend: str) -> None:
    _run("union_stack", backend)


def test_action_with_directional_parameter_unbound_in_table_is_an_error() -> None:
    src = (REG_DIR / "bound_action_args.p4").read_text()
    bad = src.replace("actions = { put(h.d.lo); bump(h.d.hi); }", "actions = { put; }")
    bad = bad.replace("default_action = put(h.d.lo, 0x77);", "")
    with pytest.raises(P4Error, match="must bind them"):
        Switch.from_source(bad, target="p4sim")


# -- p4c-compatible STF reading (`p4sim stf --p4c-compat`) -------------------------------


def test_p4c_compat_ignores_output_on_ports_the_script_never_names() -> None:
    sw = Switch.from_file(str(REG_DIR / "guard_macros.p4"))  # sends everything to port 3
    script = "packet 0 5a\n"
    assert not run_stf(sw, parse_stf(script)).passed  # strict: port 3 output unexpected
    assert run_stf(sw, parse_stf(script, p4c_compat=True), p4c_compat=True).passed


def test_p4c_compat_still_checks_named_ports() -> None:
    sw = Switch.from_file(str(REG_DIR / "guard_macros.p4"))
    script = "packet 3 5a\n"  # port 3 named by the packet line: its output must be expected
    result = run_stf(sw, parse_stf(script, p4c_compat=True), p4c_compat=True)
    assert not result.passed and "port 3: expected 0 packet(s), got 1" in result.report


def test_p4c_compat_reads_a_lone_last_hex_digit_as_a_byte() -> None:
    (cmd,) = parse_stf("packet 0 ab c\n", p4c_compat=True)
    assert cmd.data == b"\xab\x0c"  # type: ignore[attr-defined]
    with pytest.raises(StfError, match="odd number"):
        parse_stf("packet 0 ab c\n")


# -- P4_16 v1.2.5 loops (p4c sample forloop-bmv2) ----------------------------------------


def test_for_loops_run_break_continue_ranges_lists_and_stacks(backend: str) -> None:
    _run("for_loops", backend)


def _loop_program(body: str) -> str:
    """for_loops.p4 with the ingress apply block replaced by ``body``."""
    src = (REG_DIR / "for_loops.p4").read_text()
    start = src.index("    apply {\n        sm.egress_spec = 1;")
    end = src.index("control Eg(")
    return src[:start] + "    apply {\n" + body + "\n    }\n}\n" + src[end:]


def test_break_outside_a_loop_is_an_error() -> None:
    with pytest.raises(P4Error, match="'break' is only allowed inside a for loop"):
        Switch.from_source(_loop_program("        break;"), target="p4sim")


def test_continue_outside_a_loop_is_an_error() -> None:
    with pytest.raises(P4Error, match="'continue' is only allowed inside a for loop"):
        Switch.from_source(_loop_program("        if (h.i.n == 1) { continue; }"), target="p4sim")


def test_for_in_over_a_scalar_is_an_error() -> None:
    with pytest.raises(P4Error, match="cannot iterate over bit<8>"):
        Switch.from_source(
            _loop_program("        for (bit<8> x in h.i.n) { h.o.r0 = x; }"), target="p4sim"
        )


# -- generic functions and lookahead of structs --------------------------------------------


def test_generic_functions_infer_or_take_type_arguments(backend: str) -> None:
    _run("generic_functions", backend)


def test_generic_function_type_parameter_only_in_result_must_be_written() -> None:
    src = (REG_DIR / "generic_functions.p4").read_text()
    bad = src.replace("widen<bit<8>, bit<16>>(twice(h.h.b))", "widen(twice(h.h.b))")
    with pytest.raises(P4Error, match="cannot infer type parameter R of widen"):
        Switch.from_source(bad, target="p4sim")


def test_lookahead_of_a_struct_reads_fields_without_consuming_bits(backend: str) -> None:
    _run("lookahead_struct", backend)


# -- instances as constructor arguments, direct type invocation (p4c issue1566-bmv2) ----


def test_control_instances_as_constructor_arguments_and_direct_apply(backend: str) -> None:
    _run("control_instances", backend)


def test_instance_passed_by_name_is_shared_and_inline_instance_is_new() -> None:
    sw = Switch.from_file(str(REG_DIR / "control_instances.p4"))
    sw.send(0, bytes.fromhex("aa10203000"))
    assert sw.register_read("Ig.inc.calls", 0) == 3  # twice through t1, once directly
    assert sw.register_read("Ig.t2.s.calls", 0) == 2  # t2's own Inc()


def test_control_parameter_needs_an_instance() -> None:
    src = (REG_DIR / "control_instances.p4").read_text()
    with pytest.raises(P4Error, match="'s' needs a parser or control instance"):
        Switch.from_source(src.replace("Twice(inc) t1;", "Twice(3) t1;"), target="p4sim")


def test_error_key_takes_p4cs_error_numbers_from_the_control_plane() -> None:
    src = (REG_DIR / "accepted_constructs.p4").read_text()
    src = src.replace("actions = { set1; NoAction; }", "actions = { set1; NoAction; } size = 4;")
    src = src.replace(
        """        const entries = {
            error.NoError : set1(0x10);
            error.Unwanted : set1(0xee);
        }
""",
        "",
    )
    sw = Switch.from_source(src, target="p4sim")
    sw.table_add("by_error", {"sm.parser_error": 1}, "set1", {"v": 0x10})  # NoError
    sw.table_add("by_error", {"sm.parser_error": 8}, "set1", {"v": 0xEE})  # first user error
    assert sw.send(0, bytes.fromhex("090107000000"))[0][1][3] == 0x10
    assert sw.send(0, bytes.fromhex("080002090000"))[0][1][3] == 0xEE  # error.Unwanted
