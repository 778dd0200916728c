"""The consensus sequencer of ``p4src/inc.p4`` on p4sim, programmed by
``controller/systems/consensus.py`` over P4Runtime; frames go through the switch in-process.

Job 1: client 0 on port 1, replicas on ports 2, 3, 4; port 5 belongs to nobody.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.jobs.job import host_ip, host_mac
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import Pipeline, SwitchConnection, SwitchSpec
from controller.systems import consensus
from controller.systems.consensus import Consensus, ConsensusRequest
from topologies.local_switch import LocalSwitch, compile_pipeline
from wire.framing import decapsulate, encapsulate
from wire.header import SLOTS, DropReason, Header, Op, pack, unpack
from wire.serial import newer

INC_P4 = Path(__file__).resolve().parents[1] / "p4src" / "inc.p4"
REPLICAS = (2, 3, 4)


def mac(p: int) -> bytes:
    return bytes.fromhex(host_mac(p).replace(":", ""))


@pytest.fixture(scope="module")
def sequencer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    files = compile_pipeline(INC_P4, tmp_path_factory.mktemp("cons"))
    kind = Consensus()
    req = ConsensusRequest(
        kind="consensus", workers=1, worker_ports=[1], replica_ports=REPLICAS,
        worker_ips=[host_ip(1)], worker_macs=[host_mac(1)],
    )  # fmt: skip
    job = kind.make_job(req, 1, 0, Region(5, 1), 0.0)
    loop = asyncio.new_event_loop()
    with LocalSwitch(device_id=0) as local:
        pipeline = Pipeline.from_files(files.p4info, files.device_config)
        conn = SwitchConnection(SwitchSpec(0, local.address), pipeline)
        loop.run_until_complete(conn.connect())
        loop.run_until_complete(kind.clear(conn, job.region))
        loop.run_until_complete(kind.install(conn, job))
        try:
            yield local.server.switch, conn, loop, kind, job
        finally:
            loop.run_until_complete(conn.close())
            loop.close()


def request(psn: int, port: int = 1) -> bytes:
    h = Header(op=Op.CONSENSUS, job_id=1, worker_id=0, psn=psn)
    group = socket.inet_aton(consensus.group_address(1))
    src = socket.inet_aton(host_ip(port))
    return encapsulate(pack(h, np.full(SLOTS, psn)), mac(port), mac(REPLICAS[0]), src, group)


def test_requests_get_consecutive_numbers_and_reach_every_replica(sequencer) -> None:
    sw, conn, loop, kind, job = sequencer
    entry = loop.run_until_complete(conn.read(consensus.group_key(1)))[0]
    session = int(entry.action.args["session_number"])
    for seq, psn in enumerate((7, 8, 7), start=1):
        out = sw.send(1, request(psn))
        assert sorted(p for p, _ in out) == list(REPLICAS)
        for _, frame in out:
            h, v = unpack(bytes(decapsulate(frame)))  # type: ignore[arg-type]
            assert (h.agg_idx, h.epoch, h.psn) == (seq, session, psn)
            assert v.tolist() == [psn] * SLOTS
    stats = loop.run_until_complete(kind.live_stats(conn, job))
    assert [(f.name, f.value) for f in stats.figures] == [("sequenced", 3)]


def test_a_request_from_a_foreign_port_is_dropped_and_takes_no_number(sequencer) -> None:
    sw, conn, loop, kind, job = sequencer
    before = sw.counter_read("inc_drops", int(DropReason.UNKNOWN_WORKER))[0]
    assert sw.send(5, request(9, port=5)) == []
    assert sw.counter_read("inc_drops", int(DropReason.UNKNOWN_WORKER))[0] == before + 1
    seq = loop.run_until_complete(conn.read_register(consensus.CONS_SEQ, job.region.offset))
    out = sw.send(1, request(10))
    assert {unpack(bytes(decapsulate(f)))[0].agg_idx for _, f in out} == {seq + 1}  # type: ignore[arg-type]


def test_a_reinstall_gives_a_newer_session(sequencer) -> None:
    sw, conn, loop, kind, job = sequencer
    old = int(
        loop.run_until_complete(conn.read(consensus.group_key(1)))[0].action.args["session_number"]
    )
    loop.run_until_complete(asyncio.sleep(0.002))
    loop.run_until_complete(kind.install(conn, job, idempotent=True))
    new = int(
        loop.run_until_complete(conn.read(consensus.group_key(1)))[0].action.args["session_number"]
    )
    assert 0 < (new - old) % 2**32 < 2**31


def test_sessions_stay_newer_across_controller_restarts_whatever_the_clock(
    sequencer, tmp_path, monkeypatch
) -> None:
    """Each start of the controller takes a new run from its store, and a session is a
    stamp of it: a re-install after a restart gets a newer session without the clock (which
    may step back: NTP, another machine)."""
    from controller.jobs.stamps import COUNT_BITS, Stamps
    from controller.jobs.store import JobStore

    sw, conn, loop, kind, job = sequencer
    store, stamps = JobStore(tmp_path / "c.db"), Stamps()
    monkeypatch.setattr(consensus, "STAMPS", stamps)

    def session() -> int:
        loop.run_until_complete(kind.install(conn, job, idempotent=True))
        entry = loop.run_until_complete(conn.read(consensus.group_key(1)))[0]
        return int(entry.action.args["session_number"])

    sessions = []
    for _ in range(3):  # three starts of the controller on one store
        stamps.attach(store.next_run)
        sessions += [session(), session()]
    assert [s >> COUNT_BITS for s in sessions] == [1, 1, 2, 2, 3, 3], sessions
    assert all(newer(b, a) for a, b in itertools.pairwise(sessions)), sessions
    store.close()
