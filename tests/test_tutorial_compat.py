"""Regressions found running the p4lang/tutorials exercises on our stack.

The tutorials' conventions that differed from ours: ``runtime_json`` paths relative to the
exercise directory (one level above ``pod-topo/``), exact keys written as one-element
lists (``"hdr.myTunnel.dst_id": [1]``), and several switches programmed in one process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from p4rt_config.runtime_json import RuntimeJsonError, parse_runtime_json
from topologies import runner

REPO = Path(__file__).resolve().parent.parent


def _tutorial_layout(root: Path, runtime_ref: str) -> Path:
    """``root/ex/one-topo/topology.json`` naming its runtime file as ``runtime_ref``;
    the runtime file itself lives in ``root/ex/one-topo/``."""
    topo_dir = root / "ex" / "one-topo"
    topo_dir.mkdir(parents=True)
    data = json.loads((REPO / "topologies/basic/topology.json").read_text())
    data["switches"]["s1"]["runtime_json"] = runtime_ref
    (topo_dir / "topology.json").write_text(json.dumps(data))
    shutil.copy(REPO / "topologies/basic/s1-runtime.json", topo_dir / "s1-runtime.json")
    return topo_dir / "topology.json"


def test_runtime_json_named_from_exercise_directory_resolves_beside_topology(tmp_path):
    topo = runner.load_topology(_tutorial_layout(tmp_path, "one-topo/s1-runtime.json"))
    got = runner.resolve_path(topo, "one-topo/s1-runtime.json")
    assert got == tmp_path / "ex" / "one-topo" / "s1-runtime.json"
    assert got.exists()


def test_runtime_json_named_from_topology_directory_still_resolves(tmp_path):
    topo = runner.load_topology(_tutorial_layout(tmp_path, "s1-runtime.json"))
    assert runner.resolve_path(topo, "s1-runtime.json") == topo.base_dir / "s1-runtime.json"


def test_missing_runtime_json_is_reported_beside_the_topology(tmp_path):
    topo = runner.load_topology(_tutorial_layout(tmp_path, "nowhere/s9-runtime.json"))
    assert runner.resolve_path(topo, "nowhere/s9-runtime.json") == (
        topo.base_dir / "nowhere" / "s9-runtime.json"
    )


def _entry(match: dict[str, object]) -> dict[str, object]:
    return {
        "table": "Ing.tunnel",
        "match": match,
        "action_name": "Ing.fwd",
        "action_params": {"port": 2},
    }


def test_one_element_list_exact_key_is_read_as_its_value():
    cfg = parse_runtime_json({"table_entries": [_entry({"hdr.tun.dst_id": [7]})]})
    assert cfg.table_entries[0].match == {"hdr.tun.dst_id": 7}


def test_two_element_list_key_stays_a_pair():
    cfg = parse_runtime_json({"table_entries": [_entry({"hdr.ip.dst": ["10.0.0.0", 8]})]})
    assert cfg.table_entries[0].match == {"hdr.ip.dst": (0x0A000000, 8)}


def test_three_element_list_key_is_an_error_naming_the_entry():
    with pytest.raises(RuntimeJsonError, match=r"table_entries\[0\].*one or two elements"):
        parse_runtime_json({"table_entries": [_entry({"k": [1, 2, 3]})]})


@pytest.mark.mininet
@pytest.mark.slow
def test_tutorial_layout_exercise_pings_without_event_loop_tracebacks(
    tmp_path, capsys, monkeypatch
):
    """Run from the exercise directory like the tutorials' ``make run``; the runtime path
    names ``one-topo/``; programming must not print "Event loop is closed"."""
    topo_json = _tutorial_layout(tmp_path, "one-topo/s1-runtime.json")
    monkeypatch.chdir(tmp_path / "ex")
    rc = runner.main(
        [
            str(topo_json.relative_to(tmp_path / "ex")),
            "--program",
            str(REPO / "topologies/basic/basic.p4"),
            "--ping-all",
            "--log-dir",
            str(tmp_path / "logs"),
            "--build-dir",
            str(tmp_path / "build"),
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "h1 -> h2: 3/3 replies" in out
    assert "Event loop is closed" not in err
