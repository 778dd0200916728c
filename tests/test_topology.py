import ipaddress
import json
import subprocess

import pytest

from p4rt_config.runtime_json import load_runtime_json
from topologies.p4switch import SwitchStartError, compile_program, switch_command, switch_kind
from topologies.runner import (
    TopologyError,
    _nft_chain,
    compile_programs,
    load_topology,
    loss_table_name,
    remove_link_loss,
    remove_stale_loss_tables,
)


def test_tutorial_topology_loads_hosts_switches_and_links(tmp_path):
    f = tmp_path / "topology.json"
    f.write_text(
        json.dumps(
            {
                "hosts": {
                    "h1": {
                        "ip": "10.0.1.1/24",
                        "mac": "08:00:00:00:01:11",
                        "commands": ["route add default gw 10.0.1.10 dev eth0"],
                    }
                },
                "switches": {"s1": {"runtime_json": "s1-runtime.json"}, "s2": {}},
                "links": [["h1", "s1-p1"], ["s1-p2", "s2-p2", "5ms", 10]],
            }
        )
    )
    topo = load_topology(f)
    assert [h.name for h in topo.hosts] == ["h1"]
    assert topo.hosts[0].commands == ["route add default gw 10.0.1.10 dev eth0"]
    assert topo.switches[0].runtime_json == "s1-runtime.json"
    first, second = topo.links
    assert (first.a, first.a_port, first.b, first.b_port) == ("h1", None, "s1", 1)
    assert (second.a_port, second.b_port, second.latency, second.bandwidth_mbps) == (
        2,
        2,
        "5ms",
        10.0,
    )
    assert topo.base_dir == tmp_path


def test_link_to_unknown_node_is_rejected(tmp_path):
    f = tmp_path / "topology.json"
    f.write_text(json.dumps({"hosts": {}, "switches": {"s1": {}}, "links": [["h9", "s1-p1"]]}))
    with pytest.raises(TopologyError, match="unknown node 'h9'"):
        load_topology(f)


def test_bad_endpoint_is_rejected(tmp_path):
    f = tmp_path / "topology.json"
    f.write_text(json.dumps({"switches": {"s1": {}}, "links": [["s1-px", "s1-p1"]]}))
    with pytest.raises(TopologyError, match="bad link endpoint"):
        load_topology(f)


def test_shipped_basic_exercise_is_consistent():
    topo = load_topology("topologies/basic/topology.json")
    assert {h.name for h in topo.hosts} == {"h1", "h2"}
    assert all((topo.base_dir / s.runtime_json).exists() for s in topo.switches)


def test_link_loss_is_read_from_the_fifth_element_in_percent(tmp_path):
    f = tmp_path / "topology.json"
    links = [["s1-p1", "s2-p1", "0ms", 10, 1.5], ["s1-p2", "s2-p2", "0ms", None, "20%"]]
    f.write_text(json.dumps({"switches": {"s1": {}, "s2": {}}, "links": links}))
    first, second = load_topology(f).links
    assert (first.loss_pct, second.loss_pct, second.bandwidth_mbps) == (1.5, 20.0, None)


def test_loss_outside_zero_to_hundred_percent_is_rejected(tmp_path):
    f = tmp_path / "topology.json"
    links = [["s1-p1", "s2-p1", "0ms", 10, 150]]
    f.write_text(json.dumps({"switches": {"s1": {}, "s2": {}}, "links": links}))
    with pytest.raises(TopologyError, match="outside 0..100"):
        load_topology(f)


def test_shipped_triangle_has_three_switches_each_with_one_host():
    topo = load_topology("topologies/triangle/topology.json")
    assert {s.name for s in topo.switches} == {"s1", "s2", "s3"}
    hosts = {h.name for h in topo.hosts}
    host_links = {(x.a, x.b, x.b_port) for x in topo.links if x.a in hosts}
    assert host_links == {("h1", "s1", 1), ("h2", "s2", 1), ("h3", "s3", 1)}
    trunk = {frozenset((x.a, x.b)) for x in topo.links if x.a not in hosts}
    assert trunk == {frozenset(p) for p in (("s1", "s2"), ("s1", "s3"), ("s2", "s3"))}


def test_triangle_runtime_json_routes_every_host_subnet_on_every_switch():
    topo = load_topology("topologies/triangle/topology.json")
    for s in topo.switches:
        cfg = load_runtime_json(topo.base_dir / s.runtime_json)
        prefixes = {e.match["hdr.ipv4.dst_addr"] for e in cfg.table_entries if not e.is_default}
        nets = {ipaddress.ip_network((value, plen), strict=False) for value, plen in prefixes}
        for h in topo.hosts:
            assert any(ipaddress.ip_address(h.ip.split("/")[0]) in n for n in nets), (s, h)
        assert {e.table for e in cfg.table_entries} == {"RouterIngress.ipv4_route"}


def test_bmv2_and_p4sim_get_the_same_command_line_but_the_executable():
    common = dict(device_id=2, grpc_port=50052, thrift_port=9092, cpu_port=255)
    ports = {2: "s2-eth2", 1: "s2-eth1"}
    bmv2 = switch_command(["simple_switch_grpc"], ports, **common)
    p4sim = switch_command(["python", "-m", "p4sim.cli"], ports, **common)
    assert bmv2[1:] == p4sim[3:]
    assert bmv2[1:] == [
        "-i", "1@s2-eth1", "-i", "2@s2-eth2", "--device-id", "2", "--thrift-port", "9092",
        "--no-p4", "--", "--grpc-server-addr", "0.0.0.0:50052", "--cpu-port", "255",
    ]  # fmt: skip


def test_switch_kind_comes_from_the_environment_and_rejects_unknown(monkeypatch):
    monkeypatch.setenv("SWITCH", "bmv2")
    assert switch_kind() == "bmv2"
    assert switch_kind("p4sim") == "p4sim"
    monkeypatch.setenv("SWITCH", "tofino")
    with pytest.raises(ValueError, match="p4sim, bmv2"):
        switch_kind()


def test_p4sim_compile_writes_p4info_and_device_config_once_per_program(tmp_path):
    topo = load_topology("topologies/triangle/topology.json")
    compiled = compile_programs(topo, "topologies/basic/basic.p4", "p4sim", tmp_path)
    assert set(compiled) == {"s1", "s2", "s3"}
    assert compiled["s1"] is compiled["s2"] is compiled["s3"]
    info = compiled["s1"].pipeline().p4info
    assert [t.preamble.name for t in info.tables] == ["RouterIngress.ipv4_route"]
    assert compiled["s1"].device_config.stat().st_size > 0


def test_runtime_json_without_any_program_is_a_topology_error():
    topo = load_topology("topologies/triangle/topology.json")
    with pytest.raises(TopologyError, match="no program"):
        compile_programs(topo, None, "p4sim", "unused")


def test_bmv2_json_without_its_p4info_next_to_it_is_refused(tmp_path):
    (tmp_path / "basic.json").write_text("{}")
    with pytest.raises(SwitchStartError, match="P4Info"):
        compile_program(tmp_path / "basic.json", "bmv2", tmp_path)
    (tmp_path / "basic.p4info.txtpb").write_text("")
    got = compile_program(tmp_path / "basic.json", "bmv2", tmp_path)
    assert (got.p4info, got.device_config) == (
        tmp_path / "basic.p4info.txtpb",
        tmp_path / "basic.json",
    )


def test_nft_loss_chain_drops_on_egress_with_the_given_probability():
    assert "numgen random mod 10000 < 150 drop" in _nft_chain("s1-eth2", 1.5)
    assert 'hook egress device "s1-eth2"' in _nft_chain("s1-eth2", 1.5)
    full = _nft_chain("eth0", 100.0)
    assert "numgen" not in full and "drop" in full


@pytest.mark.root
def test_loss_tables_of_dead_runners_are_removed_and_live_ones_kept():
    dead = subprocess.Popen(["true"])
    dead.wait()
    names = (f"inc_loss_{dead.pid}", loss_table_name())
    for name in names:
        subprocess.run(["nft", "add", "table", "netdev", name], check=True)
    try:
        removed = remove_stale_loss_tables()
        assert names[0] in removed and names[1] not in removed
        listed = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
        assert names[0] not in listed and names[1] in listed
    finally:
        remove_link_loss(names)
