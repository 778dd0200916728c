"""Egress queues between ingress and egress, as BMv2 ``simple_switch`` models them.

Example::

    tm = TrafficManager(priorities=1)
    tm.set_rate(100, port=2)            # packets/s; 0 = no limit (the default)
    tm.set_depth(16, port=2)            # packets; 64 by default, as simple_switch
    tm.shaped(2)                        # True: packets to port 2 wait in its queue
    tm.enqueue(job, 2, priority=0, now_us=10) -> (enq_qdepth) or None when full (tail drop)
    tm.dequeue(now_us)                  # -> (job, deq_qdepth) whose departure time has come

What simple_switch does (``QueueingLogicPriRL``, ``SimpleSwitch::enqueue`` and
``egress_thread``), and so what this does:

* one queue per egress port and priority; ``--priority-queues N`` gives N priorities per
  port (default 1). ``standard_metadata.priority`` picks the queue; a priority the port does
  not have drops the packet. Higher priority values are served first (strict priority:
  a queue is served only when every higher one is empty or held back by its rate).
* a queue's rate (packets/s, ``set_queue_rate``) spaces departures by ``1/rate``: a packet
  leaves at ``max(now, previous departure + 1/rate)``; without a rate there is no limit.
* a queue's depth (packets, ``set_queue_depth``, default 64) bounds it: a packet arriving
  at a full queue is dropped (tail drop).
* ``enq_timestamp`` (microseconds since the switch started) and ``enq_qdepth`` (packets in
  the packet's queue before it joined) are set at enqueue; ``deq_timedelta`` (microseconds
  spent queued) and ``deq_qdepth`` (packets left behind it) at dequeue.

p4sim runs a packet to completion, so a queue only fills when it has a rate: ports without
one skip the queue entirely (their queueing metadata read as an idle BMv2's: depth 0, no
delay), and a switch where no rate is set pays nothing for queues on its fast path.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

DEFAULT_DEPTH = 64  # simple_switch's egress buffer capacity per queue


class QueueConfigError(ValueError):
    """A bad queue setting (negative rate or depth, unknown priority)."""


@dataclass
class _Queue:
    rate: float = 0.0  # packets per second, 0 = unlimited
    depth: int = DEFAULT_DEPTH
    last_us: float = 0.0  # departure time of the packet queued last
    items: deque[tuple[float, Any]] = field(default_factory=deque)  # (departure, job)


class TrafficManager:
    """Per-port, per-priority egress queues with a rate and a depth (module docstring)."""

    def __init__(self, priorities: int = 1) -> None:
        if not 1 <= priorities <= 8:
            raise QueueConfigError(f"priority queues per port must be 1..8, got {priorities}")
        self.priorities = priorities
        self.default_rate = 0.0
        self.default_depth = DEFAULT_DEPTH
        self._queues: dict[int, list[_Queue]] = {}
        self._held = 0  # packets waiting in any queue
        self.dropped = 0  # tail drops and packets for a priority the port does not have
        self.active = False  # some queue has a rate: the pipeline must look here

    # -- configuration (simple_switch_CLI set_queue_rate / set_queue_depth) ---------------

    def _port(self, port: int) -> list[_Queue]:
        qs = self._queues.get(port)
        if qs is None:
            qs = [_Queue(self.default_rate, self.default_depth) for _ in range(self.priorities)]
            self._queues[port] = qs
        return qs

    def _targets(self, port: int | None, priority: int | None) -> list[_Queue]:
        if priority is not None and not 0 <= priority < self.priorities:
            raise QueueConfigError(
                f"priority {priority} out of range: the switch has {self.priorities} "
                "priority queue(s) per port (--priority-queues)"
            )
        if port is None:
            if priority is not None:
                raise QueueConfigError("a priority needs an egress port")
            return [q for qs in self._queues.values() for q in qs]
        qs = self._port(port)
        return qs if priority is None else [qs[priority]]

    def set_rate(
        self, rate_pps: float, port: int | None = None, priority: int | None = None
    ) -> None:
        """Departures per second of one queue, a port's queues, or every queue (no port:
        also the default of ports configured later); 0 removes the limit."""
        if rate_pps < 0:
            raise QueueConfigError(f"queue rate must be >= 0 packets/s, got {rate_pps}")
        targets = self._targets(port, priority)
        if port is None:
            self.default_rate = float(rate_pps)
        for q in targets:
            q.rate = float(rate_pps)
        self.active = self.default_rate > 0 or any(
            q.rate > 0 for qs in self._queues.values() for q in qs
        )

    def set_depth(self, depth: int, port: int | None = None, priority: int | None = None) -> None:
        """Capacity in packets of one queue, a port's queues, or every queue."""
        if depth < 0:
            raise QueueConfigError(f"queue depth must be >= 0 packets, got {depth}")
        targets = self._targets(port, priority)
        if port is None:
            self.default_depth = int(depth)
        for q in targets:
            q.depth = int(depth)

    def settings(self, port: int) -> list[tuple[float, int]]:
        """(rate, depth) of each priority queue of ``port``, highest priority last."""
        qs = self._queues.get(port)
        if qs is None:
            return [(self.default_rate, self.default_depth)] * self.priorities
        return [(q.rate, q.depth) for q in qs]

    # -- packets ----------------------------------------------------------------------------

    def shaped(self, port: int) -> bool:
        """True when packets to ``port`` go through its queues (a rate is set there, or
        packets still wait in them)."""
        qs = self._queues.get(port)
        if qs is None:
            return self.default_rate > 0
        return any(q.rate > 0 or q.items for q in qs)

    def enqueue(self, job: Any, port: int, priority: int, now_us: float) -> int | None:
        """Queue ``job`` for ``port``; returns the depth it found (``enq_qdepth``), or None
        when it was dropped (full queue, or a priority the port lacks)."""
        if not 0 <= priority < self.priorities:
            self.dropped += 1
            return None
        q = self._port(port)[priority]
        depth = len(q.items)
        if depth >= q.depth:
            self.dropped += 1
            return None
        gap = 1e6 / q.rate if q.rate > 0 else 0.0
        q.last_us = max(now_us, q.last_us + gap)
        q.items.append((q.last_us, job))
        self._held += 1
        return depth

    def dequeue(self, now_us: float) -> tuple[Any, int, int] | None:
        """The next packet whose departure time has come: (job, port, ``deq_qdepth``);
        higher priorities first, ports in the order they were configured."""
        if not self._held:
            return None
        for port, qs in self._queues.items():
            for q in reversed(qs):  # the highest priority is the last queue
                if q.items and q.items[0][0] <= now_us:
                    _, job = q.items.popleft()
                    self._held -= 1
                    return job, port, len(q.items)
        return None

    def next_departure(self) -> float | None:
        """Microseconds (switch clock) of the earliest departure waiting, or None."""
        if not self._held:
            return None
        return min(q.items[0][0] for qs in self._queues.values() for q in qs if q.items)

    def __len__(self) -> int:
        return self._held
