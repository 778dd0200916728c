"""Ethernet/IPv4/UDP framing of INC payloads, for raw sockets and tests.

Example:
    >>> frame = encapsulate(b"x" * 24, b"\\x02" * 6, b"\\x04" * 6, bytes(4), bytes(4))
    >>> bytes(decapsulate(frame))[:1]
    b'x'
"""

from __future__ import annotations

import struct

import numpy as np

from wire.header import INC_UDP_PORT, IPV4_ETHERTYPE, UDP_PROTO

_ETH = struct.Struct("!6s6sH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
FRAME_OVERHEAD = _ETH.size + _IPV4.size + _UDP.size  # 42 bytes before the INC header


def ipv4_checksum(header: bytes) -> int:
    """RFC 791 header checksum (ones' complement of the ones' complement sum)."""
    words = np.frombuffer(header, dtype=">u2").astype(np.uint32)
    s = int(words.sum())
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def encapsulate(
    payload: bytes, src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, ttl: int = 64
) -> bytes:
    """Ethernet/IPv4/UDP frame around an INC payload (UDP checksum 0 = none, as the switch)."""
    udp_len = _UDP.size + len(payload)
    ip = _IPV4.pack(0x45, 0, _IPV4.size + udp_len, 0, 0x4000, ttl, UDP_PROTO, 0, src_ip, dst_ip)
    ip = ip[:10] + ipv4_checksum(ip).to_bytes(2, "big") + ip[12:]
    udp = _UDP.pack(INC_UDP_PORT, INC_UDP_PORT, udp_len, 0)
    return _ETH.pack(dst_mac, src_mac, IPV4_ETHERTYPE) + ip + udp + payload


def decapsulate(frame: bytes | memoryview) -> memoryview | None:
    """The INC payload of a frame, or None when it is not IPv4/UDP to ``INC_UDP_PORT``."""
    mv = memoryview(frame)
    if len(mv) < FRAME_OVERHEAD or _ETH.unpack_from(mv)[2] != IPV4_ETHERTYPE:
        return None
    ihl = (mv[_ETH.size] & 0x0F) * 4
    if mv[_ETH.size + 9] != UDP_PROTO or len(mv) < _ETH.size + ihl + _UDP.size:
        return None
    udp_at = _ETH.size + ihl
    _, dport, udp_len, _ = _UDP.unpack_from(mv, udp_at)
    if dport != INC_UDP_PORT:
        return None
    return mv[udp_at + _UDP.size : udp_at + max(udp_len, _UDP.size)]
