"""A window of requests in flight over one UDP socket: the pipelined clients' engine.

Example (``hosts/kv/pipelined_client.py`` and ``hosts/consensus/pipelined_client.py``)::

    win = RequestWindow(sock, payloads, dest, first_id=psn0, window=32, on_reply=match)
    win.run()                      # every request answered (or given up after ``tries``)
    win.start[i], win.end[i]       # request i: first send, and when ``match`` completed it

Request ``i`` carries the id ``first_id + i`` (32-bit, serial arithmetic) in the INC
header's ``psn`` (bytes 8..11), so a reply finds its request by subtraction, not by a
lookup. At most ``window`` requests are unanswered at once, and no new request is sent
more than ``span`` ids past the oldest unanswered one (the server remembers that many of a
client's write ids: ``hosts/kv/store.py``, ``WRITE_WINDOW``). ``on_reply(i, datagram)``
says whether the reply completes request ``i`` (a commit may need several). An unanswered
request is sent again after the longest of ``rto``, three smoothed round trips (a saturated
server's steady queue) and RFC 6298's timeout (smoothed round trip plus four mean
deviations); a queue is not loss (before any answer: INITIAL_RTO). Only the completions
``timed(i)`` accepts are round-trip samples (default: all): a key-value client times only
the server's answers, since the switch's fast hits would set a timeout that every miss
queued at the server outlives, and each resend of it adds to that queue (a resend storm:
20,681 resends of 40,000 operations with 5 % writes, 44,246 with 20 %). The timeout doubles
for each resend up to ``max_rto``, with ``retx_flag`` OR-ed into its flags byte; after
``tries`` sends it is given up (``end`` stays NaN).
With ``source``, a reply counts only from that address and port (or, given a set, from one
of them: a replicated log's replicas); what comes from elsewhere,
is shorter than a header or answers no request in flight is dropped and counted by reason
(``drops``, ``wire.header.HostDrop``); ``on_reply`` may count its own reasons there too.
Send and receive are batched per wake-up: every queued reply is drained, then every free
slot of the window filled, and only then are overdue requests looked for (so a client that
was descheduled does not resend what was answered meanwhile).

Times are ``time.monotonic()``, the clock every Mininet host shares, so histories of
several clients can be checked together (``hosts/kv/linearizability.py``).
"""

from __future__ import annotations

import math
import select
import socket
import struct
import time
from collections.abc import Callable, Sequence

import numpy as np

from wire.header import HOST_DROPS, HostDrop

Address = tuple[str, int]
MASK = (1 << 32) - 1
_PSN = struct.Struct("!I")
_PSN_OFFSET = 8
_FLAGS_OFFSET = 1
WAITING, IN_FLIGHT, DONE, GIVEN_UP = 0, 1, 2, 3
INITIAL_RTO = 1.0  # seconds before the first resend while no round trip is measured


def _foreign(src: Address, sources: frozenset[Address]) -> HostDrop:
    known = any(src[0] == ip for ip, _ in sources)
    return HostDrop.FOREIGN_PORT if known else HostDrop.FOREIGN_ADDRESS


class RequestWindow:
    """Sends ``payloads`` to ``dest`` with up to ``window`` in flight; see the module."""

    def __init__(
        self,
        sock: socket.socket,
        payloads: Sequence[bytes],
        dest: Address | Sequence[Address],
        first_id: int,
        on_reply: Callable[[int, bytes], bool],
        window: int = 32,
        span: int = 1 << 13,
        rto: float = 0.05,
        max_rto: float = 1.0,
        tries: int = 30,
        retx_flag: int = 0,
        timed: Callable[[int], bool] | None = None,
        source: Address | frozenset[Address] | None = None,
    ) -> None:
        if window < 1 or span < window:
            raise ValueError(f"window must be in [1, span={span}], got {window}")
        self.sock = sock
        self.payloads = payloads
        n = len(payloads)
        self.dests: Sequence[Address] = [dest] * n if isinstance(dest[0], str) else dest  # type: ignore[list-item,assignment]
        self.first_id = first_id
        self.on_reply = on_reply
        self.window, self.span = window, span
        self.rto, self.max_rto, self.tries, self.retx_flag = rto, max_rto, tries, retx_flag
        self.timed = timed
        self.start = [math.nan] * n  # plain lists: cheaper per element than numpy
        self.end = [math.nan] * n
        self.state = bytearray(n)
        self.srtt = 0.0  # smoothed round trip of first sends (Karn: not of retransmissions)
        self.rttvar = 0.0  # and its mean deviation
        self.retransmissions = 0
        self.given_up = 0
        self.max_in_flight = 0
        self.source = frozenset([source]) if isinstance(source, tuple) else source
        self.drops = [0] * HOST_DROPS  # by wire.header.HostDrop (module doc)

    def _send(self, data: bytes, dest: Address) -> None:
        try:
            self.sock.sendto(data, dest)
        except BlockingIOError:
            pass  # a full send buffer is loss: the retransmission recovers it
        except ConnectionRefusedError:
            pass

    def run(self, stop_at: float | None = None) -> None:
        """Until every request is answered or given up (or ``stop_at``, monotonic)."""
        n = len(self.payloads)
        state, start, end = self.state, self.start, self.end
        last = [0.0] * n
        sends = [0] * n
        backoff = [1.0] * n
        poll = select.poll()
        poll.register(self.sock.fileno(), select.POLLIN)
        recv, psn_of, on_reply, timed = (
            self.sock.recvfrom,
            _PSN.unpack_from,
            self.on_reply,
            self.timed,
        )
        first_id, payloads, dests, send = self.first_id, self.payloads, self.dests, self._send
        source, drops = self.source, self.drops
        nxt = oldest = in_flight = finished = 0
        next_scan = 0.0
        clock = time.monotonic
        timeout = 0.0
        while finished < n:
            if poll.poll(timeout * 1000.0):  # drain first: a stalled client must not resend
                while True:  # what was answered meanwhile
                    try:
                        data, src = recv(2048)
                    except (BlockingIOError, InterruptedError):
                        break
                    except ConnectionRefusedError:
                        continue
                    if source is not None and src not in source:
                        drops[_foreign(src, source)] += 1
                        continue
                    if len(data) < 12:
                        drops[HostDrop.MALFORMED] += 1
                        continue
                    i = (psn_of(data, _PSN_OFFSET)[0] - first_id) & MASK
                    if i >= nxt or state[i] != IN_FLIGHT:
                        drops[HostDrop.NOT_IN_FLIGHT] += 1  # late duplicates too
                        continue
                    if not on_reply(i, data):
                        continue
                    state[i] = DONE
                    t = end[i] = clock()
                    # Karn: only first sends measure the round trip; ``timed``: only the
                    # slow path's (a cache's hits say nothing of the server's queue)
                    if sends[i] == 1 and (timed is None or timed(i)):
                        sample = t - start[i]
                        if self.srtt:  # RFC 6298's estimators
                            self.rttvar += (abs(self.srtt - sample) - self.rttvar) / 4
                            self.srtt += (sample - self.srtt) / 8
                        else:
                            self.srtt, self.rttvar = sample, sample / 2
                    in_flight -= 1
                    finished += 1
                while oldest < nxt and state[oldest] >= DONE:
                    oldest += 1
            now = clock()
            if stop_at is not None and now > stop_at:
                break
            while in_flight < self.window and nxt < n and nxt - oldest < self.span:
                send(payloads[nxt], dests[nxt])
                start[nxt] = last[nxt] = now
                sends[nxt] = 1
                state[nxt] = IN_FLIGHT
                in_flight += 1
                nxt += 1
            if in_flight > self.max_in_flight:
                self.max_in_flight = in_flight
            if now >= next_scan:
                # before the first answer, a saturated server's queue is unknown: wait as
                # long as a first TCP timeout (RFC 6298) rather than resend a whole window
                if self.srtt:  # a steady queue has a small deviation: keep 3 round trips too
                    rto = max(self.rto, 3 * self.srtt, self.srtt + 4 * self.rttvar)
                else:
                    rto = max(self.rto, INITIAL_RTO)
                next_scan = now + rto / 4
                for i in range(oldest, nxt):
                    if state[i] != IN_FLIGHT or now - last[i] < min(rto * backoff[i], self.max_rto):
                        continue
                    if sends[i] >= self.tries:
                        state[i] = GIVEN_UP
                        in_flight -= 1
                        finished += 1
                        self.given_up += 1
                        continue
                    data = bytearray(payloads[i])
                    data[_FLAGS_OFFSET] |= self.retx_flag
                    send(bytes(data), dests[i])
                    last[i] = now
                    sends[i] += 1
                    backoff[i] *= 2
                    self.retransmissions += 1
            timeout = max(0.0, min(next_scan - now, 0.05))

    def done(self) -> np.ndarray:
        return np.frombuffer(bytes(self.state), dtype=np.int8) == DONE

    def latencies(self) -> np.ndarray:
        """Seconds from first send to completion, of the completed requests."""
        ok = self.done()
        return (np.array(self.end) - np.array(self.start))[ok]
