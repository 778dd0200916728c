"""ATP's shared pool in p4src/atp.p4, packet by packet on an in-process p4sim switch.

Jobs are admitted by the controller's own code (``controller.systems.atp.Atp.install`` over
P4Runtime): ATP job 1 (workers on ports 1..3), ATP job 2 (workers on ports 4, 5) share
the pool range [0, 4); NetReduce job 3 (workers on ports 7, 8) has aggregators 8..11 of
its own pool. Every job's aggregation address (PS) is the host on port 6. The PS side
(hosts/atp/ps.py) is driven with what the switch emits, so the sums are checked end to end.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.jobs.job import Job, host_ip, host_mac
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import Pipeline, SwitchConnection, SwitchSpec
from controller.systems.atp import Atp, AtpRequest, pool_stats
from controller.systems.netreduce import NetReduce, NetReduceRequest
from hosts.atp.ps import AtpAggregator, AtpJobSpec
from p4sim.switch import Switch
from topologies.local_switch import LocalSwitch, compile_pipeline
from wire.framing import encapsulate
from wire.header import (
    SLOTS,
    AtpEvent,
    DropReason,
    Flag,
    Header,
    aggregator_address,
    atp_index,
    pack,
    unpack,
)

INC_P4 = Path(__file__).resolve().parents[1] / "p4src" / "inc.p4"
PS_PORT = 6
POOL = Region(0, 4)
WIDE = Region(0, 32)
JOB1, JOB2, NR = 1, 2, 3
PORTS = {JOB1: (1, 2, 3), JOB2: (4, 5), NR: (7, 8)}


def mac(port: int) -> bytes:
    return bytes.fromhex(host_mac(port).replace(":", ""))


def ip(port: int) -> bytes:
    return socket.inet_aton(host_ip(port))


def hosts(ports: tuple[int, ...]) -> dict[str, object]:
    ps = list(ports)
    return {
        "workers": len(ps),
        "worker_ports": ps,
        "worker_ips": [host_ip(p) for p in ps],
        "worker_macs": [host_mac(p) for p in ps],
        "agg_ip": host_ip(PS_PORT),
        "agg_mac": host_mac(PS_PORT),
    }


class Net:
    """The switch, its jobs, and helpers to send a worker's packet or the PS's result."""

    def __init__(self, sw: Switch, conn_address: str, jobs: dict[int, Job]) -> None:
        self.sw, self.address, self.jobs = sw, conn_address, jobs

    def contribution(
        self, job: int, worker: int, psn: int, values: np.ndarray, **fields: int
    ) -> list[tuple[int, bytes]]:
        j = self.jobs[job]
        if j.kind == "atp":
            idx, ver = atp_index(job, psn, j.region.offset, j.region.size), 0
        else:
            idx, ver = aggregator_address(psn, j.region.offset, j.region.size)
        fields = {"agg_idx": idx, "ver": ver} | fields
        h = Header(job_id=job, worker_id=worker, psn=psn, **fields)
        port = PORTS[job][worker]
        frame = encapsulate(pack(h, values), mac(port), mac(PS_PORT), ip(port), ip(PS_PORT))
        return self.sw.send(port, frame)

    def from_ps(self, payload: bytes, port: int = PS_PORT) -> list[tuple[int, bytes]]:
        frame = encapsulate(payload, mac(PS_PORT), mac(1), ip(PS_PORT), ip(1))
        return self.sw.send(port, frame)

    def drops(self) -> dict[str, int]:
        return {r.name: self.sw.counter_read("inc_drops", int(r))[0] for r in DropReason}

    def events(self) -> dict[str, int]:
        return {e.name: self.sw.counter_read("atp_events", int(e))[0] for e in AtpEvent}


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    yield from started(tmp_path, POOL, window=8)


@pytest.fixture
def wide_net(tmp_path: Path) -> Iterator[Net]:
    """The same jobs, their ATP range [0, 32) and window 2: each may hold 4 aggregators."""
    yield from started(tmp_path, WIDE, window=2)


def started(tmp_path: Path, pool: Region, window: int) -> Iterator[Net]:
    files = compile_pipeline(INC_P4, tmp_path)
    atp, nr = Atp(), NetReduce()

    def atp_job(j: int) -> Job:
        req = AtpRequest(window=window, pool_size=pool.size, ps_port=PS_PORT, **hosts(PORTS[j]))  # type: ignore[arg-type]
        return atp.make_job(req, j, 0, pool, 0)

    nr_req = NetReduceRequest(window=4, **hosts(PORTS[NR]))  # type: ignore[arg-type]
    jobs = {
        JOB1: atp_job(JOB1),
        JOB2: atp_job(JOB2),
        NR: nr.make_job(nr_req, NR, 0, Region(8, 4), 0),
    }

    async def install(address: str) -> None:
        pipeline = Pipeline.from_files(files.p4info, files.device_config)
        async with SwitchConnection(SwitchSpec(0, address), pipeline) as conn:
            for j in jobs.values():
                await (atp if j.kind == "atp" else nr).install(conn, j)

    with LocalSwitch(device_id=0) as local:
        asyncio.run(install(local.address))
        sw = local.server.switch
        for p in range(1, 9):
            key = {"hdr.ipv4.dstAddr": (int.from_bytes(ip(p)), 32)}
            sw.table_add(
                "ipv4_lpm", key, "ipv4_forward", {"dst_mac": int.from_bytes(mac(p)), "port": p}
            )
        yield Net(sw, local.address, jobs)


def vals(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-(2**20), 2**20, SLOTS).astype(np.int32)


def inc(out: list[tuple[int, bytes]]) -> list[tuple[int, Header, np.ndarray]]:
    """(port, INC header, values) of every packet out (UDP payload after 42 bytes)."""
    return [(p, *unpack(data[42:])) for p, data in out]


def settle(net: Net, ps: AtpAggregator, out: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The packets of ``out`` that go to the PS, through ``ps``; its answers (results,
    ACKs) back into the switch. What the switch sends on."""
    back = []
    for port, h, v in inc(out):
        if port == PS_PORT:
            for payload, _ in ps.process(h, v):
                back += net.from_ps(payload)
    return back


def ps_for(net: Net) -> AtpAggregator:
    return AtpAggregator({JOB1: AtpJobSpec(3, host_ip(1)), JOB2: AtpJobSpec(2, host_ip(4))})


def psn_pair_colliding(offset: int = 0, size: int = 4) -> tuple[int, int]:
    """A psn of job 1 and one of job 2 that hash to the same aggregator."""
    for p in range(64):
        for q in range(64):
            if atp_index(JOB1, p, offset, size) == atp_index(JOB2, q, offset, size):
                return p, q
    raise AssertionError("no colliding pair")


def test_switch_hash_is_the_python_hash_and_a_wrong_index_is_dropped(net: Net) -> None:
    j = net.jobs[JOB1]
    right = atp_index(JOB1, 5, j.region.offset, j.region.size)
    wrong = (right + 1) % j.region.size
    assert net.contribution(JOB1, 0, 5, vals(1), agg_idx=wrong) == []
    assert net.drops()["OUT_OF_REGION"] == 1
    assert net.contribution(JOB1, 0, 5, vals(1)) == []  # absorbed: the switch agrees
    assert net.events()["CLAIMED"] == 1 and net.drops()["OUT_OF_REGION"] == 1


def test_completed_aggregate_goes_to_every_worker_and_the_ps_whose_ack_releases_it(
    net: Net,
) -> None:
    """The switch multicasts a completed aggregate as the result: to each worker from the
    aggregation address (the PS's), and to the PS, which remembers it and acknowledges;
    the ACK releases the aggregator and goes no further."""
    rows = [vals(10 + w) for w in range(3)]
    total = rows[0] + rows[1] + rows[2]
    assert net.contribution(JOB1, 0, 7, rows[0]) == []
    assert net.contribution(JOB1, 1, 7, rows[1]) == []
    out = net.contribution(JOB1, 2, 7, rows[2])
    res = inc(out)
    assert sorted((p, h.bitmap, h.flags) for p, h, _ in res) == [
        (p, 0b111, Flag.RESULT) for p in (1, 2, 3, PS_PORT)
    ]
    assert all(np.array_equal(v, total) for _, _, v in res)
    workers = [(p, h, data) for (p, h, _), (_, data) in zip(res, out, strict=True) if p != PS_PORT]
    assert sorted(h.worker_id for _, h, _ in workers) == [0, 1, 2]
    for p, _, data in workers:  # IPv4 source and destination (bytes 26..33)
        assert (data[26:30], data[30:34]) == (ip(PS_PORT), ip(p))
    (_, to_ps), = [(p, d) for p, d in out if p == PS_PORT]  # fmt: skip
    assert to_ps[26:30] == ip(3)  # the PS's copy as it came: from the last worker
    ps = ps_for(net)
    assert net.events()["RELEASED"] == 0 and held_by(net, JOB1) == 1
    assert settle(net, ps, out) == []  # the ACK ends at the switch
    assert ps.stats.multicast == 1 and ps.stats.results == 1
    assert net.events()["RELEASED"] == 1 and net.events()["COMPLETED"] == 1
    assert held_by(net, JOB1) == 0
    # A worker that lost the result gets it again from the PS.
    (_, h, v), = inc(net.contribution(JOB1, 1, 7, rows[1], flags=Flag.RETX))  # fmt: skip
    (payload, _), = ps.process(h, v)  # fmt: skip
    assert sorted(p for p, _, _ in inc(net.from_ps(payload))) == [1, 2, 3]
    assert np.array_equal(unpack(payload)[1], total)
    # Released: the same use's late copy is stale; a new psn claims the aggregator.
    assert net.contribution(JOB1, 0, 7, rows[0]) == []
    assert net.drops()["STALE"] == 1


def test_collision_falls_back_to_the_ps_which_completes_the_sum_exactly(net: Net) -> None:
    p, q = psn_pair_colliding()
    a = [vals(20 + w) for w in range(3)]
    b = [vals(30 + w) for w in range(2)]
    ps = ps_for(net)
    results = []
    assert net.contribution(JOB1, 0, p, a[0]) == []  # job 1 holds the aggregator
    for w in range(2):  # job 2's packets collide: to the PS, unaggregated
        out = inc(net.contribution(JOB2, w, q, b[w]))
        assert [(port, h.flags, h.bitmap) for port, h, _ in out] == [
            (PS_PORT, Flag.COLLISION | Flag.FALLBACK, 1 << w)
        ]
        results += ps.process(out[0][1], out[0][2])
    assert net.events()["COLLISION"] == 2
    (payload, _), = results  # fmt: skip
    res = inc(net.from_ps(payload))
    assert sorted(port for port, _, _ in res) == [4, 5]
    assert all(np.array_equal(v, b[0] + b[1]) for _, _, v in res)
    assert net.events()["RELEASE_MISSED"] == 1  # job 1 still holds it: nothing released
    # Job 1 completes in the switch meanwhile.
    net.contribution(JOB1, 1, p, a[1])
    out = inc(net.contribution(JOB1, 2, p, a[2]))
    assert np.array_equal(out[0][2], a[0] + a[1] + a[2])


def test_retransmission_goes_to_the_ps_and_the_ps_merges_it_with_the_aggregate(net: Net) -> None:
    rows = [vals(40 + w) for w in range(3)]
    ps = ps_for(net)
    net.contribution(JOB1, 0, 9, rows[0])
    out = inc(net.contribution(JOB1, 0, 9, rows[0], flags=Flag.RETX))
    assert [(p, h.flags & Flag.FALLBACK, h.bitmap) for p, h, _ in out] == [(PS_PORT, 16, 1)]
    assert ps.process(out[0][1], out[0][2]) == []
    net.contribution(JOB1, 1, 9, rows[1])
    out = net.contribution(JOB1, 2, 9, rows[2])  # the full aggregate contains worker 0
    assert settle(net, ps, out) == []  # its copy finishes the psn at the PS: ACK
    assert ps.stats.results == 1 and ps.stats.aggregates == 1 and held_by(net, JOB1) == 0


def test_a_lost_copy_to_the_ps_is_recovered_from_the_switch_by_a_retransmission(
    net: Net,
) -> None:
    """The PS's copy of a completed aggregate is lost (no ACK: the aggregator stays held),
    and so is worker 1's result. Its retransmission finds the complete use: the switch
    sends the sum it holds to the PS, which answers with the result for every worker."""
    rows = [vals(50 + w) for w in range(3)]
    for w in range(3):
        net.contribution(JOB1, w, 12, rows[w])  # completed: the copies are all lost
    ps = ps_for(net)
    out = inc(net.contribution(JOB1, 1, 12, rows[1], flags=Flag.RETX))
    assert [(p, h.flags, h.bitmap) for p, h, _ in out] == [(PS_PORT, Flag.RETX, 0b111)]
    (payload, _), = ps.process(out[0][1], out[0][2])  # fmt: skip
    res = inc(net.from_ps(payload))
    assert sorted(p for p, _, _ in res) == [1, 2, 3]
    assert all(np.array_equal(v, rows[0] + rows[1] + rows[2]) for _, _, v in res)
    assert held_by(net, JOB1) == 0


def test_a_complete_use_reclaimed_before_its_ack_takes_its_sum_to_the_ps(net: Net) -> None:
    """Psn 13 completes but its PS's copy is lost; psn 13 + 4 (the reclaim gap: the range)
    of worker 0 reclaims the aggregator. The packet leaves its own values there and takes
    psn 13's sum to the PS, so a worker that lost 13's result still gets it."""
    rows = [vals(60 + w) for w in range(3)]
    for w in range(3):
        net.contribution(JOB1, w, 13, rows[w])
    new = vals(64)
    out = inc(net.contribution(JOB1, 0, 17, new))
    assert [(p, h.flags, h.bitmap, h.psn) for p, h, _ in out] == [(PS_PORT, Flag.RESULT, 0b111, 13)]
    assert np.array_equal(out[0][2], rows[0] + rows[1] + rows[2])
    ps = ps_for(net)
    (ack, _), = ps.process(out[0][1], out[0][2])  # fmt: skip
    assert net.from_ps(ack) == [] and net.events()["RELEASE_MISSED"] == 1
    (_, h, v), = inc(net.contribution(JOB1, 2, 13, rows[2], flags=Flag.RETX))  # fmt: skip
    (payload, _), = ps.process(h, v)  # fmt: skip
    assert np.array_equal(unpack(payload)[1], rows[0] + rows[1] + rows[2])
    # Psn 17 goes on in the switch from worker 0's values.
    net.contribution(JOB1, 1, 17, vals(65))
    res = inc(net.contribution(JOB1, 2, 17, vals(66)))
    assert np.array_equal(res[0][2], new + vals(65) + vals(66))


def test_sum_that_would_overflow_int32_falls_back_and_the_ps_sums_in_64_bits(net: Net) -> None:
    big = np.full(SLOTS, 2**31 - 10, dtype=np.int32)
    neg = np.full(SLOTS, -(2**31) + 5, dtype=np.int32)
    ps = ps_for(net)
    pieces = []
    assert net.contribution(JOB1, 0, 11, big) == []
    out = inc(net.contribution(JOB1, 1, 11, big))  # big + big overflows: not added
    assert [(p, h.flags, h.bitmap) for p, h, _ in out] == [(PS_PORT, Flag.FALLBACK, 0b10)]
    assert np.array_equal(out[0][2], big)  # the packet's own values, not a wrapped sum
    assert net.events()["OVERFLOW"] == 1
    pieces += out
    # Worker 2 adds fine to worker 0 but the aggregate never completes (worker 1 is missing):
    # everyone retransmits, and the PS completes from the retransmissions.
    assert net.contribution(JOB1, 2, 11, neg) == []
    for w, v in ((0, big), (2, neg)):
        pieces += inc(net.contribution(JOB1, w, 11, v, flags=Flag.RETX))
    results = [r for _, h, v in pieces for r in ps.process(h, v)]
    (payload, _), = results  # fmt: skip
    want = (big.astype(np.int64) * 2 + neg).astype(np.int32)
    assert np.array_equal(unpack(payload)[1], want)
    inc(net.from_ps(payload))
    assert net.events()["RELEASED"] == 1


def test_results_and_acks_from_a_port_not_towards_the_ps_are_dropped_and_release_nothing(
    net: Net,
) -> None:
    rows = [vals(50 + w) for w in range(3)]
    for w in range(3):
        out = inc(net.contribution(JOB1, w, 13, rows[w]))
    h, v = out[0][1], out[0][2]
    forged = pack(Header(job_id=JOB1, psn=13, agg_idx=h.agg_idx, flags=Flag.RESULT), v * 0)
    ack = pack(Header(job_id=JOB1, psn=13, agg_idx=h.agg_idx, flags=Flag.ACK), v * 0)
    for port in (1, 4, 7):  # a worker of the job, of another job, a NetReduce worker
        assert net.from_ps(forged, port=port) == []
        assert net.from_ps(ack, port=port) == []
    assert net.drops()["FORGED_RESULT"] == 6
    assert net.events()["RELEASED"] == 0
    # Job 2's PS side cannot release job 1's aggregator with its own job id either.
    other = pack(Header(job_id=JOB2, psn=13, agg_idx=h.agg_idx, flags=Flag.ACK), v * 0)
    assert net.from_ps(other) == []
    assert net.events()["RELEASED"] == 0 and net.events()["RELEASE_MISSED"] == 1
    # The real ACK from the PS port releases it.
    assert net.from_ps(ack) == []
    assert net.events()["RELEASED"] == 1


def test_netreduce_job_beside_atp_jobs_aggregates_in_its_own_pool(net: Net) -> None:
    rows = [vals(60), vals(61)]
    for psn in range(3):
        net.contribution(JOB1, 0, psn, rows[0])  # ATP traffic in between
        assert net.contribution(NR, 0, psn, rows[0]) == []
        out = inc(net.contribution(NR, 1, psn, rows[1]))
        assert sorted(p for p, _, _ in out) == [7, 8]
        assert all(np.array_equal(v, rows[0] + rows[1]) for _, _, v in out)
    assert sum(net.drops().values()) == 0


def test_uninstall_frees_the_jobs_aggregators_and_pool_stats_count_them(net: Net) -> None:
    for psn in range(4):
        net.contribution(JOB1, 0, psn, vals(psn))

    async def run() -> tuple[dict[str, int], dict[str, int]]:
        async with SwitchConnection(SwitchSpec(0, net.address), None) as conn:
            before = await pool_stats(conn, POOL)
            await Atp().uninstall(conn, net.jobs[JOB1])
            return before, await pool_stats(conn, POOL)

    before, after = asyncio.run(run())
    held = len({atp_index(JOB1, p, 0, 4) for p in range(4)})
    assert before["held"] == held and before["claimed"] >= 1
    assert after["held"] == 0


def test_a_window_of_psns_the_size_of_the_range_aggregates_in_the_switch_without_collisions(
    net: Net,
) -> None:
    """Workers send a whole window (the range's size, 4) of psns each in turn, as the
    worker does, starting anywhere: consecutive psns take consecutive aggregators, so
    the job never collides with itself and every psn is summed in the switch."""
    for first in (0, 4, 2**32 - 2):  # the psns wrap at 2**32 too
        ps, results = ps_for(net), {}
        psns = [(first + i) % 2**32 for i in range(POOL.size)]
        assert len({atp_index(JOB1, p, POOL.offset, POOL.size) for p in psns}) == POOL.size
        for w in range(3):
            for psn in psns:
                out = net.contribution(JOB1, w, psn, vals(100 * w + psn % 97))
                for _, h, v in inc(out):
                    assert not h.flags & Flag.FALLBACK, net.events()
                    results[psn] = v
                settle(net, ps, out)  # the PS's ACK releases the aggregator
        assert sorted(results) == sorted(psns), (net.events(), net.drops())
        for psn, got in results.items():
            assert np.array_equal(got, sum(vals(100 * w + psn % 97) for w in range(3)))
    ev = net.events()
    assert ev["COMPLETED"] == 3 * POOL.size and ev["COLLISION"] == 0 == ev["FOLLOWED"], ev


def test_a_psn_that_collided_for_one_worker_goes_to_the_ps_for_every_worker(net: Net) -> None:
    """Worker 0's packet of job 2's psn q collides (job 1 holds the aggregator); job 1's
    result releases it before worker 1's packet of q arrives. That packet finds a free
    aggregator but follows worker 0's to the PS instead of claiming it, where nobody else
    would join it: the PS completes q at once, and nothing is left held."""
    p, q = psn_pair_colliding()
    a = [vals(70 + w) for w in range(3)]
    b = [vals(80 + w) for w in range(2)]
    ps, results = ps_for(net), []
    assert net.contribution(JOB1, 0, p, a[0]) == []  # job 1 claims the aggregator
    out = inc(net.contribution(JOB2, 0, q, b[0]))  # collides: to the PS
    assert [h.flags for _, h, _ in out] == [Flag.COLLISION | Flag.FALLBACK]
    results += ps.process(out[0][1], out[0][2])
    net.contribution(JOB1, 1, p, a[1])
    settle(net, ps_for(net), net.contribution(JOB1, 2, p, a[2]))  # job 1's ACK releases it
    assert held_by(net, JOB1) == 0
    out = inc(net.contribution(JOB2, 1, q, b[1]))  # free now, but q is at the PS
    assert [(port, h.flags, h.bitmap) for port, h, _ in out] == [
        (PS_PORT, Flag.COLLISION | Flag.FALLBACK, 0b10)
    ]
    results += ps.process(out[0][1], out[0][2])
    (payload, _), = results  # fmt: skip
    assert np.array_equal(unpack(payload)[1], b[0] + b[1])
    ev = net.events()
    assert ev["FOLLOWED"] == 1 and ev["CLAIMED"] == 1 and held_by(net, JOB2) == 0, ev
    marks = net.sw.extern("IncIngress.atp.atp_marked").values
    assert sum(1 for m in marks if m) == 1  # q's mark, in job 2's cells

    async def uninstall() -> None:
        async with SwitchConnection(SwitchSpec(0, net.address), None) as conn:
            await Atp().uninstall(conn, net.jobs[JOB2])

    asyncio.run(uninstall())  # the id's next owner finds no mark of it
    assert not any(net.sw.extern("IncIngress.atp.atp_marked").values)


def test_ipv4_fragment_carrying_an_inc_header_is_dropped_and_counted(net: Net) -> None:
    """A first fragment (MF set, offset 0) of a worker packet, ATP's or NetReduce's, is
    never aggregated, nor routed past admission to the PS (whose kernel would reassemble
    it): dropped and counted as UNPARSED_IPV4."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    from wire.header import INC_UDP_PORT

    j = net.jobs[JOB1]
    for job, worker, idx in ((JOB1, 0, atp_index(JOB1, 1, j.region.offset, j.region.size)),
                             (NR, 0, 8)):  # fmt: skip
        h = Header(job_id=job, worker_id=worker, psn=1, agg_idx=idx)
        port = PORTS[job][worker]
        frag = (
            Ether(src=host_mac(port), dst=host_mac(PS_PORT))
            / IP(src=host_ip(port), dst=host_ip(PS_PORT), flags="MF")
            / UDP(sport=INC_UDP_PORT, dport=INC_UDP_PORT, chksum=0)
            / Raw(pack(h, vals(1)))
        )
        assert net.sw.send(port, bytes(frag)) == []
    assert net.events()["CLAIMED"] == 0
    assert net.drops() == {r.name: 2 * (r == DropReason.UNPARSED_IPV4) for r in DropReason}


def held_by(net: Net, job: int) -> int:
    """Aggregators of the pool that hold a use of ``job`` (count != 0)."""
    tags = net.sw.extern("IncIngress.atp.atp_job").values
    counts = net.sw.extern("IncIngress.atp.atp_count").values
    return sum(1 for t, c in zip(tags, counts, strict=True) if t == job and c != 0)


def test_a_job_holds_at_most_its_cap_of_the_shared_pool_the_rest_goes_to_its_ps(
    wide_net: Net,
) -> None:
    """One worker of job 1 (three workers) sends 64 psns that never complete: job 1 holds no
    more than its cap (two windows: 4) of the 32 aggregators; every further first packet
    that finds a free aggregator goes to the PS unaggregated, counted as CAPPED, and the
    PS's results release the held ones, so the job's count returns to 0."""
    net, cap = wide_net, 4
    to_ps = []
    for psn in range(64):
        for port, h, _ in inc(net.contribution(JOB1, 0, psn, vals(psn))):
            assert port == PS_PORT and h.flags & Flag.FALLBACK and h.bitmap == 0b001
            to_ps.append(psn)
        assert held_by(net, JOB1) <= cap
    assert held_by(net, JOB1) == cap
    assert net.sw.extern("IncIngress.atp.atp_held").values[JOB1] == cap
    ev = net.events()
    assert ev["CLAIMED"] - ev["RECLAIMED"] == cap and ev["CAPPED"] >= 1, ev  # free ones
    assert ev["CAPPED"] + ev["COLLISION"] + ev["CLAIMED"] == 64, ev
    # Job 2 still finds free aggregators: a psn of its own completes in the switch.
    completed = [h for w in range(2) for _, h, _ in inc(net.contribution(JOB2, w, 5, vals(5)))]
    assert [h.bitmap for h in completed] == [0b11] * 3  # its two workers and its PS
    assert not any(h.flags & Flag.FALLBACK for h in completed)
    # The PS's results of job 1's held psns release them, and the count with them.
    for psn in range(64):
        idx = atp_index(JOB1, psn, WIDE.offset, WIDE.size)
        h = Header(job_id=JOB1, psn=psn, agg_idx=idx, flags=Flag.RESULT, bitmap=0b111)
        net.from_ps(pack(h, vals(psn)))
    assert held_by(net, JOB1) == 0
    assert net.sw.extern("IncIngress.atp.atp_held").values[JOB1] == 0


def test_another_jobs_packet_takes_over_a_complete_use_and_carries_its_sum_to_its_ps(
    net: Net,
) -> None:
    """Job 1's psn p completes (its members have the result) but the PS's ACK is not back.
    Job 2's packet of psn q, hashed to the same aggregator, does not collide: it claims the
    aggregator for (2, q), leaving its values there, and takes job 1's sum to job 1's PS
    (routed by its address) as a RESULT of (1, p), which the PS remembers. Each job's
    occupancy follows."""
    p, q = psn_pair_colliding()
    a = [vals(90 + w) for w in range(3)]
    b = [vals(95 + w) for w in range(2)]
    for w in range(3):
        net.contribution(JOB1, w, p, a[w])  # complete: the copies (and the ACK) are lost
    assert held_by(net, JOB1) == 1
    out = inc(net.contribution(JOB2, 0, q, b[0]))
    assert [(port, h.job_id, h.psn, h.flags, h.bitmap) for port, h, _ in out] == [
        (PS_PORT, JOB1, p, Flag.RESULT, 0b111)
    ]
    assert np.array_equal(out[0][2], a[0] + a[1] + a[2])
    ev = net.events()
    assert ev["LENT"] == 1 and ev["COLLISION"] == 0, ev
    assert held_by(net, JOB1) == 0 and held_by(net, JOB2) == 1
    held = net.sw.extern("IncIngress.atp.atp_held").values
    assert (held[JOB1], held[JOB2]) == (0, 1)
    ps = ps_for(net)
    (ack, _), = ps.process(out[0][1], out[0][2])  # fmt: skip
    assert net.from_ps(ack) == [] and net.events()["RELEASE_MISSED"] == 1
    # Job 2's psn completes from the values its first packet left.
    res = inc(net.contribution(JOB2, 1, q, b[1]))
    assert sorted(port for port, _, _ in res) == [4, 5, PS_PORT]
    assert all(np.array_equal(v, b[0] + b[1]) for _, _, v in res)
    # An incomplete use of another job is not taken over: that is a collision.
    r, s = psn_pair_colliding()
    net.contribution(JOB1, 0, r + 4, vals(1))  # job 1 takes job 2's complete use over
    out = inc(net.contribution(JOB2, 0, s + 4, vals(2)))
    assert [h.flags for _, h, _ in out] == [Flag.COLLISION | Flag.FALLBACK]
