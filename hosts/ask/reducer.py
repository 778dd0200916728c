"""The reducer side of ASK: tuples the switch passed on, rows it drains, exact results.

Example (no network):
    >>> from hosts.ask.mapper import MapperConfig, MapperFlow
    >>> m = MapperFlow(MapperConfig(job_id=1, flow=0, part_base=0, part_size=4, window=4))
    >>> m.add_counts({"a": 3}); m.flush()
    >>> r = Reducer(job_id=1, reducer_id=1, rows=range(0, 4))
    >>> ack = r.on_packet(m.to_send(0.0)[0])     # as if the switch had absorbed nothing
    >>> r.on_packet(m.to_send(1.0)[0]) == ack     # a retransmission is acknowledged again...
    True
    >>> r.result([m.vocab], lambda fps: [m.counts_for(fps)])   # ...and counted once
    {'a': 3}

``Reducer`` holds no socket. It adds up, per fingerprint, (1) the tuples of mapper packets
that reach it (those the switch did not absorb, and the cold keys' FALLBACK packets),
once per (flow, psn) whatever the duplicates, acknowledging each copy; (2) the rows it
drains from the switch: ``start_drain(e)`` lists the job's rows, ``drain_requests`` sends
one DRAIN packet per row not yet answered (again after ``rto``), ``on_packet`` takes the
answers (a row's copy of epoch ``e``, read by the switch, not cleared).

What it takes (docs/protocol.md, *Isolation*, I-ASK): a mapper's packet names a mapper of
the job (flows ``0..reducer_id - 1``), carries ``FALLBACK`` and ``RETX`` at most and ``K``
slots, and, when it came from a socket, comes from the address and port that mapper bound
(``bind_flow``: the IP the job declares for it, the port it said it sends from); a drained
row carries ``RESULT|DRAIN``, names the reducer, comes from where the DRAINs went
(``drain_source``) and answers a row still pending in the epoch being drained. Anything
else changes no total, marks no psn seen and gets no ACK: dropped and counted by reason
(``stats.drops``, ``wire.header.HostDrop``). The ACK echoes the packet's ``bitmap`` (the
mapper's nonce) and epoch.

``result`` maps fingerprints back to keys with the mappers' vocabularies. A fingerprint
that two different keys were sent under is a collision: the switch and the reducer have
added those keys together, so their totals are discarded and the keys' results are the
sums each mapper reports having sent (``counts_for``). Results are exact either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from hosts.ask.wire import kv_packet
from hosts.transport.udp import Address
from wire.header import (
    ASK_TUPLES,
    HOST_DROPS,
    SLOTS,
    Flag,
    Header,
    HostDrop,
    Op,
    ProtocolError,
    pack,
    unpack,
)

MAPPER_FLAGS = Flag.FALLBACK | Flag.RETX  # what a mapper's packet may carry
DRAINED_FLAGS = Flag.RESULT | Flag.DRAIN  # the switch's answer to a DRAIN


@dataclass
class ReducerStats:
    packets: int = 0  # mapper packets that reached the reducer (duplicates too)
    duplicates: int = 0
    passed_tuples: int = 0  # tuples the switch did not absorb (switch path)
    bypass_tuples: int = 0  # tuples of FALLBACK packets
    drained_rows: int = 0
    drained_tuples: int = 0
    drain_requests: int = 0
    bytes_in: int = 0  # UDP payload bytes received (mapper packets and drained rows)
    collisions: int = 0  # fingerprints claimed by more than one key
    # Datagrams dropped, by wire.header.HostDrop (module doc); a repeated answer to a row
    # already drained counts under NOT_IN_FLIGHT with forged ones: both change nothing.
    drops: list[int] = field(default_factory=lambda: [0] * HOST_DROPS)


class Reducer:
    def __init__(self, job_id: int, reducer_id: int, rows: range, rto: float = 0.05) -> None:
        self.job_id = job_id
        self.reducer_id = reducer_id
        self.rows = rows
        self.rto = rto
        self.totals: dict[int, int] = {}  # fingerprint -> sum
        self._seen: dict[int, set[int]] = {}  # flow -> psns counted
        self._drain_epoch: int | None = None
        self._pending: dict[int, float] = {}  # row -> when last asked
        self.flows: dict[int, Address] = {}  # mapper -> the address its packets come from
        self.drain_source: Address | None = None  # where drained rows come from
        self.stats = ReducerStats()

    def bind_flow(self, flow: int, address: Address) -> None:
        """Take mapper ``flow``'s packets from ``address`` only (when they come with one)."""
        if not 0 <= flow < self.reducer_id:
            raise ValueError(f"flow {flow} is not a mapper of job {self.job_id}")
        self.flows[flow] = address

    def _add(self, keys: np.ndarray, vals: np.ndarray) -> int:
        n = 0
        for k, v in zip(keys.tolist(), vals.tolist(), strict=True):
            if k:
                self.totals[k] = self.totals.get(k, 0) + v
                n += 1
        return n

    def on_packet(self, payload: bytes, src: Address | None = None) -> bytes | None:
        """Take one datagram (``src``: where it came from, when from a socket); returns the
        ACK to send back to a mapper, if any."""
        got = self._admit(payload, src)
        if isinstance(got, HostDrop):
            self.stats.drops[got] += 1
            return None
        h, values = got
        keys, vals = values[0::2].view(np.uint32), values[1::2]
        self.stats.bytes_in += len(payload)
        if h.flags & Flag.DRAIN:
            self._on_drained(h, keys, vals)
            return None
        self.stats.packets += 1
        seen = self._seen.setdefault(h.worker_id, set())
        if h.psn in seen:
            self.stats.duplicates += 1
        else:
            seen.add(h.psn)
            n = self._add(keys, vals)
            if h.flags & Flag.FALLBACK:
                self.stats.bypass_tuples += n
            else:
                self.stats.passed_tuples += n
        ack = Header(
            op=Op.AGG_KV, flags=Flag.ACK, job_id=self.job_id, worker_id=h.worker_id, psn=h.psn,
            epoch=h.epoch, bitmap=h.bitmap,
        )  # fmt: skip
        return pack(ack, np.zeros(0, np.int32))

    def _admit(self, payload: bytes, src: Address | None) -> HostDrop | tuple[Header, np.ndarray]:
        try:
            h, values = unpack(payload)
        except ProtocolError:
            return HostDrop.MALFORMED
        if h.op != Op.AGG_KV or h.job_id != self.job_id:
            return HostDrop.OTHER_JOB
        if h.flags & Flag.DRAIN:
            if h.flags & ~Flag.RETX != DRAINED_FLAGS:
                return HostDrop.FORGED_FLAGS
            if h.worker_id != self.reducer_id:
                return HostDrop.NOT_A_MEMBER
            expect = self.drain_source
        else:
            if h.flags & ~MAPPER_FLAGS:
                return HostDrop.FORGED_FLAGS
            if not 0 <= h.worker_id < self.reducer_id:
                return HostDrop.NOT_A_MEMBER
            expect = self.flows.get(h.worker_id)
        if src is not None:
            if expect is None:
                return HostDrop.NOT_A_MEMBER  # no mapper bound to that flow (yet)
            if src[0] != expect[0]:
                return HostDrop.FOREIGN_ADDRESS
            if src[1] != expect[1]:
                return HostDrop.FOREIGN_PORT
        if h.slot_count != SLOTS:
            return HostDrop.BAD_SLOT_COUNT
        if h.flags & Flag.DRAIN and (
            h.epoch != self._drain_epoch or h.agg_idx not in self._pending
        ):
            return HostDrop.NOT_IN_FLIGHT  # another drain's, or a row already taken
        return h, values

    # -- draining ---------------------------------------------------------------------

    def start_drain(self, epoch: int) -> None:
        """Read every row's copy of ``epoch`` (no mapper writes it any more)."""
        self._drain_epoch = epoch
        self._pending = {row: -1e18 for row in self.rows}

    @property
    def draining(self) -> bool:
        return bool(self._pending)

    def drain_requests(self, now: float, limit: int = 256) -> list[bytes]:
        out: list[bytes] = []
        assert self._drain_epoch is not None or not self._pending
        for row, at in self._pending.items():
            if len(out) >= limit:
                break
            if now - at >= self.rto:
                self._pending[row] = now
                h = Header(
                    op=Op.AGG_KV, flags=Flag.DRAIN, job_id=self.job_id,
                    worker_id=self.reducer_id, agg_idx=row, epoch=self._drain_epoch or 0,
                    ver=(self._drain_epoch or 0) & 1,
                )  # fmt: skip
                out.append(kv_packet(h, [0] * ASK_TUPLES, [0] * ASK_TUPLES))
                self.stats.drain_requests += 1
        return out

    def _on_drained(self, h: Header, keys: np.ndarray, vals: np.ndarray) -> None:
        del self._pending[h.agg_idx]  # _admit: pending in the epoch being drained
        self.stats.drained_rows += 1
        self.stats.drained_tuples += self._add(keys, vals)

    # -- results ------------------------------------------------------------------------

    def result(
        self,
        vocabs: Sequence[Mapping[int, Sequence[Hashable]]],
        counts_for: Callable[[list[int]], Iterable[Mapping[Hashable, int]]],
    ) -> dict[Hashable, int]:
        """Key -> exact total. ``vocabs``: each mapper's fingerprint -> keys;
        ``counts_for(fps)``: each mapper's exact sums for the keys under ``fps``."""
        pairs = [([fp for fp, ks in v.items() for _ in ks], [k for ks in v.values() for k in ks])
                 for v in vocabs]  # fmt: skip
        keys, colliding = owners(pairs)
        return self.result_of(keys, colliding, counts_for(sorted(colliding)) if colliding else [])

    def result_of(
        self, keys: Mapping[int, Hashable], colliding: set[int],
        counts: Iterable[Mapping[Hashable, int]],
    ) -> dict[Hashable, int]:  # fmt: skip
        """Key -> exact total from ``owners``' fingerprint -> key and colliding
        fingerprints, and the mappers' exact sums (``counts``) for the colliding ones."""
        unknown = self.totals.keys() - keys.keys()
        if unknown:
            raise ProtocolError(f"{len(unknown)} fingerprints no mapper sent, e.g. {min(unknown)}")
        self.stats.collisions = len(colliding)
        totals = self.totals
        out = {k: totals.get(fp, 0) for fp, k in keys.items() if fp not in colliding}
        for part in counts:
            for key, v in part.items():
                out[key] = out.get(key, 0) + v
        return out


def owners(
    vocabs: Iterable[tuple[Sequence[int], Sequence[Hashable]]],
) -> tuple[dict[int, Hashable], set[int]]:
    """Each fingerprint's key, and the fingerprints more than one key was sent under
    (collisions), from each mapper's fingerprints and keys as two parallel lists; dicts
    and sets built in C, Python only for the fingerprints two mappers share.

    >>> owners([([7, 8], ["a", "b"]), ([8, 9, 9], ["c", "d", "e"])])
    ({7: 'a', 8: 'c', 9: 'e'}, {8, 9})
    """
    keys: dict[int, Hashable] = {}
    colliding: set[int] = set()
    for fps, ks in vocabs:
        mine = dict(zip(fps, ks, strict=True))
        if len(mine) < len(fps):  # this mapper sent two keys under one fingerprint
            twice = Counter(fps)
            colliding.update(fp for fp, n in twice.items() if n > 1)
        colliding.update(fp for fp in mine.keys() & keys.keys() if keys[fp] != mine[fp])
        keys.update(mine)
    return keys, colliding
