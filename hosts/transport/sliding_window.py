"""Worker-side sliding window over PSNs and reassembly of results (pure logic, no I/O).

Example (the clock is injected, so nothing sleeps):
    >>> now = [0.0]
    >>> w = SendWindow(first_psn=0, count=4, window=2, timeout=1.0, clock=lambda: now[0])
    >>> w.poll()
    [(0, False), (1, False)]
    >>> w.ack(0)
    True
    >>> w.poll()
    [(2, False)]
    >>> now[0] = 1.5
    >>> w.poll()
    [(1, True), (2, True)]

Window rule (docs/protocol.md, invariant I1): PSN p may be in flight only when the results
of every PSN <= p - W are in, i.e. p < base + W where base is the oldest PSN without a
result. Counting packets in flight is not enough: results can arrive out of order, and the
switch reuses an aggregator copy on the assumption that p - W has completed everywhere.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

Clock = Callable[[], float]


class WindowTimeout(TimeoutError):
    """A PSN stayed unanswered after the allowed retransmissions."""


class SendWindow:
    """Which PSNs to send or resend now, for PSNs first_psn .. first_psn + count - 1."""

    def __init__(
        self,
        first_psn: int,
        count: int,
        window: int,
        timeout: float,
        clock: Clock = time.monotonic,
        max_retries: int = 50,
    ) -> None:
        if window < 1 or count < 0 or timeout <= 0:
            raise ValueError(
                f"need window >= 1, count >= 0, timeout > 0; got "
                f"window={window}, count={count}, timeout={timeout}"
            )
        self.first_psn, self.end_psn = first_psn, first_psn + count
        self.window, self.timeout, self.max_retries = window, timeout, max_retries
        self._clock = clock
        self._base = first_psn  # oldest PSN without a result
        self._next = first_psn  # next PSN never sent
        # PSN in flight -> time of its last send, in the order of those times (a resend
        # moves it to the end): the front is always the next to fall due, so a poll, an ack
        # and the next deadline cost O(1) plus the PSNs they touch, not O(window).
        self._sent_at: OrderedDict[int, float] = OrderedDict()
        self._tries: dict[int, int] = {}  # PSN in flight -> retransmissions so far
        self.retransmissions = 0

    @property
    def base(self) -> int:
        return self._base

    @property
    def done(self) -> bool:
        return self._base >= self.end_psn

    def in_flight(self) -> list[int]:
        """PSNs sent and still waiting for their result, oldest first."""
        return sorted(self._sent_at)

    def poll(self) -> list[tuple[int, bool]]:
        """(psn, is_retransmission) pairs to put on the wire now, oldest first.

        Raises WindowTimeout when a PSN exceeds ``max_retries`` retransmissions.
        """
        now = self._clock()
        due = []
        for p, at in self._sent_at.items():
            if now - at < self.timeout:
                break  # later ones were sent later still
            due.append(p)
        out = [(p, True) for p in sorted(due)]
        for p, _ in out:
            if self._tries[p] >= self.max_retries:
                raise WindowTimeout(
                    f"psn {p} got no result after {self._tries[p]} retransmissions "
                    f"({self.timeout:g} s apart): is the switch running and the job admitted?"
                )
            self._tries[p] += 1
            self._sent_at[p] = now
            self._sent_at.move_to_end(p)
        self.retransmissions += len(out)
        limit = min(self._base + self.window, self.end_psn)
        while self._next < limit:
            out.append((self._next, False))
            self._sent_at[self._next], self._tries[self._next] = now, 0
            self._next += 1
        return out

    def ack(self, psn: int) -> bool:
        """Record the result of ``psn``; False when it was not in flight (duplicate, stray)."""
        if psn not in self._sent_at:
            return False
        del self._sent_at[psn], self._tries[psn]
        # The base moves to the oldest PSN still in flight, or past everything sent: every
        # PSN in [base, next) is in flight until acknowledged.
        while self._base < self._next and self._base not in self._sent_at:
            self._base += 1
        return True

    def waited(self, psn: int) -> None:
        """The switch told ``psn`` to wait (FLAG_WAIT, bounded staleness): that send was
        answered, so it does not count towards ``max_retries``; it goes again at its
        timeout."""
        if self._tries.get(psn, 0) > 0:
            self._tries[psn] -= 1

    def make_due(self, psn: int) -> bool:
        """Make ``psn`` due for retransmission at the next poll (fast retransmission);
        False when it is not in flight or already due."""
        sent_at, due = self._sent_at.get(psn), self._clock() - self.timeout
        if sent_at is None or sent_at <= due:
            return False
        self._sent_at[psn] = due
        self._sent_at.move_to_end(psn, last=False)  # due now: the front stays the next due
        return True

    def next_deadline(self) -> float | None:
        """Clock time at which the oldest send falls due for retransmission (None: idle)."""
        if not self._sent_at:
            return None
        return next(iter(self._sent_at.values())) + self.timeout


class ResultAssembler:
    """Collects the K-slot results of PSNs first_psn .. first_psn + count - 1 in order.

    >>> r = ResultAssembler(first_psn=10, count=2, slots=2, length=3)
    >>> r.accept(11, np.array([5, 6])), r.accept(10, np.array([1, 2])), r.accept(10, [1, 2])
    (True, True, False)
    >>> r.result().tolist()
    [1, 2, 5]
    """

    def __init__(self, first_psn: int, count: int, slots: int, length: int | None = None):
        self.first_psn, self.count, self.slots = first_psn, count, slots
        self.length = count * slots if length is None else length
        if not 0 <= self.length <= count * slots:
            raise ValueError(f"length {self.length} does not fit {count} packets of {slots}")
        self._data = np.zeros((count, slots), dtype=np.int32)
        self._have = np.zeros(count, dtype=bool)

    @property
    def complete(self) -> bool:
        return bool(self._have.all())

    def missing(self) -> list[int]:
        """PSNs whose result has not arrived yet."""
        return [self.first_psn + int(i) for i in np.flatnonzero(~self._have)]

    def accept(self, psn: int, values: np.ndarray | list[int]) -> bool:
        """Store a result; False for a duplicate or a PSN outside this call."""
        i = psn - self.first_psn
        if not 0 <= i < self.count or self._have[i]:
            return False
        v = np.asarray(values)
        if v.shape != (self.slots,):
            raise ValueError(f"result of psn {psn} has {v.size} slots, expected {self.slots}")
        self._data[i] = v
        self._have[i] = True
        return True

    def result(self) -> np.ndarray:
        """The reassembled vector (trimmed to ``length``); raises if results are missing."""
        if not self.complete:
            raise ValueError(f"results missing for psns {self.missing()[:8]}")
        return self._data.reshape(-1)[: self.length].copy()


def split_into_packets(values: np.ndarray, slots: int) -> np.ndarray:
    """Pad a 1-D int32 vector with zeros to whole packets: shape (packets, slots).

    >>> split_into_packets(np.arange(5, dtype=np.int32), 4).tolist()
    [[0, 1, 2, 3], [4, 0, 0, 0]]
    """
    v = np.asarray(values, dtype=np.int32).reshape(-1)
    packets = -(-v.size // slots)
    out = np.zeros(packets * slots, dtype=np.int32)
    out[: v.size] = v
    return out.reshape(packets, slots)
