"""Programs ``p4src/job_meter.p4``: a job's meter, set at admission.

A job submitted with ``meter_pps`` gets a token bucket in the switch: its admitted
aggregation packets beyond ``meter_pps`` packets per second (after a burst of
``meter_burst``) are dropped and counted as ``METERED``, so one tenant flooding the switch
cannot take the aggregators or the switch's time from the others.

Example::

    >>> from controller.systems.atp import AtpRequest
    >>> AtpRequest(workers=2, meter_pps=2000).meter()
    (2000, 64)
    >>> AtpRequest(workers=2).meter() is None
    True
"""

from __future__ import annotations

from typing import Annotated, Any

from finsy import P4TableEntry, P4TableMatch
from pydantic import BaseModel, Field, model_validator

from controller.jobs.job import Job
from controller.p4rt.p4runtime_client import table_entry

JOB_METERS = "IncIngress.job_meter.job_meters"
DEFAULT_BURST = 64
MAX_RATE = 10_000_000  # packets/s: far above what any target here forwards


class Metered(BaseModel):
    """Request fields of a kind whose jobs may be metered (``incctl job submit
    --meter-pps N [--meter-burst B]``)."""

    meter_pps: Annotated[int, Field(strict=True, ge=1, le=MAX_RATE)] | None = None
    meter_burst: Annotated[int, Field(strict=True, ge=1, le=1 << 20)] | None = None

    @model_validator(mode="after")
    def _burst_needs_rate(self) -> Metered:
        if self.meter_burst is not None and self.meter_pps is None:
            raise ValueError("meter_burst: only with meter_pps")
        return self

    def meter(self) -> tuple[int, int] | None:
        """(rate, burst), or None: not metered."""
        if self.meter_pps is None:
            return None
        return self.meter_pps, self.meter_burst or DEFAULT_BURST

    def meter_params(self) -> dict[str, Any]:
        """What ``Job.params`` keeps of the meter (install reads it back)."""
        m = self.meter()
        return {} if m is None else {"meter_pps": m[0], "meter_burst": m[1]}


def meter_entries(job: Job) -> list[P4TableEntry]:
    """The ``job_meters`` entry of a metered job (none otherwise)."""
    rate = job.params.get("meter_pps")
    if rate is None:
        return []
    return [
        table_entry(
            JOB_METERS,
            {"hdr.inc.job_id": job.job_id},
            "IncIngress.job_meter.set_meter",
            rate=int(rate),
            burst=int(job.params.get("meter_burst", DEFAULT_BURST)),
        )
    ]


def meter_key(job_id: int) -> P4TableEntry:
    return P4TableEntry(JOB_METERS, match=P4TableMatch({"hdr.inc.job_id": job_id}))
