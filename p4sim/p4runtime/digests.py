"""DigestList generation with the P4Runtime ack rule.

Example::

    dg = DigestLists()
    msg = dg.make(digest_id, values, config)  # StreamMessageResponse, or None (duplicate)
    dg.ack(digest_id, list_id)                # the controller acknowledged that list

Each digest sample becomes a one-entry DigestList as soon as it is produced (allowed by
any ``max_list_size``; ``max_timeout_ns`` is an upper bound).  While a list is not
acknowledged, and for at most ``ack_timeout_ns``, the same data is not sent again for
that digest (the spec's de-duplication; ``ack_timeout_ns == 0`` disables it).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence

from finsy.proto import p4r

from p4sim.p4runtime.codec import encode_int


class DigestLists:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        # (digest id, data) -> (list id, deadline in ns) of lists awaiting an ack
        self._pending: dict[tuple[int, tuple[int, ...]], tuple[int, int]] = {}

    def make(
        self, digest_id: int, values: Sequence[int], cfg: p4r.DigestEntry.Config
    ) -> p4r.StreamMessageResponse | None:
        data = tuple(int(v) for v in values)
        now = time.monotonic_ns()
        with self._lock:
            self._expire(now)
            if (digest_id, data) in self._pending:
                return None
            list_id = next(self._ids)
            if cfg.ack_timeout_ns > 0:
                self._pending[(digest_id, data)] = (list_id, now + cfg.ack_timeout_ns)
        msg = p4r.StreamMessageResponse()
        dl = msg.digest
        dl.digest_id, dl.list_id, dl.timestamp = digest_id, list_id, time.time_ns()
        member = dl.data.add()
        for v in data:
            member.struct.members.add(bitstring=encode_int(v))
        return msg

    def ack(self, digest_id: int, list_id: int) -> None:
        with self._lock:
            done = [
                k for k, (lid, _) in self._pending.items() if k[0] == digest_id and lid == list_id
            ]
            for k in done:
                del self._pending[k]

    def _expire(self, now: int) -> None:
        for k in [k for k, (_, deadline) in self._pending.items() if deadline <= now]:
            del self._pending[k]
