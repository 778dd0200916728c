"""Reads the switch's ``inc_drops`` counter (``p4src/inc.p4``): packets dropped, by reason.

Example::

    drops = await read_drops(sw)      # {"unknown_job": 3, "stale": 0, ...}

The counter's index is ``wire.header.DropReason``; an index that enum does not name (a
newer switch program) is reported as ``reason_<index>``, so nothing is hidden.
"""

from __future__ import annotations

from controller.p4runtime_client import SwitchConnection
from wire.header import DropReason

INC_DROPS = "IncIngress.inc_drops"


def reason_name(index: int) -> str:
    try:
        return DropReason(index).name.lower()
    except ValueError:
        return f"reason_{index}"


async def read_drops(sw: SwitchConnection) -> dict[str, int]:
    """Packets dropped per reason since the pipeline was set."""
    cells = await sw.read_counter(INC_DROPS)
    return {reason_name(i): packets for i, (packets, _) in sorted(cells.items())}
