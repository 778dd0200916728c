"""ATP worker: the all-reduce client with hashed addressing into a shared pool and AIMD.

Example (a single worker against ATP's parameter server in this process, no switch: every
packet reaches the PS as a one-worker piece, and the PS answers):
    >>> import numpy as np
    >>> from hosts.atp.ps import AtpJobSpec, AtpParameterServer
    >>> c = AtpClient(5, 0, 1, 0, 64, 8, dest=("127.0.0.1", 9), bind=("127.0.0.1", 0))
    >>> spec = AtpJobSpec(1, "127.0.0.1", result_port=c.endpoint.address[1])
    >>> ps = AtpParameterServer({5: spec}, bind=("127.0.0.1", 0)).start()
    >>> c.dest = ps.address
    >>> c.allreduce_int(np.arange(40, dtype=np.int32)).tolist()[-2:]
    [38, 39]
    >>> c.close(); ps.stop()

Differences from NetReduce's client (hosts/netreduce/allreduce.py), docs/protocol.md "ATP":
- psn ``p`` goes to ``agg_idx = (Hash(job_id) + p) % size + offset``
  (``wire.header.atp_index``), copy 0: consecutive psns on consecutive aggregators. The
  range ``(offset, size)`` may be shared with other jobs; a collision with another job is
  the switch's business (it falls back to the PS). The window is kept to the range's size,
  so the psns in flight occupy different aggregators and never collide with each other.
- Packets go to the job's PS (the aggregation address); results come from that address:
  the switch multicasts a result it completed in the PS's name, the PS sends the others
  through the switch. A retransmission carries ``RETX`` and the switch sends it to the PS
  (unaggregated, or the sum it holds for the psn).
- The packet loop is the C one of NetReduce's client (hosts/transport/native_window.c) with
  ATP's addressing and the window below, by default; ``backend="python"`` (or
  ``$INC_HOST_BACKEND``) keeps it in Python; both read ECN marks. The C loop makes
  no fast retransmission: the switch's results overtake the PS's as a matter of course.
- The window adapts: +1 per window of results (additive increase), halved on a timeout at
  most once per timeout interval (multiplicative decrease; not before the call's first
  result: a call with no result yet is stalled, by a partner not started or a paused
  switch or PS, not congested), between 1 and ``window``; a
  decrease is taken back when the timeout proves spurious (``undone_cuts``: the results
  were late, not lost, ``_undo_if_spurious``). The socket is ECN-capable: a result that
  arrives marked Congestion Experienced (a switch egress queue above its threshold,
  p4src/ecn.p4) halves the window too, at most once per timeout interval (``ecn_cuts``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hosts.netreduce.allreduce import (
    RTT_PROBE_EVERY,
    AllReduceClient,
    AllReduceTimeout,
    ClientStats,
    _check_config,
    _Window,
)
from hosts.transport import native_window
from hosts.transport.sliding_window import ResultAssembler
from hosts.transport.udp import Endpoint
from wire.header import atp_hash, atp_index

UNDO_TIMEOUTS = 4  # how long after a retransmission its duplicate result undoes the decrease


@dataclass
class AtpClientStats(ClientStats):
    window_cuts: int = 0  # multiplicative decreases (a retransmission or an ECN mark)
    ecn_cuts: int = 0  # of those, for a result marked Congestion Experienced
    undone_cuts: int = 0  # decreases taken back: the timeout was spurious (a late result)


class AtpClient(AllReduceClient):
    """One worker of an ATP job; the constructor is AllReduceClient's, ``window`` the
    largest window AIMD may reach."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.window = min(self.window, self.region_size)
        self.max_window = self.window
        self.cwnd = float(self.window)
        self._last_cut = -1.0
        self.stats: AtpClientStats = AtpClientStats()
        self._retx_at: dict[int, float] = {}  # psn -> when it was last retransmitted
        self._undo: float | None = None  # the window before the last timeouts' decreases
        self._undo_until = 0.0  # evidence that they were spurious counts until then
        self._rtt_floor: float | None = None  # the smallest round trip seen
        self._ecn = self.endpoint if isinstance(self.endpoint, Endpoint) else None
        if self._ecn is not None:
            self._ecn.enable_ecn()

    def set_layout(
        self,
        epoch: int,
        offset: int,
        size: int,
        window: int | None = None,
        addressing: str = "hash",
    ) -> None:
        """A scheduled job's range for ``epoch`` (hosts/scheduled_job.py); AIMD's ceiling
        follows the new window. ATP always hashes (``atp_index``)."""
        if addressing != "hash":
            raise ValueError(f"an ATP worker hashes its psns, not {addressing!r}")
        super().set_layout(epoch, offset, size, window)
        self.window = min(self.window, size)
        self.max_window = self.window
        self.cwnd = min(self.cwnd, float(self.window))

    def _check_layout(
        self, job_id: int, worker_id: int, n_workers: int, size: int, window: int, slots: int
    ) -> None:
        # Any window is accepted; the worker keeps at most ``size`` psns in flight.
        _check_config(job_id, worker_id, n_workers, size, min(window, size), slots)

    def _address(self, psn: int) -> tuple[int, int]:
        return atp_index(self.job_id, psn, self.region_offset, self.region_size), 0

    def _native_applies(self) -> bool:
        """The C loop (hosts/transport/native_window.c) with ATP's addressing and AIMD; not
        on a test's impaired endpoint."""
        return self.backend == "native" and type(self.endpoint) is Endpoint

    def _run_native(self, first: int, count: int, wire: np.ndarray, length: int) -> np.ndarray:
        """One call in C. No fast retransmission: results of psns the switch summed come
        back over two links, those the PS summed over four, so results overtake each other
        as a matter of course (a window of them would make a fast retransmission of every
        psn that went to the PS)."""
        assert isinstance(self.endpoint, Endpoint)
        r = native_window.run_call(
            self.endpoint.fileno(), self.dest, wire,
            job_id=self.job_id, worker_id=self.worker_id, epoch=self.epoch, first_psn=first,
            window=self.max_window, timeout=self.timeout, max_retries=self.max_retries,
            fast_retx_results=1 << 62, rtt_probe_every=RTT_PROBE_EVERY,
            total_timeout=self.total_timeout, offset=self.region_offset,
            size=self.region_size, hashed=None, atp_start=atp_hash(self.job_id),
            aimd=(self.cwnd, self._last_cut, self._undo, self._undo_until, self._rtt_floor),
            ecn=self._ecn is not None,
        )  # fmt: skip
        native_window.fold_stats(r, self.stats, self.endpoint.stats)
        c = r.stats
        self.cwnd, self._last_cut, self._undo_until = c.cwnd, c.last_cut, c.undo_until
        self._undo = c.undo if c.undo >= 0 else None
        self._rtt_floor = c.rtt_floor if c.rtt_floor >= 0 else None
        self._retx_at.clear()  # the C loop keeps its resends' times itself
        self.stats.window_cuts += c.cuts
        self.stats.ecn_cuts += c.ecn_cuts
        self.stats.undone_cuts += c.undone
        if c.min_rtt >= 0:
            self._min_rtt = c.min_rtt if self._min_rtt is None else min(self._min_rtt, c.min_rtt)
        self.last_bitmaps = r.bitmaps
        if r.status == native_window.RETRIES:
            why = f"psn {c.fail_psn} got no result after {c.fail_tries} retransmissions"
            raise AllReduceTimeout(self.job_id, self.worker_id, r.missing, why)
        if r.status == native_window.DEADLINE:
            why = f"no complete result within {self.total_timeout:g} s"
            raise AllReduceTimeout(self.job_id, self.worker_id, r.missing, why)
        flat = r.out.reshape(-1)
        return flat if flat.size == length else flat[:length].copy()

    def _send(self, sends: list[tuple[int, bool]], window: _Window, wire: Any) -> None:
        resent = [psn for psn, retx in sends if retx]
        if resent and window._results:  # none yet: a stall (a partner not started), no cut
            before = self.cwnd
            if self._cut(window) and self._undo is None:
                self._undo = before  # the window before this run of timeouts
            if self._undo is not None:
                now = time.monotonic()
                self._retx_at.update((psn, now) for psn in resent)
                self._undo_until = now + UNDO_TIMEOUTS * self.timeout
        super()._send(sends, window, wire)

    def _cut(self, window: _Window) -> bool:
        """Multiplicative decrease, at most once per timeout interval."""
        now = time.monotonic()
        if now - self._last_cut < self.timeout:
            return False
        self.cwnd = max(1.0, self.cwnd / 2)
        window.window = int(self.cwnd)
        self._last_cut = now
        self.stats.window_cuts += 1
        return True

    def _receive(self, window: _Window, results: ResultAssembler) -> None:
        before = self.stats.results
        dups = self.stats.duplicate_results
        marked = self._ecn.stats.ce_marked if self._ecn is not None else 0
        super()._receive(window, results)
        gained = self.stats.results - before
        if self._min_rtt is not None:
            self._rtt_floor = min(self._rtt_floor or self._min_rtt, self._min_rtt)
        if self._undo is not None:
            self._undo_if_spurious(window, self.stats.duplicate_results > dups)
        if self._ecn is not None and self._ecn.stats.ce_marked > marked and self._cut(window):
            self._undo = None  # congestion the switch saw: no timeout to take back
            self._retx_at.clear()
            self.stats.ecn_cuts += 1
            return
        if gained:
            self.cwnd = min(float(self.max_window), self.cwnd + gained / self.cwnd)
            window.window = int(self.cwnd)

    def _undo_if_spurious(self, window: _Window, duplicate: bool) -> None:
        """The decrease a timeout caused is taken back when the packets it resent were late,
        not lost (TCP's Eifel response, with timing and duplicates for timestamps): a
        resent psn's result came back sooner than the smallest round trip (it answers the
        original), or a result arrived twice (the PS answered both the original and the
        copy). Late results are not congestion: a cold start, or
        a host descheduled for longer than the timeout, would otherwise keep the window
        small for many round trips. The evidence counts for ``UNDO_TIMEOUTS`` timeouts after
        the last retransmission."""
        now = time.monotonic()
        flying = set(window.in_flight())
        spurious = duplicate
        for psn, at in list(self._retx_at.items()):
            if psn < window.first_psn:
                del self._retx_at[psn]  # of an earlier call
            elif psn not in flying:  # answered now
                del self._retx_at[psn]
                floor = self._rtt_floor
                spurious = spurious or (floor is not None and now - at < floor)
        if spurious and self._undo is not None:
            self.cwnd = max(self.cwnd, self._undo)
            window.window = int(self.cwnd)
            self._undo = None
            self.stats.undone_cuts += 1
        elif now > self._undo_until:
            self._undo = None  # no sign the resent packets' originals were answered: lost
        if self._undo is None:
            self._retx_at.clear()
