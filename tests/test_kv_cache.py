"""The key-value cache of ``p4src/inc.p4`` on p4sim, programmed over P4Runtime by
``controller/systems/kv_cache.py``, with the real storage server logic
(``hosts/kv/store.py: KvServer.handle``) answering whatever the switch forwards to it.
Frames go through the switch in-process.

Job 1: clients on ports 1 and 2, server on port 3, cache entries [4, 8). Job 2: client on
port 4, server on port 5, entries [8, 12). Host 6 is nobody's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.jobs.job import Job, host_ip, host_mac
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import Pipeline, SwitchConnection, SwitchSpec
from controller.systems import kv_cache
from controller.systems.kv_cache import KvCache, KvCacheRequest
from hosts.kv.store import KvServer, _values
from topologies.local_switch import LocalSwitch, compile_pipeline
from wire.framing import decapsulate, encapsulate
from wire.header import (
    KV_ANSWERED_BY_SWITCH,
    KV_VALUE_WORDS,
    DropReason,
    Flag,
    Header,
    Op,
    pack,
    unpack,
)

INC_P4 = Path(__file__).resolve().parents[1] / "p4src" / "inc.p4"


def mac(p: int) -> bytes:
    return bytes.fromhex(host_mac(p).replace(":", ""))


def ip(p: int) -> bytes:
    return bytes(int(x) for x in host_ip(p).split("."))


class Bench:
    """The switch, the two jobs, a P4Runtime connection run on a private loop."""

    def __init__(self, local: LocalSwitch, files: object) -> None:
        self.local = local
        self.loop = asyncio.new_event_loop()
        pipeline = Pipeline.from_files(files.p4info, files.device_config)  # type: ignore[attr-defined]
        self.conn = SwitchConnection(SwitchSpec(0, local.address), pipeline)
        self.run(self.conn.connect())
        self.sw = local.server.switch
        self.kind = KvCache()
        self.jobs = {
            1: self.admit(1, (1, 2), 3, Region(4, 4)),
            2: self.admit(2, (4,), 5, Region(8, 4)),
        }
        self.servers = {1: KvServer(1, endpoint=None), 2: KvServer(2, endpoint=None)}  # type: ignore[arg-type]
        for p in range(1, 7):
            dst_mac, dst_ip = int.from_bytes(mac(p)), int.from_bytes(ip(p))
            self.sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (dst_ip, 32)}, "ipv4_forward",
                              {"dst_mac": dst_mac, "port": p})  # fmt: skip

    def run(self, coro: object) -> object:
        return self.loop.run_until_complete(coro)  # type: ignore[arg-type]

    def admit(self, job_id: int, ports: tuple[int, ...], server: int, region: Region) -> Job:
        req = KvCacheRequest(
            kind="kv_cache", workers=len(ports), worker_ports=list(ports), server=server,
            worker_ips=[host_ip(p) for p in ports], worker_macs=[host_mac(p) for p in ports],
            agg_ip=host_ip(server), agg_mac=host_mac(server), cache_size=region.size,
        )  # fmt: skip
        job = self.kind.make_job(req, job_id, 0, region, 0.0)
        self.run(self.kind.clear(self.conn, region))
        self.run(self.kind.install(self.conn, job))
        return job

    def request(
        self,
        job_id: int,
        port: int,
        op: Op,
        key: int,
        value: list[int] = (),
        psn: int = 1,
        worker: int | None = None,
    ) -> list[tuple[int, bytes]]:
        job = self.jobs[job_id]
        wid = (
            worker
            if worker is not None
            else next(w.worker_id for w in job.workers if w.port == port)
        )
        h = Header(op=op, job_id=job_id, worker_id=wid, psn=psn)
        server = job.params["server_port"]
        frame = encapsulate(
            pack(h, _values(key, value)), mac(port), mac(server), ip(port), ip(server)
        )
        return self.sw.send(port, frame)

    def reply_of(self, job_id: int, forwarded: bytes) -> bytes:
        """What the job's server answers to a request the switch forwarded to it."""
        payload = decapsulate(forwarded)
        assert payload is not None
        reply = self.servers[job_id].handle(bytes(payload))
        assert reply is not None
        server = self.jobs[job_id].params["server_port"]
        h, _ = unpack(reply)
        client = next(w.port for w in self.jobs[job_id].workers if w.worker_id == h.worker_id)
        return encapsulate(reply, mac(server), mac(client), ip(server), ip(client))

    def round_trip(
        self, job_id: int, port: int, op: Op, key: int, value: list[int] = (), psn: int = 1
    ):
        """A request and, if the switch forwarded it, the server's reply back through it."""
        out = self.request(job_id, port, op, key, value, psn)
        assert len(out) == 1, out
        out_port, frame = out[0]
        server = self.jobs[job_id].params["server_port"]
        if out_port == server:
            back = self.sw.send(server, self.reply_of(job_id, frame))
            assert [p for p, _ in back] == [port]
            frame = back[0][1]
        else:
            assert out_port == port
        h, v = unpack(bytes(decapsulate(frame)))  # type: ignore[arg-type]
        return h, [int(x) for x in v[1 : 1 + KV_VALUE_WORDS]]

    def drops(self) -> dict[DropReason, int]:
        return {r: self.sw.counter_read("inc_drops", int(r))[0] for r in DropReason}

    def registers(self) -> dict[str, list[int]]:
        return {
            e.name: list(self.sw.extern(e.name).values)
            for e in self.sw.externs()
            if e.kind == "register"
        }

    def close(self) -> None:
        self.run(self.conn.close())
        self.loop.close()


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    files = compile_pipeline(INC_P4, tmp_path_factory.mktemp("kv"))
    with LocalSwitch(device_id=0) as local:
        b = Bench(local, files)
        try:
            yield b
        finally:
            b.close()


def test_hot_key_is_cached_by_the_controller_and_answered_by_the_switch(bench: Bench) -> None:
    job = bench.jobs[1]
    h, _ = bench.round_trip(1, 1, Op.KV_WRITE, 7, [5] * 8, psn=1)
    assert h.bitmap == 1 and h.epoch != KV_ANSWERED_BY_SWITCH
    for psn in range(2, 6):  # misses: the server answers, the switch counts them
        h, value = bench.round_trip(1, 2, Op.KV_READ, 7, psn=psn)
        assert value == [5] * 8 and h.epoch != KV_ANSWERED_BY_SWITCH
    bench.round_trip(1, 2, Op.KV_READ, 9, psn=6)  # read once: not hot
    decided = bench.run(kv_cache.refresh(bench.conn, job))
    assert [k for k, _ in decided.insert] == [7]
    assert bench.run(kv_cache.cached_keys(bench.conn, job)) == {7: 4}
    regs = bench.registers()
    for name in kv_cache.COUNTERS:  # the refresh started counting afresh
        assert regs[name][4:8] == [0] * 4, name
    # The entry is empty until a reply to a request made after the entry existed fills it.
    h, value = bench.round_trip(1, 2, Op.KV_READ, 7, psn=7)
    assert h.epoch != KV_ANSWERED_BY_SWITCH and value == [5] * 8
    h, value = bench.round_trip(1, 1, Op.KV_READ, 7, psn=8)
    assert h.epoch == KV_ANSWERED_BY_SWITCH and value == [5] * 8 and h.bitmap == 1
    assert bench.servers[1].reads == 6  # the last read never reached the server


def test_a_write_in_flight_leaves_the_old_value_served_until_its_reply_passes(
    bench: Bench,
) -> None:
    w = bench.request(1, 1, Op.KV_WRITE, 7, [6] * 8, psn=20)
    assert [p for p, _ in w] == [3]  # to the server, stamped; the entry stays valid
    h, value = bench.round_trip(1, 2, Op.KV_READ, 7, psn=21)  # concurrent with the write
    assert h.epoch == KV_ANSWERED_BY_SWITCH and value == [5] * 8 and h.bitmap == 1
    back = bench.sw.send(3, bench.reply_of(1, w[0][1]))
    assert [p for p, _ in back] == [1]  # the write completes as its reply passes here ...
    h, value = bench.round_trip(1, 2, Op.KV_READ, 7, psn=22)
    assert h.epoch == KV_ANSWERED_BY_SWITCH and value == [6] * 8 and h.bitmap == 2  # ... and
    # put its value in the entry on the way: every later read gets it


def test_reordered_replies_never_bring_an_older_value_back(bench: Bench) -> None:
    w1 = bench.request(1, 1, Op.KV_WRITE, 7, [7] * 8, psn=30)
    r1 = bench.reply_of(1, w1[0][1])  # applied (version 3); this reply is delayed
    again = bench.request(1, 1, Op.KV_WRITE, 7, [7] * 8, psn=30)  # the client resends
    stored = bench.reply_of(1, again[0][1])  # the server's stored reply: no stamp
    assert [p for p, _ in bench.sw.send(3, stored)] == [1]  # the write completes; the entry
    read = bench.request(1, 2, Op.KV_READ, 7, psn=31)  # holds version 3, invalid: a miss
    assert [p for p, _ in read] == [3]
    read_reply = bench.reply_of(1, read[0][1])  # version 3, delayed
    w2 = bench.request(1, 2, Op.KV_WRITE, 7, [8] * 8, psn=32)
    r2 = bench.reply_of(1, w2[0][1])  # version 4
    bench.sw.send(3, r2)  # the newest reply first: the entry holds version 4
    h, value = bench.round_trip(1, 1, Op.KV_READ, 7, psn=33)
    assert h.epoch == KV_ANSWERED_BY_SWITCH and value == [8] * 8 and h.bitmap == 4
    bench.sw.send(3, r1)  # older versions, late: ignored
    bench.sw.send(3, read_reply)
    h, value = bench.round_trip(1, 1, Op.KV_READ, 7, psn=34)
    assert h.epoch == KV_ANSWERED_BY_SWITCH and value == [8] * 8 and h.bitmap == 4


def test_reply_stamped_before_the_key_was_cached_cannot_fill_the_entry(bench: Bench) -> None:
    job = bench.jobs[1]
    # Key 11 is not cached: a read goes to the server unstamped, and is answered late.
    early = bench.request(1, 1, Op.KV_READ, 11, psn=40)
    early_reply = bench.reply_of(1, early[0][1])
    bench.run(kv_cache.cache_keys(bench.conn, job, [11]))
    bench.sw.send(3, early_reply)  # no stamp of the entry's generation: fills nothing
    h, value = bench.round_trip(1, 1, Op.KV_READ, 11, psn=41)
    assert h.epoch != KV_ANSWERED_BY_SWITCH  # still empty: the server answered
    h, value = bench.round_trip(1, 1, Op.KV_READ, 11, psn=42)
    assert h.epoch == KV_ANSWERED_BY_SWITCH and h.bitmap == 0  # filled by the stamped reply


def test_other_tenants_packets_change_nothing(bench: Bench) -> None:
    before, drops = bench.registers(), bench.drops()
    # job 2's client speaks for job 1 (its port is not job 1's), and forges a server reply
    bench.request(1, 4, Op.KV_READ, 7, psn=50, worker=0)
    forged = pack(
        Header(op=Op.KV_WRITE, flags=Flag.RESULT, job_id=1, psn=1, agg_idx=1, bitmap=99),
        _values(7, [66] * 8),
    )
    bench.sw.send(4, encapsulate(forged, mac(4), mac(1), ip(4), ip(1)))
    bench.request(2, 4, Op.KV_READ, 7, psn=51)  # job 2's own read: allowed, touches job 2 only
    after = bench.registers()
    changed = {
        n: [i for i, (a, b) in enumerate(zip(after[n], before[n], strict=True)) if a != b]
        for n in after
    }
    touched = {i for cells in changed.values() for i in cells}
    assert touched <= set(range(8, 12)), changed  # only job 2's range (its sketch)
    now = bench.drops()
    assert now[DropReason.UNKNOWN_WORKER] - drops[DropReason.UNKNOWN_WORKER] == 2
    h, value = bench.round_trip(1, 1, Op.KV_READ, 7, psn=52)
    assert value == [8] * 8 and h.bitmap == 4


def test_plan_prefers_reads_and_keeps_cached_keys_on_ties() -> None:
    region = Region(0, 2)
    got = kv_cache.plan({1: 0, 2: 1}, [3, 0], [(5, 3), (6, 1)], region, min_reads=2)
    assert got.evict == (2,) and got.insert == ((5, 1),)
    assert kv_cache.plan({1: 0}, [0, 0], [(5, 1)], region, min_reads=2).insert == ()
