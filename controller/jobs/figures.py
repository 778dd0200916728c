"""Live figures of a job: what the dashboard shows and ``/metrics`` exports, per kind.

Example:
    >>> f = Figure("packets", 1200, "packets of the job the switch admitted")
    >>> f.metric_name, f.counter
    ('inc_job_packets', True)
    >>> Figure("progress", 40, "packets from the worker", worker=2).labels()
    {'worker': '2'}

A kind (``controller/jobs/job_kinds.py``) reports its figures through ``JobKind.live_stats``,
read over P4Runtime (direct counters, registers); worker agents may add theirs with a
progress report (``controller/api/worker_reports.py``). Nothing here knows a kind: a figure is
a name, a number, whether it counts up (a counter: the dashboard shows its rate) or is a
level (a gauge), and optionally the worker it belongs to. Text that describes the job's
current behaviour (synchronisation mode, scheduling class) goes in ``JobStats.state``.

Conventions the dashboard relies on: the per-worker counter named ``progress`` measures
how far each worker got (its lag is the leader's progress minus its own: stragglers);
``bytes`` and ``packets`` of the whole job give its throughput.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

FIGURE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
PROGRESS = "progress"


@dataclass(frozen=True)
class Figure:
    """One number about a job (``worker``: about one of its workers)."""

    name: str  # lower_snake_case; exported as inc_job_<name> (inc_job_<name>_total if counter)
    value: float
    help: str
    counter: bool = True  # counts up since the job started (rates make sense); else a gauge
    worker: int | None = None

    def __post_init__(self) -> None:
        if not FIGURE_NAME.match(self.name):
            raise ValueError(f"figure name {self.name!r}: lower_snake_case, up to 40 characters")

    @property
    def metric_name(self) -> str:
        return f"inc_job_{self.name}"

    def labels(self) -> dict[str, str]:
        return {} if self.worker is None else {"worker": str(self.worker)}


@dataclass(frozen=True)
class JobStats:
    """A kind's live view of one job: figures, and text about its current behaviour."""

    figures: tuple[Figure, ...] = ()
    state: Mapping[str, str] = field(default_factory=dict)
