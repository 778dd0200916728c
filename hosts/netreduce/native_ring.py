"""The ring baseline's event loop in C (native_ring.c), loaded with ctypes.

Example::

    ring = NativeRing(endpoint.fileno(), right, left, rank=0, n=4, job_id=1, slots=32,
                      window=32, timeout=0.05, max_retries=100, fast_acks=3, acks_per=127)
    status, missing = ring.allreduce(rows, epoch=1, total_timeout=30.0)  # rows summed in place
    ring.linger(last_epoch=1, seconds=0.2); ring.close()

hosts/netreduce/ring.py uses it when its host back end is native (the choice and the
build are hosts/transport/native_window.py's), so the ring gets the same native transport as
the switch path; the Python loop there is the reference with the same packets on the wire.
"""

from __future__ import annotations

import ctypes
import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hosts.transport.native_window import DEADLINE, NO_MEMORY, OK, RETRIES, build_lock, library

__all__ = ["NativeRing", "OK", "RETRIES", "DEADLINE"]

_I64 = ctypes.c_int64
_U32 = ctypes.c_uint32


class _Ctx(ctypes.Structure):
    """The leading fields of ``struct ring_ctx`` (native_ring.c), in order."""

    _fields_ = [
        ("fd", ctypes.c_int),
        ("right", ctypes.c_ubyte * 16),
        ("left", ctypes.c_ubyte * 16),
        *(
            (n, _I64)
            for n in (
                "rank",
                "n",
                "job_id",
                "slots",
                "window",
                "max_retries",
                "fast_acks",
                "acks_per_datagram",
            )
        ),  # fmt: skip
        ("timeout", ctypes.c_double),
        ("early", ctypes.c_void_p),
        ("n_early", _I64),
        ("cap_early", _I64),
        *(
            (n, _I64)
            for n in (
                "data_sent",
                "retx",
                "fast_retx",
                "acks_sent",
                "duplicates",
                "early_kept",
                "send_drops",
                "err",
                "fail_step",
                "fail_packet",
                "fail_tries",
            )
        ),  # fmt: skip
        ("drops", _I64 * 8),  # by wire.header.HostDrop
        *(
            (n, _U32)
            for n in ("from_left_ip", "from_left_port", "from_right_ip", "from_right_port")
        ),
    ]


def _lib() -> Any:
    with build_lock:
        return _typed(library(Path(__file__).with_name("native_ring.c")))


def _typed(lib: Any) -> Any:
    if not hasattr(lib, "typed"):
        lib.ring_new.argtypes = [_I64, _U32, _U32, _U32, _U32]
        lib.ring_new.restype = ctypes.POINTER(_Ctx)
        lib.ring_free.argtypes = [ctypes.POINTER(_Ctx)]
        lib.ring_allreduce.argtypes = [
            ctypes.POINTER(_Ctx), ctypes.c_void_p, _I64, _I64, ctypes.c_double, ctypes.c_void_p
        ]  # fmt: skip
        lib.ring_allreduce.restype = ctypes.c_int
        lib.ring_linger.argtypes = [ctypes.POINTER(_Ctx), _I64, ctypes.c_double]
        lib.ring_linger.restype = ctypes.c_int
        lib.typed = True
    return lib


def _ip(host: str) -> int:
    return int.from_bytes(socket.inet_aton(socket.gethostbyname(host)), sys.byteorder)


class NativeRing:
    """One rank's ring state in C over socket ``fd`` (owned by the caller)."""

    def __init__(
        self,
        fd: int,
        right: tuple[str, int],
        left: tuple[str, int],
        *,
        rank: int,
        n: int,
        job_id: int,
        slots: int,
        window: int,
        timeout: float,
        max_retries: int,
        fast_acks: int,
        acks_per: int,
        senders: tuple[tuple[str, int], tuple[str, int]] | None = None,
    ) -> None:
        """``senders``: where the left and right neighbours' datagrams come from (default
        ``left`` and ``right``); anything else is dropped (``RingAllReduce``)."""
        self._lib = _lib()
        ctx = self._lib.ring_new(fd, _ip(right[0]), right[1], _ip(left[0]), left[1])
        if not ctx:
            raise MemoryError("native ring: no memory for its state")
        self._ctx = ctx
        c = ctx.contents
        c.rank, c.n, c.job_id, c.slots, c.window = rank, n, job_id, slots, window
        c.max_retries, c.fast_acks, c.acks_per_datagram = max_retries, fast_acks, acks_per
        c.timeout = timeout
        (lip, lport), (rip, rport) = (left, right) if senders is None else senders
        c.from_left_ip, c.from_left_port = _ip(lip), lport
        c.from_right_ip, c.from_right_port = _ip(rip), rport

    @property
    def counters(self) -> _Ctx:
        return self._ctx.contents  # type: ignore[no-any-return]

    def allreduce(self, rows: np.ndarray, epoch: int, total_timeout: float) -> tuple[int, list]:
        """Sum ``rows`` (packets x slots, int32, C order) over the ring in place: (status,
        rows whose data did not all arrive when the call failed)."""
        missing = np.zeros(rows.shape[0], dtype=np.uint8)
        status = self._lib.ring_allreduce(
            self._ctx, rows.ctypes.data, rows.shape[0], epoch, total_timeout, missing.ctypes.data
        )
        if status == NO_MEMORY:
            raise MemoryError(f"native ring: no memory for {rows.shape[0]} packets")
        if status not in (OK, RETRIES, DEADLINE):
            err = int(self.counters.err)
            raise OSError(err, f"native ring: socket error {err}")
        return status, [int(i) for i in np.flatnonzero(missing)]

    def linger(self, last_epoch: int, seconds: float) -> None:
        self._lib.ring_linger(self._ctx, last_epoch, seconds)

    def close(self) -> None:
        if self._ctx:
            self._lib.ring_free(self._ctx)
            self._ctx = None
