"""The main job's link rate, chosen for the switch that runs it (topologies/link_rate.py)."""

import pytest

from topologies.link_rate import FRAME_BYTES, HEADROOM, SWITCH_AGG_RATE, link_rate


def test_p4sim_links_let_four_workers_offer_half_its_aggregation_rate(monkeypatch):
    monkeypatch.delenv("P4SIM_BACKEND", raising=False)
    r = link_rate("p4sim", workers=4)
    offered = 4 * r.mbps * 1e6 / 8 / FRAME_BYTES  # aggregation frames/s the links can carry
    assert r.mbps == 25.2
    assert offered == pytest.approx(HEADROOM * SWITCH_AGG_RATE["p4sim"], rel=0.05)
    assert "chosen for p4sim: 130,000 aggregation packets/s (configured)" in r.describe()


def test_p4sim_on_the_python_back_end_gets_the_links_of_its_own_rate(monkeypatch):
    monkeypatch.setenv("P4SIM_BACKEND", "python")
    r = link_rate("p4sim", workers=4)
    assert r.mbps == 3.9
    assert "chosen for p4sim-python: 20,000 aggregation packets/s" in r.describe()


def test_bmv2_gets_slower_links_than_p4sim_in_proportion_to_its_rate(monkeypatch):
    monkeypatch.delenv("P4SIM_BACKEND", raising=False)
    p4sim, bmv2 = link_rate("p4sim", 4), link_rate("bmv2", 4)
    assert bmv2.mbps == 1.0
    ratio = SWITCH_AGG_RATE["bmv2"] / SWITCH_AGG_RATE["p4sim"]
    assert bmv2.mbps / p4sim.mbps == pytest.approx(ratio, rel=0.1)


def test_a_measured_rate_replaces_the_configured_one_and_more_workers_share_it():
    r = link_rate("bmv2", workers=8, switch_rate=20_000)
    assert r.source == "given" and r.mbps == 1.9
    assert "20,000 aggregation packets/s (given)" in r.describe()


def test_a_fixed_rate_is_kept_and_bad_input_is_a_clear_error():
    assert link_rate("bmv2", 4, fixed_mbps=3.0).mbps == 3.0
    with pytest.raises(ValueError, match="no aggregation rate known for switch 'tofino'"):
        link_rate("tofino", 4)
    with pytest.raises(ValueError, match="must be > 0"):
        link_rate("p4sim", 4, switch_rate=0)


def test_the_hosts_loops_bound_the_links_when_they_are_slower_than_the_switch():
    native = link_rate("p4sim", 4, host_backend="native", cores=2)
    python = link_rate("p4sim", 4, host_backend="python", cores=2)
    assert native.bound == "switch" and native.mbps == 25.2
    assert python.bound == "hosts" and python.mbps < native.mbps
    # python: 62,700 per CPU-second x 2 cores / (4 workers + the switch) x headroom
    assert python.host_fps == pytest.approx(62_700 * 2 / 5 * HEADROOM)
    assert "the hosts' python packet loops allow 12,540" in python.describe()
    assert "the hosts set the rate" in python.describe()
    with pytest.raises(ValueError, match="host back end must be one of native, python"):
        link_rate("p4sim", 4, host_backend="dpdk")
