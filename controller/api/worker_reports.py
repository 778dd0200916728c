"""Progress that worker agents report to the daemon (``POST /jobs/{id}/workers/{w}/progress``).

Example:
    >>> r = ProgressReport(counters={"retransmissions": 3, "results": 640}, gauges={"epoch": 2})
    >>> [(f.name, f.value, f.counter) for f in r.figures(worker=1)][:2]
    [('retransmissions', 3, True), ('results', 640, True)]
    >>> ProgressReport(counters={"Bad Name": 1})
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for ProgressReport
    ...

What the switch cannot see comes from the hosts: retransmissions and timeouts of a worker,
its epoch, accuracy, synchronisation mode as the worker applies it. A report holds the
worker's cumulative counters, its gauges and a little text, all bounded (names like figure
names, at most 16 of each), so a report cannot grow the daemon. The latest report of each
worker is kept while its job exists; reports are best effort and never affect admission.
"""

from __future__ import annotations

import time
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from controller.jobs.figures import FIGURE_NAME, Figure

MAX_FIGURES = 16
Name = Annotated[str, Field(strict=True, pattern=FIGURE_NAME.pattern)]
Count = Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)]
Level = Annotated[float, Field(allow_inf_nan=False, ge=-1e18, le=1e18)]
Text = Annotated[str, Field(strict=True, max_length=80, pattern=r"^[ -~]*$")]


class ProgressReport(BaseModel):
    """A worker's figures now: ``counters`` count up since it started, ``gauges`` are
    levels, ``state`` is short printable text (e.g. ``{"mode": "async"}``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    counters: Annotated[dict[Name, Count], Field(max_length=MAX_FIGURES)] = {}
    gauges: Annotated[dict[Name, Level], Field(max_length=MAX_FIGURES)] = {}
    state: Annotated[dict[Name, Text], Field(max_length=MAX_FIGURES)] = {}

    def figures(self, worker: int) -> list[Figure]:
        help_ = "reported by the worker agent"
        return [
            Figure(k, v, help_, counter=True, worker=worker) for k, v in self.counters.items()
        ] + [Figure(k, v, help_, counter=False, worker=worker) for k, v in self.gauges.items()]


class WorkerReports:
    """The latest report of every worker, by job (touched from the daemon's loop only)."""

    def __init__(self) -> None:
        self._latest: dict[int, dict[int, tuple[float, ProgressReport]]] = {}

    def put(self, job_id: int, worker_id: int, report: ProgressReport) -> None:
        self._latest.setdefault(job_id, {})[worker_id] = (time.time(), report)

    def of_job(self, job_id: int) -> dict[int, tuple[float, ProgressReport]]:
        return dict(self._latest.get(job_id, {}))

    def forget(self, job_id: int) -> None:
        self._latest.pop(job_id, None)
