"""Switch memory: contiguous regions of the aggregator pool, first fit, coalesced on free.

Example:
    >>> mm = MemoryManager(pool_size=16)
    >>> mm.allocate(owner=1, size=4)
    Region(offset=0, size=4)
    >>> mm.allocate(owner=2, size=8)
    Region(offset=4, size=8)
    >>> _ = mm.free(1)
    >>> mm.allocate(owner=3, size=2)
    Region(offset=0, size=2)
    >>> [(s.offset, s.size, s.owner) for s in mm.segments()]
    [(0, 2, 3), (2, 2, None), (4, 8, 2), (12, 4, None)]

Units are aggregators; each aggregator holds two copies in the switch (docs/protocol.md), so
a region of ``size`` aggregators uses register indices ``[2 offset, 2 (offset + size))``. A
job with window W needs ``size >= W`` (NetReduce: ``size = W``, switch memory = 2 x window).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from dataclasses import dataclass

from wire.header import AGG_POOL_SIZE


class OutOfMemory(Exception):
    """No free region is large enough; the message gives the largest one available."""


@dataclass(frozen=True, order=True)
class Region:
    offset: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass(frozen=True)
class Segment:
    """A stretch of the pool: owned by ``owner`` or free (``owner is None``)."""

    offset: int
    size: int
    owner: Hashable | None


class MemoryManager:
    """First-fit allocator over ``[0, pool_size)``; free blocks are kept sorted and merged."""

    def __init__(self, pool_size: int = AGG_POOL_SIZE) -> None:
        if pool_size <= 0:
            raise ValueError("pool_size must be positive")
        self.pool_size = pool_size
        self._free: list[Region] = [Region(0, pool_size)]  # sorted by offset, never adjacent
        self._owned: dict[Hashable, Region] = {}

    def allocate(self, owner: Hashable, size: int) -> Region:
        """The lowest free region of ``size`` aggregators, now owned by ``owner``."""
        if owner in self._owned:
            raise ValueError(f"{owner!r} already owns {self._owned[owner]}")
        if size <= 0:
            raise ValueError(f"region size must be positive, got {size}")
        for i, block in enumerate(self._free):
            if block.size >= size:
                got = Region(block.offset, size)
                rest = Region(block.offset + size, block.size - size)
                self._free[i : i + 1] = [rest] if rest.size else []
                self._owned[owner] = got
                return got
        raise OutOfMemory(
            f"no free region of {size} aggregators (largest free: {self.largest_free()},"
            f" {self.free_total()} free of {self.pool_size})"
        )

    def reserve(self, owner: Hashable, region: Region) -> None:
        """Mark ``region`` as owned (rebuilding state from storage); it must be free."""
        if owner in self._owned:
            raise ValueError(f"{owner!r} already owns {self._owned[owner]}")
        for i, block in enumerate(self._free):
            if block.offset <= region.offset and region.end <= block.end:
                parts = [
                    Region(block.offset, region.offset - block.offset),
                    Region(region.end, block.end - region.end),
                ]
                self._free[i : i + 1] = [p for p in parts if p.size]
                self._owned[owner] = region
                return
        raise ValueError(f"region {region} is not free in the pool")

    def free(self, owner: Hashable) -> Region:
        """Give back ``owner``'s region, merged with free neighbours."""
        try:
            region = self._owned.pop(owner)
        except KeyError:
            raise KeyError(f"{owner!r} owns no region") from None
        i = bisect.bisect_left(self._free, region)
        start, end = region.offset, region.end
        if i < len(self._free) and self._free[i].offset == end:
            end = self._free.pop(i).end
        if i > 0 and self._free[i - 1].end == start:
            i -= 1
            start = self._free.pop(i).offset
        self._free.insert(i, Region(start, end - start))
        return region

    def region_of(self, owner: Hashable) -> Region | None:
        return self._owned.get(owner)

    def owners(self) -> dict[Hashable, Region]:
        return dict(self._owned)

    def free_total(self) -> int:
        return sum(b.size for b in self._free)

    def largest_free(self) -> int:
        return max((b.size for b in self._free), default=0)

    def segments(self) -> list[Segment]:
        """The whole pool in order: owned regions and free blocks."""
        segs = [Segment(r.offset, r.size, o) for o, r in self._owned.items()]
        segs += [Segment(b.offset, b.size, None) for b in self._free]
        return sorted(segs, key=lambda s: s.offset)
