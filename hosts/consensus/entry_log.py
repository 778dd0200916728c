"""A replica's log: a sequence of ``Entry``, whose tail the C request path appends in bulk.

Example (``native_replica.py`` appends what its C loop logged; the rest of the replica reads
and changes it as a list)::

    log = EntryLog([NOOP])
    log.extend_records(raw, 3)     # three records of native_replica.c's `rec` layout
    len(log), log[1], log[1:]      # 4, Entry(...), [Entry(...), ...]

The C path logs every request of the steady state; making a Python ``Entry`` of each as it
comes cost about a microsecond per request, a sixth of a replica's whole CPU per commit. The
records are kept as the C loop wrote them (one bytes object per batch) and turned into
entries the first time anything but the length is asked (a view change, a copy to a
follower, a read, the summary): the same entries, in the same order, decoded later.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, MutableSequence
from typing import Any, overload

from hosts.consensus.log_wire import MAX_DATA, Entry

#: one record of native_replica.c's ``rec``: worker, request id, data size, data
RECORD = struct.Struct(f"=III{MAX_DATA}s")


class EntryLog(MutableSequence[Entry]):
    """A list of entries with records not yet decoded at its end (module docstring)."""

    __slots__ = ("_items", "_raw", "_raw_n")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._items: list[Entry] = list(entries)
        self._raw: list[bytes] = []  # batches of records, after _items
        self._raw_n = 0

    def extend_records(self, raw: bytes, n: int) -> None:
        """Append ``n`` records (``RECORD`` each, back to back) without decoding them."""
        if len(raw) != n * RECORD.size:
            raise ValueError(f"{n} records take {n * RECORD.size} bytes, got {len(raw)}")
        if n:
            self._raw.append(raw)
            self._raw_n += n

    def _decoded(self) -> list[Entry]:
        if self._raw:
            items = self._items
            for raw in self._raw:
                items.extend([Entry(w, p, d[:size]) for w, p, size, d in RECORD.iter_unpack(raw)])
            self._raw.clear()
            self._raw_n = 0
        return self._items

    def __len__(self) -> int:
        return len(self._items) + self._raw_n

    @overload
    def __getitem__(self, i: int) -> Entry: ...

    @overload
    def __getitem__(self, i: slice) -> list[Entry]: ...

    def __getitem__(self, i: int | slice) -> Entry | list[Entry]:
        return self._decoded()[i]

    @overload
    def __setitem__(self, i: int, v: Entry) -> None: ...

    @overload
    def __setitem__(self, i: slice, v: Iterable[Entry]) -> None: ...

    def __setitem__(self, i: Any, v: Any) -> None:
        self._decoded()[i] = v

    def __delitem__(self, i: int | slice) -> None:
        del self._decoded()[i]

    def insert(self, i: int, v: Entry) -> None:
        self._decoded().insert(i, v)

    def append(self, v: Entry) -> None:
        self._decoded().append(v)

    def extend(self, vs: Iterable[Entry]) -> None:
        self._decoded().extend(vs)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._decoded())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EntryLog):
            return self._decoded() == other._decoded()
        if isinstance(other, list):
            return self._decoded() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"EntryLog({self._decoded()!r})"
