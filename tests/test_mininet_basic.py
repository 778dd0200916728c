"""Two Mininet hosts ping each other through p4sim on real veth links (root)."""

import pytest

from topologies import runner

pytestmark = [pytest.mark.mininet, pytest.mark.slow]


def test_two_hosts_ping_each_other_through_p4sim_basic_forwarding(tmp_path, capsys):
    rc = runner.main(
        [
            "topologies/basic/topology.json",
            "--program",
            "topologies/basic/basic.p4",
            "--ping-all",
            "--log-dir",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert "h1 -> h2: 3/3 replies" in out, out
    assert "h2 -> h1: 3/3 replies" in out, out
    assert rc == 0
