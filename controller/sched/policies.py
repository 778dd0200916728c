"""Scheduling policies: how the switch memory pool is shared among jobs, in one code path.

Example:
    >>> sorted(POLICIES)
    ['edf', 'fifo', 'mlfq', 'rr']
    >>> make_policy("lottery")
    Traceback (most recent call last):
    ...
    ValueError: unknown policy 'lottery' (known: edf, fifo, mlfq, rr)

A policy looks at the jobs that have work left (``controller/sched/sched_job.py``, ``SchedJob``)
and returns ``(job_id, aggregators)`` for every one of them, in priority order; the
scheduler then places the sizes with the memory manager in that order. Size 0 means the
job waits. Every policy is work-conserving up to what jobs can use (``want``: memory for
line rate, or the job's throughput target).

- ``edf`` (the seed's Earliest Deadline First): MD jobs in deadline order get the least
  memory that meets their deadline by the model (``need``), as long as it fits; what is
  left goes to BE jobs, to MD jobs whose deadline cannot be met any more, and as top-ups
  to the MD jobs already served: first each keeps what it holds, then shortest remaining
  time first (leftover memory is not taken from a running job for a shorter newcomer).
- ``fifo``: arrival order, each job as much as it can use.
- ``rr``: round robin, memory time-sliced: jobs take turns of ``quantum`` seconds in a
  rotating order, each as much as it can use while it is its turn.
- ``mlfq``: multi-level feedback queue on attained service (seconds a job has held
  memory): a job starts in the top level and drops one level each time its service
  passes ``quantum x factor^level``; higher levels first, arrival order inside a level.
  Long jobs sink, so short ones finish first without knowing sizes in advance.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from controller.sched.sched_job import SchedJob

Plan = list[tuple[int, int]]  # (job id, aggregators), highest priority first

DEFAULT_QUANTUM = 30.0  # seconds: RR's time slice and MLFQ's first level


class Policy(ABC):
    name: ClassVar[str]

    @abstractmethod
    def plan(self, now: float, jobs: Sequence[SchedJob], capacity: int) -> Plan:
        """Sizes for every job in ``jobs`` (those with work left), in priority order."""

    def next_decision(self, now: float, jobs: Sequence[SchedJob]) -> float | None:
        """When the plan changes without any event (a quantum ends); None: never."""
        return None


def _greedy(order: Sequence[SchedJob], capacity: int) -> Plan:
    """Each job in turn as much as it can use, while memory lasts."""
    plan = []
    for job in order:
        size = min(job.want(), capacity)
        capacity -= size
        plan.append((job.job_id, size))
    return plan


class Fifo(Policy):
    name = "fifo"

    def plan(self, now: float, jobs: Sequence[SchedJob], capacity: int) -> Plan:
        return _greedy(sorted(jobs, key=lambda j: (j.arrival, j.job_id)), capacity)


class Edf(Policy):
    name = "edf"

    def plan(self, now: float, jobs: Sequence[SchedJob], capacity: int) -> Plan:
        sizes: dict[int, int] = {}
        served: list[SchedJob] = []
        md = [j for j in jobs if j.job_class == "md" and j.deadline is not None]
        for job in sorted(md, key=lambda j: (j.deadline, j.arrival, j.job_id)):
            need = job.need(now)
            if need is not None and need <= capacity:
                sizes[job.job_id] = need
                capacity -= need
                served.append(job)
        # What is left: first every job keeps what it holds (up to what it can use), then
        # shortest remaining time (at full speed) first, over everyone. Taking memory from
        # a running job to give it to a shorter one costs a switch-over (the old region
        # stays held until the job's next epoch boundary), and with compute taking its
        # share of every epoch the job loses more than the newcomer gains; deadlines are
        # not at stake here (they were served above).
        rest = sorted(jobs, key=lambda j: (j.time_left(j.want()), j.arrival, j.job_id))
        for cap in (lambda j: min(j.memory, j.want()), lambda j: j.want()):
            for job in rest:
                extra = min(cap(job) - sizes.get(job.job_id, 0), capacity)
                if extra > 0:
                    sizes[job.job_id] = sizes.get(job.job_id, 0) + extra
                    capacity -= extra
        first = {j.job_id for j in served}
        ordered = served + [j for j in rest if j.job_id not in first]
        return [(j.job_id, sizes.get(j.job_id, 0)) for j in ordered]


class RoundRobin(Policy):
    """Jobs take turns: at each quantum's end, those that held memory go to the back."""

    name = "rr"

    def __init__(self, quantum: float = DEFAULT_QUANTUM) -> None:
        if quantum <= 0:
            raise ValueError("quantum must be positive")
        self.quantum = quantum
        self._order: list[int] = []
        self._ran: list[int] = []
        self._slice_end: float | None = None

    def plan(self, now: float, jobs: Sequence[SchedJob], capacity: int) -> Plan:
        by_id = {j.job_id: j for j in jobs}
        self._order = [jid for jid in self._order if jid in by_id]
        for job in sorted(jobs, key=lambda j: (j.arrival, j.job_id)):
            if job.job_id not in self._order:
                self._order.append(job.job_id)
        if self._slice_end is None or now >= self._slice_end:
            ran = [jid for jid in self._ran if jid in by_id]
            self._order = [jid for jid in self._order if jid not in ran] + ran
            self._slice_end = now + self.quantum
            self._ran = []
        plan = _greedy([by_id[jid] for jid in self._order], capacity)
        for jid, size in plan:
            if size > 0 and jid not in self._ran:
                self._ran.append(jid)
        return plan

    def next_decision(self, now: float, jobs: Sequence[SchedJob]) -> float | None:
        waiting = any(j.memory < j.want() for j in jobs)
        return self._slice_end if waiting and self._slice_end is not None else None


class Mlfq(Policy):
    name = "mlfq"

    def __init__(
        self, quantum: float = DEFAULT_QUANTUM, factor: float = 4.0, levels: int = 4
    ) -> None:
        if quantum <= 0 or factor <= 1 or levels < 1:
            raise ValueError("need quantum > 0, factor > 1, levels >= 1")
        self.thresholds = [quantum * factor**k for k in range(levels - 1)]

    def level(self, job: SchedJob) -> int:
        # Relative slack: a job stopped at a threshold by float rounding has crossed it.
        return sum(1 for t in self.thresholds if job.attained >= t * (1 - 1e-9))

    def plan(self, now: float, jobs: Sequence[SchedJob], capacity: int) -> Plan:
        order = sorted(jobs, key=lambda j: (self.level(j), j.arrival, j.job_id))
        return _greedy(order, capacity)

    def next_decision(self, now: float, jobs: Sequence[SchedJob]) -> float | None:
        times = [
            now + self.thresholds[self.level(j)] - j.attained
            for j in jobs
            if j.memory > 0 and self.level(j) < len(self.thresholds)
        ]
        return min(times, default=None)


POLICIES: dict[str, Callable[..., Policy]] = {
    "edf": Edf,
    "fifo": Fifo,
    "rr": RoundRobin,
    "mlfq": Mlfq,
}


def make_policy(name: str, quantum: float = DEFAULT_QUANTUM) -> Policy:
    """The policy called ``name``; ``quantum`` is RR's slice and MLFQ's first level."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(sorted(POLICIES))})")
    if name in ("rr", "mlfq"):
        return POLICIES[name](quantum=quantum)
    return POLICIES[name]()
