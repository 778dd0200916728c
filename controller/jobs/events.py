"""What the controller decided and when: admissions, cancellations, switches coming back,
scheduling decisions. The dashboard shows the latest; the log keeps a bounded number.

Example:
    >>> log = EventLog(maxlen=2)
    >>> log.record("admitted", "job 1 (mlp): 4 workers", job_id=1)
    >>> log.record("cancelled", "job 1", job_id=1); log.record("admitted", "job 2", job_id=2)
    >>> [e.what for e in log.recent()]
    ['admitted', 'cancelled']

Any part of the controller that decides something a user may want to see records it here
(a scheduler: "job 4 queued behind job 2, deadline 120 s"; a mode manager: "job 3 now
bounded staleness 2"); ``what`` is a short tag the dashboard can filter on.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    time: float
    what: str
    message: str
    job_id: int | None = None
    device_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EventLog:
    def __init__(self, maxlen: int = 200) -> None:
        self._events: deque[Event] = deque(maxlen=maxlen)

    def record(
        self, what: str, message: str, job_id: int | None = None, device_id: int | None = None
    ) -> None:
        self._events.append(Event(time.time(), what, message, job_id, device_id))

    def recent(self, n: int = 50) -> list[Event]:
        """The newest ``n`` events, newest first."""
        return list(reversed(self._events))[:n]
