"""The programs that must run on the native back end with no fallback notice.

Every program here loads with ``backend="native"`` and runs native: no one-line notice of
a fallback to Python. A program joins the list when the C generator covers it; leaving
the list is a regression. The differential test (tests/test_native.py) checks that each
gives Python's outputs; tests/test_stf_programs.py runs their STF scripts on both back
ends.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.switch import Switch
from tests.beyond_bmv2 import target_of

ROOT = Path(__file__).resolve().parents[1]

MUST_RUN_NATIVE = [
    "p4src/inc.p4",
    "tests/bench/register_heavy.p4",
    "tests/compiler_programs/basic.p4",
    "tests/compiler_programs/lang.p4",
    "tests/compiler_programs/misc.p4",
    "tests/compiler_programs/ops.p4",
    "tests/compiler_programs/parse.p4",
    "tests/compiler_programs/replicate.p4",
    "tests/compiler_programs/stateful.p4",
    "tests/compiler_programs/tables.p4",
    "tests/p4/conformance/action_profiles/ecmp_selector.p4",
    "tests/p4/conformance/architecture/checksum.p4",
    "tests/p4/conformance/architecture/clone.p4",
    "tests/p4/conformance/architecture/multicast_rid.p4",
    "tests/p4/conformance/architecture/resubmit_recirculate.p4",
    "tests/p4/conformance/architecture/truncate_drop.p4",
    "tests/p4/conformance/externs/hashes.p4",
    "tests/p4/conformance/externs/meter_random_digest.p4",
    "tests/p4/conformance/externs/register_counter.p4",
    "tests/p4/conformance/operators/arith.p4",
    "tests/p4/conformance/operators/bits_and_bools.p4",
    "tests/p4/conformance/operators/headers_and_flow.p4",
    "tests/p4/conformance/parser/lookahead_advance_verify.p4",
    "tests/p4/conformance/parser/select_variants.p4",
    "tests/p4/conformance/parser/stack_errors.p4",
    "tests/p4/conformance/parser/subparser.p4",
    "tests/p4/conformance/parser/varbit.p4",
    "tests/p4/conformance/regressions/accepted_constructs.p4",
    "tests/p4/conformance/regressions/bound_action_args.p4",
    "tests/p4/conformance/regressions/compound_assign_once.p4",
    "tests/p4/conformance/regressions/control_instances.p4",
    "tests/p4/conformance/regressions/copy_in_copy_out.p4",
    "tests/p4/conformance/regressions/enum_mask_entries.p4",
    "tests/p4/conformance/regressions/eval_order.p4",
    "tests/p4/conformance/regressions/eval_order_calls.p4",
    "tests/p4/conformance/regressions/eval_order_side_effects.p4",
    "tests/p4/conformance/regressions/exit_copy_out.p4",
    "tests/p4/conformance/regressions/extract_dont_care.p4",
    "tests/p4/conformance/regressions/for_loops.p4",
    "tests/p4/conformance/regressions/generic_functions.p4",
    "tests/p4/conformance/regressions/guard_macros.p4",
    "tests/p4/conformance/regressions/indirect_header_assign.p4",
    "tests/p4/conformance/regressions/inout_slice_argument.p4",
    "tests/p4/conformance/regressions/lookahead_struct.p4",
    "tests/p4/conformance/regressions/nested_slice_assign.p4",
    "tests/p4/conformance/regressions/priority_annotation.p4",
    "tests/p4/conformance/regressions/stack_push_pop.p4",
    "tests/p4/conformance/regressions/struct_in_header.p4",
    "tests/p4/conformance/regressions/table_empty_parens.p4",
    "tests/p4/conformance/regressions/ternary_width.p4",
    "tests/p4/conformance/regressions/unaligned_header.p4",
    "tests/p4/conformance/regressions/union_stack.p4",
    "tests/p4/conformance/tables/const_and_action_run.p4",
    "tests/p4/conformance/tables/match_kinds.p4",
    "tests/p4/conformance/tables/priorities.p4",
    "tests/p4/native/action_params.p4",
    "tests/p4/native/ctor_params.p4",
    "tests/p4/native/enum_action_data.p4",
    "tests/p4/native/error_keys.p4",
    "tests/p4/native/hash_algos.p4",
    "tests/p4/native/index_args.p4",
    "tests/p4/native/options_checksums.p4",
    "tests/p4/native/signed_ops.p4",
    "tests/p4/native/stacks_and_ranges.p4",
    "tests/p4/native/subcontrol_params.p4",
    "tests/p4/native/unions_enums.p4",
    "tests/p4/native/wide_bits.p4",
    "tests/p4/p4info/action_order.p4",
    "tests/p4/p4info/controller_enum.p4",
    "tests/p4/p4info/direct_actions.p4",
    "tests/p4/tutorials/basic/basic.p4",
    "tests/p4/tutorials/basic_tunnel/basic_tunnel.p4",
    "tests/p4/tutorials/calc/calc.p4",
    "tests/p4/tutorials/ecn/ecn.p4",
    "tests/p4/tutorials/firewall/firewall.p4",
    "tests/p4/tutorials/link_monitor/link_monitor.p4",
    "tests/p4/tutorials/load_balance/load_balance.p4",
    "tests/p4/tutorials/mri/mri.p4",
    "tests/p4/tutorials/multicast/multicast.p4",
    "tests/p4/tutorials/qos/qos.p4",
    "tests/p4/tutorials/source_routing/source_routing.p4",
    "tests/parser_programs/basic_forward.p4",
    "tests/parser_programs/calc.p4",
    "tests/parser_programs/stacks_pvs.p4",
    "tests/parser_programs/tunnel.p4",
    "topologies/basic/basic.p4",
]


@pytest.mark.parametrize("path", MUST_RUN_NATIVE)
def test_program_runs_native_without_a_fallback_notice(path: str) -> None:
    program = ROOT / path
    sw = Switch.from_file(
        str(program),
        include_dirs=(str(program.parent),),
        backend="native",
        target=target_of(program),
    )
    assert sw.backend == "native" and not sw.backend_notice, sw.backend_notice


def test_the_list_names_existing_programs_once() -> None:
    assert len(set(MUST_RUN_NATIVE)) == len(MUST_RUN_NATIVE)
    assert all((ROOT / p).is_file() for p in MUST_RUN_NATIVE)
