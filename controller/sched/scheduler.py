"""The scheduler: which job gets how much switch memory, now (EDF, FIFO, RR, MLFQ).

Example:
    >>> from controller.jobs.memory_manager import MemoryManager
    >>> net = Network(rtt_s=1e-3, line_rate=128_000.0)     # 1 ms, 128 kB/s: 1 aggregator
    >>> s = Scheduler(make_policy("edf"), MemoryManager(pool_size=4))
    >>> be = SchedJob(1, JobClass.BE, Profile(10, 12_800, 0.1), arrival=0.0, network=net)
    >>> md = SchedJob(2, JobClass.MD, Profile(10, 12_800, 0.1), arrival=0.0, network=net,
    ...               deadline=5.0)
    >>> s.add(be); s.add(md)
    >>> {c.job_id: c.new for c in s.replan(now=0.0)}
    {2: Region(offset=0, size=1), 1: Region(offset=1, size=1)}

Both jobs want 1 aggregator at line rate (128 kB/s x 1 ms / 128 B); the pool has 4, so
both run. Memory is given in the policy's order: EDF places deadline jobs first.

``Scheduler`` is the one piece of code both the controller daemon (``controller/job_manager.py``)
and the trace-driven simulator (``python -m controller.sched.sched_sim``) drive: jobs come and
go (``add``, ``remove``), report progress (``update``), and at every event ``replan`` asks
the policy for sizes and the memory manager for regions. The policies
(``controller/sched/policies.py``) only order jobs and size their shares; they never place memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from controller.jobs.memory_manager import MemoryManager, Region
from controller.jobs.sizing import Network, Profile
from controller.sched.policies import Policy, make_policy
from controller.sched.sched_job import JobClass, SchedJob

__all__ = ["JobClass", "SchedJob", "Scheduler", "Change", "make_policy", "Network", "Profile"]


@dataclass(frozen=True)
class Change:
    """A job's region moved or resized by ``replan`` (None: no memory)."""

    job_id: int
    old: Region | None
    new: Region | None


@dataclass
class Scheduler:
    """Jobs of one memory pool, a policy, and the memory manager that places them.

    Owners in ``memory`` that are not scheduled jobs (jobs admitted with a fixed region)
    keep their memory; the policy shares what they leave."""

    policy: Policy
    memory: MemoryManager
    jobs: dict[int, SchedJob] = field(default_factory=dict)
    planned: dict[int, int] = field(default_factory=dict)  # the policy's last sizes
    last_rtt_s: float | None = None  # the latest RTT a job on this switch measured
    # Jobs whose region is being cleared for their admission: ``replan`` leaves it as it is.
    admitting: set[int] = field(default_factory=set)
    _clock: float | None = None

    def add(self, job: SchedJob) -> None:
        """Schedule ``job``; until its workers report their RTT it is sized with the latest
        RTT measured on this switch (when there is one) instead of its network's guess."""
        if job.job_id in self.jobs:
            raise ValueError(f"job {job.job_id} is already scheduled")
        if not job.rtt_measured and self.last_rtt_s is not None:
            job.network = replace(job.network, rtt_s=self.last_rtt_s)
        self.jobs[job.job_id] = job

    def remove(self, job_id: int) -> None:
        """Forget the job and give back all its memory (the caller clears it on the switch)."""
        self.jobs.pop(job_id)
        self.admitting.discard(job_id)
        self.planned.pop(job_id, None)
        try:
            self.memory.free(job_id)
        except KeyError:
            pass  # it held nothing

    def update(
        self, job_id: int, epochs_done: float | None = None, rtt_s: float | None = None
    ) -> None:
        """Progress from the job's workers: epochs finished, measured round-trip time.

        A job's RTT is measured by its own workers once it runs; jobs that have not
        measured theirs yet (queued without memory, or not started) take this one as their
        prior: they share the switch, and a guess far off (the daemon's ``--rtt-ms``) would
        size them for memory they cannot use, or keep them queued, until they report."""
        job = self.jobs[job_id]
        if epochs_done is not None:
            job.epochs_done = min(float(job.profile.epochs), max(job.epochs_done, epochs_done))
        if rtt_s is not None and rtt_s > 0 and math.isfinite(rtt_s):
            job.network = replace(job.network, rtt_s=rtt_s)
            job.rtt_measured = True
            self.last_rtt_s = rtt_s
            for other in self.jobs.values():
                if not other.rtt_measured:
                    other.network = replace(other.network, rtt_s=rtt_s)

    def advance(self, now: float) -> None:
        """Count service up to ``now``: jobs that held memory since the last call."""
        if self._clock is not None and now > self._clock:
            for job in self.jobs.values():
                if job.memory > 0:
                    job.attained += now - self._clock
        self._clock = now if self._clock is None else max(self._clock, now)

    def capacity(self) -> int:
        """The pool minus what owners outside the scheduler (fixed regions) hold."""
        pinned = sum(self.memory.held_by(o) for o in self.memory.holders() if o not in self.jobs)
        return self.memory.pool_size - pinned

    def replan(self, now: float) -> list[Change]:
        """Ask the policy for sizes, place them (shrinks first, then growth in the policy's
        order) and return the jobs whose region changed."""
        self.advance(now)
        active = [j for j in self.jobs.values() if not j.finished]
        plan = self.policy.plan(now, active, self.capacity())
        self.planned = dict(plan)
        for j in self.jobs.values():
            if j.finished:
                self.planned[j.job_id] = 0
        before = {jid: self.memory.region_of(jid) for jid in self.jobs}
        for jid, size in self.planned.items():
            if size < self.jobs[jid].memory and jid not in self.admitting:
                self.memory.resize(jid, size)
        for jid, size in plan:
            if size > self.jobs[jid].memory and jid not in self.admitting:
                self.memory.resize(jid, size)
        changes = []
        for jid, job in self.jobs.items():
            region = self.memory.region_of(jid)
            job.memory = region.size if region else 0
            if region != before[jid]:
                changes.append(Change(jid, before[jid], region))
        order = {jid: i for i, (jid, _) in enumerate(plan)}
        changes.sort(key=lambda c: order.get(c.job_id, len(order)))
        return changes

    def next_decision(self, now: float) -> float | None:
        """When the policy will want to change the plan by itself (a quantum ends)."""
        return self.policy.next_decision(now, [j for j in self.jobs.values() if not j.finished])

    def view(self, now: float) -> list[dict[str, Any]]:
        """Every job, in the policy's order: class, progress, plan and region, predicted
        finish and deadline (``incctl sched show``)."""
        order = {jid: i for i, jid in enumerate(self.planned)}
        rows = []
        for job in sorted(self.jobs.values(), key=lambda j: order.get(j.job_id, len(order))):
            region = self.memory.region_of(job.job_id)
            left = job.time_left()
            finish = now + left if math.isfinite(left) else None
            need = job.need(now)
            rows.append(
                {
                    "job_id": job.job_id,
                    "class": job.job_class.value,
                    "epochs": job.profile.epochs,
                    "epochs_done": job.epochs_done,
                    "planned": self.planned.get(job.job_id, 0),
                    "want": job.want(),
                    "need": need,
                    "region": None
                    if region is None
                    else {"offset": region.offset, "size": region.size},
                    "retiring": [
                        {"offset": r.offset, "size": r.size}
                        for r in self.memory.retiring_of(job.job_id)
                    ],
                    "rtt_s": job.network.rtt_s,
                    "rtt_measured": job.rtt_measured,
                    "predicted_finish": finish,
                    "deadline": job.deadline,
                    "on_time": None
                    if job.deadline is None
                    else (finish is not None and finish <= job.deadline * (1 + 1e-9)),
                    "state": "running" if job.memory > 0 else "queued",
                }
            )
        return rows
