"""The same runner and controller client on the real BMv2 ``simple_switch_grpc``.

BMv2 and p4c are not installed on every machine (the docker image has both); these tests
skip with the missing binary's name when absent, and run everywhere they are present."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy import P4TableEntry

from controller.p4rt.p4runtime_client import SwitchConnection, SwitchSpec
from controller.p4rt.runtime_config import apply_runtime_config
from p4rt_config.runtime_json import load_runtime_json
from topologies import runner
from topologies.p4switch import CompiledProgram, compile_program, switch_command

needs_p4c = pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH")
needs_bmv2 = pytest.mark.skipif(
    shutil.which("simple_switch_grpc") is None, reason="simple_switch_grpc not on PATH"
)

PROGRAM = Path("topologies/basic/basic.p4")
TRIANGLE = Path("topologies/triangle/topology.json")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def compiled(tmp_path: Path) -> CompiledProgram:
    return compile_program(PROGRAM, "bmv2", tmp_path / "build")


@pytest.fixture
def bmv2(tmp_path: Path) -> Iterator[str]:
    """simple_switch_grpc started with the flags P4Switch gives it, no ports, no program."""
    port = _free_port()
    cmd = switch_command(
        [str(shutil.which("simple_switch_grpc"))],
        {},
        device_id=1,
        grpc_port=port,
        thrift_port=_free_port(),
    )
    with open(tmp_path / "bmv2.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            assert proc.poll() is None, (tmp_path / "bmv2.log").read_text()
            assert time.monotonic() < deadline, "simple_switch_grpc did not listen in 30 s"
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@needs_p4c
def test_p4c_output_holds_bmv2_json_and_the_p4info(compiled: CompiledProgram) -> None:
    info = compiled.pipeline().p4info
    assert [t.preamble.name for t in info.tables] == ["RouterIngress.ipv4_route"]
    assert compiled.device_config.suffix == ".json"
    assert b'"pipelines"' in compiled.device_config.read_bytes()


@needs_p4c
@needs_bmv2
def test_controller_client_pushes_bmv2_json_and_reads_runtime_entries_back(
    bmv2: str, compiled: CompiledProgram
) -> None:
    cfg = load_runtime_json(TRIANGLE.parent / "s1-runtime.json")

    async def scenario() -> tuple[bool, int]:
        async with SwitchConnection(SwitchSpec(1, bmv2), compiled.pipeline()) as sw:
            await apply_runtime_config(sw, cfg)
            await apply_runtime_config(sw, cfg)  # idempotent, as on p4sim
            entries = await sw.read(P4TableEntry("RouterIngress.ipv4_route"))
            return sw.pipeline_pushed, len(entries)

    pushed, count = asyncio.run(scenario())
    assert pushed
    assert count == sum(1 for e in cfg.table_entries if not e.is_default)


@needs_p4c
@needs_bmv2
@pytest.mark.mininet
@pytest.mark.slow
def test_triangle_on_bmv2_every_host_pings_every_other(tmp_path: Path) -> None:
    topo = runner.load_topology(TRIANGLE)
    with runner.started_network(
        topo, str(PROGRAM), kind="bmv2", log_dir=str(tmp_path / "logs"), build_dir=tmp_path
    ) as net:
        results = runner.ping_all(net, topo, count=3)
    assert [(s, d) for s, d, sent, recv in results if (sent, recv) != (3, 3)] == []
    assert len(results) == 6
