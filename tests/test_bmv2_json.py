"""p4c's BMv2 JSON as p4sim's program: pushed as ``p4_device_config`` the way the
tutorials' ``p4runtime_lib`` does, given on the command line, named by a tutorial topology.

p4sim runs the P4 source the JSON names (``"program"``) after checking that the JSON
describes it. Where p4c is on PATH the JSON is p4c's own; elsewhere it is one written here
with the fields p4sim reads (``program``, the pipelines' tables and their actions, the
register arrays), from the program's ProgramInfo, so it is not p4c output.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.p4rt.p4runtime_client import Pipeline, SwitchConnection, SwitchError, SwitchSpec
from controller.p4rt.runtime_config import apply_runtime_config
from p4rt_config.runtime_json import load_runtime_json
from p4sim.bmv2_json import Bmv2JsonError, switch_from_bmv2_json
from p4sim.p4info import compile_outputs, write_p4info
from p4sim.p4runtime.pipeline import load_switch_from_device_config
from p4sim.p4runtime.server import P4RuntimeServer
from p4sim.runtime import hashes
from p4sim.stf import run_stf
from p4sim.stf_format import parse_stf
from p4sim.switch import Switch
from tests.beyond_bmv2 import target_of
from tests.test_stf_programs import P4_DIR, STF_FILES, program_for
from topologies import runner
from topologies.p4switch import compile_program

ROOT = Path(__file__).resolve().parent.parent
BASIC = ROOT / "topologies" / "basic"


def _json_naming(program: Path, as_written: str) -> bytes:
    """A BMv2 JSON with the fields p4sim reads, for ``program`` (see the module doc)."""
    info = Switch.from_file(str(program)).info
    tables = [{"name": t.name, "actions": [r.action for r in t.actions]} for t in info.tables]
    doc = {
        "header_types": [],
        "program": as_written,
        "pipelines": [{"name": "ingress", "tables": tables}],
        "register_arrays": [
            {"name": r.name, "size": r.size, "bitwidth": r.width} for r in info.registers
        ],
    }
    return json.dumps(doc).encode()


@pytest.fixture
def exercise(tmp_path: Path) -> Path:
    """The tutorials' layout: ``ex/basic.p4`` compiled into ``ex/build/basic.json`` and
    ``ex/build/basic.p4info.txtpb`` (by p4c where it is installed)."""
    ex = tmp_path / "ex"
    (ex / "build").mkdir(parents=True)
    shutil.copy(BASIC / "basic.p4", ex / "basic.p4")
    if shutil.which("p4c"):
        compile_program(ex / "basic.p4", "bmv2", ex / "build")
    else:
        (ex / "build" / "basic.json").write_bytes(_json_naming(ex / "basic.p4", "basic.p4"))
        write_p4info(compile_outputs(str(ex / "basic.p4")), ex / "build" / "basic.p4info.txtpb")
    return ex


def _ipv4(dst: str) -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01") / IP(src="10.0.1.1", dst=dst, ttl=64) / UDP())


def test_client_pushes_p4info_and_bmv2_json_writes_entries_and_packets_forward(
    exercise: Path,
) -> None:
    build = exercise / "build"
    server = P4RuntimeServer(
        switch_factory=lambda cfg: load_switch_from_device_config(cfg, source_dirs=[exercise]),
        device_id=1,
        address="127.0.0.1:0",
    )
    port = server.start()
    pipeline = Pipeline.from_files(build / "basic.p4info.txtpb", build / "basic.json")
    assert pipeline.device_config.lstrip().startswith(b"{")  # the JSON's bytes, as pushed
    cfg = load_runtime_json(BASIC / "s1-runtime.json")

    async def program_it() -> bool:
        async with SwitchConnection(SwitchSpec(1, f"127.0.0.1:{port}"), pipeline) as sw:
            await apply_runtime_config(sw, cfg)
            return bool(sw.pipeline_pushed)

    try:
        assert asyncio.run(program_it())
        out = server.inject(1, _ipv4("10.0.2.2"))
        assert [p for p, _ in out] == [2]
        assert IP(out[0][1][14:]).ttl == 63
        assert server.inject(1, _ipv4("10.9.9.9")) == []  # default action: drop
    finally:
        server.stop(0)


def test_json_of_another_program_is_refused_with_the_difference(exercise: Path) -> None:
    doc = json.loads((exercise / "build" / "basic.json").read_bytes())
    for p in doc["pipelines"]:
        for t in p["tables"]:
            t["name"] = t["name"].replace("ipv4_route", "ipv4_lpm")
    with pytest.raises(Bmv2JsonError, match=r"table RouterIngress\.ipv4_route is not in the JSON"):
        switch_from_bmv2_json(json.dumps(doc).encode(), [exercise])


def test_json_whose_source_is_nowhere_says_where_it_looked(tmp_path: Path) -> None:
    data = _json_naming(BASIC / "basic.p4", "gone.p4")  # no parser: cannot run by itself
    with pytest.raises(Bmv2JsonError, match=r"compiled from gone\.p4.*not found in.*nor can"):
        switch_from_bmv2_json(data, [tmp_path])
    server = P4RuntimeServer(device_id=1, address="127.0.0.1:0")
    with pytest.raises(SwitchError, match=r"INVALID_ARGUMENT: .*compiled from gone\.p4"):
        _push(server, compile_outputs(str(BASIC / "basic.p4")), data)


def _push(server: P4RuntimeServer, p4info: Any, device_config: bytes) -> None:
    port = server.start()
    pipeline = Pipeline(p4info, device_config)

    async def push() -> None:
        async with SwitchConnection(SwitchSpec(1, f"127.0.0.1:{port}"), pipeline):
            pass

    try:
        asyncio.run(push())
    finally:
        server.stop(0)


def test_command_line_json_runs_its_source_found_one_folder_up(exercise: Path) -> None:
    from p4sim.bmv2_json import source_dirs
    from p4sim.cli import _json_program_args

    json_path = exercise / "build" / "basic.json"
    loaded = _json_program_args(json_path, source_dirs(json_path), [], None, None)
    assert loaded["device_config"] == json_path.read_bytes()
    assert [t.preamble.name for t in loaded["p4info"].tables] == ["RouterIngress.ipv4_route"]
    sw = loaded["switch"]
    sw.table_add("ipv4_route", {"hdr.ipv4.dst_addr": (0x0A000202, 32)}, "forward",
                 {"next_hop_mac": 2, "port": 2})  # fmt: skip
    assert [p for p, _ in sw.send(1, _ipv4("10.0.2.2"))] == [2]


def test_tutorial_topology_naming_build_json_per_switch_compiles_each_source(
    exercise: Path,
) -> None:
    """The firewall exercise's shape: s1 runs ``build/firewall.json``, s2 ``build/basic.json``;
    on p4sim the runner compiles ``firewall.p4`` and ``basic.p4`` from the exercise folder."""
    shutil.copy(ROOT / "tests/p4/tutorials/firewall/firewall.p4", exercise / "firewall.p4")
    (exercise / "build" / "firewall.json").unlink(missing_ok=True)  # not built: no p4c
    topo_dir = exercise / "pod-topo"
    topo_dir.mkdir()
    data = json.loads((ROOT / "topologies/triangle/topology.json").read_text())
    names = sorted(data["switches"])
    for i, name in enumerate(names):
        data["switches"][name] = {
            "program": "build/firewall.json" if i == 0 else "build/basic.json"
        }
    (topo_dir / "topology.json").write_text(json.dumps(data))
    topo = runner.load_topology(topo_dir / "topology.json")
    compiled = runner.compile_programs(topo, None, "p4sim", exercise / "build" / "p4sim")
    assert {n: c.source.name for n, c in compiled.items()} == {
        n: ("firewall.p4" if i == 0 else "basic.p4") for i, n in enumerate(names)
    }
    assert all(c.device_config.suffix == ".p4sim" for c in compiled.values())


#: the scripts of the programs p4c compiles (not those tests/beyond_bmv2.py lists)
BMV2_STF_FILES = [stf for stf in STF_FILES if target_of(program_for(stf)) == "bmv2"]


@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH")
@pytest.mark.parametrize(
    "stf", BMV2_STF_FILES, ids=[str(p.relative_to(P4_DIR)) for p in BMV2_STF_FILES]
)
def test_program_from_source_and_from_p4cs_json_give_the_same_stf_outputs(
    stf: Path, tmp_path: Path
) -> None:
    program = program_for(stf)
    compiled = compile_program(program, "bmv2", tmp_path, include_dirs=[str(stf.parent)])
    data = compiled.device_config.read_bytes()
    from_json, source = switch_from_bmv2_json(data, [program.parent, stf.parent])
    # the p4c driver names the program it preprocessed (OUTDIR/NAME.p4i): p4sim runs that
    assert source.resolve() == compiled.device_config.with_suffix(".p4i").resolve()
    from_source = Switch.from_file(str(program), include_dirs=(str(stf.parent),))
    commands = parse_stf(stf.read_text(), str(stf))
    results = [run_stf(sw, commands) for sw in (from_source, from_json)]
    assert [r.passed for r in results] == [True, True], results[1].report
    assert results[0].report == results[1].report


#: programs where p4c's JSON itself (and so BMv2, checked with p4c's own STF runner on
#: simple_switch 1.15.5) does not give what their STF script (p4sim's source) expects
P4C_DIFFERS = {
    # p4c evaluates the stack index of the l-value after the call that changes it
    "conformance/regressions/eval_order.stf",
    # p4c does not copy inout arguments out on `exit` in this case
    "conformance/regressions/exit_copy_out.stf",
    # p4c drops the default action of a table with an action selector (its warning:
    # "Target does not support default_action ... due to action profiles"): a miss forwards
    "conformance/action_profiles/ecmp_selector.stf",
}


@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH")
@pytest.mark.parametrize(
    "stf", BMV2_STF_FILES, ids=[str(p.relative_to(P4_DIR)) for p in BMV2_STF_FILES]
)
def test_p4cs_json_translated_gives_the_sources_outputs_or_is_refused_in_one_line(
    stf: Path, tmp_path: Path
) -> None:
    program = program_for(stf)
    compiled = compile_program(program, "bmv2", tmp_path / "p4c", include_dirs=[str(stf.parent)])
    compiled.device_config.with_suffix(".p4i").unlink()  # no source at hand: translate
    try:
        from_json, source = switch_from_bmv2_json(compiled.device_config.read_bytes(), [tmp_path])
    except Bmv2JsonError as err:
        reason = str(err).rpartition("nor can p4sim run the JSON itself: ")[2]
        assert reason and "\n" not in reason and reason.startswith("p4sim cannot"), err
        return
    assert source.parent != program.parent
    from_source = Switch.from_file(str(program), include_dirs=(str(stf.parent),))
    commands = parse_stf(stf.read_text(), str(stf))
    results = [run_stf(sw, commands) for sw in (from_source, from_json)]
    same = results[0].report == results[1].report and results[1].passed
    assert same != (str(stf.relative_to(P4_DIR)) in P4C_DIFFERS), results[1].report


# -- a JSON without its source: run the JSON itself (p4sim.bmv2_translate) ---------------

#: BMv2 JSON written by us in the format p4c gives (not generated by p4c) for what
#: topologies/basic/basic.p4 does, with p4c's usual shapes: ``ttl - 1`` as ``(ttl + 0xff) &
#: 0xff``, a conditional node, the direct ``drop()`` as the hidden table ``tbl_drop``.
ROUTER_JSON = ROOT / "tests" / "p4" / "bmv2_json" / "basic_router.json"


def _entries(sw: Switch) -> Switch:
    route, fwd = "RouterIngress.ipv4_route", "RouterIngress.forward"
    sw.table_add(route, {"hdr.ipv4.dst_addr": (0x0A000200, 24)}, fwd,
                 {"next_hop_mac": 0x080000000222, "port": 2})  # fmt: skip
    sw.table_add(route, {"hdr.ipv4.dst_addr": (0x0A000000, 8)}, fwd,
                 {"next_hop_mac": 0x080000000333, "port": 3})  # fmt: skip
    return sw


def test_json_without_its_source_runs_itself_as_its_source_does(tmp_path: Path) -> None:
    from_json, path = switch_from_bmv2_json(ROUTER_JSON.read_bytes(), [tmp_path])
    assert path.suffix == ".p4" and path.parent.name == "p4sim-bmv2-json"
    from_source = _entries(Switch.from_file(str(BASIC / "basic.p4")))
    _entries(from_json)
    rng = random.Random(16)
    for _ in range(200):
        ttl = rng.choice([0, 1, 2, 64])
        dst = rng.choice(["10.0.2.2", "10.1.1.1", "11.0.0.1"])
        eth = Ether(dst="00:00:00:00:00:01", type=rng.choice([0x0800, 0x0800, 0x86DD]))
        frame = bytes(eth / IP(src="10.0.1.1", dst=dst, ttl=ttl) / UDP())
        if rng.random() < 0.2:
            frame = frame[: rng.randrange(len(frame))]
        assert from_json.send(1, frame) == from_source.send(1, frame), frame.hex()
    assert [p for p, _ in from_json.send(1, _ipv4("10.0.2.2"))] == [2]  # not all dropped


def test_client_pushes_a_json_whose_source_is_nowhere_and_packets_forward(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    shutil.copy(ROUTER_JSON, build / "basic.json")
    write_p4info(compile_outputs(str(BASIC / "basic.p4")), build / "basic.p4info.txtpb")
    server = P4RuntimeServer(
        switch_factory=lambda cfg: load_switch_from_device_config(cfg, source_dirs=[tmp_path]),
        device_id=1,
        address="127.0.0.1:0",
    )
    port = server.start()
    pipeline = Pipeline.from_files(build / "basic.p4info.txtpb", build / "basic.json")

    async def program_it() -> None:
        async with SwitchConnection(SwitchSpec(1, f"127.0.0.1:{port}"), pipeline) as sw:
            await apply_runtime_config(sw, load_runtime_json(BASIC / "s1-runtime.json"))

    try:
        asyncio.run(program_it())
        out = server.inject(1, _ipv4("10.0.2.2"))
        assert [p for p, _ in out] == [2]
        assert IP(out[0][1][14:]).ttl == 63
    finally:
        server.stop(0)


def test_json_using_what_the_translation_lacks_is_refused_naming_it(tmp_path: Path) -> None:
    doc = json.loads(ROUTER_JSON.read_text())
    doc["header_union_stacks"] = [
        {"name": "us", "id": 0, "union_type": "u_t", "header_union_ids": [0, 1]}
    ]
    with pytest.raises(Bmv2JsonError, match=r"not found in.*nor can p4sim run.*union_stacks"):
        switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    doc = json.loads(ROUTER_JSON.read_text())
    assign_vl = {"op": "assign_VL", "parameters": [{"type": "field", "value": ["ipv4", "ttl"]}]}
    doc["actions"][3]["primitives"].append(assign_vl)
    with pytest.raises(Bmv2JsonError, match=r"primitive 'assign_VL'"):
        switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])


@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH")
def test_p4cs_json_of_the_basic_tutorial_runs_itself_as_its_source(tmp_path: Path) -> None:
    program = P4_DIR / "tutorials" / "basic" / "basic.p4"
    stf = program.with_suffix(".stf")
    data = compile_program(program, "bmv2", tmp_path).device_config.read_bytes()
    doc = json.loads(data)
    doc["program"] = "elsewhere/basic.p4"  # its source out of reach: the JSON runs itself
    from_json, path = switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    assert path.parent.name == "p4sim-bmv2-json"
    result = run_stf(from_json, parse_stf(stf.read_text(), str(stf)))
    assert result.passed, result.report


def test_json_externs_hash_clone_and_direct_counter_run_without_the_source(
    tmp_path: Path,
) -> None:
    """The router JSON with more of what BMv2 JSON holds: a register and a counter array
    written by the forward action, a direct counter on the route table, a crc16 hash into
    the IPv4 identification, a clone to session 5 (shapes as p4c writes them)."""
    doc = json.loads(ROUTER_JSON.read_text())
    f = lambda h, n: {"type": "field", "value": [h, n]}  # noqa: E731
    x = lambda v: {"type": "hexstr", "value": v}  # noqa: E731
    doc["register_arrays"] = [
        {"name": "RouterIngress.last_ttl", "id": 0, "size": 16, "bitwidth": 8}
    ]
    doc["counter_arrays"] = [
        {"name": "RouterIngress.per_port", "id": 0, "is_direct": False, "size": 16},
        {"name": "RouterIngress.route_hits", "id": 1, "is_direct": True,
         "binding": "RouterIngress.ipv4_route"},
    ]  # fmt: skip
    doc["calculations"].append(
        {"name": "calc_0", "id": 1, "algo": "crc16",
         "input": [f("ipv4", "src_addr"), f("ipv4", "dst_addr")]}
    )  # fmt: skip
    forward = doc["actions"][3]["primitives"]
    forward += [
        {"op": "register_write", "parameters": [
            {"type": "register_array", "value": "RouterIngress.last_ttl"},
            {"type": "runtime_data", "value": 1}, f("ipv4", "ttl")]},
        {"op": "count", "parameters": [
            {"type": "counter_array", "value": "RouterIngress.per_port"},
            {"type": "runtime_data", "value": 1}]},
        {"op": "modify_field_with_hash_based_offset", "parameters": [
            f("ipv4", "identification"), x("0x0000"), {"type": "calculation", "value": "calc_0"},
            x("0x10000")]},
        {"op": "clone_ingress_pkt_to_egress", "parameters": [x("0x00000005"), x("0x0")]},
    ]  # fmt: skip
    route = doc["pipelines"][0]["tables"][1]
    route["with_counters"] = True
    sw, _ = switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    _entries(sw)
    sw.clone_session_set(5, [(7, 0)])
    out = sw.send(1, _ipv4("10.0.2.2"))
    assert sorted(p for p, _ in out) == [2, 7]  # forwarded and its ingress clone
    ip = IP(dict(out)[2][14:])
    assert sw.register_read("RouterIngress.last_ttl", 2) == 63
    assert sw.counter_read("RouterIngress.per_port", 2)[0] == 1
    assert [e.counter[0] for e in sw.table_entries("RouterIngress.ipv4_route")] == [1, 0]
    data = bytes(IP(src="10.0.1.1", dst="10.0.2.2"))[12:20]  # the two addresses
    assert ip.id == hashes.compute("crc16", data)


def test_json_with_a_header_stack_parses_pops_and_deparses_it(tmp_path: Path) -> None:
    """A label stack as p4c writes it (``header_stacks``, elements ``labels[i]``, parser
    ``stack`` extract and ``stack_field`` key, the ``pop`` primitive): the first label
    picks the port and is popped."""
    doc = json.loads(ROUTER_JSON.read_text())
    f = lambda h, n: {"type": "field", "value": [h, n]}  # noqa: E731
    x = lambda v: {"type": "hexstr", "value": v}  # noqa: E731
    doc["header_types"].append(
        {"name": "label_t", "id": 4, "fields": [["port", 8, False], ["bos", 1, False],
                                                ["rsvd", 7, False]]}
    )  # fmt: skip
    doc["headers"] += [
        {"name": f"labels[{i}]", "id": 4 + i, "header_type": "label_t", "metadata": False}
        for i in range(3)
    ]
    doc["header_stacks"] = [
        {"name": "labels", "id": 0, "header_type": "label_t", "size": 3, "header_ids": [4, 5, 6]}
    ]
    start, parse_ipv4 = doc["parsers"][0]["parse_states"]
    start["transitions"].insert(1, {"type": "hexstr", "value": "0x8847", "mask": None,
                                    "next_state": "parse_label"})  # fmt: skip
    doc["parsers"][0]["parse_states"].append(
        {"name": "parse_label", "id": 2,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "stack", "value": "labels"}]}],
         "transition_key": [{"type": "stack_field", "value": ["labels", "bos"]}],
         "transitions": [{"type": "hexstr", "value": "0x01", "mask": None,
                          "next_state": "parse_ipv4"},
                         {"type": "default", "value": None, "mask": None,
                          "next_state": "parse_label"}]}
    )  # fmt: skip
    doc["actions"].append(
        {"name": "RouterIngress.pop_label", "id": 4, "runtime_data": [], "primitives": [
            {"op": "assign", "parameters": [f("standard_metadata", "egress_spec"),
                                            f("labels[0]", "port")]},
            {"op": "pop", "parameters": [{"type": "header_stack", "value": "labels"}, x("0x1")]},
        ]}
    )  # fmt: skip
    ingress = doc["pipelines"][0]
    ingress["tables"].append(
        {"name": "tbl_pop_label", "id": 2, "key": [], "match_type": "exact", "type": "simple",
         "max_size": 1024, "with_counters": False, "support_timeout": False,
         "direct_meters": None, "action_ids": [4], "actions": ["RouterIngress.pop_label"],
         "base_default_next": None, "next_tables": {"RouterIngress.pop_label": None},
         "default_entry": {"action_id": 4, "action_const": True, "action_data": [],
                           "action_entry_const": True}}
    )  # fmt: skip
    ingress["conditionals"].append(
        {"name": "node_label", "id": 1,
         "expression": {"type": "expression", "value": {
             "op": "d2b", "left": None, "right": f("labels[0]", "$valid$")}},
         "true_next": "tbl_pop_label", "false_next": "node_2"}
    )  # fmt: skip
    ingress["init_table"] = "node_label"
    doc["deparsers"][0]["order"] = ["ethernet", "labels[0]", "labels[1]", "labels[2]", "ipv4"]
    sw, _ = switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    ip = bytes(IP(src="10.0.1.1", dst="10.0.2.2") / UDP())
    eth = bytes(Ether(dst="00:00:00:00:00:01", type=0x8847))
    out = sw.send(1, eth + bytes([5, 0x00, 6, 0x80]) + ip)
    assert out == [(5, eth + bytes([6, 0x80]) + ip)]
    assert [p for p, _ in _entries(sw).send(1, _ipv4("10.0.2.2"))] == [2]  # no labels: routed


def test_json_lookahead_select_and_digest_run_without_the_source(tmp_path: Path) -> None:
    """A first parser state that selects on ``lookahead`` bits 96..111 (the EtherType,
    before anything is extracted) and a digest of a learn list, as p4c writes them."""
    doc = json.loads(ROUTER_JSON.read_text())
    parser = doc["parsers"][0]
    parser["parse_states"].append(
        {"name": "peek", "id": 3, "parser_ops": [],
         "transition_key": [{"type": "lookahead", "value": [96, 16]}],
         "transitions": [{"type": "hexstr", "value": "0x0800", "mask": None,
                          "next_state": "start"},
                         {"type": "default", "value": None, "mask": None, "next_state": None}]}
    )  # fmt: skip
    parser["init_state"] = "peek"
    doc["learn_lists"] = [
        {"id": 1, "name": "route_learn_t", "elements": [
            {"type": "field", "value": ["ipv4", "src_addr"]},
            {"type": "field", "value": ["standard_metadata", "ingress_port"]}]}
    ]  # fmt: skip
    doc["actions"][3]["primitives"].append(
        {"op": "generate_digest", "parameters": [{"type": "hexstr", "value": "0x1"},
                                                 {"type": "hexstr", "value": "0x1"}]}
    )  # fmt: skip
    sw, path = switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    assert "pk.lookahead<bit<112>>()[15:0]" in path.read_text()
    _entries(sw)
    source = _entries(Switch.from_file(str(BASIC / "basic.p4")))
    frame = _ipv4("10.0.2.2")
    assert sw.send(1, frame) == source.send(1, frame) != []  # parsed through the peek state
    assert sw.digests[-1] == ("route_learn_t", (0x0A000101, 1))


def _f(h: str, n: str) -> dict[str, Any]:
    return {"type": "field", "value": [h, n]}


def _x(v: str) -> dict[str, Any]:
    return {"type": "hexstr", "value": v}


def _table_running(doc: dict[str, Any], action: dict[str, Any], tid: int) -> str:
    """Add ``action`` and a keyless table running it (p4c's ``tbl_X``); its name."""
    doc["actions"].append(action)
    name = f"tbl_{action['name'].split('.')[-1]}"
    doc["pipelines"][0]["tables"].append(
        {"name": name, "id": tid, "key": [], "match_type": "exact", "type": "simple",
         "max_size": 1024, "with_counters": False, "support_timeout": False,
         "direct_meters": None, "action_ids": [action["id"]], "actions": [action["name"]],
         "base_default_next": None, "next_tables": {action["name"]: None},
         "default_entry": {"action_id": action["id"], "action_const": True, "action_data": [],
                           "action_entry_const": True}}
    )  # fmt: skip
    return name


def test_json_header_union_and_parse_value_set_run_without_the_source(tmp_path: Path) -> None:
    """A header union ``u`` (members a, b as p4c lists them: ``header_union_types``,
    ``header_unions``, headers ``u.a``/``u.b``) entered through a parse value set of
    EtherTypes the control plane fills, a second state extracting ``u.b`` (which makes
    ``u.a`` invalid), and ingress sending any packet with a valid ``u``
    (``valid_union``) to port 3."""
    doc = json.loads(ROUTER_JSON.read_text())
    doc["header_types"] += [
        {"name": "a_t", "id": 10, "fields": [["x", 8, False]]},
        {"name": "b_t", "id": 11, "fields": [["y", 16, False]]},
    ]
    doc["headers"] += [
        {"name": "u.a", "id": 10, "header_type": "a_t", "metadata": False},
        {"name": "u.b", "id": 11, "header_type": "b_t", "metadata": False},
    ]
    doc["header_union_types"] = [{"name": "u_t", "id": 0, "headers": [["a", "a_t"], ["b", "b_t"]]}]
    doc["header_unions"] = [{"name": "u", "id": 0, "union_type": "u_t", "header_ids": [10, 11]}]
    doc["parse_vsets"] = [{"name": "RouterParser.etypes", "id": 0, "compressed_bitwidth": 16}]
    states = doc["parsers"][0]["parse_states"]
    states[0]["transitions"].insert(1, {"type": "parse_vset", "value": "RouterParser.etypes",
                                        "mask": None, "next_state": "parse_a"})  # fmt: skip
    extract = lambda h: {"op": "extract", "parameters": [{"type": "regular", "value": h}]}  # noqa: E731
    states += [
        {"name": "parse_a", "id": 2, "parser_ops": [extract("u.a")],
         "transition_key": [_f("u.a", "x")],
         "transitions": [{"type": "hexstr", "value": "0xbb", "mask": None,
                          "next_state": "parse_b"},
                         {"type": "default", "value": None, "mask": None, "next_state": None}]},
        {"name": "parse_b", "id": 3, "parser_ops": [extract("u.b")], "transition_key": [],
         "transitions": [{"type": "default", "value": None, "mask": None, "next_state": None}]},
    ]  # fmt: skip
    to3 = {
        "name": "RouterIngress.to_port_3",
        "id": 4,
        "runtime_data": [],
        "primitives": [
            {"op": "assign", "parameters": [_f("standard_metadata", "egress_spec"), _x("0x0003")]}
        ],
    }
    tbl = _table_running(doc, to3, 2)
    ingress = doc["pipelines"][0]
    ingress["conditionals"].append(
        {"name": "node_u", "id": 1, "true_next": tbl, "false_next": "node_2",
         "expression": {"type": "expression", "value": {
             "op": "valid_union", "left": None, "right": {"type": "header_union", "value": "u"}}}}
    )  # fmt: skip
    ingress["init_table"] = "node_u"
    doc["deparsers"][0]["order"] = ["ethernet", "u.a", "u.b", "ipv4"]
    sw, path = switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    assert "header_union" in path.read_text() and "value_set<bit<16>>" in path.read_text()
    eth = lambda t: bytes(Ether(dst="00:00:00:00:00:01", type=t))  # noqa: E731
    assert sw.send(1, eth(0x88B5) + b"\x11rest") == []  # not in the set: no u, not IPv4
    sw.value_set_add("RouterParser.etypes", [0x88B5])
    assert sw.send(1, eth(0x88B5) + b"\x11rest") == [(3, eth(0x88B5) + b"\x11rest")]
    # u.b extracted after u.a: a is invalid and not emitted, b is
    assert sw.send(1, eth(0x88B5) + b"\xbb\x12\x34rest") == [(3, eth(0x88B5) + b"\x12\x34rest")]
    assert sw.send(1, eth(0x88B6) + b"\x11rest") == []
    assert [p for p, _ in _entries(sw).send(1, _ipv4("10.0.2.2"))] == [2]  # IPv4 still routed


def test_json_action_selector_spreads_flows_by_its_hash_without_the_source(
    tmp_path: Path,
) -> None:
    """The route table made ``indirect_ws`` over an action selector hashing the IPv4
    addresses with crc16 (``action_profiles`` with ``selector``): a group of two
    members sends each flow to the member its hash picks, the same for every packet."""
    doc = json.loads(ROUTER_JSON.read_text())
    ingress = doc["pipelines"][0]
    ingress["action_profiles"] = [
        {"name": "RouterIngress.ecmp", "id": 0, "max_size": 64, "selector": {
            "algo": "crc16", "input": [_f("ipv4", "src_addr"), _f("ipv4", "dst_addr")]}}
    ]  # fmt: skip
    route = ingress["tables"][1]
    route["type"], route["action_profile"] = "indirect_ws", "RouterIngress.ecmp"
    sw, path = switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    assert "action_selector(HashAlgorithm.crc16" in path.read_text()
    fwd = "RouterIngress.forward"
    for member, port in ((1, 5), (2, 6)):
        sw.act_prof_create_member("RouterIngress.ecmp", member, fwd,
                                  {"next_hop_mac": port, "port": port})  # fmt: skip
    sw.act_prof_create_group("RouterIngress.ecmp", 10)
    sw.act_prof_add_member_to_group("RouterIngress.ecmp", 1, 10)
    sw.act_prof_add_member_to_group("RouterIngress.ecmp", 2, 10)
    sw.table_indirect_add("RouterIngress.ipv4_route", {"hdr.ipv4.dst_addr": (0x0A000000, 8)},
                          group=10)  # fmt: skip
    ports = set()
    for i in range(24):
        src, dst = f"10.0.1.{i + 1}", "10.0.2.2"
        frame = bytes(Ether(dst="00:00:00:00:00:01") / IP(src=src, dst=dst) / UDP())
        data = bytes(IP(src=src, dst=dst))[12:20]
        want = 5 + hashes.compute("crc16", data) % 2
        assert [p for p, _ in sw.send(1, frame)] == [want] == [p for p, _ in sw.send(1, frame)]
        ports.add(want)
    assert ports == {5, 6}


def test_json_direct_meter_colours_reach_its_result_target_without_the_source(
    tmp_path: Path,
) -> None:
    """A direct meter on the route table writing its colour into a metadata field
    (``meter_arrays`` entry with ``is_direct``, ``binding``, ``result_target``; the
    table's ``direct_meters``), which the forward action copies into the IPv4 DSCP
    byte: with a peak burst of 2 packets the third packet is RED."""
    doc = json.loads(ROUTER_JSON.read_text())
    scalars = next(t for t in doc["header_types"] if t["name"] == "scalars_0")
    scalars["fields"].append(["color", 8, False])
    doc["meter_arrays"] = [
        {"name": "RouterIngress.route_meter", "id": 0, "is_direct": True, "rate_count": 2,
         "type": "packets", "size": 1024, "binding": "RouterIngress.ipv4_route",
         "result_target": ["scalars", "color"]}
    ]  # fmt: skip
    doc["pipelines"][0]["tables"][1]["direct_meters"] = "RouterIngress.route_meter"
    doc["actions"][3]["primitives"].append(
        {"op": "assign", "parameters": [_f("ipv4", "diffserv"), _f("scalars", "color")]}
    )
    sw, path = switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    assert "direct_meter<bit<8>>(MeterType.packets)" in path.read_text()
    _entries(sw)
    handle = sw.table_entries("RouterIngress.ipv4_route")[0].handle
    sw.meter_set_rates("RouterIngress.route_meter", handle, (1e-9, 1), (1e-9, 2))
    tos = [IP(sw.send(1, _ipv4("10.0.2.2"))[0][1][14:]).tos for _ in range(3)]
    assert tos == [0, 1, 2]  # GREEN, YELLOW (committed burst used up), RED


def test_json_resubmit_keeps_the_metadata_of_its_field_list_without_the_source(
    tmp_path: Path,
) -> None:
    """``resubmit_preserving_field_list`` with the JSON's ``field_lists``: the first pass
    counts 1 into a metadata field in the list and resubmits; the resubmitted pass sees
    it (and ``instance_type`` 6) and forwards with the count in the IPv4 DSCP byte. A
    field outside the list starts again from 0."""
    doc = json.loads(ROUTER_JSON.read_text())
    scalars = next(t for t in doc["header_types"] if t["name"] == "scalars_0")
    scalars["fields"] += [["kept", 8, False], ["lost", 8, False]]
    doc["field_lists"] = [{"id": 1, "name": "fl", "elements": [_f("scalars", "kept")]}]
    add = lambda fld: {"op": "assign", "parameters": [_f("scalars", fld), {  # noqa: E731
        "type": "expression", "value": {"type": "expression", "value": {
            "op": "+", "left": _f("scalars", fld), "right": _x("0x01")}}}]}  # fmt: skip
    first = {
        "name": "RouterIngress.again",
        "id": 4,
        "runtime_data": [],
        "primitives": [
            add("kept"),
            add("lost"),
            {"op": "resubmit_preserving_field_list", "parameters": [_x("0x1")]},
        ],
    }
    tbl = _table_running(doc, first, 2)
    ingress = doc["pipelines"][0]
    ingress["conditionals"].append(
        {"name": "node_first", "id": 1, "true_next": tbl, "false_next": "node_2",
         "expression": {"type": "expression", "value": {
             "op": "==", "left": _f("standard_metadata", "instance_type"),
             "right": _x("0x00000000")}}}
    )  # fmt: skip
    ingress["init_table"] = "node_first"
    doc["actions"][3]["primitives"].append(
        {"op": "assign", "parameters": [_f("ipv4", "diffserv"), {
            "type": "expression", "value": {"type": "expression", "value": {
                "op": "|", "left": {"type": "expression", "value": {
                    "op": "<<", "left": _f("scalars", "kept"), "right": _x("0x4")}},
                "right": _f("scalars", "lost")}}}]}
    )  # fmt: skip
    sw, path = switch_from_bmv2_json(json.dumps(doc).encode(), [tmp_path])
    assert "@field_list(1) bit<8> kept;" in path.read_text()
    _entries(sw)
    ((port, out),) = sw.send(1, _ipv4("10.0.2.2"))
    assert port == 2 and IP(out[14:]).tos == 0x10  # kept 1, lost 0


def test_json_of_the_p4c_driver_names_its_preprocessed_file_and_p4sim_runs_it(
    tmp_path: Path,
) -> None:
    from p4sim.bmv2_json import find_source

    # the p4c driver writes OUTDIR/NAME.p4i (the program preprocessed by cc -E) and names it
    build = tmp_path / "build"
    build.mkdir()
    src = ROOT / "topologies" / "basic" / "basic.p4"
    include = ROOT / "p4sim" / "frontend" / "include"
    p4i = build / "basic.p4i"
    cc = ["gcc", "-E", "-x", "assembler-with-cpp", f"-I{include}", str(src), "-o", str(p4i)]
    subprocess.run(cc, check=True)
    doc = {"program": "build/basic.p4i"}
    assert find_source(doc, [tmp_path]) == build / "basic.p4i"
    sw = Switch.from_file(str(p4i))
    assert [t.name for t in sw.info.tables] == ["RouterIngress.ipv4_route"]
    p4i.unlink()  # without the preprocessed copy, NAME.p4 where the sources are
    assert find_source(doc, [tmp_path, src.parent]) == src
    with pytest.raises(Bmv2JsonError, match=r"compiled from build/basic\.p4i"):
        find_source(doc, [tmp_path])


# -- JSON written by real p4c, checked in: the translation tested in every run ----------

#: ``A__B__C.json`` is p4c's JSON of tests/p4/A/B/C.p4 (README.md there names the p4c).
P4C_JSON_DIR = ROOT / "tests" / "p4" / "bmv2_json" / "p4c"
P4C_JSONS = sorted(P4C_JSON_DIR.glob("*.json"))


def test_json_written_by_p4c_is_checked_in_for_several_programs() -> None:
    assert len(P4C_JSONS) >= 4
    assert "p4c" in (P4C_JSON_DIR / "README.md").read_text()


@pytest.mark.parametrize("json_path", P4C_JSONS, ids=lambda p: p.stem)
def test_p4cs_json_without_its_source_gives_the_stf_outputs_of_the_source(
    json_path: Path, tmp_path: Path
) -> None:
    program = P4_DIR / (json_path.stem.replace("__", "/") + ".p4")
    stf = program.with_suffix(".stf")
    from_json, source = switch_from_bmv2_json(json_path.read_bytes(), [tmp_path])
    assert source.parent != program.parent  # the source was not found: translated
    from_source = Switch.from_file(str(program), include_dirs=(str(program.parent),))
    commands = parse_stf(stf.read_text(), str(stf))
    results = [run_stf(sw, commands) for sw in (from_source, from_json)]
    assert [r.passed for r in results] == [True, True], results[1].report
    assert results[0].report == results[1].report
