"""The P4Runtime client layer against p4sim's P4Runtime server over real gRPC."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from finsy import P4CloneSessionEntry, P4MulticastGroupEntry, P4TableEntry
from finsy.grpcutil import GRPCStatusCode

from controller.p4rt.p4runtime_client import (
    Pipeline,
    SwitchConnection,
    SwitchError,
    SwitchSet,
    SwitchSpec,
    table_entry,
)
from controller.p4rt.runtime_config import apply_runtime_config
from p4rt_config.runtime_json import load_runtime_json
from topologies.local_switch import LocalSwitch, PipelineFiles, compile_pipeline
from wire.header import DROP_REASONS

JOBS = "IncIngress.job_region.jobs"


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def pipeline(files: PipelineFiles) -> Pipeline:
    return Pipeline.from_files(files.p4info, files.device_config)


@pytest.fixture
def switch() -> Iterator[LocalSwitch]:
    with LocalSwitch(device_id=3) as sw:
        yield sw


def job_entry(job_id: int, size: int = 8) -> P4TableEntry:
    return table_entry(
        JOBS,
        {"hdr.inc.job_id": job_id},
        "set_region",
        offset=0,
        size=size,
        quorum=2,
        mcast_grp=job_id,
        slot_count=32,
    )


def test_switch_spec_parses_command_line_form() -> None:
    spec = SwitchSpec.parse("2@10.0.0.1:50001,thrift=9091,name=leaf,election=7")
    assert (spec.device_id, spec.address, spec.thrift_port, spec.label, spec.election_id) == (
        2,
        "10.0.0.1:50001",
        9091,
        "leaf",
        7,
    )
    for bad in ("10.0.0.1:9559", "x@h:1", "1@host", "1@h:1,colour=red", "1@h:1,election=0"):
        with pytest.raises(ValueError):
            SwitchSpec.parse(bad)


def test_connect_pushes_pipeline_once_and_a_reconnect_keeps_switch_state(
    switch: LocalSwitch, pipeline: Pipeline
) -> None:
    spec = SwitchSpec(3, switch.address)

    async def scenario() -> tuple[bool, bool, list[Any]]:
        async with SwitchConnection(spec, pipeline) as sw:
            first = sw.pipeline_pushed and sw.is_primary
            await sw.insert([job_entry(7)])
        async with SwitchConnection(spec, pipeline) as sw:
            return first, sw.pipeline_pushed, await sw.read(P4TableEntry(JOBS))

    pushed_first, pushed_again, entries = run(scenario())
    assert pushed_first and not pushed_again
    assert [e.match["job_id"] for e in entries] == [7]
    args = {"offset": 0, "size": 8, "quorum": 2, "mcast_grp": 7, "slot_count": 32}
    assert entries[0].action.args == args


def test_backup_client_cannot_write(switch: LocalSwitch, pipeline: Pipeline) -> None:
    async def scenario() -> tuple[bool, SwitchError]:
        async with SwitchConnection(SwitchSpec(3, switch.address, election_id=20), pipeline):
            async with SwitchConnection(SwitchSpec(3, switch.address, election_id=5)) as low:
                with pytest.raises(SwitchError) as info:
                    await low.insert([job_entry(1)])
                return low.is_primary, info.value

    primary, err = run(scenario())
    assert not primary
    assert err.code == GRPCStatusCode.PERMISSION_DENIED
    assert "switch s3" in str(err)


def test_write_errors_name_the_update_and_upsert_modifies_existing(
    switch: LocalSwitch, pipeline: Pipeline
) -> None:
    async def scenario() -> tuple[SwitchError, list[Any]]:
        async with SwitchConnection(SwitchSpec(3, switch.address), pipeline) as sw:
            await sw.insert([job_entry(1)])
            with pytest.raises(SwitchError) as info:
                await sw.insert([job_entry(2), job_entry(1)])
            await sw.upsert([job_entry(1, size=16), job_entry(3)])
            await sw.delete([job_entry(9)], strict=False)  # already gone: fine
            with pytest.raises(SwitchError):
                await sw.delete([job_entry(9)])
            return info.value, await sw.read(P4TableEntry(JOBS))

    err, entries = run(scenario())
    assert err.details == {1: GRPCStatusCode.ALREADY_EXISTS}
    assert "update 1: ALREADY_EXISTS" in str(err)
    sizes = {e.match["job_id"]: e.action.args["size"] for e in entries}
    assert sizes == {1: 16, 2: 8, 3: 8}


def test_multicast_group_is_replaced_then_deleted(switch: LocalSwitch, pipeline: Pipeline) -> None:
    async def scenario() -> tuple[list[Any], list[Any]]:
        async with SwitchConnection(SwitchSpec(3, switch.address), pipeline) as sw:
            await sw.set_multicast_group(4, [(1, 1), (2, 2)])
            await sw.set_multicast_group(4, [(1, 1), (5, 2)])
            got = await sw.read(P4MulticastGroupEntry())
            await sw.delete_multicast_group(4)
            await sw.delete_multicast_group(4)  # not strict by default
            return got, await sw.read(P4MulticastGroupEntry())

    got, after = run(scenario())
    assert [(r.port, r.instance) for r in got[0].replicas] == [(1, 1), (5, 2)]
    assert after == []


def test_clone_session_is_created_and_replaced(switch: LocalSwitch, pipeline: Pipeline) -> None:
    async def scenario() -> list[Any]:
        async with SwitchConnection(SwitchSpec(3, switch.address), pipeline) as sw:
            await sw.set_clone_session(100, [(7, 1)])
            await sw.set_clone_session(100, [(8, 1)], packet_length_bytes=64)
            return await sw.read(P4CloneSessionEntry())

    sessions = run(scenario())
    assert [(s.session_id, s.packet_length_bytes) for s in sessions] == [(100, 64)]
    assert [(r.port, r.instance) for r in sessions[0].replicas] == [(8, 1)]


def test_registers_are_filled_and_read_and_counters_read(
    switch: LocalSwitch, pipeline: Pipeline
) -> None:
    async def scenario() -> tuple[list[int], dict[int, tuple[int, int]]]:
        async with SwitchConnection(SwitchSpec(3, switch.address), pipeline) as sw:
            await sw.fill_register("agg_job", range(10, 14), 9)
            await sw.write_register("IncIngress.aggregator.agg_psn", 11, 0xFFFFFFFF)
            vals = [await sw.read_register("agg_job", i) for i in range(9, 15)]
            vals.append(await sw.read_register("agg_psn", 11))
            return vals, await sw.read_counter("inc_drops")

    vals, drops = run(scenario())
    assert vals == [0, 9, 9, 9, 9, 0, 0xFFFFFFFF]
    assert sorted(drops) == list(range(DROP_REASONS)) and all(v == (0, 0) for v in drops.values())


def test_reads_and_writes_carry_our_deadline_not_finsys(
    switch: LocalSwitch, pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every RPC carries RPC_TIMEOUT (finsy's own calls fix 10 s): while the switch's
    control plane is held, a Read and a Write each fail after RPC_TIMEOUT as a one-line
    DEADLINE_EXCEEDED error naming the call; once released the connection still works."""
    from controller.p4rt import p4runtime_client

    async def scenario() -> tuple[list[SwitchError], list[Any]]:
        errors = []
        async with SwitchConnection(SwitchSpec(3, switch.address), pipeline) as sw:
            monkeypatch.setattr(p4runtime_client, "RPC_TIMEOUT", 0.5)
            with switch.server.lock:  # a switch busy in its control plane answers nothing
                for call in (sw.read(P4TableEntry(JOBS)), sw.insert([job_entry(5)])):
                    try:
                        await call
                    except SwitchError as err:
                        errors.append(err)
            monkeypatch.setattr(p4runtime_client, "RPC_TIMEOUT", 30.0)
            await sw.insert([job_entry(6)])
            return errors, await sw.read(P4TableEntry(JOBS))

    errors, entries = run(scenario())
    assert [str(e).split(": ", 1)[1] for e in errors] == [
        "Read timed out after 0.5 s",
        "Write timed out after 0.5 s",
    ]
    assert all(e.code == GRPCStatusCode.DEADLINE_EXCEEDED for e in errors)
    assert 6 in {
        e.match["job_id"] for e in entries
    }  # (5 may be in too: a timed-out write may land)


def test_connecting_to_nothing_is_a_switch_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def scenario() -> None:
        await SwitchConnection(SwitchSpec(0, f"127.0.0.1:{port}")).connect(timeout=5)

    with pytest.raises(SwitchError, match="cannot connect"):
        run(scenario())


def test_switch_set_connects_several_switches(pipeline: Pipeline) -> None:
    with LocalSwitch(device_id=1) as a, LocalSwitch(device_id=2) as b:
        specs = [SwitchSpec(1, a.address), SwitchSpec(2, b.address)]

        async def scenario() -> list[bool]:
            async with SwitchSet(specs, pipeline) as switches:
                await switches[2].insert([job_entry(5)])
                return [c.is_primary for c in switches] + [
                    len(await switches[1].read(P4TableEntry(JOBS))) == 0,
                    len(await switches[2].read(P4TableEntry(JOBS))) == 1,
                ]

        assert run(scenario()) == [True, True, True, True]


def test_runtime_json_is_applied_idempotently_and_forwards(
    switch: LocalSwitch, pipeline: Pipeline, tmp_path: Path
) -> None:
    doc = {
        "target": "bmv2",
        "table_entries": [
            {
                "table": "IncIngress.forwarder.ipv4_lpm",
                "match": {"hdr.ipv4.dstAddr": ["10.0.2.0", 24]},
                "action_name": "IncIngress.forwarder.ipv4_forward",
                "action_params": {"dst_mac": "08:00:00:00:02:22", "port": 2},
            },
            {
                "table": "IncIngress.forwarder.l2_exact",
                "default_action": True,
                "action_name": "IncIngress.forwarder.drop",
                "action_params": {},
            },
        ],
        "multicast_group_entries": [
            {"multicast_group_id": 900, "replicas": [{"egress_port": 1, "instance": 1}]}
        ],
    }
    path = tmp_path / "s1-runtime.json"
    path.write_text(json.dumps(doc))
    cfg = load_runtime_json(path)

    async def scenario() -> list[Any]:
        async with SwitchConnection(SwitchSpec(3, switch.address), pipeline) as sw:
            await apply_runtime_config(sw, cfg)
            await apply_runtime_config(sw, cfg)  # a restarted controller applies it again
            return await sw.read(P4TableEntry("IncIngress.forwarder.ipv4_lpm"))

    entries = run(scenario())
    assert len(entries) == 1
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    frame = bytes(
        Ether(dst="00:00:00:00:00:aa") / IP(src="10.0.1.1", dst="10.0.2.2") / UDP(sport=1, dport=2)
    )
    out = switch.send(1, frame)
    assert [port for port, _ in out] == [2]
    assert Ether(out[0][1]).dst == "08:00:00:00:02:22"


CPU_PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>
@controller_header("packet_in")
header packet_in_h { bit<9> ingress_port; bit<7> pad; }
@controller_header("packet_out")
header packet_out_h { bit<9> egress_port; bit<7> pad; }
header ethernet_h { bit<48> dst; bit<48> src; bit<16> etherType; }
struct headers_t { packet_in_h packet_in; packet_out_h packet_out; ethernet_h ethernet; }
struct learn_t { bit<48> src; bit<9> port; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { transition select(sm.ingress_port) { 255: parse_out; default: parse_eth; } }
    state parse_out { pkt.extract(hdr.packet_out); transition parse_eth; }
    state parse_eth { pkt.extract(hdr.ethernet); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            digest<learn_t>(1, { hdr.ethernet.src, sm.ingress_port });
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = sm.ingress_port;
            sm.egress_spec = 255;
        }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.packet_in); pkt.emit(hdr.ethernet); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_packet_in_out_and_digests_flow_over_the_stream(tmp_path: Path) -> None:
    src = tmp_path / "cpu.p4"
    src.write_text(CPU_PROGRAM)
    cpu_files = compile_pipeline(src, tmp_path)
    frame = bytes.fromhex("ffffffffffff0000000000aa0800") + b"payload!"
    with LocalSwitch(device_id=0, cpu_port=255) as sw:
        sent: list[tuple[int, bytes]] = []
        sw.server.packet_sink = lambda port, data: sent.append((port, data))

        async def scenario() -> tuple[Any, Any]:
            pipe = Pipeline.from_files(cpu_files.p4info, cpu_files.device_config)
            async with SwitchConnection(SwitchSpec(0, sw.address), pipe) as conn:
                await conn.subscribe_digest("learn_t")
                assert sw.send(3, frame) == []  # to the CPU port: a PacketIn
                pkt = await asyncio.wait_for(anext(conn.packets()), 10)
                digest = await asyncio.wait_for(anext(conn.digests("learn_t")), 10)
                await conn.packet_out(frame, egress_port=2)  # pad defaults to 0
                for _ in range(100):
                    if sent:
                        break
                    await asyncio.sleep(0.02)
                return pkt, digest

        pkt, digest = run(scenario())
    assert pkt.payload == frame and pkt.metadata["ingress_port"] == 3
    assert list(digest) == [{"src": 0xAA, "port": 3}]
    assert sent == [(2, frame)]


FAKE_CLI = """#!/bin/sh
# Stands in for BMv2's simple_switch_CLI: logs its arguments and commands, answers reads.
echo "$@" >> "{log}"
while read -r cmd name index value; do
    echo "$cmd $name $index $value" >> "{log}"
    if [ "$cmd" = register_read ]; then echo "RuntimeCmd: $name[$index]= 42"; fi
done
"""


def test_bmv2_registers_go_through_simple_switch_cli(
    switch: LocalSwitch, pipeline: Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "cli.log"
    cli = tmp_path / "bin" / "simple_switch_CLI"
    cli.parent.mkdir()
    cli.write_text(FAKE_CLI.format(log=log))
    cli.chmod(0o755)
    monkeypatch.setenv("PATH", f"{cli.parent}:{Path('/usr/bin')}:{Path('/bin')}")

    async def scenario() -> int:
        spec = SwitchSpec(3, switch.address, thrift_port=9091)
        async with SwitchConnection(spec, pipeline) as sw:
            await sw.fill_register("agg_job", range(4, 6), 0)
            return await sw.read_register("agg_count", 9)

    assert run(scenario()) == 42
    lines = log.read_text().splitlines()
    assert lines[0] == "--thrift-ip 127.0.0.1 --thrift-port 9091"
    assert lines[1:3] == [f"register_write IncIngress.aggregator.agg_job {i} 0" for i in (4, 5)]
    assert lines[-1] == "register_read IncIngress.aggregator.agg_count 9 "


def test_unknown_names_are_switch_errors_not_tracebacks(
    switch: LocalSwitch, pipeline: Pipeline
) -> None:
    async def scenario() -> list[str]:
        msgs = []
        async with SwitchConnection(SwitchSpec(3, switch.address), pipeline) as sw:
            for attempt in (
                sw.add_table_entry("no_such_table", {"x": 1}, "NoAction"),
                sw.read_register("no_such_register", 0),
                sw.packet_out(b"x", port=1),
            ):
                with pytest.raises(SwitchError) as info:
                    await attempt
                msgs.append(str(info.value))
        return msgs

    msgs = run(scenario())
    assert "no_such_table" in msgs[0]
    assert "no register 'no_such_register'" in msgs[1]
    assert "PacketOut" in msgs[2]


def test_a_pipeline_the_switch_rejects_is_a_readable_error(
    switch: LocalSwitch, pipeline: Pipeline
) -> None:
    broken = Pipeline(pipeline.p4info, b"this is not a P4 program")

    async def scenario() -> None:
        await SwitchConnection(SwitchSpec(3, switch.address), broken).connect()

    with pytest.raises(SwitchError) as info:
        run(scenario())
    assert info.value.code == GRPCStatusCode.INVALID_ARGUMENT
    assert "SetForwardingPipelineConfig failed" in str(info.value)
