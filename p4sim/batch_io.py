"""Many frames per system call on an AF_PACKET socket: ``recvmmsg``/``sendmmsg`` via ctypes.

Example::

    rx = Receiver(sock.fileno(), batch=32)
    for frame in rx.receive():          # up to 32 frames, one system call, no blocking
        ...
    tx = Sender(sock.fileno(), batch=64)
    tx.send([b"...", b"..."])           # -> (frames, bytes) the kernel took, in order

The buffers are allocated once: a receive copies each frame out of its slot (the pipeline
keeps the bytes), a send copies each frame into its slot. Python's socket module has no
``recvmmsg``/``sendmmsg``; the per-frame cost of ``recvfrom`` (a 64 KiB bytes object per
call, an address tuple, one system call) is what this removes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
from collections.abc import Sequence

SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # Linux 4.20: do not deliver our own transmitted frames back
MSG_DONTWAIT = 0x40
MSG_TRUNC = 0x20


#: Bytes of kernel memory each port socket may hold, each way. A frame sent stays charged to
#: the sending socket until its link has carried it, so on shaped links the frames waiting in
#: every egress port's queue count against one send buffer (the native loop sends all ports'
#: frames through one socket), and a full buffer refuses the frame (counted in tx_errors,
#: lost). The default 212,992 bytes held ~90 frames of 578 bytes: 8 workers with 32 results
#: each in flight on 25 Mbit/s links lost 1.5-2.5 % of them (tests/bench/netreduce.py). 4 MiB
#: (doubled by the kernel) holds thousands (tests/test_ports.py: 400 at once into one link).
SOCKET_BUFFER = 4 * 1024 * 1024
# Linux's <asm/socket.h>; Python's socket module does not name them. As root they set a
# buffer past net.core.rmem_max / wmem_max (212,992 bytes unless raised by hand).
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33


def set_buffers(sock: socket.socket, size: int = SOCKET_BUFFER) -> None:
    """Receive and send buffers of ``size`` bytes each: past the system's limits where we
    may (root, as a switch or a relay under Mininet), else as deep as they allow."""
    for force, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, plain, size)


class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(_IOVec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", _MsgHdr), ("len", ctypes.c_uint)]


_libc = ctypes.CDLL(None, use_errno=True)
try:
    _recvmmsg = _libc.recvmmsg
    _sendmmsg = _libc.sendmmsg
    _recvmmsg.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_void_p,
    ]
    _sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    AVAILABLE = True
except AttributeError:  # not Linux: PortSet keeps one frame per call
    AVAILABLE = False


def ignore_outgoing(sock: socket.socket) -> bool:
    """Ask the kernel not to hand ``sock`` the frames it sends itself; False when the
    kernel is too old (the caller then filters them by packet type)."""
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        return False
    return True


class _Ring:
    """``n`` message headers, each with one iovec onto a slot of ``size`` bytes."""

    def __init__(self, n: int, size: int) -> None:
        self.n, self.size = n, size
        self.buf = ctypes.create_string_buffer(n * size)
        self.view = memoryview(self.buf).cast("B")
        self.iov = (_IOVec * n)()
        self.msgs = (_MMsgHdr * n)()
        base = ctypes.addressof(self.buf)
        for i in range(n):
            self.iov[i].base = base + i * size
            self.iov[i].len = size
            self.msgs[i].hdr.iov = ctypes.pointer(self.iov[i])
            self.msgs[i].hdr.iovlen = 1


class Receiver:
    """Receive up to ``batch`` frames of at most ``size`` bytes per call."""

    def __init__(self, fd: int, batch: int = 32, size: int = 65536 + 64) -> None:
        self.fd = fd
        self.ring = _Ring(batch, size)
        self.truncated = 0  # frames longer than a slot (dropped, counted)

    def receive(self) -> list[bytes]:
        """The frames waiting now (possibly none); OSError on a socket error."""
        r = self.ring
        n = _recvmmsg(self.fd, ctypes.addressof(r.msgs), r.n, MSG_DONTWAIT | MSG_TRUNC, None)
        if n < 0:
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                return []
            raise OSError(err, os.strerror(err))
        out = []
        view, size, msgs = r.view, r.size, r.msgs
        for i in range(n):
            ln = msgs[i].len
            if ln > size:
                self.truncated += 1
                continue
            off = i * size
            out.append(bytes(view[off : off + ln]))
        return out


class Sender:
    """Send frames in batches of up to ``batch``, each at most ``size`` bytes."""

    def __init__(self, fd: int, batch: int = 64, size: int = 65536 + 64) -> None:
        self.fd = fd
        self.ring = _Ring(batch, size)

    def send(self, frames: Sequence[bytes]) -> tuple[int, int]:
        """Send ``frames`` in order; returns (frames, bytes) the kernel took. The kernel stops at
        the first frame it refuses (e.g. dropped by an nftables egress rule): that frame
        is skipped and counted as not sent, the rest go on."""
        r = self.ring
        sent = nbytes = 0
        i = 0
        total = len(frames)
        while i < total:
            k = min(r.n, total - i)
            for j in range(k):
                f = frames[i + j]
                ln = len(f)
                if ln > r.size:
                    ln = 0  # too long for a slot: sent empty, which the kernel refuses
                off = j * r.size
                r.view[off : off + ln] = f[:ln]
                r.iov[j].len = ln
            n = _sendmmsg(self.fd, ctypes.addressof(r.msgs), k, MSG_DONTWAIT)
            if n < 0:
                n = 0
                i += 1  # the first frame failed: skip it
            else:
                sent += n
                nbytes += sum(r.iov[j].len for j in range(n))
                i += n if n > 0 else 1
        return sent, nbytes
