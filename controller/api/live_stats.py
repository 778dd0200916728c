"""Live state of switches and jobs, read now: what the dashboard streams and ``/metrics`` shows.

Example::

    stats = LiveStats(switches, manager, reports, events)
    sample = await stats.sample()          # switches (drops by reason), memory, every job
    view = sample.to_json(previous)        # + rates against an earlier sample, lag, ...
    async for view in LiveFeed(stats).updates():   # one shared sampler for all viewers
        ...

A sample reads every switch's ``inc_drops`` counter and asks each job's kind for its live
figures (``JobKind.live_stats``, over P4Runtime), then adds what the job's workers reported
(``controller/api/worker_reports.py``). Nothing here knows a kind's figures: rates are computed
for every counter, per-worker lag for the ``progress`` counter (``controller/jobs/figures.py``).
A switch or a job whose figures cannot be read is shown with its error, the rest still.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from controller.api.worker_reports import WorkerReports
from controller.job_manager import JobManager
from controller.jobs.events import EventLog
from controller.jobs.figures import PROGRESS, Figure, JobStats
from controller.jobs.job import Job
from controller.jobs.job_kinds import kind_of
from controller.p4rt.p4runtime_client import SwitchConnection, SwitchError, SwitchSet
from controller.systems.inc_drops import JOB_DROPS, read_drops, read_job_drops

log = logging.getLogger("controller.api.live_stats")


@dataclass(frozen=True)
class SwitchSample:
    device_id: int
    name: str
    address: str
    connected: bool
    primary: bool
    drops: dict[str, int] | None  # None: could not be read (see error)
    error: str | None = None


@dataclass(frozen=True)
class JobSample:
    job: Job
    stats: JobStats
    reported_at: dict[int, float] = field(default_factory=dict)  # worker id -> report time
    error: str | None = None

    def figures(self) -> list[Figure]:
        return list(self.stats.figures)


@dataclass(frozen=True)
class Sample:
    time: float
    switches: list[SwitchSample]
    jobs: list[JobSample]
    memory: list[dict[str, Any]]
    events: list[dict[str, Any]]

    def counters(self) -> dict[tuple[Any, ...], float]:
        """Every counter by key, for rates between two samples."""
        out: dict[tuple[Any, ...], float] = {}
        for s in self.switches:
            for reason, n in (s.drops or {}).items():
                out[("drops", s.device_id, reason)] = n
        for j in self.jobs:
            for f in j.stats.figures:
                if f.counter:
                    out[("job", j.job.job_id, f.name, f.worker)] = f.value
        return out

    def to_json(self, previous: Sample | None = None) -> dict[str, Any]:
        """The dashboard's view: JSON values only, rates per second against ``previous``."""
        rates = _rates(previous, self) if previous is not None else {}
        return {
            "time": self.time,
            "switches": [
                {
                    "device_id": s.device_id,
                    "name": s.name,
                    "address": s.address,
                    "connected": s.connected,
                    "primary": s.primary,
                    "error": s.error,
                    "drops": {
                        r: {"value": n, "rate": rates.get(("drops", s.device_id, r))}
                        for r, n in (s.drops or {}).items()
                    },
                }
                for s in self.switches
            ],
            "memory": self.memory,
            "jobs": [_job_json(j, rates) for j in self.jobs],
            "events": self.events,
        }


def _rates(a: Sample, b: Sample) -> dict[tuple[Any, ...], float]:
    dt = b.time - a.time
    if dt <= 0:
        return {}
    before = a.counters()
    out = {}
    for key, value in b.counters().items():
        if key in before and value >= before[key]:  # a reset (switch restart) has no rate
            out[key] = (value - before[key]) / dt
    return out


def _figure_json(f: Figure, rate: float | None) -> dict[str, Any]:
    return {"name": f.name, "value": f.value, "rate": rate, "help": f.help, "counter": f.counter}


def _job_json(s: JobSample, rates: dict[tuple[Any, ...], float]) -> dict[str, Any]:
    job = s.job
    rate = {f: rates.get(("job", job.job_id, f.name, f.worker)) for f in s.stats.figures}
    job_level = [_figure_json(f, rate[f]) for f in s.stats.figures if f.worker is None]
    per_worker: dict[int, dict[str, Any]] = {w.worker_id: {} for w in job.workers}
    for f in s.stats.figures:
        if f.worker is not None:
            per_worker.setdefault(f.worker, {})[f.name] = _figure_json(f, rate[f])
    # Per-worker counters without a job-level figure of that name: their sum, e.g. the
    # job's retransmissions from what each worker reported.
    have = {f["name"] for f in job_level}
    for name in sorted({n for figs in per_worker.values() for n in figs} - have - {PROGRESS}):
        figs = [figs[name] for figs in per_worker.values() if name in figs]
        if all(f["counter"] for f in figs):
            rs = [f["rate"] for f in figs]
            total_rate = None if None in rs else sum(rs)
            job_level.append(
                {
                    "name": name,
                    "value": sum(f["value"] for f in figs),
                    "rate": total_rate,
                    "help": f"sum over the workers: {figs[0]['help']}",
                    "counter": True,
                }
            )
    progress = {w: figs[PROGRESS]["value"] for w, figs in per_worker.items() if PROGRESS in figs}
    lead = max(progress.values(), default=0)
    workers: list[dict[str, Any]] = []
    for w in job.workers:
        lag = lead - progress[w.worker_id] if w.worker_id in progress else None
        workers.append(
            {
                "worker_id": w.worker_id,
                "port": w.port,
                "ip": w.ip,
                "figures": per_worker.get(w.worker_id, {}),
                "lag": lag,
                "reported_at": s.reported_at.get(w.worker_id),
            }
        )
    lags = {x["worker_id"]: x["lag"] for x in workers if x["lag"]}
    straggler = max(lags, key=lambda w: lags[w]) if lags else None
    return {
        **job.to_dict(),
        "pool": kind_of(job.kind).pool,
        "state": dict(s.stats.state),
        "error": s.error,
        "figures": job_level,
        "worker_stats": workers,
        "straggler": straggler,
    }


class LiveStats:
    """Samples switches and jobs on the daemon's loop (all calls from that loop)."""

    def __init__(
        self,
        switches: SwitchSet,
        manager: JobManager,
        reports: WorkerReports,
        events: EventLog,
    ) -> None:
        self.switches = switches
        self.manager = manager
        self.reports = reports
        self.events = events

    async def sample(self) -> Sample:
        switches = await asyncio.gather(*(self._switch(dev) for dev in self.switches.connections))
        jobs = await asyncio.gather(*(self._job(job) for job in self.manager.jobs()))
        return Sample(
            time=time.time(),
            switches=list(switches),
            jobs=list(jobs),
            memory=self.manager.memory_view(),
            events=[e.to_dict() for e in self.events.recent(30)],
        )

    async def _switch(self, device_id: int) -> SwitchSample:
        conn = self.switches[device_id]
        drops, error = None, None
        if conn.connected:
            try:
                drops = await read_drops(conn)
            except (SwitchError, KeyError, ValueError) as err:  # no inc_drops: another program
                error = str(err)
        else:
            error = "not connected"
        return SwitchSample(
            device_id,
            conn.spec.label,
            conn.spec.address,
            conn.connected,
            conn.connected and conn.is_primary,
            drops,
            error,
        )

    async def _job(self, job: Job) -> JobSample:
        stats, error = JobStats(), None
        conn = self.switches.connections.get(job.device_id)
        if conn is None or not conn.connected:
            error = f"switch {job.device_id} is not connected"
        else:
            try:
                stats = await kind_of(job.kind).live_stats(conn, job)
                stats = await _with_drops(conn, job, stats)
            except (SwitchError, KeyError, ValueError) as err:
                error = str(err)
        reported = self.reports.of_job(job.job_id)
        figures = list(stats.figures)
        have = {(f.name, f.worker) for f in figures}
        state = dict(stats.state)
        for wid, (_, report) in sorted(reported.items()):
            # What the switch says wins over what a host says about the same figure.
            figures += [f for f in report.figures(wid) if (f.name, f.worker) not in have]
            for key, text in report.state.items():
                state.setdefault(f"w{wid} {key}", text)
        return JobSample(
            job,
            JobStats(tuple(figures), state),
            {wid: t for wid, (t, _) in reported.items()},
            error,
        )


async def _with_drops(conn: SwitchConnection, job: Job, stats: JobStats) -> JobStats:
    """``stats`` plus the switch's drops of packets naming the job, one figure per reason."""
    try:
        conn.schema.counters[JOB_DROPS]
    except (KeyError, ValueError):  # another program: no per-job drop counter
        return stats
    drops = await read_job_drops(conn, job.job_id)
    figures = [
        Figure(f"drops_{reason}", n, f"packets naming the job the switch dropped: {reason}")
        for reason, n in drops.items()
    ]
    return JobStats(stats.figures + tuple(figures), stats.state)


class LiveFeed:
    """One sampler shared by every viewer: runs while someone watches, every ``interval``."""

    def __init__(self, stats: LiveStats, interval: float = 1.0) -> None:
        self.stats = stats
        self.interval = interval
        self._latest: dict[str, Any] | None = None
        self._changed = asyncio.Event()
        self._viewers = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def updates(self) -> AsyncIterator[dict[str, Any]]:
        """The dashboard's view now, then each new one, until ``close()``."""
        self._viewers += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="live-feed")
        try:
            seen = None
            while not self._closed:
                changed = self._changed
                if self._latest is not None and self._latest is not seen:
                    seen = self._latest
                    yield seen
                await changed.wait()
        finally:
            self._viewers -= 1
            if self._viewers == 0 and self._task is not None:
                self._task.cancel()
                self._task = None

    def close(self) -> None:
        self._closed = True
        self._publish(self._latest)

    def _publish(self, view: dict[str, Any] | None) -> None:
        self._latest = view
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _run(self) -> None:
        previous: Sample | None = None
        while not self._closed:
            try:
                sample = await self.stats.sample()
                self._publish(sample.to_json(previous))
                previous = sample
            except Exception:  # a bug in a kind's figures must not stop the feed
                log.exception("live sample failed")
            await asyncio.sleep(self.interval)
