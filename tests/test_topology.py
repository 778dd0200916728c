import json

import pytest

from topologies.runner import TopologyError, load_topology


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
