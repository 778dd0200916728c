"""Match-action tables for p4sim, with the lookup semantics of BMv2 ``simple_switch``.

Example::

    t = Table("ipv4_lpm", [KeyField("hdr.ipv4.dstAddr", "lpm", 32)], size=1024,
              default_action="drop")
    h = t.add(Entry(((0x0A000000, 8),), "fwd", (1,)))
    t.lookup((0x0A010203,)).action     # -> "fwd"; None on a miss (run the default)

Three index shapes are chosen from the key's match kinds:

* exact only: one dict keyed by the key tuple;
* one ``lpm`` field, the rest exact: one dict per prefix length, probed longest first;
* anything with ``ternary``/``range``/``optional`` (or several lpm fields): highest
  priority wins, ties broken by insertion order.  Entries with the same set of masks
  share a group whose dict is keyed by ``key & masks`` (tuple-space search); range
  fields are checked on the few candidates a group's dict returns.

Priorities follow P4Runtime: a *higher* number wins.  BMv2's own CLI
(``table_add ... => args PRIORITY``) uses the opposite order (lower wins); a caller
converting BMv2-style priorities passes ``-bmv2_priority`` (or ``C - bmv2_priority``
for any constant C), which preserves the order and the tie rules.  BMv2 breaks ties
between equal priorities by its internal handle (the lowest wins); without deletions
that is insertion order, which is what p4sim always uses.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional")


class TableError(Exception):
    """A control-plane mistake on a table (bad value, duplicate, full, const ...)."""


@dataclass(frozen=True)
class KeyField:
    """One field of a table key, e.g. ``KeyField("hdr.ipv4.dstAddr", "lpm", 32)``."""

    name: str
    match_kind: str
    width: int


@dataclass(eq=False)
class Entry:
    """A table entry.

    ``matches`` holds one item per key field: exact -> int; lpm -> (value, prefix_len);
    ternary -> (value, mask); range -> (lo, hi); optional -> int or None (wildcard).
    ``Table.add`` replaces it by its canonical form (see ``Table.add``).
    """

    matches: tuple
    action: str
    args: tuple[int, ...] = ()
    priority: int = 0
    handle: int = -1
    counter: list[int] = field(default_factory=lambda: [0, 0])
    meter: Any = None  # per-entry direct-meter state (externs.MeterState) when configured


def _lpm_mask(width: int, plen: int) -> int:
    return ((1 << plen) - 1) << (width - plen)


class _Group:
    """Entries sharing one mask set: a dict ``key & masks`` -> candidates, best first."""

    __slots__ = ("idx_masks", "buckets", "max_prio", "count")

    def __init__(self, idx_masks: tuple[tuple[int, int], ...]) -> None:
        self.idx_masks = idx_masks  # (field index, mask) for every non-zero mask
        self.buckets: dict[tuple[int, ...], list[tuple]] = {}
        self.max_prio = 0
        self.count = 0


class Table:
    """A P4 match-action table (see the module docstring for lookup semantics).

    ``size`` is the capacity: exactly ``size`` entries fit, as in BMv2.  With
    ``const_entries=True`` the entry set is frozen after construction (``entries``
    given here are installed first); ``default_const=True`` freezes the default action.
    """

    def __init__(
        self,
        name: str,
        keys: Sequence[KeyField],
        size: int,
        default_action: str,
        default_args: tuple[int, ...] = (),
        default_const: bool = False,
        const_entries: bool = False,
        entries: Iterable[Entry] = (),
    ) -> None:
        self.name = name
        self.keys = tuple(keys)
        self.size = size
        self.default_action = default_action
        self.default_args = tuple(default_args)
        self.default_const = default_const
        for k in self.keys:
            if k.match_kind not in MATCH_KINDS:
                raise TableError(
                    f"table {name}: key {k.name} has unknown match kind "
                    f"{k.match_kind!r} (expected one of {', '.join(MATCH_KINDS)})"
                )
        kinds = [k.match_kind for k in self.keys]
        if all(k == "exact" for k in kinds):
            self.mode = "exact"
        elif kinds.count("lpm") == 1 and all(k in ("exact", "lpm") for k in kinds):
            self.mode = "lpm"
        else:
            self.mode = "ternary"
        self._lpm_index = kinds.index("lpm") if self.mode == "lpm" else -1
        self.const_entries = False
        self.clear()
        if entries:
            self._install_const(entries)
        self.const_entries = const_entries

    @property
    def uses_priority(self) -> bool:
        """True when entries are ordered by priority (ternary/range/optional keys)."""
        return self.mode == "ternary"

    # -- control plane -------------------------------------------------------------

    def clear(self) -> None:
        """Remove every entry (not allowed on a const table after construction)."""
        self._check_mutable("clear")
        self._entries: dict[int, Entry] = {}
        self._by_match: dict[tuple, int] = {}
        self._free_handles: list[int] = []
        self._next_handle = 0
        self._seq = 0
        self._seq_of: dict[int, int] = {}
        self._exact: dict[tuple, Entry] = {}
        self._lpm_levels: dict[int, dict] = {}
        self._lpm_probe: list[tuple[int, dict]] = []  # (mask, dict), longest prefix first
        self._groups: dict[tuple[int, ...], _Group] = {}
        self._groups_sorted: list[_Group] = []

    def add(self, entry: Entry, canonicalize: bool = False) -> int:
        """Install ``entry`` and return its handle.

        Raises TableError when a value does not fit its key width, an lpm value has
        bits past its prefix or a ternary value has bits outside its mask (unless
        ``canonicalize=True``, which clears those bits as BMv2's CLI does), a range
        has lo > hi, the same match key (and priority, for prioritised tables)
        already exists, or the table is full.
        """
        self._check_mutable("add entries to")
        return self._insert(entry, canonicalize)

    def modify(self, handle: int, action: str, args: tuple[int, ...]) -> None:
        """Change the action of an installed entry (its counters are kept)."""
        self._check_mutable("modify entries of")
        e = self.get(handle)
        e.action = action
        e.args = tuple(args)

    def delete(self, handle: int) -> None:
        """Remove the entry with ``handle``; its direct counter/meter go with it."""
        self._check_mutable("delete entries from")
        e = self.get(handle)
        self._unindex(e)
        del self._entries[handle]
        del self._by_match[self._match_id(e)]
        del self._seq_of[handle]
        heapq.heappush(self._free_handles, handle)

    def set_default(self, action: str, args: tuple[int, ...] = ()) -> None:
        """Set the action run on a miss; TableError when the default is const."""
        if self.default_const:
            raise TableError(
                f"table {self.name}: the default action is const and cannot be changed to {action}"
            )
        self.default_action = action
        self.default_args = tuple(args)

    def get(self, handle: int) -> Entry:
        """The entry with ``handle``; TableError when there is none."""
        try:
            return self._entries[handle]
        except KeyError:
            raise TableError(f"table {self.name}: no entry with handle {handle}") from None

    def find(self, matches: tuple, priority: int = 0) -> Entry | None:
        """The entry installed with this match key (and priority), or None."""
        probe = Entry(self._normalise(tuple(matches), False), "", (), priority)
        h = self._by_match.get(self._match_id(probe))
        return None if h is None else self._entries[h]

    def entries(self) -> list[Entry]:
        """All entries, in insertion order."""
        return list(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def count_hit(self, entry: Entry, nbytes: int) -> None:
        """Update the direct counter of ``entry`` for one packet of ``nbytes`` bytes."""
        c = entry.counter
        c[0] += 1
        c[1] += nbytes

    def _install_const(self, entries: Iterable[Entry]) -> None:
        """Install the program's ``const entries`` (bypasses the const check)."""
        for e in entries:
            self._insert(e, False)

    def _check_mutable(self, what: str) -> None:
        if self.const_entries:
            raise TableError(f"table {self.name}: cannot {what} a table with const entries")

    # -- validation ------------------------------------------------------------------

    def _normalise(self, matches: tuple, canonicalize: bool) -> tuple:
        if len(matches) != len(self.keys):
            raise TableError(
                f"table {self.name}: expected {len(self.keys)} match value(s), got {len(matches)}"
            )
        pairs = zip(self.keys, matches, strict=True)
        return tuple(self._norm_one(k, m, canonicalize) for k, m in pairs)

    def _norm_one(self, k: KeyField, m: Any, canon: bool) -> Any:
        kind, w = k.match_kind, k.width
        full = (1 << w) - 1
        if kind == "exact":
            return self._fit(k, m, "value")
        if kind == "optional":
            return None if m is None else self._fit(k, m, "value")
        if isinstance(m, int) and not isinstance(m, bool):  # bare int = all bits exact
            m = {"lpm": (m, w), "ternary": (m, full), "range": (m, m)}[kind]
        if not (isinstance(m, tuple) and len(m) == 2):
            raise TableError(f"table {self.name}: key {k.name} ({kind}) expects a pair, got {m!r}")
        a, b = m
        if kind == "lpm":
            v = self._fit(k, a, "value")
            if not isinstance(b, int) or not 0 <= b <= w:
                raise TableError(
                    f"table {self.name}: key {k.name}: prefix length {b!r} is not in 0..{w}"
                )
            return (self._check_bits(k, v, _lpm_mask(w, b), canon, f"/{b} prefix"), b)
        if kind == "ternary":
            v, mask = self._fit(k, a, "value"), self._fit(k, b, "mask")
            return (self._check_bits(k, v, mask, canon, f"mask {mask:#x}"), mask)
        lo, hi = self._fit(k, a, "range low"), self._fit(k, b, "range high")
        if lo > hi:
            raise TableError(f"table {self.name}: key {k.name}: range low {lo} > high {hi}")
        return (lo, hi)

    def _fit(self, k: KeyField, v: Any, what: str) -> int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise TableError(f"table {self.name}: key {k.name}: {what} {v!r} is not an int")
        if not 0 <= v < (1 << k.width):
            raise TableError(
                f"table {self.name}: key {k.name}: {what} {v:#x} does not fit in {k.width} bits"
            )
        return v

    def _check_bits(self, k: KeyField, v: int, mask: int, canon: bool, where: str) -> int:
        if v & ~mask == 0 or canon:
            return v & mask
        raise TableError(
            f"table {self.name}: key {k.name}: value {v:#x} has bits set "
            f"outside its {where} (pass canonicalize=True to clear them)"
        )

    def _match_id(self, e: Entry) -> tuple:
        return (e.matches, e.priority) if self.mode == "ternary" else e.matches

    # -- insertion / indexing ----------------------------------------------------------

    def _insert(self, entry: Entry, canonicalize: bool) -> int:
        entry.matches = self._normalise(tuple(entry.matches), canonicalize)
        entry.args = tuple(entry.args)
        mid = self._match_id(entry)
        if mid in self._by_match:
            raise TableError(
                f"table {self.name}: entry already exists (handle "
                f"{self._by_match[mid]}) for match key {entry.matches}"
            )
        if len(self._entries) >= self.size:
            raise TableError(f"table {self.name}: table is full ({self.size} entries)")
        h = heapq.heappop(self._free_handles) if self._free_handles else self._next_handle
        if h == self._next_handle:
            self._next_handle += 1
        entry.handle = h
        self._seq += 1
        self._seq_of[h] = self._seq
        self._entries[h] = entry
        self._by_match[mid] = h
        self._index(entry)
        return h

    def _index(self, e: Entry) -> None:
        if self.mode == "exact":
            self._exact[e.matches] = e
        elif self.mode == "lpm":
            plen, k = self._lpm_key(e)
            level = self._lpm_levels.get(plen)
            if level is None:
                level = self._lpm_levels[plen] = {}
                self._rebuild_lpm_probe()
            level[k] = e
        else:
            self._tss_add(e)

    def _unindex(self, e: Entry) -> None:
        if self.mode == "exact":
            del self._exact[e.matches]
        elif self.mode == "lpm":
            plen, k = self._lpm_key(e)
            level = self._lpm_levels[plen]
            del level[k]
            if not level:
                del self._lpm_levels[plen]
                self._rebuild_lpm_probe()
        else:
            self._tss_remove(e)

    def _lpm_key(self, e: Entry) -> tuple[int, Any]:
        li = self._lpm_index
        v, plen = e.matches[li]
        if len(self.keys) == 1:
            return plen, v
        return plen, e.matches[:li] + (v,) + e.matches[li + 1 :]

    def _rebuild_lpm_probe(self) -> None:
        w = self.keys[self._lpm_index].width
        self._lpm_probe = [
            (_lpm_mask(w, p), self._lpm_levels[p]) for p in sorted(self._lpm_levels, reverse=True)
        ]

    def _tss_parts(self, e: Entry) -> tuple[tuple, tuple, tuple]:
        """(masks, masked values, range checks) of an entry for the tuple-space index."""
        masks, vals, ranges = [], [], []
        for i, (k, m) in enumerate(zip(self.keys, e.matches, strict=True)):
            full = (1 << k.width) - 1
            kind = k.match_kind
            if kind == "exact":
                mask, val = full, m
            elif kind == "optional":
                mask, val = (0, 0) if m is None else (full, m)
            elif kind == "lpm":
                mask, val = _lpm_mask(k.width, m[1]), m[0]
            elif kind == "ternary":
                mask, val = m[1], m[0]
            else:
                mask, val = 0, 0
                if m != (0, full):  # the full range is a wildcard: nothing to check
                    ranges.append((i, m[0], m[1]))
            masks.append(mask)
            vals.append(val)
        idx = tuple(i for i, m in enumerate(masks) if m)
        return (tuple((i, masks[i]) for i in idx), tuple(vals[i] for i in idx), tuple(ranges))

    def _tss_add(self, e: Entry) -> None:
        idx_masks, vals, ranges = self._tss_parts(e)
        g = self._groups.get(idx_masks)
        if g is None:
            g = self._groups[idx_masks] = _Group(idx_masks)
        cand = (-e.priority, self._seq_of[e.handle], ranges, e)
        bucket = g.buckets.setdefault(vals, [])
        bucket.append(cand)
        bucket.sort(key=lambda c: (c[0], c[1]))
        g.max_prio = e.priority if g.count == 0 else max(g.max_prio, e.priority)
        g.count += 1
        self._sort_groups()

    def _tss_remove(self, e: Entry) -> None:
        idx_masks, vals, _ = self._tss_parts(e)
        g = self._groups[idx_masks]
        bucket = g.buckets[vals]
        bucket[:] = [c for c in bucket if c[3] is not e]
        if not bucket:
            del g.buckets[vals]
        g.count -= 1
        if g.count == 0:
            del self._groups[idx_masks]
        else:
            g.max_prio = max(-b[0][0] for b in g.buckets.values())
        self._sort_groups()

    def _sort_groups(self) -> None:
        self._groups_sorted = sorted(self._groups.values(), key=lambda g: -g.max_prio)

    # -- data plane ------------------------------------------------------------------

    def lookup(self, key: tuple[int, ...]) -> Entry | None:
        """The matching entry for ``key`` (one int per key field), or None on a miss."""
        if self.mode == "exact":
            return self._exact.get(key)
        if self.mode == "lpm":
            return self._lookup_lpm(key)
        return self._lookup_tss(key)

    def _lookup_lpm(self, key: tuple[int, ...]) -> Entry | None:
        if len(key) == 1:
            v = key[0]
            for mask, level in self._lpm_probe:
                e = level.get(v & mask)
                if e is not None:
                    return e
            return None
        li = self._lpm_index
        head, v, tail = key[:li], key[li], key[li + 1 :]
        for mask, level in self._lpm_probe:
            e = level.get(head + (v & mask,) + tail)
            if e is not None:
                return e
        return None

    def _lookup_tss(self, key: tuple[int, ...]) -> Entry | None:
        best: tuple | None = None
        for g in self._groups_sorted:
            if best is not None and -g.max_prio > best[0]:
                break  # groups are sorted by their best priority: none can win now
            bucket = g.buckets.get(tuple([key[i] & m for i, m in g.idx_masks]))
            if bucket is None:
                continue
            for c in bucket:
                if best is not None and (c[0], c[1]) >= (best[0], best[1]):
                    break
                if all(lo <= key[i] <= hi for i, lo, hi in c[2]):
                    best = c
                    break
        return None if best is None else best[3]
