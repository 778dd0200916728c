"""Switch ports on Linux interfaces, and the packet loop that feeds the pipeline.

Example::

    ports = PortSet({1: "s1-eth1", 2: "s1-eth2"}, pcap_dir="pcaps")
    ports.serve(lambda port, data: switch.send(port, data))   # until stop() is called

Each port is an AF_PACKET raw socket bound to one interface. The loop reads whatever
arrives on any port, hands it to ``process(port, bytes)`` and transmits every packet that
comes back on its egress port. ``process`` runs packets to completion, so there is no
queue between ingress and egress, as with BMv2's single-threaded mode.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from p4sim import batch_io
from p4sim.batch_io import SOCKET_BUFFER as SOCKET_BUFFER  # where it was documented
from p4sim.batch_io import set_buffers

log = logging.getLogger("p4sim.ports")

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # sll_pkttype of frames we sent ourselves
MAX_FRAME = 65535 + 64

Process = Callable[[int, bytes], Iterable[tuple[int, bytes]]]
Timer = Callable[[], tuple[list[tuple[int, bytes]], float | None]]


class PcapWriter:
    """A classic libpcap file (Ethernet link type, microsecond timestamps)."""

    def __init__(self, path: Path) -> None:
        self._f = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, MAX_FRAME, 1))
        self._f.flush()

    def write(self, data: bytes, now: float | None = None) -> None:
        t = time.time() if now is None else now
        sec = int(t)
        usec = int((t - sec) * 1_000_000)
        self._f.write(struct.pack("<IIII", sec, usec, len(data), len(data)))
        self._f.write(data)
        self._f.flush()

    def close(self) -> None:
        self._f.close()


@dataclass
class PortCounters:
    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0
    tx_errors: int = 0


@dataclass
class Port:
    number: int
    iface: str
    sock: socket.socket
    counters: PortCounters = field(default_factory=PortCounters)
    pcap_in: PcapWriter | None = None
    pcap_out: PcapWriter | None = None
    rx: batch_io.Receiver | None = None  # many frames per system call, when the kernel can
    tx: batch_io.Sender | None = None


def open_raw_socket(iface: str) -> socket.socket:
    """A non-blocking AF_PACKET socket that receives and sends whole frames on ``iface``."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.bind((iface, 0))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot open interface {iface!r}: {e.strerror}") from None
    set_buffers(sock)
    sock.setblocking(False)
    return sock


class PortSet:
    """The switch's ports. ``ifaces`` maps port numbers to interface names."""

    def __init__(self, ifaces: Mapping[int, str], pcap_dir: str | os.PathLike[str] | None = None):
        self.ports: dict[int, Port] = {}
        self._stop = threading.Event()
        # A pipe wakes the loop when stop() is called from another thread or a signal.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        try:
            for number, iface in sorted(ifaces.items()):
                p = self.ports[number] = Port(number, iface, open_raw_socket(iface))
                if batch_io.AVAILABLE and batch_io.ignore_outgoing(p.sock):
                    p.rx = batch_io.Receiver(p.sock.fileno())
                    p.tx = batch_io.Sender(p.sock.fileno())
        except OSError:
            self.close()
            raise
        if pcap_dir is not None:
            d = Path(pcap_dir)
            d.mkdir(parents=True, exist_ok=True)
            for p in self.ports.values():
                p.pcap_in = PcapWriter(d / f"{p.iface}_in.pcap")
                p.pcap_out = PcapWriter(d / f"{p.iface}_out.pcap")

    def transmit(self, port: int, data: bytes) -> bool:
        """Send ``data`` out of ``port``; False (and counted) when the port is unknown or
        the kernel refuses the frame."""
        p = self.ports.get(port)
        if p is None:
            log.debug("egress port %d has no interface: packet dropped", port)
            return False
        try:
            p.sock.send(data)
        except OSError as e:
            # ENOBUFS: an egress hook (e.g. nftables loss injection) dropped the frame.
            p.counters.tx_errors += 1
            if e.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.ENETDOWN, errno.EMSGSIZE):
                log.warning("send on %s failed: %s", p.iface, e)
            return False
        p.counters.tx_packets += 1
        p.counters.tx_bytes += len(data)
        if p.pcap_out is not None:
            p.pcap_out.write(data)
        return True

    def serve(
        self,
        process: Process,
        poll_interval: float = 0.5,
        timer: Timer | None = None,
        native: Callable[[], object] | None = None,
    ) -> None:
        """Run the packet loop until :meth:`stop`. Exceptions raised by ``process`` for one
        packet are logged and the packet is dropped; the loop goes on. ``timer()`` (the
        egress queues) returns the packets due now and the seconds until the next ones; the
        loop calls it after each round and wakes up in time for them. ``native()`` returns
        the switch now running (p4sim.native.backend.NativeLoop): while it is on the native
        back end, ready ports are drained by its C loop instead of ``process``."""
        loop = None
        if native is not None:
            from p4sim.native.backend import NativeLoop

            loop = NativeLoop(self, native)
        by_fd = {p.sock.fileno(): p for p in self.ports.values()}
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        wait = poll_interval
        while not self._stop.is_set():
            sw = loop.usable() if loop is not None else None
            if loop is not None and sw is not None:
                if loop.serve(sw, self._wake_r, wait) == 1:
                    try:
                        os.read(self._wake_r, 4096)
                    except BlockingIOError:
                        pass
            else:
                for fd, _ in poller.poll(wait * 1000):
                    p = by_fd.get(fd)
                    if p is not None:
                        self._drain(p, process)
            wait = poll_interval
            if timer is not None:
                outs, delay = timer()
                pending: dict[int, list[bytes]] = {}
                for port, pkt in outs:
                    pending.setdefault(port, []).append(pkt)
                for port, pkts in pending.items():
                    self.transmit_many(port, pkts)
                if delay is not None:
                    wait = min(wait, delay)

    def _drain(self, p: Port, process: Process, budget: int = 64) -> None:
        if p.rx is None:
            self._drain_one_by_one(p, process, budget)
            return
        pending: dict[int, list[bytes]] = {}
        for _ in range(0, budget, p.rx.ring.n):
            try:
                frames = p.rx.receive()
            except OSError as e:
                log.warning("receive on %s failed: %s", p.iface, e)
                break
            for data in frames:
                for port, pkt in self._process(p, process, data):
                    pending.setdefault(port, []).append(pkt)
            if len(frames) < p.rx.ring.n:
                break
        for port, pkts in pending.items():
            self.transmit_many(port, pkts)

    def _process(self, p: Port, process: Process, data: bytes) -> Iterable[tuple[int, bytes]]:
        p.counters.rx_packets += 1
        p.counters.rx_bytes += len(data)
        if p.pcap_in is not None:
            p.pcap_in.write(data)
        try:
            return process(p.number, data)
        except Exception:  # a bug must not take the switch down
            log.exception("packet from port %d dropped: pipeline error", p.number)
            return ()

    def transmit_many(self, port: int, pkts: list[bytes]) -> int:
        """Send ``pkts`` out of ``port`` in order, many per system call where possible;
        returns how many left."""
        p = self.ports.get(port)
        if p is None or p.tx is None or p.pcap_out is not None:
            return sum(self.transmit(port, pkt) for pkt in pkts)
        sent, nbytes = p.tx.send(pkts)
        p.counters.tx_packets += sent
        p.counters.tx_bytes += nbytes
        p.counters.tx_errors += len(pkts) - sent
        return sent

    def _drain_one_by_one(self, p: Port, process: Process, budget: int) -> None:
        for _ in range(budget):
            try:
                data, addr = p.sock.recvfrom(MAX_FRAME)
            except BlockingIOError:
                return
            except OSError as e:
                log.warning("receive on %s failed: %s", p.iface, e)
                return
            if addr[2] == PACKET_OUTGOING:
                continue
            for port, pkt in self._process(p, process, data):
                self.transmit(port, pkt)

    def stop(self) -> None:
        self._stop.set()
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def close(self) -> None:
        for p in self.ports.values():
            p.sock.close()
            for w in (p.pcap_in, p.pcap_out):
                if w is not None:
                    w.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> PortSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
