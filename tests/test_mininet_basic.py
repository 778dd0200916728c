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


def test_make_run_switch_is_started_empty_and_programmed_over_p4runtime(tmp_path, capsys):
    rc = runner.main(
        [
            "topologies/basic/topology.json",
            "--program",
            "topologies/basic/basic.p4",
            "--switch",
            "p4sim",
            "--ping-all",
            "--log-dir",
            str(tmp_path / "logs"),
            "--build-dir",
            str(tmp_path / "build"),
        ]
    )
    command = (tmp_path / "logs" / "s1.log").read_text().splitlines()[0]
    assert rc == 0, capsys.readouterr()
    assert "--no-p4" in command and "--grpc-server-addr" in command
    assert (tmp_path / "build" / "basic.p4info.txtpb").exists()
    assert (tmp_path / "build" / "basic.p4sim").exists()
