"""Egress queues (traffic manager) on the in-process switch, with a virtual clock:
rate, depth (tail drop), strict priorities and the queueing metadata, as simple_switch."""

from pathlib import Path

import pytest

from p4sim.switch import Switch, SwitchError
from p4sim.v1model.traffic_manager import TrafficManager

ROOT = Path(__file__).resolve().parents[1]
ECN = ROOT / "tests/p4/tutorials/ecn/ecn.p4"

# Ethernet / 4 bytes: every packet goes to port 2; egress writes the queueing metadata
# and standard_metadata.priority into the payload (set from the first payload byte).
QUEUE_PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header q_t { bit<8> prio; bit<8> tag; bit<32> enq_ts; bit<32> enq_depth; bit<32> deq_delta;
             bit<32> deq_depth; }
struct headers_t { eth_t eth; q_t q; }
struct meta_t { }
parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.eth); pkt.extract(h.q); transition accept; }
}
control V(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 2; sm.priority = (bit<3>)h.q.prio; }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        h.q.enq_ts = sm.enq_timestamp;
        h.q.enq_depth = (bit<32>)sm.enq_qdepth;
        h.q.deq_delta = sm.deq_timedelta;
        h.q.deq_depth = (bit<32>)sm.deq_qdepth;
    }
}
control C(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); pkt.emit(h.q); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


class Clock:
    def __init__(self) -> None:
        self.us = 1000

    def __call__(self) -> int:
        return self.us


def _switch(priorities: int = 1) -> tuple[Switch, Clock]:
    sw = Switch.from_source(QUEUE_PROGRAM, tm=TrafficManager(priorities))
    clock = Clock()
    sw.pipeline.clock = clock
    return sw, clock


def _pkt(tag: int, prio: int = 0) -> bytes:
    return bytes(14) + bytes([prio, tag]) + bytes(16)


def _fields(out: bytes) -> dict[str, int]:
    q = out[14:]
    return {
        "tag": q[1],
        "enq_ts": int.from_bytes(q[2:6], "big"),
        "enq_depth": int.from_bytes(q[6:10], "big"),
        "deq_delta": int.from_bytes(q[10:14], "big"),
        "deq_depth": int.from_bytes(q[14:18], "big"),
    }


def test_without_a_rate_packets_skip_the_queue_with_an_idle_queues_metadata():
    sw, clock = _switch()
    ((port, out),) = sw.send(1, _pkt(7))
    assert port == 2
    assert _fields(out) == {
        "tag": 7,
        "enq_ts": 1000,
        "enq_depth": 0,
        "deq_delta": 0,
        "deq_depth": 0,
    }
    assert sw.release() == [] and sw.next_departure_us() is None


def test_a_rate_limited_port_spaces_departures_and_fills_the_queueing_metadata():
    sw, clock = _switch()
    sw.set_queue_rate(1000, port=2)  # one packet per millisecond
    outs = [o for i in range(4) for o in sw.send(1, _pkt(i))]
    assert [_fields(o)["tag"] for _, o in outs] == [0]  # the first leaves at once
    assert sw.next_departure_us() == 2000
    clock.us = 1999
    assert sw.release() == []
    clock.us = 2000
    ((port, second),) = sw.release()
    clock.us = 5000  # late: both remaining departures are due
    rest = sw.release()
    got = [_fields(outs[0][1]), _fields(second)] + [_fields(o) for _, o in rest]
    assert [g["tag"] for g in got] == [0, 1, 2, 3]
    assert [g["enq_ts"] for g in got] == [1000] * 4
    assert [g["enq_depth"] for g in got] == [0, 0, 1, 2]  # packets ahead when it joined
    assert [g["deq_delta"] for g in got] == [0, 1000, 4000, 4000]
    assert [g["deq_depth"] for g in got] == [0, 2, 1, 0]  # packets left behind it
    assert sw.next_departure_us() is None


def test_a_full_queue_drops_what_arrives_tail_drop():
    sw, clock = _switch()
    sw.set_queue_rate(1000, port=2)
    sw.set_queue_depth(3, port=2)
    first = [o for i in range(10) for o in sw.send(1, _pkt(i))]
    clock.us += 10_000
    later = sw.release()
    tags = [_fields(o)["tag"] for _, o in first + later]
    assert tags == [0, 1, 2, 3]  # 0 left at once, 1..3 filled the queue, 4..9 dropped
    assert sw.tm.dropped == 6


def test_higher_priority_queues_are_served_first():
    sw, clock = _switch(priorities=2)
    sw.set_queue_rate(1000, port=2)
    outs = sw.send(1, _pkt(0, prio=0)) + sw.send(1, _pkt(1, prio=0)) + sw.send(1, _pkt(2, prio=1))
    clock.us += 100_000
    outs += sw.release()
    assert [_fields(o)["tag"] for _, o in outs] == [0, 2, 1]


def test_a_priority_the_port_does_not_have_drops_the_packet():
    sw, clock = _switch(priorities=1)
    sw.set_queue_rate(1000, port=2)
    assert sw.send(1, _pkt(5, prio=3)) == []
    assert sw.tm.dropped == 1


def test_bad_queue_settings_are_clear_errors():
    sw, _ = _switch(priorities=2)
    with pytest.raises(SwitchError, match="priority 2 out of range"):
        sw.set_queue_rate(10, port=1, priority=2)
    with pytest.raises(SwitchError, match=">= 0"):
        sw.set_queue_depth(-1, port=1)


def _ecn_packet(ecn: int, ident: int) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(
        Ether(dst="08:00:00:00:02:00", src="08:00:00:00:01:11")
        / IP(src="10.0.1.1", dst="10.0.2.2", tos=ecn, id=ident)
        / UDP(sport=7, dport=8)
        / b"ecn"
    )


def test_ecn_marks_packets_once_a_queue_builds_behind_a_slow_port():
    sw = Switch.from_file(str(ECN))
    clock = Clock()
    sw.pipeline.clock = clock
    sw.table_add(
        "ipv4_lpm",
        {"hdr.ipv4.dstAddr": (0x0A000202, 32)},
        "ipv4_forward",
        {"dstAddr": 0x080000000222, "port": 2},
    )
    sw.set_queue_rate(100, port=2)  # a slow port: 100 packets/s
    outs = []
    for i in range(30):  # a burst, faster than the port drains
        outs += sw.send(1, _ecn_packet(1, i))
        clock.us += 1000
    clock.us += 1_000_000
    outs += sw.release()
    assert len(outs) == 30
    ecn = [o[15] & 3 for _, o in outs]  # IPv4 TOS byte, low 2 bits
    ident = [int.from_bytes(o[18:20], "big") for _, o in outs]
    assert ident == list(range(30))  # a queue keeps order
    # the threshold is 10 packets: those that found 10 or more ahead are marked CE
    assert ecn[:11] == [1] * 11 and ecn[11:] == [3] * 19
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    ip = Ether(outs[-1][1])[IP]  # the switch recomputed the checksum after marking
    sent = ip.chksum
    del ip.chksum
    assert IP(bytes(ip)).chksum == sent
