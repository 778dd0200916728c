"""End-to-end IPv4 forwarding through the compiled basic.p4 (LPM, TTL, checksum, drop,
parser errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.all import IP, UDP, Ether, raw

from p4sim import Switch

PROG = Path(__file__).parent / "compiler_programs" / "basic.p4"


@pytest.fixture
def sw() -> Switch:
    s = Switch.from_file(str(PROG))
    s.table_add(
        "Ing.ipv4_lpm",
        {"hdr.ipv4.dstAddr": (0x0A000000, 8)},
        "Ing.ipv4_forward",
        {"dstAddr": 0xAABBCCDDEEFF, "port": 3},
    )
    s.table_add(
        "ipv4_lpm",
        {"hdr.ipv4.dstAddr": (0x0A010000, 16)},
        "ipv4_forward",
        {"dstAddr": 0x111111111111, "port": 4},
    )
    return s


def pkt(dst: str, ttl: int = 64) -> bytes:
    return raw(
        Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02")
        / IP(src="1.2.3.4", dst=dst, ttl=ttl)
        / UDP(sport=1, dport=2)
        / b"payload"
    )


def test_forward_rewrites_macs_and_decrements_ttl(sw: Switch) -> None:
    out = sw.send(0, pkt("10.2.3.4"))
    assert len(out) == 1
    port, data = out[0]
    assert port == 3
    e = Ether(data)
    assert e.dst == "aa:bb:cc:dd:ee:ff" and e.src == "00:00:00:00:00:01"
    assert e[IP].ttl == 63
    assert bytes(e[UDP].payload) == b"payload"


def test_forward_checksum_matches_scapy(sw: Switch) -> None:
    data = sw.send(0, pkt("10.2.3.4", ttl=17))[0][1]
    ip = IP(data[14:])
    got = ip.chksum
    del ip.chksum
    assert got == IP(raw(ip)).chksum


def test_longest_prefix_wins(sw: Switch) -> None:
    assert sw.send(0, pkt("10.1.9.9"))[0][0] == 4
    assert sw.send(0, pkt("10.9.9.9"))[0][0] == 3


def test_lpm_miss_runs_default_drop(sw: Switch) -> None:
    assert sw.send(0, pkt("11.0.0.1")) == []


def test_non_ip_packet_is_dropped_by_else_branch(sw: Switch) -> None:
    assert sw.send(0, raw(Ether(type=0x86DD) / (b"x" * 40))) == []


def test_set_default_changes_miss_behaviour(sw: Switch) -> None:
    sw.table_set_default("ipv4_lpm", "ipv4_forward", {"dstAddr": 1, "port": 9})
    assert sw.send(0, pkt("11.0.0.1"))[0][0] == 9


def test_modify_and_delete_entry(sw: Switch) -> None:
    h = sw.table_add(
        "ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0C000000, 8)}, "ipv4_forward", {"dstAddr": 1, "port": 5}
    )
    assert sw.send(0, pkt("12.0.0.1"))[0][0] == 5
    sw.table_modify("ipv4_lpm", h, "ipv4_forward", {"dstAddr": 1, "port": 6})
    assert sw.send(0, pkt("12.0.0.1"))[0][0] == 6
    sw.table_delete("ipv4_lpm", h)
    assert sw.send(0, pkt("12.0.0.1")) == []


def test_truncated_packet_continues_to_ingress_with_parser_error() -> None:
    seen: list[str] = []
    s = Switch.from_file(str(PROG), log=seen.append)
    out = s.send(0, raw(Ether())[:10])
    assert out == []  # ingress ran: ipv4 invalid → drop() action
    assert any("PacketTooShort" in line for line in seen)
    assert any("Action Ing.drop" in line for line in seen)


def test_ttl_zero_wraps_to_255(sw: Switch) -> None:
    data = sw.send(0, pkt("10.2.3.4", ttl=0))[0][1]
    assert IP(data[14:]).ttl == 255
