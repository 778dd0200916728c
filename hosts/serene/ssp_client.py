"""Several epochs' all-reduces in flight at once, for bounded staleness (SSP).

Example (a worker that may run ``ahead`` epochs before it needs a result)::

    pipe = PipelinedAllReduce(client)            # client: an AllReduceClient
    pipe.submit(epoch=0, x=grad0, bound=1.0)     # returns at once
    pipe.submit(epoch=1, x=grad1, bound=1.0)     # epoch 0's round may still be running
    total, bitmaps = pipe.result(0)              # blocks until every packet of epoch 0 is in

A background thread drives one send window over the job's whole psn stream (every
submitted epoch's packets in order, each carrying its epoch), so the rule the switch's
memory relies on (I1: psn p goes out only with the results of every psn <= p - window)
holds across epochs, not just within one. Results are sorted back to their epoch; lost
packets or results are resent at the timeout; a result that arrives before its packet went
out (a partial round completed without this worker) is kept, and the packet still goes
out once, so that the switch sees every epoch of every worker; a WAIT reply (the switch
holds this worker back: bounded staleness, a mode swap's fence) is resent at the timeout
too. Values are fixed point with the one scale every worker derives from
the agreed bound (``hosts/transport/quantize.py``), so no exponent vote is needed per epoch.

For Serene's async mode (docs/protocol.md, "Synchronisation modes") packet ``c`` of every
epoch carries ``c`` in ``bitmap``: the switch keeps chunk ``c``'s running aggregate on
aggregator ``offset + c`` (the region must hold an epoch's packets) and adds a worker's
contributions in psn order, each once. An answer flagged ``RUNNING`` is that running
aggregate (``running(epoch)``), not a round.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from hosts.netreduce.allreduce import AllReduceClient, AllReduceTimeout
from hosts.transport.quantize import choose_scale, dequantize, quantize
from hosts.transport.result_filter import ResultFilter
from hosts.transport.sliding_window import split_into_packets
from wire.header import Flag, Header, Op, aggregator_address, pack_header


@dataclass
class _Epoch:
    first: int
    count: int
    length: int
    scale: float
    data: np.ndarray
    bitmaps: np.ndarray
    have: int = 0
    running: bool = False  # answered with running aggregates (async), not rounds
    done: threading.Event = field(default_factory=threading.Event)


class PipelinedAllReduce:
    """One worker's all-reduces of successive epochs, overlapped (module docstring)."""

    def __init__(self, client: AllReduceClient, poll_s: float = 0.005) -> None:
        self.c = client
        self.poll_s = poll_s
        self.waits = 0
        self.retransmissions = 0
        self._lock = threading.Lock()
        self._epochs: dict[int, _Epoch] = {}
        self._owner: dict[int, int] = {}  # psn -> epoch, for psns in flight or queued
        self._packets: dict[int, bytes] = {}  # psn -> datagram, until its result is in
        self._end = client.next_psn  # psns below were submitted
        self._running: dict[int, bool] = {}  # epoch -> answered by running aggregates
        self._next = client.next_psn  # next psn to send for the first time
        self._base = client.next_psn  # oldest psn without a result
        self._sent: OrderedDict[int, float] = OrderedDict()
        # psns whose result came (multicast: a partial round completed without us) before
        # we sent them: still sent once, so that the switch sees every epoch of this worker
        # (its clock moves one epoch at a time), but never resent.
        self._early: set[int] = set()
        self._error: str | None = None
        # The switch's (or PS's) answers of this job only, dropped by reason into the
        # client's counters (client.stats.drops, hosts/transport/result_filter.py).
        self._filter = ResultFilter(client.job_id, client.slots, client.dest)
        self._filter.drops = client.stats.drops
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    # --- what the training loop calls ---------------------------------------------------------
    def submit(self, epoch: int, x: np.ndarray, bound: float | None, terms: int = 0) -> None:
        """Start epoch ``epoch``'s all-reduce of float32 ``x`` (|x| <= ``bound`` on every
        worker alike; ``bound`` None: ``x`` is int32, summed as is); epochs must be
        submitted in order, the same on every worker. ``terms``: how many contributions a
        sum may hold (the fixed-point scale leaves room for them; default N; a running
        aggregate holds every contribution of an async period)."""
        terms = max(terms, self.c.n_workers)
        if bound is None:
            v = np.asarray(x).reshape(-1).astype(np.int32)
            scale, ints = 0.0, v
        else:
            v = np.clip(np.asarray(x, dtype=np.float32).reshape(-1), -bound, bound)
            scale = choose_scale(bound, terms)
            ints = quantize(v, scale, terms)
        packets = split_into_packets(ints, self.c.slots)
        wire = packets.astype(">i4")
        with self._lock:
            first = self._end
            data = np.zeros(packets.shape, np.int32)
            ep = _Epoch(first, len(packets), v.size, scale, data, np.zeros(len(data), np.uint32))
            self._epochs[epoch] = ep
            for i in range(len(packets)):
                psn = first + i
                idx, ver = aggregator_address(psn, self.c.region_offset, self.c.region_size)
                h = Header(op=Op.AGG_SYNC, job_id=self.c.job_id, worker_id=self.c.worker_id,
                           ver=ver, psn=psn, agg_idx=idx, epoch=epoch, bitmap=i)  # fmt: skip
                self._packets[psn] = pack_header(h, self.c.slots) + wire[i].tobytes()
                self._owner[psn] = epoch
            self._end = first + len(packets)
            self.c.next_psn = self._end

    def ready(self, epoch: int) -> bool:
        ep = self._epochs.get(epoch)
        return ep is not None and ep.done.is_set()

    def result(self, epoch: int, timeout: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Epoch ``epoch``'s sum (float32; int32 if submitted without a bound) and per
        packet its contributors' bitmap."""
        ep = self._epochs[epoch]
        limit = self.c.total_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while not ep.done.wait(0.05):
            if self._error is not None or time.monotonic() > deadline:
                why = self._error or f"epoch {epoch} not complete within {limit:g} s"
                missing = [p for p in range(ep.first, ep.first + ep.count) if p in self._packets]
                raise AllReduceTimeout(self.c.job_id, self.c.worker_id, missing, why)
        with self._lock:
            del self._epochs[epoch]
        self._running[epoch] = ep.running
        ints = ep.data.reshape(-1)[: ep.length]
        return (ints.copy() if ep.scale == 0.0 else dequantize(ints, ep.scale)), ep.bitmaps

    def running(self, epoch: int) -> bool:
        """Whether epoch ``epoch``'s result (already taken) was the running aggregate of an
        async period rather than a round's sum."""
        return self._running.get(epoch, False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)

    # --- the window, on its own thread -------------------------------------------------------
    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._send_due()
                if self.c.endpoint.wait(self.poll_s):
                    self._receive()
        except OSError as e:  # the socket went away: tell whoever waits
            self._error = f"socket error: {e}"

    def _send_due(self) -> None:
        now = time.monotonic()
        out = []
        with self._lock:
            for psn, at in list(self._sent.items()):
                if now - at < self.c.timeout:
                    break
                self._sent.move_to_end(psn)
                self._sent[psn] = now
                out.append(self._packets[psn])
                self.retransmissions += 1
            limit = min(self._base + self.c.window, self._end)
            while self._next < limit:
                psn = self._next
                out.append(self._packets[psn])
                if psn in self._early:
                    self._early.discard(psn)
                    del self._packets[psn]
                else:
                    self._sent[psn] = now
                self._next += 1
            while self._base < self._next and self._base not in self._packets:
                self._base += 1
        if out:
            self.c.endpoint.send_many([(d, self.c.dest) for d in out])

    def _receive(self) -> None:
        for payload, src in self.c.endpoint.recv_many():
            got = self._filter.admit(payload, src)
            if got is None:
                continue  # not an answer of the aggregation address to this job: counted
            h, values = got
            if not h.flags & Flag.RESULT:
                self.waits += 1  # WAIT: resent at its timeout
                continue
            with self._lock:
                if h.psn not in self._packets or h.psn not in self._owner:
                    continue  # a duplicate result
                ep = self._epochs.get(self._owner.pop(h.psn))
                if h.psn >= self._next:
                    self._early.add(h.psn)
                else:
                    del self._packets[h.psn]
                    self._sent.pop(h.psn, None)
                if ep is None:
                    continue
                ep.data[h.psn - ep.first] = values
                ep.bitmaps[h.psn - ep.first] = h.bitmap
                ep.running = ep.running or bool(h.flags & Flag.RUNNING)
                ep.have += 1
                if ep.have == ep.count:
                    ep.done.set()
                while self._base < self._next and self._base not in self._packets:
                    self._base += 1
