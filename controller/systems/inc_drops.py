"""Reads the switch's drop counters (``p4src/inc.p4``): packets dropped, by reason.

Example::

    drops = await read_drops(sw)      # {"unknown_job": 3, "stale": 0, ...}
    mine = await read_job_drops(sw, 7)  # the same, for packets that named job 7

``inc_drops`` counts per switch; ``job_drops`` counts the same drops per job id the packet
claims (a forged packet naming job 7 counts under job 7: that is where an operator looks).

The counter's index is ``wire.header.DropReason``; an index that enum does not name (a
newer switch program) is reported as ``reason_<index>``, so nothing is hidden.
"""

from __future__ import annotations

from finsy import P4CounterEntry

from controller.p4rt.p4runtime_client import SwitchConnection
from wire.header import DROP_REASONS, DROP_STRIDE, JOB_DROP_JOBS, DropReason

INC_DROPS = "IncIngress.inc_drops"
JOB_DROPS = "IncIngress.job_drops"


def reason_name(index: int) -> str:
    try:
        return DropReason(index).name.lower()
    except ValueError:
        return f"reason_{index}"


async def read_drops(sw: SwitchConnection) -> dict[str, int]:
    """Packets dropped per reason since the pipeline was set."""
    cells = await sw.read_counter(INC_DROPS)
    return {reason_name(i): packets for i, (packets, _) in sorted(cells.items())}


async def read_job_drops(sw: SwitchConnection, job_id: int) -> dict[str, int]:
    """Packets naming ``job_id`` dropped per reason (one read request for all reasons).

    Job ids from ``JOB_DROP_JOBS`` up share cell 0 ("no job") and are not told apart.
    """
    job = job_id if 0 < job_id < JOB_DROP_JOBS else 0
    cells = [P4CounterEntry(JOB_DROPS, index=job * DROP_STRIDE + r) for r in range(DROP_REASONS)]
    got = await sw.read_many(cells)
    return {
        reason_name(e.index - job * DROP_STRIDE): e.packet_count
        for e in sorted(got, key=lambda e: e.index)
        if e.index is not None
    }
