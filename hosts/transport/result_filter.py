"""What a worker takes from its socket: only the answers its switch or PS sent it.

Example:
    >>> import numpy as np
    >>> from wire.header import Header, pack
    >>> f = ResultFilter(job_id=7, slots=2, source=("10.0.0.100", 20050))
    >>> ok = pack(Header(job_id=7, psn=3, flags=Flag.RESULT, slot_count=2), np.array([1, 2]))
    >>> f.admit(ok, ("10.0.0.100", 20050))[0].psn
    3
    >>> f.admit(ok, ("10.0.0.100", 20051)), f.drops[HostDrop.FOREIGN_PORT]
    (None, 1)

A worker's answers come from one place, the aggregation address ``source``: the switch
turns a worker's packet around (or multicasts the last one) without touching its UDP
ports, and the PS answers from the port it listens on, so both are ``dest`` as the worker
sends to it. The switch is the trust anchor (docs/protocol.md, *Isolation*): it admits
every INC packet against the job's bindings and drops results no binding allows, so what
it forwards from ``source`` is the switch's or the PS's. This filter keeps what slipped
past it out too, and counts each drop by reason (``wire.header.HostDrop``), in the same
order as the native loop (``native_window.c``, ``accept``):

1. source IP not ``source``: ``FOREIGN_ADDRESS``; source port not ``source``'s:
   ``FOREIGN_PORT`` (another process on the PS's host, or a host spoofing its IP);
2. shorter than its header and ``slot_count``: ``MALFORMED``;
3. not ``AGG_SYNC`` of this job: ``OTHER_JOB``;
4. flags other than the worker's own (``RETX``) plus either a result's (``RESULT``, with
   ``RUNNING`` for Serene's running aggregates) or a hold-back's (``WAIT``):
   ``FORGED_FLAGS``;
5. ``slot_count`` not the job's: ``BAD_SLOT_COUNT``.
"""

from __future__ import annotations

import numpy as np

from hosts.transport.udp import Address
from wire.header import (
    HOST_DROPS,
    RESULT_FLAGS,
    WORKER_FLAGS,
    Flag,
    Header,
    HostDrop,
    Op,
    ProtocolError,
    unpack,
)


def answer_flags_valid(flags: int) -> bool:
    """Whether ``flags`` are what a switch or PS sets on an answer to a worker: the
    worker's own bits plus a result's, or plus ``WAIT`` alone."""
    extra = flags & ~WORKER_FLAGS
    if extra & Flag.RESULT:
        return extra & ~RESULT_FLAGS == 0
    return extra == Flag.WAIT


class ResultFilter:
    """Admits a job's results and hold-backs from its aggregation address (module doc)."""

    def __init__(self, job_id: int, slots: int, source: Address) -> None:
        self.job_id, self.slots, self.source = job_id, slots, source
        self.drops = [0] * HOST_DROPS

    def admit(self, payload: bytes, src: Address) -> tuple[Header, np.ndarray] | None:
        """The parsed answer, or None (dropped and counted)."""
        reason = self._refuse(payload, src)
        if isinstance(reason, HostDrop):
            self.drops[reason] += 1
            return None
        return reason

    def _refuse(self, payload: bytes, src: Address) -> HostDrop | tuple[Header, np.ndarray]:
        if src[0] != self.source[0]:
            return HostDrop.FOREIGN_ADDRESS
        if src[1] != self.source[1]:
            return HostDrop.FOREIGN_PORT
        try:
            h, values = unpack(payload)
        except ProtocolError:
            return HostDrop.MALFORMED
        if h.op != Op.AGG_SYNC or h.job_id != self.job_id:
            return HostDrop.OTHER_JOB
        if not answer_flags_valid(h.flags):
            return HostDrop.FORGED_FLAGS
        if h.slot_count != self.slots:
            return HostDrop.BAD_SLOT_COUNT
        return h, values
