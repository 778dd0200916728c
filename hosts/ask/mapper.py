"""The mapper side of ASK: tuples into multi-tuple AGG_KV packets, sent reliably.

Example (no network: what the mapper would send, and its acknowledgement):
    >>> from dataclasses import replace
    >>> from hosts.ask.wire import parse
    >>> m = MapperFlow(MapperConfig(job_id=1, flow=0, part_base=0, part_size=4, window=4))
    >>> m.add_counts({"a": 3, "b": 1}); m.flush()
    >>> [parse(p)[0].psn for p in m.to_send(now=0.0)]   # "a" and "b" share a row
    [0]
    >>> sent = parse(m.to_send(now=1.0)[0])[0]                 # sent again...
    >>> m.on_ack(replace(sent, flags=Flag.ACK, slot_count=0)); m.in_flight   # ...acknowledged
    True
    0

``MapperFlow`` holds no socket (the caller moves payloads: ``hosts/ask/mapper_process.py`` over UDP,
``topologies/ask_local.py`` through an in-process switch). Each key's tuple goes to the slot of
its row that its fingerprint names (``hosts/ask/wire.py``); a row's packets are built in
up to ``layers`` buffers: a tuple goes to the first buffer whose slot holds its key (added
there, in int32; one that would overflow goes on) or nothing, else to a new buffer; a
buffer leaves when ``tuples_per_packet`` slots are used, when the row needs one buffer
more than ``layers`` (the oldest leaves), or on ``flush``. A row's packets are then about
as few as its busiest column allows.

Hot keys first: ``add_counts`` takes a chunk's counts (a bounded map-side combine, whose
counts are the frequency sketch); with ``hot_threshold`` n, keys counted fewer than n times
in the chunk bypass the switch: they travel in FALLBACK packets the switch forwards to the
reducer untouched (or, with ``cold_to_host``, as exact sums by key the caller hands the
reducer over its control connection: ``hosts/ask/mapper_process.py``), so that switch cells go to
frequent keys.

Reliability: psns count the flow's packets; at most ``window`` are unacknowledged (the
switch's seen entries are indexed by ``psn % window``); an ACK comes from the switch when
it absorbed every tuple, else from the reducer; a packet unacknowledged after ``rto``
seconds is sent again, unchanged (RETX is informational), and again after twice as long
each time (exponential backoff, up to ``2^BACKOFF rto``: a receiver behind a burst of
packets is not sent a copy of each every ``rto``). Each packet carries a random 32-bit
nonce in ``bitmap`` that its ACK echoes (the switch turns the packet around with its
header; the reducer copies it): an ACK must come from the reducer's address and port (the
switch answers in its name), name this job and flow, carry ``ACK`` (and ``RETX`` at most)
and no slots, and match a psn in flight with that packet's epoch and nonce; anything else
is dropped and counted by reason (``stats.drops``, ``wire.header.HostDrop``), so a host
that cannot see the mapper's packets cannot make it forget one it has in flight.

Epochs: packets carry the epoch current when first sent; ``start_epoch(e)`` stops new
sends until every packet in flight is acknowledged, then moves to ``e`` (``moved``), so
that the reducer may drain ``e - 1``.
"""

from __future__ import annotations

import os
import random
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from hosts.ask.wire import INT32_MAX, INT32_MIN, fingerprint, kv_bodies, place
from hosts.transport.udp import Address
from wire.header import (
    ASK_TUPLES,
    HOST_DROPS,
    INC_UDP_PORT,
    SLOTS,
    Flag,
    Header,
    HostDrop,
    Op,
    ProtocolError,
    pack_header,
    unpack,
)

BACKOFF = 5  # a packet's resends wait rto, 2 rto, ... up to 2^BACKOFF rto


@dataclass(frozen=True)
class MapperConfig:
    job_id: int
    flow: int  # the mapper's worker id in the job
    part_base: int
    part_size: int
    window: int
    fp_bits: int = 32
    hot_threshold: int = 0  # 0: every key goes through the switch
    switch_keys: int = 0  # at most so many of a chunk's keys (its most counted) through the
    # switch, the rest bypass; 0: no limit
    cold_to_host: bool = False  # add_columns: cold keys' exact sums kept in ``cold`` (by key,
    # no fingerprint) for the reducer's control connection, not sent in FALLBACK packets
    tuples_per_packet: int = ASK_TUPLES
    layers: int = 8  # packets being built per row at most
    rto: float = 0.05
    reducer: Address | None = None  # where ACKs come from: (reducer IP, INC_UDP_PORT)


@dataclass
class MapperStats:
    packets: int = 0  # first transmissions
    retransmissions: int = 0
    switch_tuples: int = 0  # tuples sent towards switch cells
    bypass_tuples: int = 0  # tuples sent in FALLBACK packets (cold keys)
    acks: int = 0
    # Datagrams dropped, by wire.header.HostDrop (module doc); late copies of ACKs already
    # taken count under NOT_IN_FLIGHT with forged ones: both change nothing.
    drops: list[int] = field(default_factory=lambda: [0] * HOST_DROPS)


def int32_pieces(
    fps: np.ndarray, vals: np.ndarray, hot: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tuples whose values fit int32: a value beyond it becomes several tuples of its key
    (each of magnitude at most ``INT32_MAX``, the last the rest), which add up to it.

    >>> int32_pieces(np.array([7, 9]), np.array([5, -(2**32)]), np.array([True, False]))[1]
    array([          5, -2147483647, -2147483647,          -2])
    """
    big = (vals < INT32_MIN) | (vals > INT32_MAX)
    if not big.any():
        return fps, vals, hot
    reps = np.maximum(1, -(-np.abs(vals) // INT32_MAX))
    first = np.cumsum(reps) - reps  # where each value's pieces start
    at = np.arange(int(reps.sum())) - np.repeat(first, reps)
    last = np.repeat(reps - 1, reps)
    sign, v = np.repeat(np.sign(vals), reps), np.repeat(vals, reps)
    pieces = np.where(at < last, sign * INT32_MAX, v - sign * INT32_MAX * last)
    return np.repeat(fps, reps), pieces, np.repeat(hot, reps)


@dataclass
class _Row:
    keys: list[int] = field(default_factory=lambda: [0] * ASK_TUPLES)
    vals: list[int] = field(default_factory=lambda: [0] * ASK_TUPLES)
    used: int = 0


class MapperFlow:
    def __init__(self, cfg: MapperConfig, epoch: int = 1) -> None:
        if not 1 <= cfg.tuples_per_packet <= ASK_TUPLES:
            raise ValueError(f"tuples_per_packet must be 1..{ASK_TUPLES}")
        self.cfg = cfg
        self.epoch = epoch
        self._next_epoch: int | None = None
        self.vocab: dict[int, list[Hashable]] = {}  # fingerprint -> keys sent under it
        self.sent: dict[Hashable, int] = {}  # key -> sum of its values sent
        self.cold: dict[Hashable, int] = {}  # key -> sum kept for the host (cold_to_host)
        self._fp: dict[Hashable, int] = {}
        self._rows: dict[int, list[_Row]] = {}  # row -> packets being built, oldest first
        self._bypass = _Row()
        # row, the packet's slots (``kv_bodies``), flags: built, waiting for the window
        self._ready: deque[tuple[int, bytes, int]] = deque()
        # psn -> (payload, when it is due again: rto after a send, twice that after each
        # resend up to 2^BACKOFF rto, so that a busy receiver is not sent ever more copies;
        # resends so far; epoch, nonce: what its ACK must echo)
        self._flight: dict[int, tuple[bytes, float, int, int, int]] = {}
        self._nonces = random.Random(os.urandom(16))  # unguessable by a host off the path
        self._psn = 0
        self.stats = MapperStats()

    # -- input ----------------------------------------------------------------------------

    def _fingerprint(self, key: Hashable) -> int:
        fp = self._fp.get(key)
        if fp is None:
            fp = fingerprint(key, self.cfg.fp_bits)
            self._fp[key] = fp
            self.vocab.setdefault(fp, []).append(key)
        return fp

    def add(self, key: Hashable, value: int) -> None:
        """One tuple through the switch."""
        self.add_counts({key: value}, hot_threshold=0)

    def add_counts(self, counts: Mapping[Hashable, int], hot_threshold: int | None = None) -> None:
        """A chunk's combined tuples; keys below the hot threshold bypass the switch."""
        threshold = self.cfg.hot_threshold if hot_threshold is None else hot_threshold
        for key, value in counts.items():
            if not INT32_MIN <= value <= INT32_MAX:
                raise ValueError(f"value {value} of key {key!r} does not fit in int32")
            fp = self._fingerprint(key)
            self.sent[key] = self.sent.get(key, 0) + value
            if threshold and abs(value) < threshold:
                self._to_bypass(fp, value)
            else:
                self._to_row(fp, value)

    def add_columns(self, keys: Sequence[Hashable], values: np.ndarray) -> None:
        """A chunk's combined tuples as two columns (each key once: Arrow's ``value_counts``
        or ``group_by``), packed with numpy: below the hot threshold (and beyond the
        ``switch_keys`` most counted) into FALLBACK packets of 16, the rest into the packets
        of their rows, a key's column in its slot; keys
        sharing a row's column go to successive packets of that row (its layers), and every
        packet leaves at the end of the chunk. A value beyond int32 (what a tuple carries)
        goes as several tuples of its key, in successive packets, that add up to it."""
        vals = np.asarray(values, dtype=np.int64)
        if len(vals) != len(keys):
            raise ValueError(f"{len(keys)} keys and {len(vals)} values")
        if len(vals) == 0:
            return
        t, most = self.cfg.hot_threshold, self.cfg.switch_keys
        hot = np.abs(vals) >= t if t else np.ones(len(vals), dtype=bool)
        if most and hot.sum() > most:  # the switch's cells to the most counted keys
            at = np.flatnonzero(hot)
            hot[at[np.argpartition(-np.abs(vals[at]), most)[most:]]] = False
        if self.cfg.cold_to_host and not hot.all():
            cold = self.cold
            at = np.flatnonzero(~hot)
            for i, v in zip(at.tolist(), vals[at].tolist(), strict=True):
                cold[keys[i]] = cold.get(keys[i], 0) + v
            self.stats.bypass_tuples += len(at)
            at = np.flatnonzero(hot)
            keys, vals, hot = [keys[i] for i in at.tolist()], vals[at], hot[at]
            if len(vals) == 0:
                return
        fp_of, sent = self._fingerprint, self.sent
        fps = np.fromiter((fp_of(k) for k in keys), dtype=np.int64, count=len(vals))
        for k, v in zip(keys, vals.tolist(), strict=True):
            sent[k] = sent.get(k, 0) + v
        fps, vals, hot = int32_pieces(fps, vals, hot)
        self._bypass_columns(fps[~hot], vals[~hot])
        fps, vals = fps[hot], vals[hot]
        if len(fps) == 0:
            return
        self.stats.switch_tuples += len(fps)
        rows = self.cfg.part_base + (fps >> 4) % self.cfg.part_size
        cols = fps % ASK_TUPLES
        # a cell's most counted key in its row's first packet: every mapper's, so that the
        # key that claims a cell is the same hot key whichever mapper's packet comes first
        order = np.lexsort((-np.abs(vals), cols, rows))
        rows, cols, fps, vals = rows[order], cols[order], fps[order], vals[order]
        first = np.ones(len(rows), dtype=bool)  # the first tuple of each (row, column)
        first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
        at = np.arange(len(rows))
        layer = at - np.maximum.accumulate(np.where(first, at, 0))
        packet, index = np.unique(rows * (len(rows) + 1) + layer, return_inverse=True)
        pk = np.zeros((len(packet), ASK_TUPLES), dtype=np.int64)
        pv = np.zeros((len(packet), ASK_TUPLES), dtype=np.int64)
        pk[index, cols], pv[index, cols] = fps, vals
        self._ready_bodies((packet // (len(rows) + 1)).tolist(), kv_bodies(pk, pv), 0)

    def _ready_bodies(self, rows: list[int], bodies: np.ndarray, flags: int) -> None:
        """Packets of ``rows`` (their slots ``bodies``, ``kv_bodies``) to the send queue."""
        data, size = bodies.tobytes(), bodies.shape[1]
        self._ready.extend(
            (row, data[i * size : (i + 1) * size], flags) for i, row in enumerate(rows)
        )

    def _bypass_columns(self, fps: np.ndarray, vals: np.ndarray) -> None:
        self.stats.bypass_tuples += len(fps)
        n = -(-len(fps) // ASK_TUPLES)
        if n == 0:
            return
        k = np.zeros(n * ASK_TUPLES, dtype=np.int64)
        v = np.zeros(n * ASK_TUPLES, dtype=np.int64)
        k[: len(fps)], v[: len(fps)] = fps, vals
        bodies = kv_bodies(k.reshape(n, ASK_TUPLES), v.reshape(n, ASK_TUPLES))
        self._ready_bodies([0] * n, bodies, Flag.FALLBACK)

    def _to_row(self, fp: int, value: int) -> None:
        """Into the first of the row's buffers (packets being built) whose column holds the
        key (added) or nothing; with none, a new buffer, and past ``layers`` buffers the
        oldest leaves first. Every row's packets are then about as few as its busiest
        column allows."""
        self.stats.switch_tuples += 1
        row, col = place(fp, self.cfg.part_base, self.cfg.part_size)
        bufs = self._rows.get(row)
        if bufs is None:
            bufs = self._rows[row] = []
        free = None
        for buf in bufs:
            k = buf.keys[col]
            if k == fp:
                total = buf.vals[col] + value
                if INT32_MIN <= total <= INT32_MAX:
                    buf.vals[col] = total
                    return
            elif k == 0 and free is None:
                free = buf
        if free is None:
            if len(bufs) >= self.cfg.layers:
                self._emit(row, bufs.pop(0), 0)
            free = _Row()
            bufs.append(free)
        free.keys[col], free.vals[col] = fp, value
        free.used += 1
        if free.used >= self.cfg.tuples_per_packet:
            bufs.remove(free)
            self._emit(row, free, 0)

    def _to_bypass(self, fp: int, value: int) -> None:
        self.stats.bypass_tuples += 1
        buf = self._bypass
        buf.keys[buf.used], buf.vals[buf.used] = fp, value
        buf.used += 1
        if buf.used == ASK_TUPLES:
            self._emit(0, buf, Flag.FALLBACK)
            self._bypass = _Row()

    def _emit(self, row: int, buf: _Row, flags: int) -> None:
        self._ready_bodies([row], kv_bodies(np.array([buf.keys]), np.array([buf.vals])), flags)

    def flush(self) -> None:
        """Every buffered tuple into a packet (at the end of the input)."""
        for row, bufs in self._rows.items():
            for buf in bufs:
                self._emit(row, buf, 0)
        self._rows.clear()
        if self._bypass.used:
            self._emit(0, self._bypass, Flag.FALLBACK)
            self._bypass = _Row()

    # -- sending ------------------------------------------------------------------------

    @property
    def ready(self) -> int:
        """Packets built and waiting for the window."""
        return len(self._ready)

    @property
    def in_flight(self) -> int:
        return len(self._flight)

    @property
    def idle(self) -> bool:
        """Nothing buffered for sending, nothing unacknowledged."""
        return not self._ready and not self._flight

    def start_epoch(self, epoch: int) -> None:
        self._next_epoch = epoch
        self._maybe_move()

    @property
    def moved(self) -> bool:
        return self._next_epoch is None

    def _maybe_move(self) -> None:
        if self._next_epoch is not None and not self._flight:
            self.epoch, self._next_epoch = self._next_epoch, None

    def to_send(self, now: float) -> list[bytes]:
        """Retransmissions due, then new packets while the window has room."""
        out = []
        for psn, (payload, due, tries, epoch, nonce) in self._flight.items():
            if now >= due:
                tries = min(tries + 1, BACKOFF)
                due = now + self.cfg.rto * (1 << tries)
                self._flight[psn] = (payload, due, tries, epoch, nonce)
                self.stats.retransmissions += 1
                out.append(payload)
        while self._ready and self._next_epoch is None and self._room():
            row, body, flags = self._ready.popleft()
            h = Header(
                op=Op.AGG_KV,
                flags=flags,
                job_id=self.cfg.job_id,
                worker_id=self.cfg.flow,
                ver=self.epoch & 1,
                psn=self._psn,
                agg_idx=row,
                epoch=self.epoch,
                bitmap=self._nonces.getrandbits(32),
            )
            payload = pack_header(h, SLOTS) + body
            self._flight[self._psn] = (payload, now + self.cfg.rto, 0, h.epoch, h.bitmap)
            self._psn = (self._psn + 1) & 0xFFFFFFFF
            self.stats.packets += 1
            out.append(payload)
        return out

    def _room(self) -> bool:
        """psn p may be sent only once p - window is acknowledged: the switch's seen entry
        ``psn % window`` then holds nothing that is still needed."""
        if not self._flight:
            return True
        oldest = next(iter(self._flight))  # psns enter in order; dicts keep it
        return (self._psn - oldest) & 0xFFFFFFFF < self.cfg.window

    def on_datagram(self, payload: bytes, src: Address) -> bool:
        """Take what reached the mapper's socket from ``src``: True if it acknowledged a
        packet in flight, else dropped and counted (module doc)."""
        reducer = self.cfg.reducer or (src[0], INC_UDP_PORT)
        if src[0] != reducer[0]:
            return self._drop(HostDrop.FOREIGN_ADDRESS)
        if src[1] != reducer[1]:
            return self._drop(HostDrop.FOREIGN_PORT)
        try:
            h = unpack(payload)[0]
        except ProtocolError:
            return self._drop(HostDrop.MALFORMED)
        return self.on_ack(h)

    def on_ack(self, h: Header) -> bool:
        """Take an acknowledgement: True if it acknowledged a packet in flight, else dropped
        and counted (module doc)."""
        reason = self._refuse_ack(h)
        if reason is not None:
            return self._drop(reason)
        del self._flight[h.psn]
        self.stats.acks += 1
        self._maybe_move()
        return True

    def _refuse_ack(self, h: Header) -> HostDrop | None:
        if h.op != Op.AGG_KV or h.job_id != self.cfg.job_id:
            return HostDrop.OTHER_JOB
        if h.worker_id != self.cfg.flow:
            return HostDrop.NOT_A_MEMBER
        if h.flags & ~Flag.RETX != Flag.ACK:
            return HostDrop.FORGED_FLAGS
        if h.slot_count != 0:
            return HostDrop.BAD_SLOT_COUNT
        sent = self._flight.get(h.psn)
        if sent is None or (h.epoch, h.bitmap) != sent[3:]:
            return HostDrop.NOT_IN_FLIGHT
        return None

    def _drop(self, reason: HostDrop) -> bool:
        self.stats.drops[reason] += 1
        return False

    def send_all(self, pairs: Iterable[tuple[Hashable, int]]) -> None:
        """Every pair as one tuple (no combining)."""
        for k, v in pairs:
            self.add(k, v)

    def counts_for(self, fps: Iterable[int]) -> dict[Hashable, int]:
        """Exact sums this mapper sent for every key under the given fingerprints."""
        return {k: self.sent[k] for fp in fps for k in self.vocab.get(fp, ())}
