"""What the scheduler knows of one job (``SchedJob``) and the job classes.

Kept apart from the scheduler itself (``controller/sched/scheduler.py``) so that the policies
(``controller/sched/policies.py``), which the scheduler drives, can read jobs without
importing the scheduler back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from controller.jobs.sizing import (
    Network,
    Profile,
    job_time,
    memory_for,
    memory_to_finish,
    throughput,
)


class JobClass(StrEnum):
    MD = "md"  # must meet a deadline
    BE = "be"  # best effort


@dataclass
class SchedJob:
    """What the scheduler knows of a job: its declaration, path and progress.

    Times are on the caller's clock (the daemon: seconds since the epoch; the simulator:
    simulated seconds); ``deadline`` is absolute on that clock."""

    job_id: int
    job_class: JobClass
    profile: Profile
    arrival: float
    network: Network
    deadline: float | None = None
    throughput_target: float | None = None  # bytes/s the job can use at most
    epochs_done: float = 0.0
    attained: float = 0.0  # seconds it has held memory (MLFQ's service)
    memory: int = 0  # aggregators held now
    rtt_measured: bool = False  # its workers reported their RTT (else: a prior)
    # (epochs, seconds) the job still runs under its present layout: a new region takes
    # effect only at its next epoch boundary (controller/sched/switchover.py). The simulator
    # knows it; the daemon counts whole epochs and leaves it (0, 0).
    to_boundary: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        if self.job_class == JobClass.MD and self.deadline is None:
            raise ValueError(f"job {self.job_id}: an MD job needs a deadline")

    @property
    def effective(self) -> Network:
        """The job's network with its throughput target as the line rate."""
        if self.throughput_target is None or self.throughput_target >= self.network.line_rate:
            return self.network
        return replace(self.network, line_rate=self.throughput_target)

    @property
    def epochs_left(self) -> float:
        return max(0.0, self.profile.epochs - self.epochs_done)

    @property
    def finished(self) -> bool:
        return self.epochs_left <= 1e-9

    def want(self) -> int:
        """Memory beyond which it cannot go faster (line rate or target)."""
        net = self.effective
        return memory_for(net.line_rate, net.rtt_s)

    def rate(self, memory: int | None = None) -> float:
        m = self.memory if memory is None else memory
        return throughput(min(m, self.want()), self.effective)

    def time_left(self, memory: int | None = None) -> float:
        """Seconds to finish with ``memory`` (default: what it holds), by the model."""
        return job_time(self.profile, self.rate(memory), self.epochs_left)

    def need(self, now: float) -> int | None:
        """MD: the least memory that meets the deadline from ``now`` on (None: none does).
        BE: None."""
        if self.deadline is None or self.job_class != JobClass.MD:
            return None
        epochs, seconds = self.to_boundary
        return memory_to_finish(
            self.profile,
            max(0.0, self.epochs_left - epochs),
            self.deadline - now - seconds,
            self.effective,
        )
