"""The aggregation client's packet loop in C (native_window.c), loaded with ctypes.

Example (a worker against a parameter server in this process)::

    lib = load()                                  # built with gcc on first use, cached
    call = WindowCall.for_packets(wire, slots=32, first_psn=0, window=32, ...)
    status = call.run(lib, endpoint.fileno(), ("10.0.0.100", 20050))

``hosts/netreduce/allreduce.py`` keeps the Python loop as the reference and picks the back
end per client: ``backend="native"|"python"``, by default ``$INC_HOST_BACKEND`` or
native. Native is used where the C loop does what the Python one would: a plain
``Endpoint`` (not a test's ``ImpairedEndpoint``, not ECN-counting) and a client whose
addressing and packet handling are the base class's; ATP's client (hosts/atp/worker.py)
runs it with ATP's addressing and AIMD window (``atp_start``, ``aimd``). Without a C
compiler the native back end falls back to Python with one line on stderr.

The library is cached by its source's hash under ``$INC_NATIVE_CACHE`` (default
``~/.cache/inc/native``), built by ``cbuild.shared_library`` like p4sim's native back end.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cbuild.shared_library import BuildError, build, cache_dir
from wire.header import HEADER_LEN, HOST_DROPS, RESULT_FLAGS, WORKER_FLAGS

SOURCE = Path(__file__).with_name("native_window.c")
BACKENDS = ("native", "python")
ENV = "INC_HOST_BACKEND"

OK, RETRIES, DEADLINE, SOCKET_ERROR, NO_MEMORY = range(5)

_I64 = ctypes.c_int64
_P = ctypes.c_void_p
HOST_DROP_CELLS = 8  # native_window.c's drops[]: at least wire.header.HOST_DROPS


class _Call(ctypes.Structure):
    """Mirror of ``struct inc_call`` (native_window.c): same order, same types."""

    _fields_ = [
        ("fd", _I64),
        ("dest_ip", ctypes.c_uint32),
        ("dest_port", ctypes.c_uint32),
        *((n, _I64) for n in ("job_id", "worker_id", "slots", "epoch")),
        *((n, _I64) for n in ("first_psn", "count", "window", "max_retries")),
        ("fast_retx_results", _I64),
        ("rtt_probe_every", _I64),
        ("timeout", ctypes.c_double),
        ("total_timeout", ctypes.c_double),
        *((n, _I64) for n in ("offset", "size", "hashed", "hash_a", "hash_b")),
        ("worker_flags", _I64),
        ("result_flags", _I64),
        *((n, _P) for n in ("wire", "out", "bitmaps", "have")),
        *(
            (n, _I64)
            for n in (
                "queued",
                "sent",
                "sent_bytes",
                "send_drops",
                "retx",
                "fast_retx",
                "results",
                "dups",
                "waits",
                "received",
                "received_bytes",
                "fail_psn",
                "fail_tries",
                "err",
            )
        ),  # fmt: skip
        ("min_rtt", ctypes.c_double),
        ("drops", _I64 * HOST_DROP_CELLS),
        ("aimd", _I64),
        ("cuts", _I64),
        ("undone", _I64),
        *((n, ctypes.c_double) for n in ("cwnd", "last_cut", "undo", "undo_until", "rtt_floor")),
        *((n, _I64) for n in ("ecn", "ce_marked", "ecn_cuts", "gro_runs")),
    ]


_libs: dict[str, Any] = {}
build_lock = threading.RLock()  # the first use may come from several threads at once
_warned = False


#: what every host loop in C shares, put in place of its ``#include "native_bytes.h"``
SHARED_C = Path(__file__).with_name("native_bytes.h").read_text()


def check_served(rc: int, err: int, who: str, no_memory: str) -> None:
    """Raise for what a C loop's ``serve_datagrams`` (native_bytes.h) returned: -2 its
    handler had no memory (MemoryError: ``who: no_memory``), -1 a socket error (OSError with
    the loop's errno ``err``); 0 is a quiet ``max_ms``."""
    if rc == -2:
        raise MemoryError(f"{who}: {no_memory}")
    if rc < 0:
        raise OSError(err, f"{who}: socket error {err}")


def library(source: Path) -> Any:
    """The C file ``source`` compiled and loaded (built on first use, then cached; raises
    BuildError without a C compiler)."""
    with build_lock:
        key = str(source)
        if key not in _libs:
            cache = cache_dir("INC_NATIVE_CACHE", "inc/native")
            prefix = source.stem.replace("_", "-")
            text = source.read_text().replace('#include "native_bytes.h"\n', SHARED_C, 1)
            _libs[key] = ctypes.CDLL(str(build(text, prefix, cache)))
        return _libs[key]


def load() -> Any:
    """The window loop's library, its functions typed and its header checked."""
    with build_lock:
        lib = library(SOURCE)
        if not hasattr(lib, "checked"):
            lib.inc_allreduce.argtypes = [ctypes.POINTER(_Call)]
            lib.inc_allreduce.restype = ctypes.c_int
            lib.inc_header_len.restype = _I64
            lib.inc_host_drops.restype = _I64
            if lib.inc_header_len() != HEADER_LEN:
                raise BuildError(f"native_window.c has a {lib.inc_header_len()}-byte INC "
                                 f"header, wire/header.py {HEADER_LEN}")  # fmt: skip
            if lib.inc_host_drops() != HOST_DROPS or HOST_DROPS > HOST_DROP_CELLS:
                raise BuildError(f"native_window.c counts {lib.inc_host_drops()} host drop "
                                 f"reasons, wire/header.py {HOST_DROPS}")  # fmt: skip
            lib.checked = True
        return lib


def choose_backend(requested: str | None = None) -> str:
    """``requested``, else ``$INC_HOST_BACKEND``, else native; native only if it builds."""
    global _warned
    name = requested or os.environ.get(ENV) or "native"
    if name not in BACKENDS:
        raise ValueError(f"host back end must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "native":
        try:
            load()
        except BuildError as e:
            if not _warned:
                print(f"hosts: native data path unavailable ({e}); using Python", file=sys.stderr)
                _warned = True
            return "python"
    return name


@dataclass
class CallResult:
    status: int
    out: np.ndarray  # count x slots int32 (rows without a result stay zero)
    bitmaps: np.ndarray
    have: np.ndarray
    stats: _Call

    @property
    def missing(self) -> list[int]:
        first = int(self.stats.first_psn)
        return [first + int(i) for i in np.flatnonzero(self.have == 0)]


def run_call(
    fd: int,
    dest: tuple[str, int],
    wire: np.ndarray,
    *,
    job_id: int,
    worker_id: int,
    epoch: int,
    first_psn: int,
    window: int,
    timeout: float,
    max_retries: int,
    fast_retx_results: int,
    rtt_probe_every: int,
    total_timeout: float,
    offset: int,
    size: int,
    hashed: tuple[int, int] | None,
    atp_start: int | None = None,
    aimd: tuple[float, float, float | None, float, float | None] | None = None,
    ecn: bool = False,
) -> CallResult:
    """One all-reduce call on socket ``fd``: ``wire`` is (packets, slots) big-endian int32.
    ``atp_start``: ATP's addressing (``wire.header.atp_index``, the job's hash), instead of
    ``hashed``; ``aimd``: ATP's window state (cwnd, time of the last decrease, the window
    before the decreases that may be undone or None, until when, the smallest round trip
    or None), read back from the result's ``stats`` (``cwnd``, ``last_cut``, ``undo`` and
    ``rtt_floor`` < 0 for None, ``undo_until``; ``cuts``, ``undone``: counts); ``ecn``: the
    socket reads TOS (``Endpoint.enable_ecn``): CE marks are counted (``ce_marked``) and,
    with ``aimd``, cut the window (``ecn_cuts``, also in ``cuts``)."""
    lib = load()
    data = np.ascontiguousarray(wire, dtype=">i4")
    count, slots = data.shape
    out = np.zeros((count, slots), dtype=np.int32)
    bitmaps = np.zeros(count, dtype=np.uint32)
    have = np.zeros(count, dtype=np.uint8)
    c = _Call()
    c.fd = fd
    c.dest_ip = int.from_bytes(socket.inet_aton(socket.gethostbyname(dest[0])), sys.byteorder)
    c.dest_port = dest[1]
    c.job_id, c.worker_id, c.slots, c.epoch = job_id, worker_id, slots, epoch
    c.first_psn, c.count, c.window, c.max_retries = first_psn, count, window, max_retries
    c.fast_retx_results, c.rtt_probe_every = fast_retx_results, rtt_probe_every
    c.timeout, c.total_timeout = timeout, total_timeout
    c.offset, c.size = offset, size
    c.hashed = hashed is not None
    c.hash_a, c.hash_b = hashed if hashed is not None else (0, 0)
    if atp_start is not None:
        c.hashed, c.hash_a, c.hash_b = 2, 0, atp_start
    c.undo = c.rtt_floor = -1.0
    if aimd is not None:
        c.aimd, (c.cwnd, c.last_cut, undo, c.undo_until, floor) = 1, aimd
        c.undo = -1.0 if undo is None else undo
        c.rtt_floor = -1.0 if floor is None else floor
    c.ecn = ecn
    c.worker_flags, c.result_flags = int(WORKER_FLAGS), int(RESULT_FLAGS)
    c.wire, c.out = data.ctypes.data, out.ctypes.data
    c.bitmaps, c.have = bitmaps.ctypes.data, have.ctypes.data
    status = lib.inc_allreduce(ctypes.byref(c))
    if status == NO_MEMORY:
        raise MemoryError(f"native all-reduce: no memory for {count} packets")
    if status == SOCKET_ERROR:
        raise OSError(int(c.err), f"native all-reduce: {os.strerror(int(c.err))}")
    return CallResult(status, out, bitmaps, have, c)


def fold_stats(r: CallResult, st: Any, ep: Any) -> None:
    """Add a call's counters to a client's ``ClientStats`` ``st`` and its endpoint's
    ``EndpointStats`` ``ep``."""
    c = r.stats
    st.packets_sent += c.queued
    st.retransmissions += c.retx
    st.fast_retransmissions += c.fast_retx
    st.results += c.results
    st.duplicate_results += c.dups
    for i in range(len(st.drops)):
        st.drops[i] += int(c.drops[i])
    st.waits += c.waits
    ep.sent += c.sent
    ep.sent_bytes += c.sent_bytes
    ep.send_drops += c.send_drops
    ep.received += c.received
    ep.received_bytes += c.received_bytes
    ep.ce_marked += c.ce_marked
    ep.gro_runs += c.gro_runs
