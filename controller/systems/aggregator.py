"""Programs ``p4src/aggregator.p4``: clearing and inspecting aggregator memory.

Example::

    await clear_region(sw, Region(offset=64, size=32))     # on cancel: the region is free
    state = await read_copy(sw, index=70, version=1)        # debugging, tests

Aggregator ``i`` has two copies; copy ``(i, v)`` is register index ``2 i + v``, so a
region ``[offset, offset + size)`` is the index range ``[2 offset, 2 (offset + size))``.
Clearing writes 0 to ``agg_job`` (0 = free: the next packet starts afresh, whatever its psn,
docs/protocol.md) and, so that the memory view shows a clean region, to the bitmap, count
and psn as well. The values need no clearing: a fresh use overwrites them.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import SwitchConnection
from wire.header import AGG_VERSIONS, SLOTS, VALUE_BLOCKS

PREFIX = "IncIngress.aggregator."
AGG_JOB = PREFIX + "agg_job"
AGG_PSN = PREFIX + "agg_psn"
AGG_BITMAP = PREFIX + "agg_bitmap"
AGG_COUNT = PREFIX + "agg_count"
STATE_REGISTERS = (AGG_JOB, AGG_BITMAP, AGG_COUNT, AGG_PSN)
# Slot k of value block b (p4src/aggregator.p4: agg_value, agg_value_b1 .. b3), in slot order.
VALUE_REGISTERS = tuple(
    f"{PREFIX}agg_value{f'_b{b}' if b else ''}_{k:02d}"
    for b in range(VALUE_BLOCKS)
    for k in range(SLOTS)
)


def copy_index(aggregator: int, version: int) -> int:
    return AGG_VERSIONS * aggregator + version


def copy_range(region: Region) -> range:
    """Register indices of both copies of every aggregator of ``region``."""
    return range(copy_index(region.offset, 0), copy_index(region.end, 0))


async def clear_region(sw: SwitchConnection, region: Region, values: bool = False) -> None:
    """Mark every copy of ``region`` free (and zero the values too when ``values``)."""
    names = STATE_REGISTERS + (VALUE_REGISTERS if values else ())
    for name in names:
        await sw.fill_register(name, copy_range(region), 0)


@dataclass(frozen=True)
class CopyState:
    job_id: int
    psn: int
    bitmap: int
    count: int
    values: tuple[int, ...]  # int32 each, as the workers read them (every block's slots)


async def read_copy(
    sw: SwitchConnection, index: int, version: int, with_values: bool = True
) -> CopyState:
    """One copy's state (a register read per field: for tests and debugging, not hot paths)."""
    at = copy_index(index, version)
    job, bitmap, count, psn = [await sw.read_register(n, at) for n in STATE_REGISTERS]
    vals: tuple[int, ...] = ()
    if with_values:
        raw = [await sw.read_register(n, at) for n in VALUE_REGISTERS]
        vals = tuple(v - (1 << 32) if v >= 1 << 31 else v for v in raw)
    return CopyState(job, psn, bitmap, count, vals)
