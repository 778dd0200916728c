"""The experiment harness: layouts route every host from every switch, and a leaf-spine
network on Mininet (three switches owned by one controller daemon, relays on every link)
carries traffic between all hosts."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from controller.systems.source_guard import (
    PORT_FIELD,
    SOURCE_ADDRS,
    SOURCE_FIELD,
    SOURCE_PORTS,
    SourceBinding,
    runtime_entries,
)
from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    Trunk,
    interface_bytes,
    leaf_spine,
    star,
)
from topologies.impair_relay import Impairment


def test_star_puts_host_i_on_port_i_of_s1() -> None:
    layout = star(3)
    assert [(h.name, h.ip, h.switch, h.port) for h in layout.hosts] == [
        ("h1", "10.0.0.1", "s1", 1),
        ("h2", "10.0.0.2", "s1", 2),
        ("h3", "10.0.0.3", "s1", 3),
    ]
    assert layout.egress_ports() == {"s1": {"h1": 1, "h2": 2, "h3": 3}}


def test_leaf_spine_routes_each_host_through_its_leaf_and_the_spine() -> None:
    layout = leaf_spine(racks=2, per_rack=2, spine_hosts=1)
    assert layout.switches == ("s1", "s2", "s3")
    assert layout.trunks == (Trunk("s2", 3, "s1", 1), Trunk("s3", 3, "s1", 2))
    ports = layout.egress_ports()
    assert ports["s2"] == {"h1": 1, "h2": 2, "h3": 3, "h4": 3, "h5": 3}
    assert ports["s3"] == {"h1": 3, "h2": 3, "h3": 1, "h4": 2, "h5": 3}
    assert ports["s1"] == {"h1": 1, "h2": 1, "h3": 2, "h4": 2, "h5": 3}
    entries = layout.forwarding_entries("s3")["table_entries"]
    routes = [e for e in entries if e["table"] == "IncIngress.forwarder.ipv4_lpm"]
    assert {e["match"]["hdr.ipv4.dstAddr"][0]: e["action_params"]["port"] for e in routes} == {
        "10.0.0.1": 3,
        "10.0.0.2": 3,
        "10.0.0.3": 1,
        "10.0.0.4": 2,
        "10.0.0.5": 3,
    }


def test_each_leaf_lets_in_only_its_own_hosts_addresses_on_their_ports_not_on_its_trunk() -> None:
    """The source guard of leaf s3 (rack 2: h3 on port 1, h4 on port 2, trunk on port 3)
    binds its two host ports to their hosts' addresses and leaves the trunk unchecked."""
    layout = leaf_spine(racks=2, per_rack=2, spine_hosts=1)
    entries = layout.forwarding_entries("s3")["table_entries"]
    ports = [e["match"] for e in entries if e["table"] == SOURCE_PORTS]
    addrs = [e["match"] for e in entries if e["table"] == SOURCE_ADDRS]
    assert ports == [{PORT_FIELD: 1}, {PORT_FIELD: 2}]
    assert addrs == [
        {PORT_FIELD: 1, SOURCE_FIELD: ["10.0.0.3", 32]},
        {PORT_FIELD: 2, SOURCE_FIELD: ["10.0.0.4", 32]},
    ]
    spine = layout.forwarding_entries("s1")["table_entries"]
    assert [e["match"] for e in spine if e["table"] == SOURCE_PORTS] == [{PORT_FIELD: 3}]


def test_a_source_binding_that_would_check_nothing_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="port 2: /0 allows every source"):
        runtime_entries([SourceBinding(2, "0.0.0.0/0")])
    with pytest.raises(ValueError, match="port 3: .*host bits set"):
        runtime_entries([SourceBinding(3, "10.0.0.1/24")])


def test_interface_counters_come_from_this_network_namespace() -> None:
    assert "lo" in interface_bytes()


@pytest.mark.mininet
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_leaf_spine_network_with_relays_reaches_every_host_from_every_host() -> None:
    layout = leaf_spine(racks=2, per_rack=1, spine_hosts=1)
    said: list[str] = []
    config = ExperimentConfig(
        layout, impairment=Impairment(), run_dir=Path("run/test-experiment"), log=said.append
    )
    with Experiment(config) as ex:
        assert len(ex.relays) == len(layout.hosts) + len(layout.trunks)
        assert [s["device_id"] for s in ex.api.switches()] == [1, 2, 3]
        # The harness says where the live dashboard is, and it serves all three switches.
        assert any(line.startswith(f"dashboard: {ex.dashboard_url} ") for line in said)
        with urllib.request.urlopen(ex.dashboard_url, timeout=30) as page:
            assert b"stats/stream" in page.read()
        with urllib.request.urlopen(ex.dashboard_url + "metrics", timeout=30) as metrics:
            text = metrics.read().decode()
        assert all(f'inc_switch_primary{{device="{d}"' in text for d in (1, 2, 3))
        before = ex.port_bytes()
        for a in layout.hosts:
            for b in layout.hosts:
                if a is not b:
                    out = ex.host(a.name).cmd(f"ping -c 1 -W 3 {b.ip}")
                    assert re.search(r"1 received", out), f"{a.name} -> {b.name}: {out}"
        after = ex.port_bytes()
        assert all(after[p] > before[p] for p in after)  # every switch port carried the pings
    assert set(ex.relay_stats()) == set(ex.relays)
