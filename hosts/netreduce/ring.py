"""Ring all-reduce among the workers over UDP: the host-only baseline.

Example (a ring of one is its own sum):
    >>> import numpy as np
    >>> r = RingAllReduce(0, [("127.0.0.1", 0)])
    >>> r.allreduce_int(np.arange(3, dtype=np.int32)).tolist()
    [0, 1, 2]
    >>> r.close()

Algorithm: the vector is cut into packets of ``slots`` int32 values and the packets into n
chunks. Reduce-scatter (n - 1 steps: at step t rank r sends chunk r - t to its right
neighbour and adds chunk r - t - 1 from its left one) leaves chunk r + 1 fully summed at
rank r; all-gather (n - 1 steps) passes the summed chunks around. The chunk sent at step
t + 1 is the one received at step t, so each packet is forwarded as soon as it arrives:
the 2(n - 1) steps form a pipeline at packet granularity.

Reliability: every data packet (step t, packet j, call number ``epoch``) is acknowledged
by its receiver (acks batched, as (t, j) pairs in the value slots). The sender keeps at most
``window`` packets unacknowledged, resends one after ``timeout`` (or at once when three
later packets were acknowledged first) with the RETX flag, and gives up with
``AllReduceTimeout`` after ``max_retries`` resends of one packet or ``total_timeout``
seconds. The receiver applies each (t, j) once, so loss, duplication and reordering still
give the exact int32 sum; the sums are bit-identical on every rank (each chunk is summed
at one rank and copied). A call returns once everything was received and everything sent
was acknowledged; data of the previous call is acknowledged again (its ack was lost) and
data of the next call (a faster neighbour) is kept for it. ``close()`` lingers briefly to
acknowledge such late retransmissions after the last call.

Back ends: this loop is the reference; on a plain socket the default (``backend`` or
``$INC_HOST_BACKEND``, else native) runs the same rules in C (hosts/netreduce/native_ring.c),
the same native transport as the switch path's client, with the same packets on the wire.

Packets use the INC header (wire/header.py): op AGG_SYNC (data) or ACK, worker_id = the
sender's rank, agg_idx = step, psn = packet index in the chunk, epoch = call number. They
go to ``RING_UDP_PORT`` (not ``INC_UDP_PORT``), so the switch forwards them as plain UDP,
past its bindings: a rank therefore takes data only from its left neighbour's address and
port (naming that rank, flags ``RETX`` at most) and acks only from its right one's; the rest
is dropped and counted by reason (``RingStats.drops``, ``wire.header.HostDrop``), the same
in the native loop.
The float path quantises exactly like the switch client (allreduce.fixed_point_allreduce).
"""

from __future__ import annotations

import socket
import time
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from hosts.netreduce import native_ring
from hosts.netreduce.allreduce import AllReduceTimeout, fixed_point_allreduce
from hosts.netreduce.native_ring import NativeRing
from hosts.transport.native_window import choose_backend
from hosts.transport.udp import Address, Datagram, DatagramEndpoint, Endpoint
from wire.header import (
    HOST_DROPS,
    INC_UDP_PORT,
    MAX_SLOTS,
    SLOTS,
    Flag,
    Header,
    HostDrop,
    Op,
    ProtocolError,
    pack,
    pack_header,
    unpack,
)
from wire.serial import distance, wrap

RING_UDP_PORT = INC_UDP_PORT + 2
ACKS_PER_DATAGRAM = MAX_SLOTS // 2
FAST_RETX_ACKS = 3


@dataclass
class RingStats:
    calls: int = 0
    data_sent: int = 0
    retransmissions: int = 0
    acks_sent: int = 0
    duplicates: int = 0
    early: int = 0  # data of the next call, kept for it
    fast_retransmissions: int = 0
    # Datagrams no neighbour of this rank sent, by wire.header.HostDrop.
    drops: list[int] = field(default_factory=lambda: [0] * HOST_DROPS)


class _Call:
    """State of one all-reduce call on one rank (pure bookkeeping, no I/O)."""

    def __init__(self, rank: int, n: int, data: np.ndarray, epoch: int) -> None:
        self.rank, self.n, self.data, self.epoch = rank, n, data, epoch
        self.bounds = [len(data) * c // n for c in range(n + 1)]  # chunk c: packet rows
        self.steps = 2 * (n - 1)
        self.received = [
            np.zeros(self.chunk_len(self.recv_chunk(t)), bool) for t in range(self.steps)
        ]
        self.left = sum(int(r.size) for r in self.received)  # packets still to receive
        # The first step sends the rank's own chunk, which needs nothing from anyone.
        self.ready: deque[tuple[int, int]] = deque()
        if self.steps:
            self.ready.extend((0, j) for j in range(self.chunk_len(rank)))

    def chunk_len(self, c: int) -> int:
        return self.bounds[c + 1] - self.bounds[c]

    def send_chunk(self, t: int) -> int:
        return (self.rank - t) % self.n if t < self.n - 1 else (self.rank + self.n - t) % self.n

    def recv_chunk(self, t: int) -> int:
        return (self.send_chunk(t) - 1) % self.n

    def row(self, t: int, j: int, sending: bool) -> int:
        c = self.send_chunk(t) if sending else self.recv_chunk(t)
        return self.bounds[c] + j

    def deliver(self, t: int, j: int, values: np.ndarray) -> bool:
        """Apply data (t, j) from the left neighbour; False when it is a duplicate."""
        if not 0 <= t < self.steps or not 0 <= j < self.received[t].size:
            return False
        if self.received[t][j]:
            return False
        self.received[t][j] = True
        self.left -= 1
        r = self.row(t, j, sending=False)
        if t < self.n - 1:
            self.data[r] += values  # reduce-scatter: int32, wrapping like the switch
        else:
            self.data[r] = values  # all-gather: the final sum
        if t + 1 < self.steps:
            self.ready.append((t + 1, j))
        return True

    def missing_rows(self) -> list[int]:
        rows = {
            self.row(t, int(j), False)
            for t in range(self.steps)
            for j in np.flatnonzero(~self.received[t])
        }
        return sorted(rows)


class RingAllReduce:
    """Rank ``rank`` of a ring over ``peers`` (every rank's (ip, port), in ring order)."""

    def __init__(
        self,
        rank: int,
        peers: list[Address],
        *,
        job_id: int = 1,
        slots: int = SLOTS,
        window: int = 64,
        timeout: float = 0.05,
        max_retries: int = 100,
        total_timeout: float = 30.0,
        bind: Address | None = None,
        endpoint: DatagramEndpoint | None = None,
        backend: str | None = None,
        senders: tuple[Address, Address] | None = None,
    ) -> None:
        """``senders``: where the left and right neighbours' datagrams come from, by default
        their ``peers`` entries (a relay in front of this rank, as in tests, changes it)."""
        if not 0 <= rank < len(peers):
            raise ValueError(f"rank must be in 0..{len(peers) - 1}, got {rank}")
        if not 1 <= slots <= MAX_SLOTS or window < 1:
            raise ValueError(f"need 1 <= slots <= {MAX_SLOTS} and window >= 1")
        self.rank, self.n, self.peers = rank, len(peers), list(peers)
        self.job_id, self.slots, self.window = job_id, slots, window
        self.timeout, self.max_retries, self.total_timeout = timeout, max_retries, total_timeout
        if endpoint is None:
            endpoint = Endpoint(bind if bind is not None else ("0.0.0.0", peers[rank][1]))
        self.endpoint = endpoint
        self.right = self.peers[(rank + 1) % self.n]
        self.left = self.peers[(rank - 1) % self.n]
        # Who may send what: data from the left neighbour, acks from the right one.
        from_left, from_right = (self.left, self.right) if senders is None else senders
        self._senders = {
            Op.AGG_SYNC: (_resolved(from_left), (rank - 1) % self.n, Flag.RETX),
            Op.ACK: (_resolved(from_right), (rank + 1) % self.n, Flag.ACK),
        }
        self.epoch = 0
        self.last_scale = 1.0
        self.stats = RingStats()
        self._early: list[tuple[Header, np.ndarray]] = []  # data of epoch + 1
        # The same native transport as the switch path's client (hosts/transport/): the C
        # loop on a plain socket, this module's loop on anything else or with "python".
        self.backend = choose_backend(backend)
        self._native: NativeRing | None = None
        if self.backend == "native" and type(endpoint) is Endpoint:
            self._native = NativeRing(
                endpoint.fileno(), self.right, self.left, rank=rank, n=self.n,
                job_id=job_id, slots=slots, window=window, timeout=timeout,
                max_retries=max_retries, fast_acks=FAST_RETX_ACKS, acks_per=ACKS_PER_DATAGRAM,
                senders=senders,
            )  # fmt: skip

    # --- public API -------------------------------------------------------------------------
    def allreduce_int(self, x: np.ndarray) -> np.ndarray:
        """Element-wise int32 sum over the ring (wrapping on overflow)."""
        v = np.asarray(x)
        if v.ndim != 1 or not np.issubdtype(v.dtype, np.integer):
            raise ValueError(f"allreduce_int needs a 1-D integer vector, got {v.dtype} {v.shape}")
        rows = -(-v.size // self.slots)
        data = np.zeros((rows, self.slots), dtype=np.int32)
        data.reshape(-1)[: v.size] = v
        self.epoch = wrap(self.epoch + 1)
        self.stats.calls += 1
        if self._native is not None:
            self._run_native(data)
            return data.reshape(-1)[: v.size].copy()
        call = _Call(self.rank, self.n, data, self.epoch)
        early, self._early = self._early, []
        for h, values in early:
            self._on_data(call, h, values, [])
        self._run(call)
        return data.reshape(-1)[: v.size].copy()

    def allreduce(self, x: np.ndarray, bound: float | None = None) -> np.ndarray:
        """Element-wise float32 sum, through the same fixed point as the switch client."""
        out, self.last_scale = fixed_point_allreduce(
            self.allreduce_int, self.n, x, bound, self.job_id
        )
        return out

    def close(self, linger: float | None = None) -> None:
        """Acknowledge late retransmissions for ``linger`` s (default 4 x timeout), then close."""
        seconds = 4 * self.timeout if linger is None else linger
        if self._native is not None:
            self._native.linger(self.epoch, seconds)
            self._native.close()
            self._native = None
            self.endpoint.close()
            return
        end = time.monotonic() + seconds
        while (now := time.monotonic()) < end:
            if self.endpoint.wait(end - now):
                acks: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)
                for h, _ in self._datagrams():
                    if self._is_late(h):
                        acks[h.epoch].append((h.agg_idx, h.psn))
                for epoch, pairs in acks.items():
                    self._send_acks(pairs, epoch)
        self.endpoint.close()

    # --- the event loop ---------------------------------------------------------------------
    def _run_native(self, data: np.ndarray) -> None:
        assert self._native is not None
        c = self._native.counters
        before = (c.data_sent, c.retx, c.fast_retx, c.acks_sent, c.duplicates, c.early_kept)
        status, missing = self._native.allreduce(data, self.epoch, self.total_timeout)
        after = (c.data_sent, c.retx, c.fast_retx, c.acks_sent, c.duplicates, c.early_kept)
        st = self.stats
        d = [a - b for a, b in zip(after, before, strict=True)]
        st.data_sent += d[0]
        st.retransmissions += d[1]
        st.fast_retransmissions += d[2]
        st.acks_sent += d[3]
        st.duplicates += d[4]
        st.early += d[5]
        st.drops[:] = [int(c.drops[i]) for i in range(HOST_DROPS)]  # cumulative in C
        if status == native_ring.RETRIES:
            why = (
                f"step {c.fail_step} packet {c.fail_packet} unacknowledged by rank "
                f"{(self.rank + 1) % self.n} after {c.fail_tries} retransmissions"
            )
            raise AllReduceTimeout(self.job_id, self.rank, missing, f"ring: {why}")
        if status == native_ring.DEADLINE:
            why = f"no complete result within {self.total_timeout:g} s"
            raise AllReduceTimeout(self.job_id, self.rank, missing, f"ring: {why}")

    def _run(self, call: _Call) -> None:
        # (step, packet) -> [payload, last send time, resends], oldest send first
        in_flight: OrderedDict[tuple[int, int], list] = OrderedDict()
        self._newer_acks = 0  # acks of packets sent after the oldest one in flight
        start = time.monotonic()
        deadline = start + self.total_timeout
        while call.left or call.ready or in_flight:
            now = time.monotonic()
            out = self._resend_due(call, in_flight, now)
            while call.ready and len(in_flight) < self.window:
                t, j = call.ready.popleft()
                payload = self._data_packet(call, t, j, retx=False)
                in_flight[(t, j)] = [payload, now, 0]
                out.append((payload, self.right))
            if out:
                self.stats.data_sent += len(out)
                self.endpoint.send_many(out)
            if now >= deadline:
                raise self._timeout(call, f"no complete result within {self.total_timeout:g} s")
            wait = deadline - now
            if in_flight:
                wait = min(wait, next(iter(in_flight.values()))[1] + self.timeout - now)
            if self.endpoint.wait(max(wait, 0.0)):
                self._receive(call, in_flight)

    def _resend_due(self, call: _Call, in_flight: OrderedDict, now: float) -> list[Datagram]:
        out: list[Datagram] = []
        while in_flight:
            key, entry = next(iter(in_flight.items()))
            payload, sent_at, tries = entry
            # Several later packets acknowledged first: the oldest was most likely lost.
            fast = self._newer_acks >= FAST_RETX_ACKS
            if now - sent_at < self.timeout and not fast:
                break  # ordered by last send: the rest are younger
            if tries >= self.max_retries:
                raise self._timeout(
                    call,
                    f"step {key[0]} packet {key[1]} unacknowledged by rank "
                    f"{(self.rank + 1) % self.n} after {tries} retransmissions",
                )
            payload = self._retx_payload(payload)
            entry[:] = [payload, now, tries + 1]
            in_flight.move_to_end(key)
            self._newer_acks = 0
            out.append((payload, self.right))
            self.stats.retransmissions += 1
            self.stats.fast_retransmissions += fast
        return out

    def _receive(self, call: _Call, in_flight: OrderedDict) -> None:
        acks: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)  # epoch -> (t, j)
        for h, values in self._datagrams():
            if h.op == Op.ACK and h.epoch == call.epoch:
                for t, j in values.reshape(-1, 2).tolist():
                    self._on_ack(in_flight, (t, j))
            elif h.op == Op.AGG_SYNC:
                if h.epoch == call.epoch:
                    self._on_data(call, h, values, acks[h.epoch])
                elif distance(h.epoch, call.epoch) == 1:
                    # A faster left neighbour already started the next call: keep its data.
                    self._early.append((h, values.copy()))
                    acks[h.epoch].append((h.agg_idx, h.psn))
                    self.stats.early += 1
                else:
                    acks[h.epoch].append((h.agg_idx, h.psn))  # our ack was lost: say it again
        for epoch, pairs in acks.items():
            self._send_acks(pairs, epoch)

    def _on_ack(self, in_flight: OrderedDict, key: tuple[int, int]) -> None:
        if key not in in_flight:
            return  # a duplicate ack
        if key == next(iter(in_flight)):
            self._newer_acks = 0  # the oldest got through; count afresh for the next one
        else:
            self._newer_acks += 1
        del in_flight[key]

    def _is_late(self, h: Header) -> bool:
        """Data of this or an earlier call: a retransmission whose ack was lost."""
        return h.op == Op.AGG_SYNC and distance(self.epoch, h.epoch) >= 0

    def _on_data(
        self, call: _Call, h: Header, values: np.ndarray, acks: list[tuple[int, int]]
    ) -> None:
        if values.size != self.slots:
            return  # a peer with another slot count: a configuration error, ignore
        if not call.deliver(h.agg_idx, h.psn, values):
            self.stats.duplicates += 1
        acks.append((h.agg_idx, h.psn))

    def _datagrams(self) -> list[tuple[Header, np.ndarray]]:
        out = []
        for payload, src in self.endpoint.recv_many():
            got = self._refuse(payload, src)
            if isinstance(got, HostDrop):
                self.stats.drops[got] += 1
            else:
                out.append(got)
        return out

    def _refuse(self, payload: bytes, src: Address) -> HostDrop | tuple[Header, np.ndarray]:
        """The datagram if a neighbour sent it (module docstring), else why not."""
        try:
            h, values = unpack(payload)
        except ProtocolError:
            return HostDrop.MALFORMED
        if h.job_id != self.job_id:
            return HostDrop.OTHER_JOB
        sender = self._senders.get(Op(h.op)) if h.op in (Op.AGG_SYNC, Op.ACK) else None
        if sender is None or (h.flags & ~sender[2] if h.op == Op.AGG_SYNC else h.flags != Flag.ACK):
            return HostDrop.FORGED_FLAGS
        (ip, port), rank, _ = sender
        if src[0] != ip:
            return HostDrop.FOREIGN_ADDRESS
        if src[1] != port or h.worker_id != rank:
            return HostDrop.FOREIGN_PORT
        return h, values

    # --- packets ----------------------------------------------------------------------------
    def _data_packet(self, call: _Call, t: int, j: int, retx: bool) -> bytes:
        h = Header(
            op=Op.AGG_SYNC,
            flags=Flag.RETX if retx else Flag.NONE,
            job_id=self.job_id,
            worker_id=self.rank,
            psn=j,
            agg_idx=t,
            epoch=call.epoch,
        )
        return pack(h, call.data[call.row(t, j, sending=True)])

    @staticmethod
    def _retx_payload(payload: bytes) -> bytes:
        return payload[:1] + bytes([payload[1] | Flag.RETX]) + payload[2:]

    def _send_acks(self, acks: list[tuple[int, int]], epoch: int) -> None:
        if not acks:
            return
        out = []
        for i in range(0, len(acks), ACKS_PER_DATAGRAM):
            part = np.asarray(acks[i : i + ACKS_PER_DATAGRAM], dtype=np.int32).reshape(-1)
            h = Header(
                op=Op.ACK, flags=Flag.ACK, job_id=self.job_id, worker_id=self.rank, epoch=epoch
            )
            out.append((pack_header(h, part.size) + part.astype(">i4").tobytes(), self.left))
        self.stats.acks_sent += len(out)
        self.endpoint.send_many(out)

    def _timeout(self, call: _Call, why: str) -> AllReduceTimeout:
        return AllReduceTimeout(self.job_id, self.rank, call.missing_rows(), f"ring: {why}")


def _resolved(addr: Address) -> Address:
    """``addr`` with its host as the dotted IP that datagrams from it carry."""
    return socket.gethostbyname(addr[0]), addr[1]
