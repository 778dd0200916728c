"""Isolation of jobs on ``p4src/inc.p4``: what a host outside a job may send, and what the
switch then does (docs/protocol.md, "Isolation"). Packet by packet, in-process.

The switch is the fuzz test's (``tests/test_fuzz_inc.py``): jobs of every kind admitted by
the controller's own code over P4Runtime. NetReduce job 1 (workers on ports 1..3) and 2
(ports 4, 5), key-value cache job 3, replicated log 4 (client 0 on port 3, replicas on 4..6),
ATP job 5 (workers on ports 2, 4, PS on port 6), Serene jobs 6 and 8, ASK job 7 (mappers
on ports 1 and 5, reducer on port 6).

Each test states one invariant; each fails when the guard it names is taken out of the
program (``FlagGuard``'s bindings, the parser's refusal of INC behind IPv4 options or in a
fragment).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP, IPOption_NOP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.jobs.job import host_ip, host_mac
from p4sim.switch import Switch
from tests.test_fuzz_inc import (
    AGG_HOST,
    ASK_JOB,
    ASK_REDUCER,
    ATP_JOB,
    JOBS,
    LOG,
    LOG_REPLICAS,
    SERENE,
    contribution,
    program,
)
from wire.framing import ipv4_checksum
from wire.header import (
    DROP_STRIDE,
    INC_UDP_PORT,
    SLOTS,
    DropReason,
    Flag,
    Header,
    Op,
    atp_index,
    pack,
)

NR1, NR2 = JOBS
LOG_CLIENT = LOG.ports[0]
OUTSIDER = 3  # a port no ATP, ASK or Serene binding names (a NetReduce-1 worker, the log's client)


TRUNK = AGG_HOST + 1  # a port the topology binds no host to (a link to another switch)


@pytest.fixture(scope="module")
def switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Switch]:
    """The fuzz test's switch, with the source guard a topology writes: each host port lets
    in its host's address only (``controller/systems/source_guard.py``); TRUNK is unbound."""
    yield from program(tmp_path_factory.mktemp("isolation"))


def drops(sw: Switch) -> dict[DropReason, int]:
    return {r: sw.counter_read("inc_drops", int(r))[0] for r in DropReason}


def registers(sw: Switch) -> dict[str, list[int]]:
    return {e.name: list(sw.extern(e.name).values) for e in sw.externs() if e.kind == "register"}


def frame(src: int, dst: int, h: Header, values: np.ndarray | None = None) -> bytes:
    """An INC packet from the host on port ``src`` to the host on port ``dst``."""
    v = np.arange(1, SLOTS + 1) * 1000 if values is None else values
    pkt = (
        Ether(src=host_mac(src), dst=host_mac(dst))
        / IP(src=host_ip(src), dst=host_ip(dst))
        / UDP(sport=INC_UDP_PORT, dport=INC_UDP_PORT, chksum=0)
        / Raw(pack(h, v))
    )
    return bytes(pkt)


def job_drops(sw: Switch, job: int) -> dict[DropReason, int]:
    return {r: sw.counter_read("job_drops", job * DROP_STRIDE + int(r))[0] for r in DropReason}


def refused(sw: Switch, port: int, data: bytes, reason: DropReason, job: int | None = None) -> None:
    """``data`` on ``port`` leaves nothing, changes no register, and is counted once, in
    all and (given ``job``) against that job (0: a packet that names none)."""
    before, state = drops(sw), registers(sw)
    mine = job_drops(sw, job or 0)
    out = sw.send(port, data)
    after = drops(sw)
    assert out == [], [p for p, _ in out]
    assert after[reason] == before[reason] + 1, {r.name: after[r] - before[r] for r in after}
    assert sum(after.values()) == sum(before.values()) + 1
    if job is not None:
        assert job_drops(sw, job)[reason] == mine[reason] + 1
    assert registers(sw) == state


# --- FlagGuard: a flagged INC packet passes only from a binding of its job -----------------

ATP_PSN = 3
ATP_IDX = atp_index(ATP_JOB.job_id, ATP_PSN, ATP_JOB.offset, ATP_JOB.size)
EVERY_WORKER = (1 << len(ATP_JOB.ports)) - 1

# (case, port, op, flags, job, worker): packets a host with no binding for them sends
FORGED = [
    # the issue's example: another job's worker sends ATP job 5's psn as a fallback piece
    # holding every worker, to job 5's PS
    ("atp-fallback-from-another-job", NR2.ports[1], Op.AGG_SYNC, Flag.FALLBACK, ATP_JOB, 0),
    ("atp-collision", OUTSIDER, Op.AGG_SYNC, Flag.FALLBACK | Flag.COLLISION, ATP_JOB, 0),
    ("atp-fallback-by-its-own-worker", ATP_JOB.ports[0], Op.AGG_SYNC, Flag.FALLBACK, ATP_JOB, 0),
    ("atp-result-fallback", OUTSIDER, Op.AGG_SYNC, Flag.RESULT | Flag.FALLBACK, ATP_JOB, 0),
    ("atp-wait", OUTSIDER, Op.AGG_SYNC, Flag.WAIT, ATP_JOB, 0),
    ("netreduce-fallback", NR2.ports[0], Op.AGG_SYNC, Flag.FALLBACK, NR1, 0),
    ("netreduce-wait", NR2.ports[0], Op.AGG_SYNC, Flag.WAIT, NR1, 0),
    ("netreduce-result-fallback", NR2.ports[0], Op.AGG_SYNC, Flag.RESULT | Flag.FALLBACK, NR1, 0),
    ("serene-running-result", OUTSIDER, Op.AGG_SYNC, Flag.RESULT | Flag.RUNNING, SERENE, 0),
    ("ask-drained-row", OUTSIDER, Op.AGG_KV, Flag.RESULT | Flag.DRAIN, ASK_JOB, ASK_REDUCER),
    ("ask-ack", OUTSIDER, Op.AGG_KV, Flag.ACK, ASK_JOB, 0),
    ("ask-fallback-from-outside", OUTSIDER, Op.AGG_KV, Flag.FALLBACK, ASK_JOB, 0),
    # a mapper speaking for the other mapper
    ("ask-fallback-as-another-mapper", ASK_JOB.ports[0], Op.AGG_KV, Flag.FALLBACK, ASK_JOB, 1),
    ("ask-ack-from-a-mapper", ASK_JOB.ports[1], Op.AGG_KV, Flag.ACK, ASK_JOB, 0),
    ("log-reply-from-outside", 1, Op.CONSENSUS, Flag.RESULT, LOG, 0),
    ("log-ack", 1, Op.CONSENSUS, Flag.ACK, LOG, 0),
    ("log-fallback-from-outside", 1, Op.CONSENSUS, Flag.FALLBACK, LOG, 0),
    ("log-reply-from-its-client", LOG_CLIENT, Op.CONSENSUS, Flag.RESULT, LOG, 0),
]


@pytest.mark.parametrize(
    ("port", "op", "flags", "job", "worker"),
    [c[1:] for c in FORGED],
    ids=[c[0] for c in FORGED],
)
def test_flagged_packet_no_binding_of_its_job_allows_is_dropped_and_counted(
    switch: Switch, port: int, op: Op, flags: Flag, job, worker: int
) -> None:
    h = Header(op=op, flags=flags, job_id=job.job_id, worker_id=worker, psn=ATP_PSN,
               agg_idx=ATP_IDX if job is ATP_JOB else job.offset, bitmap=EVERY_WORKER)  # fmt: skip
    dst = LOG_REPLICAS[0] if job is LOG else AGG_HOST
    refused(switch, port, frame(port, dst, h), DropReason.FORGED_RESULT)


def test_result_of_a_job_this_switch_does_not_serve_is_dropped(switch: Switch) -> None:
    """Only the switch, or a job's bound role, brings result-like flags: a job unknown here
    has no binding, so its results do not pass (they used to be forwarded)."""
    h = Header(op=Op.AGG_SYNC, flags=Flag.RESULT, job_id=99, psn=1)
    refused(switch, OUTSIDER, frame(OUTSIDER, 1, h), DropReason.FORGED_RESULT)


# (case, port, dst port, op, flags, job, worker): what the roles of a job send, unchanged
BOUND = [
    ("ask-mapper-fallback-to-reducer", ASK_JOB.ports[0], AGG_HOST, Op.AGG_KV, Flag.FALLBACK,
     ASK_JOB, 0),
    ("ask-mapper-fallback-resent", ASK_JOB.ports[1], AGG_HOST, Op.AGG_KV,
     Flag.FALLBACK | Flag.RETX, ASK_JOB, 1),
    ("ask-reducer-ack-to-mapper", AGG_HOST, ASK_JOB.ports[0], Op.AGG_KV, Flag.ACK, ASK_JOB, 0),
    ("log-replica-reply-to-client", LOG_REPLICAS[1], LOG_CLIENT, Op.CONSENSUS, Flag.RESULT,
     LOG, 0),
    ("log-client-to-host-leader", LOG_CLIENT, LOG_REPLICAS[0], Op.CONSENSUS, Flag.FALLBACK,
     LOG, 0),
    ("log-host-leader-to-follower", LOG_REPLICAS[0], LOG_REPLICAS[2], Op.CONSENSUS,
     Flag.FALLBACK, LOG, 0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("port", "dst", "op", "flags", "job", "worker"),
    [c[1:] for c in BOUND],
    ids=[c[0] for c in BOUND],
)
def test_flagged_packet_from_a_binding_of_its_job_is_forwarded_unchanged(
    switch: Switch, port: int, dst: int, op: Op, flags: Flag, job, worker: int
) -> None:
    h = Header(op=op, flags=flags, job_id=job.job_id, worker_id=worker, psn=7,
               agg_idx=job.offset)  # fmt: skip
    data = frame(port, dst, h)
    before = drops(switch)
    out = switch.send(port, data)
    assert [p for p, _ in out] == [dst]
    assert out[0][1][42:] == data[42:]  # the INC header and values as sent
    assert drops(switch) == before


def test_atp_result_from_its_ps_still_releases_and_reaches_every_worker(switch: Switch) -> None:
    idx = atp_index(ATP_JOB.job_id, 1000, ATP_JOB.offset, ATP_JOB.size)
    h = Header(op=Op.AGG_SYNC, flags=Flag.RESULT, job_id=ATP_JOB.job_id, psn=1000, agg_idx=idx,
               bitmap=EVERY_WORKER)  # fmt: skip
    out = switch.send(AGG_HOST, frame(AGG_HOST, ATP_JOB.ports[0], h))
    assert sorted(p for p, _ in out) == sorted(ATP_JOB.ports)


# --- the parser: INC behind IPv4 options or in a fragment never passes the guards ----------


def worker_packet(**ip: object) -> bytes:
    """A valid contribution of NetReduce job 1's worker 0, with IPv4 fields ``ip``."""
    inc = contribution(NR1, 0, 40, np.arange(SLOTS))[14 + 20 + 8 :]
    pkt = (
        Ether(src=host_mac(1), dst=host_mac(AGG_HOST))
        / IP(src=host_ip(1), dst=host_ip(AGG_HOST), **ip)  # type: ignore[arg-type]
        / UDP(sport=INC_UDP_PORT, dport=INC_UDP_PORT, chksum=0)
        / Raw(inc)
    )
    return bytes(pkt)


def test_inc_behind_ipv4_options_is_dropped_and_counted(switch: Switch) -> None:
    """IHL 6 (a no-op option): the INC header is not where the aggregator expects it; the
    packet is refused as UNPARSED_IPV4, not routed around admission."""
    refused(switch, 1, worker_packet(options=[IPOption_NOP()] * 4), DropReason.UNPARSED_IPV4)


def test_first_fragment_of_an_inc_packet_is_dropped_and_counted(switch: Switch) -> None:
    refused(switch, 1, worker_packet(flags="MF"), DropReason.UNPARSED_IPV4)


def test_whole_inc_packet_sent_as_fragments_is_not_delivered(switch: Switch) -> None:
    """Every fragment of a worker's packet: the first (which holds the UDP and INC headers)
    is refused, so the receiver never reassembles it; later ones carry no header to check."""
    pkt = Ether(worker_packet())
    frags = [bytes(Ether(src=pkt.src, dst=pkt.dst) / f) for f in _fragment(pkt[IP], 64)]
    assert len(frags) > 2
    refused(switch, 1, frags[0], DropReason.UNPARSED_IPV4)
    for f in frags[1:]:
        assert [p for p, _ in switch.send(1, f)] == [AGG_HOST]


def _fragment(ip: IP, size: int) -> list[IP]:
    from scapy.layers.inet import fragment

    return list(fragment(ip, fragsize=size))


def test_other_udp_with_ipv4_options_is_routed_with_its_options(switch: Switch) -> None:
    pkt = (
        Ether(src=host_mac(1), dst=host_mac(AGG_HOST))
        / IP(src=host_ip(1), dst=host_ip(AGG_HOST), options=[IPOption_NOP()] * 4)
        / UDP(sport=5000, dport=5001)
        / Raw(b"plain datagram")
    )
    before = drops(switch)
    out = switch.send(1, bytes(pkt))
    assert [p for p, _ in out] == [AGG_HOST]
    got = Ether(out[0][1])
    assert got[IP].ihl == 6 and bytes(got[Raw]) == b"plain datagram"
    assert got[IP].ttl == pkt[IP].ttl - 1
    assert ipv4_checksum(out[0][1][14 : 14 + 24]) == 0  # recomputed over the options too
    assert drops(switch) == before


# --- SourceGuard: a host port lets in its host's own IPv4 source only ----------------------


def udp_frame(port: int, src_ip: str, dst: int, dport: int, payload: bytes = b"x" * 64) -> bytes:
    """Plain UDP (what the switch does not parse: baselines, host-only paths, control ports)
    arriving on ``port`` with source ``src_ip`` and the source UDP port a member would use."""
    pkt = (
        Ether(src=host_mac(port), dst=host_mac(dst))
        / IP(src=src_ip, dst=host_ip(dst))
        / UDP(sport=dport, dport=dport)
        / Raw(payload)
    )
    return bytes(pkt)


# (case, UDP port): paths past the switch's INC guards, from the PS baseline to a control port
PLAIN = [("ps-baseline", INC_UDP_PORT + 1), ("ring-baseline", INC_UDP_PORT + 2),
         ("host-kv", INC_UDP_PORT + 3), ("control", INC_UDP_PORT + 1)]  # fmt: skip


@pytest.mark.parametrize("dport", [c[1] for c in PLAIN], ids=[c[0] for c in PLAIN])
def test_plain_udp_in_another_hosts_name_is_dropped_and_counted(switch: Switch, dport: int) -> None:
    """The host on port 3 copies host 1's address and UDP port exactly, to host 2: the
    switch drops it (SPOOFED_SOURCE); before the guard it was routed to host 2."""
    refused(switch, 3, udp_frame(3, host_ip(1), 2, dport), DropReason.SPOOFED_SOURCE, job=0)


def test_inc_in_a_members_name_is_counted_against_the_job_it_names(switch: Switch) -> None:
    """A worker of job 2 (port 4) sends job 1's worker 0 contribution with worker 0's
    address: refused before admission reads it, counted against job 1, no register moves."""
    data = bytearray(contribution(NR1, 0, 77, np.arange(SLOTS)))
    refused(switch, NR2.ports[0], bytes(data), DropReason.SPOOFED_SOURCE, job=NR1.job_id)
    # the same from a result-like sender: an ATP PS's all-worker RESULT in the PS's name
    h = Header(op=Op.AGG_SYNC, flags=Flag.RESULT, job_id=ATP_JOB.job_id, psn=ATP_PSN,
               agg_idx=ATP_IDX, bitmap=EVERY_WORKER)  # fmt: skip
    spoofed = bytes(Ether(frame(AGG_HOST, ATP_JOB.ports[0], h)))
    refused(switch, OUTSIDER, spoofed, DropReason.SPOOFED_SOURCE, job=ATP_JOB.job_id)


def test_a_hosts_own_address_passes_unchanged(switch: Switch) -> None:
    data = udp_frame(3, host_ip(3), 2, INC_UDP_PORT + 1)
    before = drops(switch)
    out = switch.send(3, data)
    assert [p for p, _ in out] == [2]
    assert out[0][1][34:] == data[34:]  # UDP header and payload as sent
    assert drops(switch) == before


def test_a_port_with_no_binding_keeps_todays_behaviour(switch: Switch) -> None:
    """A trunk carries other switches' hosts (and what they made): any source passes."""
    for src in (host_ip(1), host_ip(5), "192.0.2.9"):
        assert [p for p, _ in switch.send(TRUNK, udp_frame(TRUNK, src, 2, INC_UDP_PORT + 2))] == [2]


def test_what_the_switch_makes_itself_still_reaches_every_bound_port(switch: Switch) -> None:
    """A NetReduce aggregation of job 1 (its workers on bound ports): the sum the switch
    multicasts, in the aggregation address's name, reaches all three workers."""
    values = np.arange(SLOTS)
    outs = [switch.send(p, contribution(NR1, w, 90, values)) for w, p in enumerate(NR1.ports)]
    assert outs[0] == outs[1] == []
    assert sorted(p for p, _ in outs[2]) == sorted(NR1.ports)
