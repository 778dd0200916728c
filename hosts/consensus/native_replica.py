"""The replica's request path in C (native_replica.c), loaded with ctypes.

Example (``Replica.run`` does this when the native back end is chosen)::

    fast = NativeRequests.for_replica(rep)   # built with gcc on first use, cached
    fast.serve(rep, until)                   # requests until a timer or a control datagram

The C loop reads the request socket with recvmmsg, applies ``Replica.on_request``'s checks
and logs the requests that come in order (the common case under load), answering with
sendmmsg, and waits in poll until a timer of the replica's is due or a control datagram
comes (so a loaded replica pays no Python per wake-up); a request out of order and
everything after it goes to ``Replica.on_request`` with the state the C loop left. Both
sequencers use it: under a host sequencer the leader numbers its clients' requests and
sends them to the followers in the same batch. The back end is ``$INC_HOST_BACKEND``
(``native`` by default, ``python``: the reference loop); without a C compiler the replica
runs the Python loop with one line on stderr.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from hosts.consensus.entry_log import RECORD, EntryLog
from hosts.consensus.log_wire import (
    CONSENSUS,
    FALLBACK,
    HOST_SESSION,
    MAX_DATA,
    RESULT,
    VIEW_SHIFT,
    Entry,
)
from hosts.transport.native_window import BACKENDS, ENV, build_lock, library
from wire.header import HEADER_LEN, SLOTS

_I64 = ctypes.c_int64
_P = ctypes.c_void_p
CAP = 1024  # datagrams per pump at most: the loop then looks at its timers and control socket
MAX_CLIENTS = 256
MAX_FOLLOWERS = 15
TAKEN, SLOW = 1, 2


class _Ctx(ctypes.Structure):
    """Mirror of ``struct rep_ctx`` (native_replica.c): same order, same types."""

    _fields_ = [
        *((n, _I64) for n in ("fd", "job_id", "port", "op", "result_flag", "fallback_flag")),
        *((n, _I64) for n in ("slots", "host_session", "host_sequencer", "leader_ip")),
        *((n, _I64) for n in ("fast", "leader", "session", "next_seq", "host_seq")),
        *((n, _I64) for n in ("bitmap", "log_len", "received", "taken", "first_slow")),
        *((n, _I64) for n in ("requests", "dropped_sender", "send_drops", "heard", "sent")),
        ("n_followers", _I64),
        ("clients", _I64 * MAX_CLIENTS),
        ("followers", _I64 * MAX_FOLLOWERS),
        ("cap", _I64),
        ("max_data", _I64),
        *((n, _P) for n in ("buf", "lens", "ips", "ports", "kinds", "rec", "out", "out_to")),
        ("n_out", _I64),
        ("cap_out", _I64),
    ]


def _lib() -> Any:
    with build_lock:
        lib = library(Path(__file__).with_name("native_replica.c"))
        if not hasattr(lib, "typed"):
            lib.rep_new.argtypes = [_I64]
            lib.rep_new.restype = ctypes.POINTER(_Ctx)
            lib.rep_free.argtypes = [ctypes.POINTER(_Ctx)]
            lib.rep_pump.argtypes = [ctypes.POINTER(_Ctx)]
            lib.rep_pump.restype = _I64
            lib.rep_serve.argtypes = [ctypes.POINTER(_Ctx), _I64, ctypes.c_double]
            lib.rep_serve.restype = _I64
            lib.rep_header_len.restype = _I64
            lib.rep_record_len.restype = _I64
            lib.rep_slot_len.restype = _I64
            if lib.rep_header_len() != HEADER_LEN or lib.rep_record_len() < 12 + MAX_DATA:
                raise RuntimeError("native_replica.c disagrees with wire/header.py's layout")
            lib.typed = True
        return lib


def _ip(ip: str) -> int:
    """An IPv4 address as C reads ``sin_addr.s_addr`` (network order in memory)."""
    return int.from_bytes(socket.inet_aton(ip), sys.byteorder)


def backend() -> str:
    b = os.environ.get(ENV, "native")
    if b not in BACKENDS:
        raise ValueError(f"{ENV} must be one of {', '.join(BACKENDS)}, got {b!r}")
    return b


class Replica(Protocol):
    """What the C path reads and writes of a replica (``hosts/consensus/replica.py``):
    its sockets, members and the state of its log, which it extends in order."""

    req: socket.socket
    ctl: socket.socket
    job_id: int
    rid: int
    port: int
    group_ip: str | None
    replicas: list[dict[str, Any]]
    clients: dict[int, str]
    log: EntryLog
    session: int | None
    next_seq: int
    host_seq: int
    view: int
    pending: dict[int, Entry]
    decided: set[int]
    noop_ok: dict[int, set[int]]
    heard: float
    stats: dict[str, int]

    @property
    def leader_id(self) -> int: ...

    @property
    def leader(self) -> bool: ...

    @property
    def normal(self) -> bool: ...

    def others(self) -> list[int]: ...

    def on_request(self, data: bytes, addr: tuple[str, int]) -> None: ...


class NativeRequests:
    """The C request path of one replica (its request socket, clients and followers)."""

    def __init__(self, rep: Replica) -> None:
        if len(rep.replicas) - 1 > MAX_FOLLOWERS or max(rep.clients, default=0) >= MAX_CLIENTS:
            raise ValueError(f"native replica: at most {MAX_FOLLOWERS + 1} replicas and "
                             f"client ids below {MAX_CLIENTS}")  # fmt: skip
        self._lib = _lib()
        ctx = self._lib.rep_new(CAP)
        if not ctx:
            raise MemoryError("native replica: no memory for its buffers")
        self._ctx = ctx
        x = self.x = ctx.contents
        x.fd, x.job_id, x.port = rep.req.fileno(), rep.job_id, rep.port
        x.op, x.result_flag, x.fallback_flag = CONSENSUS, RESULT, FALLBACK
        x.slots, x.host_session, x.max_data = SLOTS, HOST_SESSION, MAX_DATA
        x.host_sequencer = rep.group_ip is None
        for worker, ip in rep.clients.items():
            x.clients[worker] = _ip(ip)
        others = rep.others()
        x.n_followers = len(others)
        for k, r in enumerate(others):
            x.followers[k] = _ip(rep.replicas[r]["ip"])
        self._slot = int(self._lib.rep_slot_len())

    @classmethod
    def for_replica(cls, rep: Replica) -> NativeRequests | None:
        """The native path for ``rep``, or None (the Python loop) if the back end is
        ``python`` or the C loop cannot be built (one line on stderr)."""
        if backend() != "native":
            return None
        try:
            return cls(rep)
        except (OSError, RuntimeError, ValueError) as err:  # BuildError is a RuntimeError
            print(f"replica: native request path unavailable ({err}); Python loop",
                  file=sys.stderr)  # fmt: skip
            return None

    def fast_path(self, rep: Replica) -> bool:
        """Whether a request next in order may be logged without Python: what
        ``Replica.sequenced``'s first case asks, for every sequence number from next on."""
        return (
            rep.normal
            and rep.session is not None
            and not rep.pending
            and all(q < rep.next_seq for q in rep.decided)
            and all(q < rep.next_seq for q in rep.noop_ok)
        )

    def pump(self, rep: Replica) -> int:
        """Handle every request queued on ``rep.req`` (up to CAP); returns how many were read."""
        self._state(rep)
        return self._results(rep, self._lib.rep_pump(self._ctx))

    def serve(self, rep: Replica, until: float) -> int:
        """Handle requests until ``until`` (``time.monotonic``), a datagram on ``rep.ctl``, a
        request out of order (handled here by ``on_request``) or a signal; returns how many
        requests were read."""
        self._state(rep)
        return self._results(rep, self._lib.rep_serve(self._ctx, rep.ctl.fileno(), until))

    def _state(self, rep: Replica) -> None:
        x = self.x
        x.fast, x.leader = self.fast_path(rep), rep.leader
        x.session, x.next_seq, x.host_seq = rep.session or 0, rep.next_seq, rep.host_seq
        x.bitmap = (rep.view << VIEW_SHIFT) | (1 << rep.rid)
        x.log_len = len(rep.log)
        x.leader_ip = _ip(rep.replicas[rep.leader_id]["ip"])

    def _results(self, rep: Replica, n: int) -> int:
        x = self.x
        if x.taken:  # kept as records, decoded when Python reads them (entry_log.py)
            rep.log.extend_records(ctypes.string_at(x.rec, x.taken * RECORD.size), x.taken)
            rep.next_seq, rep.host_seq = x.next_seq, x.host_seq
        stats = rep.stats
        for name in ("requests", "dropped_sender", "send_drops"):
            if got := getattr(x, name):
                stats[name] = stats.get(name, 0) + got
        if x.heard:
            rep.heard = time.monotonic()  # the host sequencer's frames: the leader is alive
        if x.first_slow >= 0:
            lens = (_I64 * n).from_address(x.lens)
            ips = (_I64 * n).from_address(x.ips)
            ports = (_I64 * n).from_address(x.ports)
            for k in range(x.first_slow, n):
                data = ctypes.string_at(x.buf + k * self._slot, lens[k])
                ip = socket.inet_ntoa(ips[k].to_bytes(4, sys.byteorder))
                rep.on_request(data, (ip, ports[k]))
        return int(n)

    def close(self) -> None:
        if self._ctx:
            self._lib.rep_free(self._ctx)
            self._ctx = None
