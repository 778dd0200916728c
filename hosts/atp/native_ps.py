"""ATP's parameter server loop in C (native_ps.c), loaded with ctypes.

Example::

    agg = NativeAtpAggregator(endpoint.fileno(), {7: AtpJobSpec(2, "10.0.0.1")})
    agg.process_payload(datagram)  # [(bytes, (ip, port)), ...]: what it would send
    while not stop.is_set():
        agg.serve(max_ms=50)       # the socket loop; returns after 50 ms without a datagram
    agg.counts()                   # {"packets": ..., ...}: AtpPsStats's fields

hosts/atp/ps.py's AtpParameterServer uses it when its host back end is native and it owns
a plain socket, so the shared pool's PS runs on the same native transport as its workers
and as the baselines' PS; ``AtpAggregator`` there is the reference, with the same packets
on the wire (tests/test_atp_native_ps.py).
"""

from __future__ import annotations

import ctypes
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hosts.transport.native_window import build_lock, check_served, library
from hosts.transport.udp import Datagram

_I64 = ctypes.c_int64
_U32 = ctypes.c_uint32
SLOT = 2048  # bytes per queued datagram (native_ps.c)
MAX_JOBS = 64  # jobs one C loop serves (native_ps.c); a PS for more stays in Python
_STATS = ("packets", "pieces", "aggregates", "duplicates", "conflicts", "results",
          "multicast", "reserved", "ignored", "forged")  # fmt: skip


class _Ctx(ctypes.Structure):
    """The leading fields of ``struct atp_ps`` (native_ps.c), in order."""

    _fields_ = [(n, _I64) for n in ("fd", "slots", "keep", *_STATS, "err", "n_out")]


def _lib() -> Any:
    with build_lock:
        lib = library(Path(__file__).with_name("native_ps.c"))
        if not hasattr(lib, "atp_typed"):
            ctx = ctypes.POINTER(_Ctx)
            lib.atp_ps_new.argtypes = [_I64, _I64, _I64]
            lib.atp_ps_new.restype = ctx
            lib.atp_ps_free.argtypes = [ctx]
            lib.atp_ps_job.argtypes = [ctx, _I64, _I64, _U32, _I64]
            lib.atp_ps_job.restype = ctypes.c_int
            lib.atp_ps_process.argtypes = [ctx, ctypes.c_char_p, _I64]
            lib.atp_ps_process.restype = ctypes.c_int
            lib.atp_ps_out.argtypes = [ctx, _I64, ctypes.c_char_p, ctypes.POINTER(_U32),
                                       ctypes.POINTER(_U32)]  # fmt: skip
            lib.atp_ps_out.restype = _I64
            lib.atp_ps_clear.argtypes = [ctx]
            lib.atp_ps_serve.argtypes = [ctx, _I64]
            lib.atp_ps_serve.restype = ctypes.c_int
            lib.atp_typed = True
        return lib


class NativeAtpAggregator:
    """AtpAggregator's state machine and the PS's socket loop, in C, on socket ``fd``
    (``-1``: the state machine alone, fed by ``process_payload``)."""

    def __init__(self, fd: int, jobs: Mapping[int, Any], slots: int, keep: int) -> None:
        """``jobs``: job id -> its spec (``n_workers``, ``result_ip``, ``result_port``:
        hosts/atp/ps.py's AtpJobSpec)."""
        self._lib = _lib()
        ctx = self._lib.atp_ps_new(fd, slots, keep)
        if not ctx:
            raise ValueError(f"native ATP parameter server: slots {slots}, keep {keep}")
        self._ctx = ctx
        for j, spec in jobs.items():
            ip = int.from_bytes(socket.inet_aton(spec.result_ip), sys.byteorder)
            rc = self._lib.atp_ps_job(ctx, j, spec.n_workers, ip, spec.result_port)
            if rc == -2:
                self.close()
                raise MemoryError("native ATP parameter server: no memory for a job's tables")
            if rc < 0:
                self.close()
                raise ValueError(f"native ATP parameter server: cannot serve job {j}")

    @property
    def counters(self) -> _Ctx:
        return self._ctx.contents  # type: ignore[no-any-return]

    def counts(self) -> dict[str, int]:
        """The C loop's counters by the names of the reference's (AtpPsStats)."""
        c = self.counters
        return {n: int(getattr(c, n)) for n in _STATS}

    def process_payload(self, payload: bytes) -> list[Datagram]:
        """AtpAggregator.process_payload in C: the datagrams it sends for ``payload``."""
        if self._lib.atp_ps_process(self._ctx, payload, len(payload)) < 0:
            raise MemoryError("native ATP parameter server: no memory for a pending psn")
        out: list[Datagram] = []
        buf = ctypes.create_string_buffer(SLOT)
        ip, port = _U32(), _U32()
        for i in range(int(self.counters.n_out)):
            n = self._lib.atp_ps_out(self._ctx, i, buf, ctypes.byref(ip), ctypes.byref(port))
            addr = socket.inet_ntoa(int(ip.value).to_bytes(4, sys.byteorder))
            out.append((buf.raw[:n], (addr, int(port.value))))
        self._lib.atp_ps_clear(self._ctx)
        return out

    def serve(self, max_ms: int) -> None:
        """Serve until ``max_ms`` pass without a datagram."""
        rc = self._lib.atp_ps_serve(self._ctx, max_ms)
        check_served(
            rc, int(self.counters.err), "native ATP parameter server", "no memory for a pending psn"
        )

    def close(self) -> None:
        if self._ctx:
            self._lib.atp_ps_free(self._ctx)
            self._ctx = None
