"""UDP datagram endpoints for the host side of aggregation (worker client, PS, ring).

Example:
    >>> a, b = Endpoint(("127.0.0.1", 0)), Endpoint(("127.0.0.1", 0))
    >>> a.send_many([(b"hi", b.address)])
    1
    >>> b.wait(1.0) and [d for d, _ in b.recv_many()]
    [b'hi']
    >>> a.close(); b.close()

One non-blocking socket per endpoint. ``send_many`` writes a batch with one ``sendto`` per
datagram; ``recv_many`` drains whatever the kernel holds (Python has no ``recvmmsg``, so
``recvfrom`` is called until the socket would block). ``wait`` blocks in ``poll`` until a
datagram is readable. ``enable_ecn`` makes the socket ECN-capable and counts the datagrams
that arrive marked Congestion Experienced. Nothing here knows the INC header; callers pack
payloads with wire/header.py.

``ImpairedEndpoint`` wraps an endpoint for in-process tests: at the sender it drops,
duplicates and reorders datagrams with a seeded RNG (real sockets still carry whatever
survives). Loss on Mininet links is injected by the network, not here.
"""

from __future__ import annotations

import errno
import random
import select
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

Address = tuple[str, int]
Datagram = tuple[bytes, Address]

DEFAULT_BUFFER = 8 << 20  # socket buffers: a window of packets from every worker fits
MAX_DATAGRAM = 65535
_SEND_RETRY_S = 0.05  # how long a full send buffer may stall one datagram before it is dropped
# ECN codepoints in the low two bits of the IP TOS byte (RFC 3168), and Linux's IP_RECVTOS.
ECT0, CE = 0b10, 0b11
IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
_CMSG_SPACE = socket.CMSG_SPACE(4)


class DatagramEndpoint(Protocol):
    """What the aggregation clients need from a transport (Endpoint or ImpairedEndpoint)."""

    @property
    def address(self) -> Address: ...

    def send_many(self, datagrams: Iterable[Datagram]) -> int: ...

    def recv_many(self, max_count: int = 4096) -> list[Datagram]: ...

    def wait(self, timeout: float) -> bool: ...

    def close(self) -> None: ...


@dataclass
class EndpointStats:
    """Datagram and byte counters of one endpoint."""

    sent: int = 0
    sent_bytes: int = 0
    received: int = 0
    received_bytes: int = 0
    send_drops: int = 0  # the kernel's send buffer stayed full
    ce_marked: int = 0  # datagrams received with ECN CE set (after enable_ecn)
    gro_runs: int = 0  # runs of datagrams received whole and cut (the native loop's UDP_GRO)


class TransportError(OSError):
    """A socket could not be set up (address in use, bad interface, no permission)."""


class Endpoint:
    """A UDP socket bound to ``bind`` (port 0: any free port)."""

    def __init__(self, bind: Address = ("0.0.0.0", 0), buffer_bytes: int = DEFAULT_BUFFER):
        self.stats = EndpointStats()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
            self._sock.bind(bind)
        except OSError as e:
            self._sock.close()
            raise TransportError(
                e.errno, f"cannot bind UDP socket to {bind}: {e.strerror}"
            ) from None
        self._sock.setblocking(False)
        self._poll = select.poll()
        self._poll.register(self._sock.fileno(), select.POLLIN)
        self._buf = bytearray(MAX_DATAGRAM)
        self._ecn = False

    def enable_ecn(self) -> None:
        """Send ECN-capable (ECT(0) in the IP TOS byte) and read each received datagram's
        TOS: those a switch marked Congestion Experienced count in ``stats.ce_marked``."""
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECT0)
        self._sock.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
        self._ecn = True

    @property
    def ecn(self) -> bool:
        """Whether ``enable_ecn`` was called (received datagrams' TOS is read)."""
        return self._ecn

    @property
    def address(self) -> Address:
        host, port = self._sock.getsockname()[:2]
        return host, port

    def fileno(self) -> int:
        return self._sock.fileno()

    def send_many(self, datagrams: Iterable[Datagram]) -> int:
        """Send every (payload, address); returns how many the kernel accepted."""
        sent = 0
        for payload, dest in datagrams:
            if self._send_one(payload, dest):
                sent += 1
                self.stats.sent += 1
                self.stats.sent_bytes += len(payload)
            else:
                self.stats.send_drops += 1
        return sent

    def _send_one(self, payload: bytes, dest: Address) -> bool:
        for _ in range(2):
            try:
                self._sock.sendto(payload, dest)
                return True
            except BlockingIOError:
                # Full send buffer: wait briefly for room once; after that the datagram is
                # treated as lost and the caller's retransmission recovers it.
                select.select([], [self._sock], [], _SEND_RETRY_S)
            except OSError as e:
                # ICMP errors reported late (ECONNREFUSED) or an unreachable network behave
                # like loss for a datagram protocol.
                if e.errno in (errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH):
                    return False
                raise
        return False

    def recv_many(self, max_count: int = 4096) -> list[Datagram]:
        """Every datagram already queued (up to ``max_count``), without blocking."""
        out: list[Datagram] = []
        buf = self._buf
        while len(out) < max_count:
            try:
                if self._ecn:
                    n, cmsgs, _, addr = self._sock.recvmsg_into([buf], _CMSG_SPACE)
                    if any(c[1] == socket.IP_TOS and c[2][:1] and c[2][0] & 3 == CE
                           for c in cmsgs):  # fmt: skip
                        self.stats.ce_marked += 1
                else:
                    n, addr = self._sock.recvfrom_into(buf)
            except BlockingIOError:
                break
            except ConnectionRefusedError:
                continue  # a late ICMP error for an earlier send; not a datagram
            out.append((bytes(buf[:n]), (addr[0], addr[1])))
            self.stats.received += 1
            self.stats.received_bytes += n
        return out

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until a datagram is readable."""
        return bool(self._poll.poll(max(0.0, timeout) * 1000.0))

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class ImpairmentStats:
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0


class ImpairedEndpoint:
    """Sender-side loss, duplication and reordering over a real endpoint (tests only).

    Each datagram is dropped with probability ``loss``; a survivor is sent twice with
    probability ``dup``, and held back with probability ``reorder`` until after the next
    datagram this endpoint sends (possibly in a later ``send_many`` call, so a held datagram
    can also arrive late, after the receiver has moved on).

    >>> inner = Endpoint(("127.0.0.1", 0))
    >>> e = ImpairedEndpoint(inner, loss=1.0, seed=1)
    >>> e.send_many([(b"x", inner.address)]), e.impairments.dropped
    (0, 1)
    >>> e.close()
    """

    def __init__(
        self,
        inner: Endpoint,
        loss: float = 0.0,
        dup: float = 0.0,
        reorder: float = 0.0,
        seed: int = 0,
    ) -> None:
        for name, p in (("loss", loss), ("dup", dup), ("reorder", reorder)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
        self.inner = inner
        self.loss, self.dup, self.reorder = loss, dup, reorder
        self._rng = random.Random(seed)
        self._held: list[Datagram] = []
        self.impairments = ImpairmentStats()

    @property
    def address(self) -> Address:
        return self.inner.address

    @property
    def stats(self) -> EndpointStats:
        return self.inner.stats

    def send_many(self, datagrams: Iterable[Datagram]) -> int:
        out: list[Datagram] = []
        rng = self._rng
        for dg in datagrams:
            if rng.random() < self.loss:
                self.impairments.dropped += 1
                continue
            copies = [dg]
            if rng.random() < self.dup:
                self.impairments.duplicated += 1
                copies.append(dg)
            for c in copies:
                if rng.random() < self.reorder:
                    self.impairments.reordered += 1
                    self._held.append(c)
                    continue
                out.append(c)
                out.extend(self._held)  # held datagrams now follow a later one
                self._held.clear()
        return self.inner.send_many(out)

    def flush(self) -> int:
        """Send the datagrams still held back for reordering."""
        held, self._held = self._held, []
        return self.inner.send_many(held)

    def recv_many(self, max_count: int = 4096) -> list[Datagram]:
        return self.inner.recv_many(max_count)

    def wait(self, timeout: float) -> bool:
        return self.inner.wait(timeout)

    def close(self) -> None:
        self.inner.close()
