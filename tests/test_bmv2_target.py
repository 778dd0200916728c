"""p4sim refuses by default what p4c's BMv2 back end refuses (p4sim/compiler/bmv2_target.py),
so a program that runs on p4sim also compiles for simple_switch; ``--target p4sim`` runs
the rest. These run everywhere; tests/test_bmv2.py and tests/test_p4info.py compare with
real p4c where it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from p4sim.cli import main
from p4sim.compiler import compile_text
from p4sim.frontend.diagnostics import P4Error
from p4sim.p4info import read_device_config
from p4sim.p4runtime.pipeline import load_switch_from_device_config
from p4sim.p4runtime.server import program_args
from tests.beyond_bmv2 import BEYOND_BMV2, ROOT

PRELUDE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { bit<8> x; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
control Fwd(inout headers_t hdr, inout standard_metadata_t sm) {
    action send(bit<9> port) { sm.egress_spec = port; }
    table route {
        key = { hdr.eth.dst: exact; }
        actions = { send; NoAction; }
        default_action = NoAction();
    }
    apply { route.apply(); }
}
"""
MAIN = "V1Switch(P(), V(), Ig(), Eg(), C(), D()) main;\n"


def program(ingress_body: str, extra: str = "") -> str:
    return (
        PRELUDE
        + extra
        + "control Ig(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {\n"
        + "    Fwd() fwd;\n"
        + ingress_body
        + "\n}\n"
        + MAIN
    )


TWO_PLACES = program(
    """    apply {
        if (hdr.eth.type == 0x800) {
            fwd.apply(hdr, sm);
            meta.x = 1;
        } else {
            fwd.apply(hdr, sm);
            meta.x = 2;
        }
    }"""
)


def test_a_control_with_a_table_applied_at_two_places_that_go_on_differently_is_refused() -> None:
    with pytest.raises(P4Error) as err:
        compile_text(TWO_PLACES, "two.p4")
    text = str(err.value)
    assert "two.p4:29:13: error: table Ig.fwd.route is applied here and at two.p4:26:13" in text
    assert '(p4c: "table Ig.fwd.route has multiple successors")' in text
    assert "--target p4sim" in text
    assert compile_text(TWO_PLACES, "two.p4", target="p4sim").tables[0].name == "Ig.fwd.route"


def test_a_table_applied_at_two_places_with_the_same_next_step_is_accepted() -> None:
    # p4c merges the two nodes: both continue with the assignment after the if
    same = program(
        """    apply {
        if (hdr.eth.type == 0x800) {
            fwd.apply(hdr, sm);
        } else {
            meta.x = 2;
            fwd.apply(hdr, sm);
        }
        meta.x = 3;
    }"""
    )
    assert [t.name for t in compile_text(same, "same.p4").tables] == ["Ig.fwd.route"]


def test_a_control_with_actions_applied_twice_is_refused_though_its_table_is_placed_once() -> None:
    # with commit = true the table's branch is folded away (as p4c does), so the table is
    # placed once; but p4c's JSON of a control with actions applied twice names a copy of
    # its metadata that simple_switch cannot load (inc.p4's SyncModes did this)
    two_phase = """control Phase(inout headers_t hdr, inout meta_t meta, in bool commit) {
    action mark() { meta.x = 9; }
    table look { key = { hdr.eth.src: exact; } actions = { mark; NoAction; } }
    apply {
        if (commit) { meta.x = meta.x + 1; } else { look.apply(); }
    }
}
"""
    body = """    Phase() phase;
    apply {
        phase.apply(hdr, meta, false);
        fwd.apply(hdr, sm);
        phase.apply(hdr, meta, true);
    }"""
    with pytest.raises(P4Error) as err:
        compile_text(program(body, two_phase), "phase.p4")
    assert "phase.p4:35:9: error: Ig.phase, a control with actions (mark), is applied here" in (
        str(err.value)
    )
    assert "table" not in str(err.value).split("error:")[1].split(",")[0]  # not the table
    compiled = compile_text(program(body, two_phase), "phase.p4", target="p4sim")
    assert {t.name for t in compiled.tables} == {"Ig.phase.look", "Ig.fwd.route"}


def test_a_control_ending_in_its_table_applied_on_paths_that_meet_is_accepted() -> None:
    # Fwd's table is its last step: on both paths it goes on to the same condition
    body = """    apply {
        if (hdr.eth.type == 1) {
            meta.x = 1;
            fwd.apply(hdr, sm);
        } else if (hdr.eth.type == 2) {
            meta.x = 2;
        } else {
            fwd.apply(hdr, sm);
        }
        if (meta.x == 2) { mark_to_drop(sm); }
    }"""
    assert [t.name for t in compile_text(program(body), "meet.p4").tables] == ["Ig.fwd.route"]
    # one more step after the table on one path only: p4c can no longer merge them
    apart = body.replace("fwd.apply(hdr, sm);\n        }\n", "fwd.apply(hdr, sm);\n"
                         "            meta.x = 5;\n        }\n")  # fmt: skip
    assert apart != body
    with pytest.raises(P4Error, match="table Ig.fwd.route is applied here"):
        compile_text(program(apart), "apart.p4")


def test_a_declaration_that_repeats_an_architecture_name_is_refused() -> None:
    clash = PRELUDE.replace("control Eg(", "control Egress(") + (
        "control Ig(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) "
        "{ apply { } }\nV1Switch(P(), V(), Ig(), Egress(), C(), D()) main;\n"
    )
    with pytest.raises(P4Error) as err:
        compile_text(clash, "clash.p4")
    assert (
        "clash.p4:10:1: error: 'Egress' is declared twice (p4c: \"Egress duplicates Egress.\")"
        in (str(err.value))
    )
    assert "is first declared here" in err.value.render()  # v1model.p4's control type
    compile_text(clash, "clash.p4", target="p4sim")


def test_a_header_of_a_width_that_is_not_whole_bytes_is_refused() -> None:
    odd = PRELUDE.replace("bit<16> type; }", "bit<13> type; }")
    with pytest.raises(P4Error, match=r"odd\.p4:3:1: error: header eth_t's fields total 109 bits"):
        compile_text(odd + "control Ig(inout headers_t hdr, inout meta_t meta, "
                     "inout standard_metadata_t sm) { apply { } }\n" + MAIN, "odd.p4")  # fmt: skip


@pytest.mark.parametrize("path", sorted(BEYOND_BMV2))
def test_each_program_listed_beyond_bmv2_is_refused_for_bmv2_and_runs_on_p4sim(path: str) -> None:
    source = (ROOT / path).read_text()
    with pytest.raises(P4Error):
        compile_text(source, str(ROOT / path), include_dirs=[str((ROOT / path).parent)])
    compile_text(source, str(ROOT / path), include_dirs=[str((ROOT / path).parent)], target="p4sim")


def test_compile_command_refuses_and_accepts_with_target_p4sim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prog = tmp_path / "two.p4"
    prog.write_text(TWO_PLACES)
    assert main(["compile", str(prog)]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"{prog}:29:13: error: table Ig.fwd.route is applied here")
    assert main(["compile", "--target", "p4sim", str(prog)]) == 0
    assert main(["compile", "--target", "tofino", str(prog)]) == 2
    assert "invalid choice: 'tofino'" in capsys.readouterr().err


def test_device_config_carries_the_target_so_a_pushed_program_loads_as_checked(
    tmp_path: Path,
) -> None:
    prog = tmp_path / "two.p4"
    prog.write_text(TWO_PLACES)
    loaded = program_args(str(prog), target="p4sim")
    assert read_device_config(loaded["device_config"])[2]["target"] == "p4sim"
    switch = load_switch_from_device_config(loaded["device_config"])
    assert switch.program.tables[0].name == "Ig.fwd.route"


def _v1model_programs() -> list[Path]:
    found = [
        p
        for folder in ("p4src", "topologies", "tests", "examples")
        for p in sorted((ROOT / folder).rglob("*.p4"))
        if "V1Switch" in p.read_text(errors="replace")
    ]
    return found


@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH")
@pytest.mark.parametrize(
    "program", _v1model_programs(), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_p4c_refuses_exactly_the_programs_listed_beyond_bmv2(program: Path, tmp_path: Path) -> None:
    rel = program.relative_to(ROOT).as_posix()
    p4c = subprocess.run(
        ["p4c", "--target", "bmv2", "--arch", "v1model", "-I", str(program.parent),
         "-o", str(tmp_path), str(program)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    listed = rel in BEYOND_BMV2
    assert (p4c.returncode != 0) == listed, p4c.stderr[-2000:]


GENERIC = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hdrs_t { h_t h; }
struct meta_t {}
bool f<T>(in T p, in T q) { BODY }
parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; } }
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply { if (f(h.h.a, h.h.b)) { sm.egress_spec = 1; } } }
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
"""


@pytest.mark.parametrize(
    ("body", "refused"),
    [  # what p4c 1.2.5.16 answers for each body (checked by hand)
        ("T t = p; T u = t; t = q; return true;", None),
        ("return p == q;", "'==' on p"),
        ("return p < q;", "'<' on p"),
        ("T t = p; return (t + q) == t;", "'+' on t"),
        ("return -p == q;", "'-' on p"),
        ("return p[0:0] == 1;", "a bit slice on p"),
        ("return (bit<8>)p == 1;", "a cast on p"),
    ],
)
def test_generic_function_bodies_may_only_copy_values_of_a_type_variable(
    body: str, refused: str | None
) -> None:
    source = GENERIC.replace("BODY", body)
    if refused is None:
        compile_text(source, "g.p4")
        return
    with pytest.raises(P4Error, match=f"{re.escape(refused)}, a value of a type variable"):
        compile_text(source, "g.p4")
    compile_text(source, "g.p4", target="p4sim")


def test_table_with_empty_parentheses_is_refused_for_bmv2_only() -> None:
    source = TWO_PLACES.replace("table route {", "table route() {")
    assert source != TWO_PLACES
    with pytest.raises(P4Error, match=r"table route: P4_16 gives a table no parameter list"):
        compile_text(source, "t.p4")
    compile_text(source, "t.p4", target="p4sim")
