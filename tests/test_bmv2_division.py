"""Which ``/`` and ``%`` p4sim's BMv2 check accepts: exactly those p4c's BMv2 back end
accepts. p4c has no run-time division; its front end inlines functions and actions called
by name, then its mid end (LocalCopyPropagation, ConstantFolding, StrengthReduction) turns
a power-of-two divisor into a shift or a mask, a zero dividend into 0, and a local known to
hold a constant into that constant; whatever division is left, CompileTimeOperations
refuses. Each case below was compiled by hand with
p4c-bm2-ss 1.2.5.16; the last test compares with p4c again wherever it is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from p4sim.compiler import compile_text
from p4sim.frontend.diagnostics import P4Error
from p4sim.switch import Switch

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; int<8> s; bit<8> c; }
struct headers_t { h_t h; }
struct meta_t { bit<8> x; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); PARSE transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
bit<8> bump(inout bit<8> v) { v = v + 1; return v; }
const bit<8> FOUR = 4;
bit<8> quarter(in bit<8> v, in bit<8> d) { return v / d; }
bit<8> outer(in bit<8> v, in bit<8> d) { return quarter(v, d); }
control Ig(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action nop() { }
    table t { key = { hdr.h.a: exact; } actions = { nop; } }
    DECL
    apply { sm.egress_spec = 1; BODY }
}
V1Switch(P(), V(), Ig(), Eg(), C(), D()) main;
"""

DIV = "action div(bit<8> d) { hdr.h.c = hdr.h.a / d; }\n"
TABLE_ACTION = DIV + "table u { key = { hdr.h.b: exact; } actions = { div; } }"

# (name, ingress body, control declarations, parser statements, what p4c says or None)
CASES = [
    ("power_of_two", "hdr.h.c = hdr.h.a / 4;", "", "", None),
    ("by_one", "hdr.h.c = hdr.h.a / 1;", "", "", None),
    ("mod_power_of_two", "hdr.h.c = hdr.h.a % 8;", "", "", None),
    ("mod_one", "hdr.h.c = hdr.h.a % 1;", "", "", None),
    ("zero_dividend", "hdr.h.c = 8w0 % hdr.h.a;", "", "", None),
    ("zero_dividend_from_a_call", "hdr.h.c = 0 / bump(hdr.h.b);", "", "", None),
    ("folded_divisor", "hdr.h.c = hdr.h.a / (8 / 2);", "", "", None),
    ("constant_divisor", "hdr.h.c = hdr.h.a / FOUR;", "", "", None),
    ("local_constant", "bit<8> d = 4; hdr.h.c = hdr.h.a / d;", "", "", None),
    ("zero_local", "bit<8> z = 0; hdr.h.c = z / hdr.h.a;", "", "", None),
    ("field_set_before", "meta.x = 4; hdr.h.c = hdr.h.a / meta.x;", "", "", None),
    ("local_across_a_table", "bit<8> d = 4; t.apply(); hdr.h.c = hdr.h.a / d;", "", "", None),
    ("local_across_an_if", "bit<8> d = 4; if (hdr.h.b == 1) { hdr.h.a = 1; } "
     "hdr.h.c = hdr.h.a / d;", "", "", None),
    ("control_local", "hdr.h.c = hdr.h.a / d;", "bit<8> d = 4;", "", None),
    ("in_the_parser", "", "", "bit<8> d = 4; hdr.h.c = hdr.h.a / d;", None),
    ("self_minus_self", "hdr.h.c = (hdr.h.a - hdr.h.a) / hdr.h.b;", "", "", None),
    ("times_zero", "hdr.h.c = (hdr.h.a * 0) / hdr.h.b;", "", "", None),
    ("same_arms", "hdr.h.c = hdr.h.a / (hdr.h.b == 1 ? 8w4 : 8w4);", "", "", None),
    ("wide", "bit<128> w = (bit<128>)hdr.h.a; hdr.h.c = (bit<8>)(w / 128w1024);", "", "", None),
    ("signed_constants", "hdr.h.s = 8s7 / 8s2;", "", "", None),
    # p4c inlines functions and actions called by name: the arguments decide
    ("function_by_four", "hdr.h.c = quarter(hdr.h.a, 4);", "", "", None),
    ("function_through_function", "hdr.h.c = outer(hdr.h.a, 8);", "", "", None),
    ("function_zero_dividend", "hdr.h.c = quarter(0, hdr.h.b);", "", "", None),
    ("function_local_argument", "bit<8> q = 16; hdr.h.c = quarter(hdr.h.a, q);", "", "", None),
    ("action_by_four", "div(4);", DIV, "", None),
    ("action_by_a_constant", "div(FOUR);", DIV, "", None),
    ("action_unused", "hdr.h.c = 1;", DIV, "", None),
    ("function_by_three", "hdr.h.c = quarter(hdr.h.a, 3);", "", "", "could not evaluate"),
    ("function_by_four_and_three", "hdr.h.c = quarter(hdr.h.a, 4); "
     "hdr.h.b = quarter(hdr.h.b, 3);", "", "", "could not evaluate"),
    ("function_through_function_by_six", "hdr.h.c = outer(hdr.h.a, 6);", "", "",
     "could not evaluate"),
    ("action_by_a_field", "div(hdr.h.b);", DIV, "", "could not evaluate"),
    ("action_by_a_local", "bit<8> q = 16; div(q);", DIV, "", "could not evaluate"),
    ("action_called_and_in_a_table", "div(4); u.apply();", TABLE_ACTION, "",
     "could not evaluate"),
    ("runtime", "hdr.h.c = hdr.h.a / hdr.h.b;", "", "", "could not evaluate"),
    ("not_a_power_of_two", "hdr.h.c = hdr.h.a / 3;", "", "", "could not evaluate"),
    ("mod_not_a_power_of_two", "hdr.h.c = hdr.h.a % 6;", "", "", "could not evaluate"),
    ("local_not_a_power_of_two", "bit<8> d = 3; hdr.h.c = hdr.h.a / d;", "", "",
     "could not evaluate"),
    ("local_set_in_a_branch", "bit<8> d = 4; if (hdr.h.b == 1) { d = 2; } "
     "hdr.h.c = hdr.h.a / d;", "", "", "could not evaluate"),
    ("same_constant_in_a_branch", "bit<8> d = 4; if (hdr.h.b == 1) { d = 4; } "
     "hdr.h.c = hdr.h.a / d;", "", "", "could not evaluate"),
    ("action_parameter", "u.apply();", TABLE_ACTION, "", "could not evaluate"),
    ("signed_power_of_two", "hdr.h.s = hdr.h.s / 4;", "", "", "Cannot operate on signed"),
    ("by_zero", "hdr.h.c = hdr.h.a / 0;", "", "", "Division by zero"),
]  # fmt: skip


def source(body: str, decl: str, parse: str) -> str:
    return PROGRAM.replace("BODY", body).replace("DECL", decl).replace("PARSE", parse)


@pytest.mark.parametrize(
    ("name", "body", "decl", "parse", "refused"), CASES, ids=[c[0] for c in CASES]
)
def test_bmv2_check_divides_what_p4c_reduces_and_refuses_the_rest(
    name: str, body: str, decl: str, parse: str, refused: str | None
) -> None:
    text = source(body, decl, parse)
    if refused is None:
        compile_text(text, f"{name}.p4")
        return
    with pytest.raises(P4Error, match=f'p4c: "{refused}'):
        compile_text(text, f"{name}.p4")
    compile_text(text, f"{name}.p4", target="p4sim")


@pytest.mark.parametrize("backend", ["python", "native"])
def test_divisions_p4c_reduces_compute_its_shift_mask_and_zero(backend: str) -> None:
    body = (
        "bit<8> d = 4; hdr.h.c = hdr.h.a / d + hdr.h.a % 8 + (hdr.h.b - hdr.h.b) / hdr.h.a;"
        " hdr.h.s = 8s7 / 8s2;"
    )
    sw = Switch(compile_text(source(body, "", ""), "d.p4"), backend=backend)
    assert sw.backend == backend, sw.backend_notice
    for a in (0, 1, 7, 9, 200, 255):
        out = sw.send(0, bytes([a, 5, 0, 0]))
        assert out == [(1, bytes([a, 5, 3, (a // 4 + a % 8) & 255]))]


@pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None, reason="p4c-bm2-ss not on PATH")
@pytest.mark.parametrize(
    ("name", "body", "decl", "parse", "refused"), CASES, ids=[c[0] for c in CASES]
)
def test_p4c_answers_each_division_case_as_listed(
    name: str, body: str, decl: str, parse: str, refused: str | None, tmp_path: Path
) -> None:
    prog = tmp_path / f"{name}.p4"
    prog.write_text(source(body, decl, parse))
    p4c = subprocess.run(
        ["p4c-bm2-ss", "-o", str(tmp_path / "out.json"), str(prog)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if refused is None:
        assert p4c.returncode == 0, p4c.stderr
    else:
        assert p4c.returncode != 0 and refused in p4c.stderr, p4c.stderr
