"""Switch memory: contiguous regions of a pool, allocated, resized and given back.

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

Resizing while a job runs (the scheduler, ``controller/sched/scheduler.py``):

    >>> mm.resize(2, 3)                     # shrink in place; the tail is still held...
    Region(offset=4, size=3)
    >>> [(s.offset, s.size, s.owner, s.retiring) for s in mm.segments() if s.owner == 2]
    [(4, 3, 2, False), (7, 5, 2, True)]
    >>> mm.release(2)                       # ...until the job has switched over
    [Region(offset=7, size=5)]
    >>> mm.resize(3, 4)                     # grows in place into the free space after it
    Region(offset=0, size=4)
    >>> mm.resize(3, 8)                     # no room there: moves to a free block
    Region(offset=7, size=8)

Units are aggregators; each aggregator holds two copies in the switch (docs/protocol.md), so
a region of ``size`` aggregators uses register indices ``[2 offset, 2 (offset + size))``. A
job with window W needs ``size >= W`` (NetReduce: ``size = W``, switch memory = 2 x window).

A job's layout changes only at an epoch boundary its workers agree on
(``controller/sched/switchover.py``), and packets of the old layout may still be in flight until
then, so ``resize`` keeps the part of the old region that the new one does not cover as
*retiring*: still held by the owner (nobody else can be given it) until ``release``. The
new region may overlap the owner's current one (growing or shrinking in place, or sliding
into a larger free block around it): docs/protocol.md shows why that is safe. It never
overlaps another owner's memory, current or retiring, nor the owner's own retiring memory.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
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

    def contains(self, other: Region) -> bool:
        return self.offset <= other.offset and other.end <= self.end


@dataclass(frozen=True)
class Segment:
    """A stretch of the pool: owned by ``owner`` or free (``owner is None``); ``retiring``
    marks memory an owner still holds for packets of its previous layout."""

    offset: int
    size: int
    owner: Hashable | None
    retiring: bool = False


def _union(regions: Iterable[Region]) -> list[Region]:
    """Sorted, merged, non-empty."""
    out: list[Region] = []
    for r in sorted(r for r in regions if r.size > 0):
        if out and r.offset <= out[-1].end:
            last = out[-1]
            out[-1] = Region(last.offset, max(last.end, r.end) - last.offset)
        else:
            out.append(r)
    return out


def _minus(regions: Iterable[Region], cut: Iterable[Region]) -> list[Region]:
    """The parts of ``regions`` outside every region of ``cut``."""
    cuts = _union(cut)
    out: list[Region] = []
    for r in _union(regions):
        start = r.offset
        for c in cuts:
            if c.end <= start or c.offset >= r.end:
                continue
            if c.offset > start:
                out.append(Region(start, c.offset - start))
            start = max(start, c.end)
        if start < r.end:
            out.append(Region(start, r.end - start))
    return out


class MemoryManager:
    """Regions of ``[0, pool_size)``: one current region per owner, plus retiring ones."""

    def __init__(self, pool_size: int = AGG_POOL_SIZE) -> None:
        if pool_size <= 0:
            raise ValueError("pool_size must be positive")
        self.pool_size = pool_size
        self._current: dict[Hashable, Region] = {}
        self._retiring: dict[Hashable, list[Region]] = {}
        self._free_cache: list[Region] | None = None

    # -- views -----------------------------------------------------------------------

    def _held(self, except_current_of: Hashable | None = None) -> list[Region]:
        held = [r for o, r in self._current.items() if o != except_current_of]
        for rs in self._retiring.values():
            held += rs
        return held

    def _free_blocks(self, except_current_of: Hashable | None = None) -> list[Region]:
        if except_current_of is None and self._free_cache is not None:
            return self._free_cache
        blocks = _minus([Region(0, self.pool_size)], self._held(except_current_of))
        if except_current_of is None:
            self._free_cache = blocks
        return blocks

    def _changed(self) -> None:
        self._free_cache = None

    def region_of(self, owner: Hashable) -> Region | None:
        """The owner's current region (None: it holds none)."""
        return self._current.get(owner)

    def retiring_of(self, owner: Hashable) -> list[Region]:
        """Memory the owner still holds for its previous layouts, outside its current region."""
        cur = self._current.get(owner)
        return _minus(self._retiring.get(owner, []), [cur] if cur else [])

    def owners(self) -> dict[Hashable, Region]:
        return dict(self._current)

    def holders(self) -> set[Hashable]:
        """Every owner holding memory, current or retiring."""
        return set(self._current) | set(self._retiring)

    def held_by(self, owner: Hashable) -> int:
        """Aggregators the owner holds, current and retiring."""
        cur = self._current.get(owner)
        return sum(
            r.size for r in _union([*([cur] if cur else []), *self._retiring.get(owner, [])])
        )

    def free_total(self) -> int:
        return sum(b.size for b in self._free_blocks())

    def largest_free(self) -> int:
        return max((b.size for b in self._free_blocks()), default=0)

    def segments(self) -> list[Segment]:
        """The whole pool in order: current regions, retiring memory and free blocks."""
        segs = [Segment(r.offset, r.size, o) for o, r in self._current.items()]
        for owner in self._retiring:
            segs += [Segment(r.offset, r.size, owner, True) for r in self.retiring_of(owner)]
        segs += [Segment(b.offset, b.size, None) for b in self._free_blocks()]
        return sorted(segs, key=lambda s: s.offset)

    # -- fixed regions (jobs that are not rescheduled) -------------------------------

    def allocate(self, owner: Hashable, size: int) -> Region:
        """The lowest free region of ``size`` aggregators, now owned by ``owner``."""
        self._check_new(owner)
        if size <= 0:
            raise ValueError(f"region size must be positive, got {size}")
        for block in self._free_blocks():
            if block.size >= size:
                got = Region(block.offset, size)
                self._current[owner] = got
                self._changed()
                return got
        raise OutOfMemory(
            f"no free region of {size} aggregators (largest free: {self.largest_free()},"
            f" {self.free_total()} free of {self.pool_size})"
        )

    def reserve(self, owner: Hashable, region: Region, retiring: Iterable[Region] = ()) -> None:
        """Mark ``region`` (and ``retiring`` memory) as owned, rebuilding state from storage;
        all of it must be free."""
        self._check_new(owner)
        wanted = [r for r in (region, *retiring) if r.size > 0]
        free = self._free_blocks()
        for r in _union(wanted):
            if not any(b.contains(r) for b in free):
                raise ValueError(f"region {r} is not free in the pool")
        if region.size > 0:
            self._current[owner] = region
        rest = _minus(wanted, [region])
        if rest:
            self._retiring[owner] = rest
        self._changed()

    def _check_new(self, owner: Hashable) -> None:
        if owner in self._current or owner in self._retiring:
            raise ValueError(f"{owner!r} already owns {self._current.get(owner)}")

    def free(self, owner: Hashable) -> Region | None:
        """Give back everything ``owner`` holds; its current region (None: it had only
        retiring memory)."""
        if owner not in self._current and owner not in self._retiring:
            raise KeyError(f"{owner!r} owns no region")
        self._retiring.pop(owner, None)
        self._changed()
        return self._current.pop(owner, None)

    # -- resizing (scheduled jobs) ---------------------------------------------------

    def resize(self, owner: Hashable, size: int) -> Region | None:
        """Give ``owner`` a region of up to ``size`` aggregators (0: none); what it gets.

        Shrinking keeps the offset. Growing extends in place when the space after the
        region is free, else moves to the smallest free block that fits (the owner's own
        current region counts as free there), else takes the largest block there is if
        that is more than it has. The part of the old region outside the new one becomes
        retiring memory, held until ``release``. A new owner is placed by best fit.
        """
        if size < 0:
            raise ValueError(f"region size must be >= 0, got {size}")
        cur = self._current.get(owner)
        have = cur.size if cur else 0
        if size == have:
            return cur
        if size == 0:
            new: Region | None = None
        elif cur is not None and size < have:
            new = Region(cur.offset, size)
        else:
            new = self._grown(owner, cur, size)
            if new is None or new.size <= have:
                return cur  # no room for more: keep what it has
        if cur is not None:
            self._retiring.setdefault(owner, []).append(cur)
        if new is None:
            self._current.pop(owner, None)
        else:
            self._current[owner] = new
        self._drop_covered(owner)
        self._changed()
        return new

    def _grown(self, owner: Hashable, cur: Region | None, size: int) -> Region | None:
        blocks = self._free_blocks(except_current_of=owner)
        if cur is not None:
            for b in blocks:
                if b.contains(cur) and b.end - cur.offset >= size:
                    return Region(cur.offset, size)  # in place
        fits = [b for b in blocks if b.size >= size]
        if fits:
            best = min(fits, key=lambda b: (b.size, b.offset))
            if cur is not None and best.contains(cur):
                # Stay as close to the old place as the block allows (most overlap).
                return Region(min(cur.offset, best.end - size), size)
            return Region(best.offset, size)
        if not blocks:
            return None
        largest = max(blocks, key=lambda b: (b.size, -b.offset))
        return Region(largest.offset, largest.size)

    def _drop_covered(self, owner: Hashable) -> None:
        """Retiring memory inside the owner's current region needs no separate holding."""
        cur = self._current.get(owner)
        rest = _minus(self._retiring.get(owner, []), [cur] if cur else [])
        if rest:
            self._retiring[owner] = rest
        else:
            self._retiring.pop(owner, None)

    def release(self, owner: Hashable, keep: Iterable[Region] = ()) -> list[Region]:
        """Free the owner's retiring memory, except what lies in ``keep`` (regions the
        switch may still use for it); the memory that became free, to be cleared."""
        retiring = self._retiring.pop(owner, [])
        kept = _minus(
            [r for k in keep for r in _intersect(retiring, k)],
            [self._current[owner]] if owner in self._current else [],
        )
        if kept:
            self._retiring[owner] = kept
        freed = _minus(
            retiring, [*kept, *([self._current[owner]] if owner in self._current else [])]
        )
        self._changed()
        return freed


def _intersect(regions: Iterable[Region], k: Region) -> list[Region]:
    out = []
    for r in regions:
        start, end = max(r.offset, k.offset), min(r.end, k.end)
        if start < end:
            out.append(Region(start, end - start))
    return out
