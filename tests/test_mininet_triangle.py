"""Three P4 switches in a triangle, programmed over P4Runtime from runtime JSON files
(root; p4sim)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from finsy import P4TableAction, P4TableEntry

from controller.p4rt.p4runtime_client import SwitchConnection, SwitchSpec
from topologies import runner
from topologies.p4switch import SwitchStartError

pytestmark = [pytest.mark.mininet, pytest.mark.slow]

TRIANGLE = Path("topologies/triangle/topology.json")
PROGRAM = "topologies/basic/basic.p4"
TABLE = "RouterIngress.ipv4_route"


@pytest.fixture(scope="class")
def triangle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, runner.Topology]]:
    tmp = tmp_path_factory.mktemp("triangle")
    topo = runner.load_topology(TRIANGLE)
    with runner.started_network(
        topo, PROGRAM, kind="p4sim", log_dir=str(tmp / "logs"), build_dir=tmp / "build"
    ) as net:
        yield net, topo


def _expected_routes(path: Path) -> set[tuple[str, int, str, int]]:
    doc = json.loads(path.read_text())
    out = set()
    for e in doc["table_entries"]:
        if e.get("default_action"):
            continue
        ip, plen = e["match"]["hdr.ipv4.dst_addr"]
        p = e["action_params"]
        out.add((ip, plen, p["next_hop_mac"].lower(), p["port"]))
    return out


def _route(entry: P4TableEntry, conn: SwitchConnection) -> tuple[str, int, str, int]:
    assert entry.match is not None and isinstance(entry.action, P4TableAction)
    (field,) = entry.match.format_dict(conn.schema.tables[TABLE]).values()
    value, _, plen = field.partition("/")
    ip = str(ipaddress.IPv4Address(int(value, 0)))  # no type in the P4Info: shown as hex
    args = entry.action.args
    mac = args["next_hop_mac"]
    mac_text = mac if isinstance(mac, str) else ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))
    return ip, int(plen or 32), mac_text.lower(), int(args["port"])


class TestTriangleOverP4Runtime:
    """One network for these tests (torn down before the next test builds its own)."""

    def test_every_host_pings_every_other_through_the_triangle(self, triangle: Any) -> None:
        net, topo = triangle
        results = runner.ping_all(net, topo, count=3)
        assert len(results) == 6
        assert [(s, d) for s, d, sent, recv in results if (sent, recv) != (3, 3)] == []

    def test_switches_start_empty_and_get_the_pipeline_over_p4runtime(self, triangle: Any) -> None:
        net, _ = triangle
        for sw in net.switches:
            first_line = sw.log_path.read_text().splitlines()[0]
            assert "--no-p4" in first_line and "--runtime-json" not in first_line

    def test_runtime_json_entries_read_back_from_s2_over_p4runtime(self, triangle: Any) -> None:
        net, _ = triangle
        s2 = net.get("s2")

        async def read() -> tuple[list[P4TableEntry], SwitchConnection]:
            # No pipeline of our own: the client adopts the switch's P4Info for names.
            async with SwitchConnection(SwitchSpec(2, s2.grpc_address, election_id=3)) as conn:
                return await conn.read(P4TableEntry(TABLE)), conn

        entries, conn = asyncio.run(read())
        got = {_route(e, conn) for e in entries}
        assert got == _expected_routes(TRIANGLE.parent / "s2-runtime.json")


def test_full_loss_on_one_link_cuts_only_the_routes_over_it(tmp_path: Path) -> None:
    topo = runner.load_topology(TRIANGLE)
    (s1s2,) = [x for x in topo.links if {x.a, x.b} == {"s1", "s2"}]
    s1s2.loss_pct = 100.0
    with runner.started_network(
        topo, PROGRAM, kind="p4sim", log_dir=str(tmp_path / "logs"), build_dir=tmp_path
    ) as net:
        state = json.loads(runner.STATE_FILE.read_text())
        results = {(s, d): recv for s, d, _, recv in runner.ping_all(net, topo, count=2)}
    assert results[("h1", "h2")] == 0 and results[("h2", "h1")] == 0
    assert results[("h1", "h3")] == 2 and results[("h3", "h2")] == 2
    if not runner.netem_available():  # nftables did it: the table is gone after the run
        assert state["nft_tables"] == [f"netdev {runner.loss_table_name()}"]
        tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True)
        assert runner.loss_table_name() not in tables.stdout
    assert not runner.STATE_FILE.exists()


def test_a_switch_that_cannot_be_programmed_fails_the_run_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    exercise = tmp_path / "triangle"
    shutil.copytree(TRIANGLE.parent, exercise)
    bad = json.loads((exercise / "s3-runtime.json").read_text())
    bad["table_entries"][1]["table"] = "RouterIngress.no_such_table"
    (exercise / "s3-runtime.json").write_text(json.dumps(bad))
    logs = tmp_path / "logs"
    with pytest.raises(SwitchStartError, match=r"s3: .*no_such_table"):
        with runner.started_network(
            runner.load_topology(exercise / "topology.json"),
            PROGRAM,
            kind="p4sim",
            log_dir=str(logs),
            build_dir=tmp_path / "build",
        ):
            pytest.fail("the network must not come up")
    assert not runner.STATE_FILE.exists()
    assert list(logs.glob("*.pid")) == []  # every started switch was stopped by its PID
    assert [
        i for i in ("s1-eth1", "s2-eth3", "s3-eth1") if Path("/sys/class/net", i).exists()
    ] == []
