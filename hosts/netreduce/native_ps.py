"""The parameter server's serve loop in C (native_ps.c), loaded with ctypes.

Example::

    agg = NativeAggregator(endpoint.fileno(), n_workers=4, slots=32)
    while not stop.is_set():
        agg.serve(max_ms=50)          # returns after 50 ms without a datagram
    agg.stats()                       # AggregatorStats-like counters

hosts/netreduce/ps.py's ParameterServer uses it when its host back end is native, it owns
a plain socket and every job gets the default region (the command-line PS), so the PS
baseline has the same native transport as the switch path's client; ``SoftAggregator``
there is the reference, with the same packets on the wire.
"""

from __future__ import annotations

import ctypes
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hosts.transport.native_window import build_lock, check_served, library
from wire.header import WORKER_FLAGS

_I64 = ctypes.c_int64
N_DROPS = 16  # cells of ps_ctx.drops (native_ps.c): at least wire.header.DROP_REASONS


class _Ctx(ctypes.Structure):
    """The leading fields of ``struct ps_ctx`` (native_ps.c), in order."""

    _fields_ = [
        *((n, _I64) for n in ("fd", "quorum", "slots", "pool")),
        *((n, _I64) for n in ("packets", "results", "reserved", "ignored", "err")),
        ("drops", _I64 * N_DROPS),
        ("spoofed", _I64),
    ]


def _lib() -> Any:
    with build_lock:
        lib = library(Path(__file__).with_name("native_ps.c"))
        if not hasattr(lib, "typed"):
            lib.ps_new.argtypes = [_I64, _I64, _I64, _I64, _I64]
            lib.ps_new.restype = ctypes.POINTER(_Ctx)
            lib.ps_free.argtypes = [ctypes.POINTER(_Ctx)]
            lib.ps_declare.argtypes = [ctypes.POINTER(_Ctx), _I64, ctypes.c_uint32]
            lib.ps_serve.argtypes = [ctypes.POINTER(_Ctx), _I64]
            lib.ps_serve.restype = ctypes.c_int
            lib.typed = True
        return lib


class NativeAggregator:
    """SoftAggregator's state machine and the PS's socket loop, in C, on socket ``fd``."""

    def __init__(
        self, fd: int, n_workers: int, slots: int | None, pool: int,
        worker_ips: Sequence[str] | None = None,
    ) -> None:  # fmt: skip
        self._lib = _lib()
        ctx = self._lib.ps_new(fd, n_workers, slots or 0, pool, int(WORKER_FLAGS))
        if not ctx:
            raise MemoryError("native parameter server: no memory for its state")
        self._ctx = ctx
        for w, ip in enumerate(worker_ips or ()):  # in network byte order, as sin_addr
            self._lib.ps_declare(ctx, w, int.from_bytes(socket.inet_aton(ip), sys.byteorder))

    @property
    def counters(self) -> _Ctx:
        return self._ctx.contents  # type: ignore[no-any-return]

    def serve(self, max_ms: int) -> None:
        """Serve until ``max_ms`` pass without a datagram."""
        rc = self._lib.ps_serve(self._ctx, max_ms)
        check_served(
            rc,
            int(self.counters.err),
            "native parameter server",
            "no memory for a job's aggregators",
        )

    def close(self) -> None:
        if self._ctx:
            self._lib.ps_free(self._ctx)
            self._ctx = None
