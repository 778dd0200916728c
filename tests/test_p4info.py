"""P4Info generation (IDs as p4c assigns them) and p4sim's device-config bundle."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

from p4sim import program_info as pi
from p4sim.p4info import (
    ACTION,
    CONTROLLER_HEADER,
    COUNTER,
    DIGEST,
    DIRECT_COUNTER,
    DIRECT_METER,
    METER,
    REGISTER,
    TABLE,
    VALUE_SET,
    DeviceConfigError,
    P4InfoError,
    SourceBundle,
    build_p4info,
    bundle_sources,
    compile_outputs,
    controller_headers_from_source,
    jenkins_one_at_a_time,
    read_device_config,
    read_p4info,
    unpack_device_config,
    write_p4info,
)


def K(name: str, kind: str, width: int, **kw: object) -> pi.KeyInfo:
    return pi.KeyInfo(name, match_kind=kind, width=width, **kw)  # type: ignore[arg-type]


def full_program() -> pi.ProgramInfo:
    """Every kind of P4Info object, with @name/@id annotations in places."""
    return pi.ProgramInfo(
        tables=[
            pi.TableInfo(
                "MyIngress.acl",
                keys=(
                    K("hdr.ipv4.dstAddr", "lpm", 32),
                    K("hdr.ipv4.srcAddr", "ternary", 32),
                    K("meta.port", "range", 16),
                    K("meta.vlan", "optional", 12),
                    K("hdr.eth.type", "exact", 16, annotations=('@name("etype")',)),
                    K("meta.sel", "selector", 8),
                ),
                actions=(
                    pi.ActionRefInfo("MyIngress.fwd"),
                    pi.ActionRefInfo("MyIngress.tagged", "TABLE_ONLY", ("@tableonly",)),
                    pi.ActionRefInfo("NoAction", "DEFAULT_ONLY", ("@defaultonly",)),
                ),
                size=512,
                default_action="NoAction",
                default_is_const=True,
                direct_counter="MyIngress.acl_hits",
                direct_meter="MyIngress.acl_rate",
                idle_timeout=True,
                annotations=('@name("acl")', '@my_note("x")'),
            ),
            pi.TableInfo(
                "MyIngress.fixed",
                keys=(K("hdr.eth.type", "exact", 16),),
                actions=(pi.ActionRefInfo("NoAction"),),
                size=4,
                default_action="NoAction",
                const_entries=(pi.ConstEntryInfo((1,), "NoAction", (), None),),
                explicit_id=7,
            ),
            pi.TableInfo(
                "MyIngress.hidden_t",
                keys=(),
                actions=(pi.ActionRefInfo("NoAction"),),
                size=1,
                default_action="NoAction",
                annotations=("@hidden",),
            ),
        ],
        actions=[
            pi.ActionInfo("NoAction", annotations=('@noWarn("unused")',)),
            pi.ActionInfo(
                "MyIngress.fwd",
                params=(pi.ParamInfo("port", 9), pi.ParamInfo("mac", 48, type_name="mac_t")),
            ),
            pi.ActionInfo("MyIngress.tagged", params=(pi.ParamInfo("vid", 12),)),
        ],
        counters=[pi.CounterInfo("MyIngress.pkts", size=64, unit="packets_and_bytes")],
        direct_counters=[
            pi.DirectCounterInfo("MyIngress.acl_hits", table="MyIngress.acl", unit="packets")
        ],
        meters=[pi.MeterInfo("MyIngress.rate", size=8, unit="bytes")],
        direct_meters=[
            pi.DirectMeterInfo("MyIngress.acl_rate", table="MyIngress.acl", unit="packets")
        ],
        registers=[pi.RegisterInfo("MyIngress.last", size=16, width=48)],
        digests=[
            pi.DigestInfo("learn_t", fields=(pi.FieldInfo("mac", 48), pi.FieldInfo("port", 9)))
        ],
        value_sets=[pi.ValueSetInfo("MyParser.tpids", size=4, fields=(K("tpid", "exact", 16),))],
        controller_headers=[
            pi.ControllerHeaderInfo(
                "packet_in", fields=(pi.FieldInfo("ingress_port", 9), pi.FieldInfo("_pad", 7))
            ),
            pi.ControllerHeaderInfo(
                "packet_out", fields=(pi.FieldInfo("egress_port", 9), pi.FieldInfo("_pad", 7))
            ),
        ],
    )


def hashed(prefix: int, name: str) -> int:
    return (prefix << 24) | (jenkins_one_at_a_time(name.encode()) & 0xFFFFFF)


@pytest.fixture(scope="module")
def p4info() -> p4i.P4Info:
    return build_p4info(full_program())


def test_jenkins_hash_gives_p4c_id_of_noaction() -> None:
    assert hashed(ACTION, "NoAction") == 21257015


def test_ids_match_p4c_for_basic_routing_bmv2() -> None:
    """IDs p4c emitted for testdata/p4_16_samples/basic_routing-bmv2.p4 (its P4Info in
    p4c's testdata/p4_16_samples_outputs)."""
    expected_tables = {
        "ingress.bd": 48392551,
        "ingress.ipv4_fib": 41084491,
        "ingress.ipv4_fib_lpm": 42875950,
        "ingress.nexthop": 43581057,
        "ingress.port_mapping": 39645634,
        "egress.rewrite_mac": 40309161,
    }
    expected_actions = {
        "NoAction": 21257015,
        "ingress.set_vrf": 33505590,
        "ingress.on_miss": 22594144,
        "ingress.fib_hit_nexthop": 26104220,
        "ingress.set_egress_details": 19738113,
        "ingress.set_bd": 27500220,
        "egress.on_miss": 28864280,
        "egress.rewrite_src_dst_mac": 28966416,
    }
    info = pi.ProgramInfo(
        tables=[
            pi.TableInfo(
                n,
                keys=(),
                actions=(pi.ActionRefInfo("NoAction"),),
                size=1,
                default_action="NoAction",
            )
            for n in expected_tables
        ],
        actions=[pi.ActionInfo(n) for n in expected_actions],
    )
    out = build_p4info(info)
    assert {t.preamble.name: t.preamble.id for t in out.tables} == expected_tables
    assert {a.preamble.name: a.preamble.id for a in out.actions} == expected_actions
    aliases = {a.preamble.name: a.preamble.alias for a in out.actions}
    assert aliases["ingress.on_miss"] == "ingress.on_miss"  # egress.on_miss shares "on_miss"
    assert aliases["ingress.set_vrf"] == "set_vrf"


def test_every_id_carries_its_entity_prefix(p4info: p4i.P4Info) -> None:
    groups = [
        (p4info.tables, TABLE),
        (p4info.actions, ACTION),
        (p4info.counters, COUNTER),
        (p4info.direct_counters, DIRECT_COUNTER),
        (p4info.meters, METER),
        (p4info.direct_meters, DIRECT_METER),
        (p4info.registers, REGISTER),
        (p4info.digests, DIGEST),
        (p4info.value_sets, VALUE_SET),
        (p4info.controller_packet_metadata, CONTROLLER_HEADER),
    ]
    for items, prefix in groups:
        assert items, prefix
        for it in items:
            assert it.preamble.id >> 24 == prefix, it.preamble.name
    assert hashed(COUNTER, "MyIngress.pkts") == p4info.counters[0].preamble.id


def test_explicit_id_gets_prefix_and_hidden_tables_are_left_out(p4info: p4i.P4Info) -> None:
    names = [t.preamble.name for t in p4info.tables]
    assert names == ["MyIngress.acl", "MyIngress.fixed"]
    assert p4info.tables[1].preamble.id == (TABLE << 24) | 7


def test_explicit_id_with_wrong_prefix_is_an_error() -> None:
    info = pi.ProgramInfo(actions=[pi.ActionInfo("a", explicit_id=0x02000001)])
    with pytest.raises(P4InfoError, match="wrong 8-bit prefix"):
        build_p4info(info)


def test_duplicate_explicit_id_is_an_error() -> None:
    info = pi.ProgramInfo(
        actions=[pi.ActionInfo("a", explicit_id=5), pi.ActionInfo("b", explicit_id=0x01000005)]
    )
    with pytest.raises(P4InfoError, match="multiple"):
        build_p4info(info)


def test_hash_collision_with_explicit_id_probes_to_next_id() -> None:
    taken = hashed(ACTION, "x.act")
    info = pi.ProgramInfo(
        actions=[pi.ActionInfo("x.act"), pi.ActionInfo("y.other", explicit_id=taken)]
    )
    out = build_p4info(info)
    ids = {a.preamble.name: a.preamble.id for a in out.actions}
    assert ids["y.other"] == taken
    assert ids["x.act"] == taken + 1


def test_table_fields(p4info: p4i.P4Info) -> None:
    t = p4info.tables[0]
    assert t.preamble.alias == "acl"
    assert list(t.preamble.annotations) == ['@my_note("x")']  # @name is consumed
    kinds = [(m.id, m.name, m.bitwidth, m.WhichOneof("match")) for m in t.match_fields]
    assert kinds == [
        (1, "hdr.ipv4.dstAddr", 32, "match_type"),
        (2, "hdr.ipv4.srcAddr", 32, "match_type"),
        (3, "meta.port", 16, "match_type"),
        (4, "meta.vlan", 12, "match_type"),
        (5, "hdr.eth.type", 16, "match_type"),
        (6, "meta.sel", 8, "other_match_type"),
    ]
    M = p4i.MatchField
    assert [m.match_type for m in t.match_fields[:5]] == [
        M.LPM,
        M.TERNARY,
        M.RANGE,
        M.OPTIONAL,
        M.EXACT,
    ]
    assert t.match_fields[5].other_match_type == "selector"
    refs = [(r.id, r.scope, list(r.annotations)) for r in t.action_refs]
    assert refs == [
        (hashed(ACTION, "MyIngress.fwd"), p4i.ActionRef.TABLE_AND_DEFAULT, []),
        (hashed(ACTION, "MyIngress.tagged"), p4i.ActionRef.TABLE_ONLY, ["@tableonly"]),
        (21257015, p4i.ActionRef.DEFAULT_ONLY, ["@defaultonly"]),
    ]
    assert t.const_default_action_id == 21257015
    assert t.initial_default_action.action_id == 21257015
    assert not t.initial_default_action.arguments
    assert t.size == 512
    assert t.idle_timeout_behavior == p4i.Table.NOTIFY_CONTROL
    assert list(t.direct_resource_ids) == [
        p4info.direct_counters[0].preamble.id,
        p4info.direct_meters[0].preamble.id,
    ]
    assert not t.is_const_table
    fixed = p4info.tables[1]
    assert fixed.is_const_table and fixed.has_initial_entries
    assert fixed.const_default_action_id == 0


def test_initial_default_action_arguments_are_full_width() -> None:
    info = pi.ProgramInfo(
        tables=[
            pi.TableInfo(
                "c.t",
                keys=(),
                actions=(pi.ActionRefInfo("c.add"),),
                size=1,
                default_action="c.add",
                default_args=(10, 0),
            )
        ],
        actions=[pi.ActionInfo("c.add", params=(pi.ParamInfo("va", 32), pi.ParamInfo("vb", 9)))],
    )
    init = build_p4info(info).tables[0].initial_default_action
    assert init.action_id == hashed(ACTION, "c.add")
    assert [(a.param_id, a.value) for a in init.arguments] == [(1, b"\0\0\0\n"), (2, b"\0\0")]


def test_action_fields(p4info: p4i.P4Info) -> None:
    noaction, fwd, _ = p4info.actions
    assert list(noaction.preamble.annotations) == ['@noWarn("unused")']
    assert [(p.id, p.name, p.bitwidth) for p in fwd.params] == [(1, "port", 9), (2, "mac", 48)]
    assert fwd.params[1].type_name.name == "mac_t"


def test_extern_fields(p4info: p4i.P4Info) -> None:
    c = p4info.counters[0]
    assert (c.spec.unit, c.size) == (p4i.CounterSpec.BOTH, 64)
    dc = p4info.direct_counters[0]
    assert dc.spec.unit == p4i.CounterSpec.PACKETS
    assert dc.direct_table_id == p4info.tables[0].preamble.id
    m = p4info.meters[0]
    assert (m.spec.unit, m.size) == (p4i.MeterSpec.BYTES, 8)
    dm = p4info.direct_meters[0]
    assert (dm.spec.unit, dm.direct_table_id) == (
        p4i.MeterSpec.PACKETS,
        p4info.tables[0].preamble.id,
    )
    r = p4info.registers[0]
    assert (r.type_spec.bitstring.bit.bitwidth, r.size) == (48, 16)


def test_digest_and_type_info(p4info: p4i.P4Info) -> None:
    d = p4info.digests[0]
    assert d.preamble.name == "learn_t" and d.type_spec.struct.name == "learn_t"
    members = p4info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("mac", 48),
        ("port", 9),
    ]


def test_value_set_and_controller_headers(p4info: p4i.P4Info) -> None:
    vs = p4info.value_sets[0]
    assert vs.size == 4 and [(f.id, f.name, f.bitwidth) for f in vs.match] == [(1, "tpid", 16)]
    pin, pout = p4info.controller_packet_metadata
    assert (pin.preamble.name, pout.preamble.name) == ("packet_in", "packet_out")
    assert list(pin.preamble.annotations) == ['@controller_header("packet_in")']
    assert [(m.id, m.name, m.bitwidth) for m in pin.metadata] == [
        (1, "ingress_port", 9),
        (2, "_pad", 7),
    ]
    assert p4info.pkg_info.arch == "v1model"


def test_write_and_read_p4info_text_and_binary(p4info: p4i.P4Info, tmp_path: Path) -> None:
    write_p4info(p4info, tmp_path / "a.txtpb")
    text = (tmp_path / "a.txtpb").read_text()
    assert text.startswith("# proto-file: p4/config/v1/p4info.proto")
    assert text_format.Parse(text, p4i.P4Info()) == p4info
    write_p4info(p4info, tmp_path / "a.bin", fmt="binary")
    assert p4i.P4Info.FromString((tmp_path / "a.bin").read_bytes()) == p4info
    assert read_p4info(tmp_path / "a.bin") == p4info == read_p4info(tmp_path / "a.txtpb")
    with pytest.raises(ValueError, match="format"):
        write_p4info(p4info, tmp_path / "x", fmt="json")


def test_device_config_round_trip() -> None:
    b = SourceBundle(
        "src/main.p4",
        {"src/main.p4": b"a", "inc/h.p4": b"\x00\xff"},
        include_dirs=["inc"],
        defines={"N": "4"},
    )
    main, files, options = read_device_config(b.to_bytes())
    assert main == "src/main.p4" and files == b.files
    assert options == {"include_dirs": ["inc"], "defines": {"N": "4"}, "target": "bmv2"}


def test_device_config_rejects_bad_blobs() -> None:
    with pytest.raises(DeviceConfigError, match="empty"):
        read_device_config(b"")
    with pytest.raises(DeviceConfigError, match="malformed"):
        read_device_config(b"P4SIM1\n{")
    escape = SourceBundle("../x.p4", {"../x.p4": b""}).to_bytes()
    with pytest.raises(DeviceConfigError, match="escapes"):
        read_device_config(escape)


def test_raw_p4_source_is_accepted_as_device_config() -> None:
    main, files, _ = read_device_config(b"#include <core.p4>\n")
    assert files[main] == b"#include <core.p4>\n"


PROG = """#include <core.p4>
#include <v1model.p4>
#include "defs.p4"
struct metadata { }
struct headers { ethernet_t eth; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t { key = { hdr.eth.dst: exact; } actions = { fwd; NoAction; } size = WIDTH; }
    apply { t.apply(); }
}
control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""
DEFS = "header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }\n"


def _project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "defs.p4").write_text(DEFS)
    main = tmp_path / "src" / "main.p4"
    main.write_text(PROG)
    return main


def test_bundle_holds_main_and_included_files_and_unpacks(tmp_path: Path) -> None:
    main = _project(tmp_path)
    b = bundle_sources(str(main), [str(tmp_path / "lib")], {"WIDTH": "16"})
    assert sorted(b.files) == ["lib/defs.p4", "src/main.p4"]
    assert b.main == "src/main.p4" and b.include_dirs == ["lib"]
    out = tmp_path / "unpacked"
    path, options = unpack_device_config(b.to_bytes(), out)
    assert Path(path).read_text() == PROG
    assert options["include_dirs"] == [str(out / "lib")]
    assert options["defines"] == {"WIDTH": "16"}


def test_compile_outputs_writes_p4info_and_device_config(tmp_path: Path) -> None:
    main = _project(tmp_path)
    out_info, out_cfg = tmp_path / "p.bin", tmp_path / "p.p4sim"
    p4info = compile_outputs(
        str(main), [str(tmp_path / "lib")], {"WIDTH": "16"}, str(out_info), "binary", str(out_cfg)
    )
    assert p4i.P4Info.FromString(out_info.read_bytes()) == p4info
    assert [t.preamble.name for t in p4info.tables] == ["Ing.t"]
    assert p4info.tables[0].size == 16
    main_rel, files, options = read_device_config(out_cfg.read_bytes())
    assert main_rel == "src/main.p4" and options["defines"] == {"WIDTH": "16"}


def test_bmv2_json_as_device_config_gets_a_helpful_error() -> None:
    with pytest.raises(DeviceConfigError, match="BMv2 JSON"):
        read_device_config(b'{"header_types": []}')


def test_controller_headers_are_read_from_source_with_typedef_widths(tmp_path: Path) -> None:
    src = tmp_path / "c.p4"
    src.write_text(
        "typedef bit<9> port_t;\ntypedef port_t my_port_t;\n"
        '@controller_header("packet_in")\nheader pin_h { my_port_t ingress_port; bit<7> pad; }\n'
        "header plain_h { bit<8> x; }\n"
    )
    (hdr,) = controller_headers_from_source(str(src))
    assert hdr.name == "packet_in"
    assert [(f.name, f.width) for f in hdr.fields] == [("ingress_port", 9), ("pad", 7)]
    p4info = build_p4info(pi.ProgramInfo(controller_headers=[hdr]))
    assert p4info.controller_packet_metadata[0].preamble.id == hashed(CONTROLLER_HEADER, "pin_h")


# Our own program whose control, table and action names are those of p4c's
# testdata/p4_16_samples/basic_routing-bmv2.p4: the compiler's names plus build_p4info
# must give the IDs p4c published for that program.
SAME_NAMES = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<16> a; bit<12> b; bit<4> pad; bit<32> c; }
struct headers { h_t h; }
struct metadata { bit<16> x; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control ingress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_vrf(bit<12> vrf) { hdr.h.b = vrf; }
    action on_miss() { }
    action fib_hit_nexthop(bit<16> nexthop_index) { meta.x = nexthop_index; }
    action set_egress_details(bit<9> egress_spec) { sm.egress_spec = egress_spec; }
    action set_bd(bit<16> bd) { hdr.h.a = bd; }
    table bd { key = { hdr.h.a: exact; } actions = { set_vrf; } }
    table ipv4_fib { key = { hdr.h.b: exact; hdr.h.c: exact; }
                     actions = { on_miss; fib_hit_nexthop; } }
    table ipv4_fib_lpm { key = { hdr.h.b: exact; hdr.h.c: lpm; }
                         actions = { on_miss; fib_hit_nexthop; } }
    table nexthop { key = { meta.x: exact; } actions = { on_miss; set_egress_details; } }
    table port_mapping { key = { sm.ingress_port: exact; } actions = { set_bd; } }
    apply { port_mapping.apply(); bd.apply(); ipv4_fib.apply(); ipv4_fib_lpm.apply();
            nexthop.apply(); }
}
control egress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action on_miss() { }
    action rewrite_src_dst_mac(bit<48> smac, bit<48> dmac) { }
    table rewrite_mac { key = { meta.x: exact; } actions = { on_miss; rewrite_src_dst_mac; } }
    apply { rewrite_mac.apply(); }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), ingress(), egress(), CC(), D()) main;
"""


def test_compiled_program_gets_p4c_ids(tmp_path: Path) -> None:
    src = tmp_path / "same_names.p4"
    src.write_text(SAME_NAMES)
    p4info = compile_outputs(str(src))
    assert {t.preamble.name: t.preamble.id for t in p4info.tables} == {
        "ingress.bd": 48392551,
        "ingress.ipv4_fib": 41084491,
        "ingress.ipv4_fib_lpm": 42875950,
        "ingress.nexthop": 43581057,
        "ingress.port_mapping": 39645634,
        "egress.rewrite_mac": 40309161,
    }
    actions = {a.preamble.name: (a.preamble.id, a.preamble.alias) for a in p4info.actions}
    assert actions["NoAction"] == (21257015, "NoAction")
    assert actions["ingress.on_miss"] == (22594144, "ingress.on_miss")
    assert actions["egress.rewrite_src_dst_mac"] == (28966416, "rewrite_src_dst_mac")
    bd = next(t for t in p4info.tables if t.preamble.name == "ingress.bd")
    assert [(r.id, r.scope) for r in bd.action_refs] == [
        (33505590, p4i.ActionRef.TABLE_AND_DEFAULT),
        (21257015, p4i.ActionRef.DEFAULT_ONLY),
    ]


# -- actions called only directly (p4c's front end removes their parameters) -------------

P4INFO_DIR = Path(__file__).parent / "p4" / "p4info"


def test_action_called_only_directly_has_no_parameters_in_p4info(tmp_path: Path) -> None:
    p4info = compile_outputs(str(P4INFO_DIR / "direct_actions.p4"))
    params = {a.preamble.name: [p.name for p in a.params] for a in p4info.actions}
    assert params["Ig.mark"] == []  # called from the apply block only
    assert "Ig.nested" not in params  # called from another action only: p4c inlines it
    assert params["Ig.fwd"] == ["port"]  # a table's action
    assert params["Ig.both"] == ["v"]  # a table's action, also called directly


def test_action_called_only_directly_still_runs_with_its_arguments() -> None:
    from p4sim.switch import Switch

    sw = Switch.from_file(str(P4INFO_DIR / "direct_actions.p4"))
    assert sw.send(0, bytes([0x33, 0x10])) == [(1, bytes([9, 8]))]  # b = 7 + 1, a = 9


def test_actions_are_listed_in_p4cs_order() -> None:
    # p4c: control by control in the package's order; in each, first a copy of every
    # top-level action the control uses (in the order of first use, nested control
    # instances inlined where they are declared), then the control's own actions in
    # declaration order; unused actions left out. Checked against p4c 1.2.5.16.
    p4info = compile_outputs(str(P4INFO_DIR / "action_order.p4"))
    names = [a.preamble.name for a in p4info.actions]
    assert names == ["gb", "NoAction", "gact", "Ig.i1", "Ig.sub.s1", "Ig.i2", "Eg.e1"]


# -- our P4Info against p4c's, where p4c is installed -----------------------------------

_ROOT = Path(__file__).parent.parent
_P4C_PROGRAMS = sorted(
    [
        _ROOT / "p4src" / "inc.p4",
        _ROOT / "topologies" / "basic" / "basic.p4",
        P4INFO_DIR / "direct_actions.p4",
        P4INFO_DIR / "action_order.p4",
        *(_ROOT / "tests" / "p4" / "tutorials").glob("*/*.p4"),
    ]
)


@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH")
@pytest.mark.parametrize("program", _P4C_PROGRAMS, ids=lambda p: p.stem)
def test_p4info_equals_p4cs(program: Path, tmp_path: Path) -> None:
    from topologies.p4switch import compile_program

    theirs = read_p4info(compile_program(program, "bmv2", tmp_path / "p4c").p4info)
    ours = compile_outputs(str(program))
    for p in (theirs, ours):
        p.ClearField("pkg_info")  # p4c names its own version and the architecture there
    assert text_format.MessageToString(ours) == text_format.MessageToString(theirs)


def test_serializable_enum_in_controller_header_is_named_with_its_width() -> None:
    p4info = compile_outputs(str(P4INFO_DIR / "controller_enum.p4"))
    (pin,) = p4info.controller_packet_metadata
    fields = {m.name: (m.bitwidth, m.type_name.name) for m in pin.metadata}
    assert fields == {"port": (9, ""), "k": (8, "Kind"), "pad": (7, "")}
    kind = p4info.type_info.serializable_enums["Kind"]
    assert kind.underlying_type.bitwidth == 8
    assert [(m.name, m.value) for m in kind.members] == [("A", b"\x01"), ("B", b"\x02")]
    assert pin.preamble.id == hashed(0x04, "pin_t")  # p4c hashes the header type's name
