"""Stateful v1model externs: registers, counters and meters, as BMv2 ``simple_switch`` runs them.

Example::

    r = Register("MyIngress.r", width=8, size=4)
    r.write(1, 0x1FF)          # stored masked to 8 bits
    r.read(1)                  # -> 0xFF

Out-of-range indexes, as BMv2 does in ``targets/simple_switch/primitives.cpp``: the
packet-path methods (``Register.read/write``, ``Counter.count``, ``Meter.execute``) log
an error and change nothing; the destination of a read keeps its old value, so those
methods take a ``default`` that the caller sets to the destination's current value.
Control-plane methods (``cp_read``, ``Counter.read`` ...) raise ExternError instead,
as BMv2's Thrift/P4Runtime servers answer with an error.

State is kept in plain Python lists: for one index at a time (the packet path) they
beat numpy arrays, whose scalar access boxes a new object every time.
"""

from __future__ import annotations

import logging

from p4sim.runtime.tables import Entry, Table, TableError

log = logging.getLogger("p4sim.externs")

GREEN, YELLOW, RED = 0, 1, 2
COUNTER_KINDS = ("packets", "bytes", "packets_and_bytes")
METER_KINDS = ("packets", "bytes")


class ExternError(Exception):
    """A control-plane mistake on an extern (bad index, bad rates, unknown entry ...)."""


def _check_kind(name: str, kind: str, allowed: tuple[str, ...]) -> None:
    if kind not in allowed:
        raise ExternError(f"{name}: unknown kind {kind!r} (expected one of {', '.join(allowed)})")


class _Indexed:
    """Common index checking for arrays of ``size`` cells."""

    name: str
    size: int

    def _cp_index(self, i: int) -> None:
        if not 0 <= i < self.size:
            raise ExternError(f"{self.name}: index {i} is out of range (size {self.size})")

    def _dp_bad_index(self, i: int, what: str) -> bool:
        if 0 <= i < self.size:
            return False
        log.error(
            "%s of %s at out-of-bounds index %d (size %d): nothing changed",
            what,
            self.name,
            i,
            self.size,
        )
        return True


class Register(_Indexed):
    """``register<bit<W>>(size)``: ``read``/``write`` from the packet path, ``cp_*`` for
    the control plane.  Values are unsigned ``width``-bit patterns."""

    def __init__(self, name: str, width: int, size: int) -> None:
        self.name, self.width, self.size = name, width, size
        self.mask = (1 << width) - 1
        self.values: list[int] = [0] * size

    def read(self, i: int, default: int = 0) -> int:
        """Packet-path read; out of range returns ``default`` (BMv2 keeps the dest)."""
        if 0 <= i < self.size:
            return self.values[i]
        self._dp_bad_index(i, "read")
        return default

    def write(self, i: int, v: int) -> None:
        """Packet-path write, masked to the width; ignored when out of range."""
        if 0 <= i < self.size:
            self.values[i] = v & self.mask
        else:
            self._dp_bad_index(i, "write")

    def cp_read(self, i: int) -> int:
        """Control-plane read; ExternError when ``i`` is out of range."""
        self._cp_index(i)
        return self.values[i]

    def cp_write(self, i: int, v: int) -> None:
        """Control-plane write; ExternError when ``i`` is out of range or ``v`` is negative."""
        self._cp_index(i)
        if v < 0:
            raise ExternError(f"{self.name}: cannot write negative value {v}")
        self.values[i] = v & self.mask

    def reset(self) -> None:
        """Zero every cell (BMv2 ``register_reset``), in place: the generated code holds
        the ``values`` list itself."""
        self.values[:] = [0] * self.size


class Counter(_Indexed):
    """``counter(size, CounterType.kind)``.

    Like BMv2, both packets and bytes are always counted whatever the kind; the kind
    only tells the control plane which of the two to report.
    """

    def __init__(self, name: str, size: int, kind: str = "packets_and_bytes") -> None:
        _check_kind(name, kind, COUNTER_KINDS)
        self.name, self.size, self.kind = name, size, kind
        self.packets: list[int] = [0] * size
        self.bytes: list[int] = [0] * size

    def count(self, i: int, nbytes: int) -> None:
        """Packet path: one packet of ``nbytes`` at index ``i``; ignored out of range."""
        if 0 <= i < self.size:
            self.packets[i] += 1
            self.bytes[i] += nbytes
        else:
            self._dp_bad_index(i, "count")

    def read(self, i: int) -> tuple[int, int]:
        """(packets, bytes) at ``i``; ExternError out of range."""
        self._cp_index(i)
        return self.packets[i], self.bytes[i]

    def write(self, i: int, packets: int, nbytes: int) -> None:
        """Set both values at ``i``; ExternError out of range."""
        self._cp_index(i)
        self.packets[i], self.bytes[i] = packets, nbytes

    def reset(self) -> None:
        """Zero every cell."""
        self.packets = [0] * self.size
        self.bytes = [0] * self.size


class MeterState:
    """One two-rate three-colour marker (RFC 2698, colour-blind) as BMv2's ``Meter``.

    Rates are in units (packets or bytes) per microsecond, bursts in units.  Both
    buckets start full when configured.  Tokens are refilled from one time origin:
    ``int(micros_since_origin * rate)`` minus the tokens already credited, capped at
    the burst.  The peak bucket is tested first: short of tokens -> RED (the committed
    bucket is not touched); else it is debited and the committed bucket is tested:
    short -> YELLOW; else debited -> GREEN.  Unconfigured -> GREEN.
    """

    __slots__ = ("configured", "cir", "cburst", "ctok", "clast", "pir", "pburst", "ptok", "plast")

    def __init__(self) -> None:
        self.configured = False
        self.cir = self.pir = 0.0
        self.cburst = self.pburst = self.ctok = self.ptok = self.clast = self.plast = 0

    def set_rates(self, name: str, committed: tuple[float, int], peak: tuple[float, int]) -> None:
        cir, cburst = committed
        pir, pburst = peak
        if cir < 0 or pir < 0 or cburst < 0 or pburst < 0:
            raise ExternError(f"{name}: meter rates and bursts must be >= 0")
        if cir > pir:  # BMv2: INVALID_INFO_RATE_VALUE
            raise ExternError(f"{name}: committed rate {cir} is above peak rate {pir}")
        self.cir, self.cburst, self.ctok, self.clast = float(cir), int(cburst), int(cburst), 0
        self.pir, self.pburst, self.ptok, self.plast = float(pir), int(pburst), int(pburst), 0
        self.configured = True

    def get_rates(self) -> list[tuple[float, int]]:
        if not self.configured:
            return []
        return [(self.cir, self.cburst), (self.pir, self.pburst)]

    def execute(self, units: int, micros: int, pre_color: int = GREEN) -> int:
        if not self.configured:
            return GREEN  # BMv2 ignores the pre-colour for an unconfigured meter
        total = int(micros * self.pir)
        self.ptok = min(self.ptok + max(0, total - self.plast), self.pburst)
        self.plast = max(total, self.plast)
        if self.ptok < units:
            return max(pre_color, RED)
        self.ptok -= units
        total = int(micros * self.cir)
        self.ctok = min(self.ctok + max(0, total - self.clast), self.cburst)
        self.clast = max(total, self.clast)
        if self.ctok < units:
            return max(pre_color, YELLOW)
        self.ctok -= units
        return pre_color


def _per_sec(cir: float, cburst: int, pir: float, pburst: int) -> tuple:
    # P4Runtime MeterConfig rates are per second; BMv2 stores per microsecond (PI / 1e6).
    return (cir / 1e6, cburst), (pir / 1e6, pburst)


def _to_per_sec(rates: list[tuple[float, int]]) -> tuple[int, int, int, int] | None:
    if not rates:
        return None
    (cir, cburst), (pir, pburst) = rates
    return int(cir * 1e6), cburst, int(pir * 1e6), pburst


class _MeterTime:
    """Time origin shared by the meters of one array (BMv2 keeps one per meter, all
    set at start-up).  ``now_us`` passed to ``execute`` is measured from it."""

    time_origin_us: int = 0

    def reset_time_origin(self, now_us: int) -> None:
        self.time_origin_us = int(now_us)


class Meter(_Indexed, _MeterTime):
    """``meter(size, MeterType.kind)``: an array of RFC 2698 markers (see MeterState)."""

    def __init__(self, name: str, size: int, kind: str = "bytes") -> None:
        _check_kind(name, kind, METER_KINDS)
        self.name, self.size, self.kind = name, size, kind
        self.states = [MeterState() for _ in range(size)]

    def execute(
        self, i: int, nbytes: int, now_us: int, default: int = GREEN, pre_color: int = GREEN
    ) -> int:
        """Colour (0 GREEN, 1 YELLOW, 2 RED) for one packet of ``nbytes`` at ``now_us``.

        Out of range: logs and returns ``default`` (BMv2 leaves the dest unchanged).
        """
        if not 0 <= i < self.size:
            self._dp_bad_index(i, "execute")
            return default
        units = 1 if self.kind == "packets" else nbytes
        return self.states[i].execute(units, int(now_us) - self.time_origin_us, pre_color)

    def set_rates(self, i: int, committed: tuple[float, int], peak: tuple[float, int]) -> None:
        """Configure index ``i``: ``(cir, cburst), (pir, pburst)``, rates per microsecond."""
        self._cp_index(i)
        self.states[i].set_rates(self.name, committed, peak)

    def set_all_rates(self, committed: tuple[float, int], peak: tuple[float, int]) -> None:
        """Configure every index alike (BMv2 ``meter_array_set_rates``)."""
        for st in self.states:
            st.set_rates(self.name, committed, peak)

    def get_rates(self, i: int) -> list[tuple[float, int]]:
        """``[(cir, cburst), (pir, pburst)]`` per microsecond, or [] when unconfigured."""
        self._cp_index(i)
        return self.states[i].get_rates()

    def reset_rates(self, i: int) -> None:
        """Back to unconfigured (every packet GREEN)."""
        self._cp_index(i)
        self.states[i].configured = False

    def set_config(self, i: int, cir: float, cburst: int, pir: float, pburst: int) -> None:
        """P4Runtime MeterConfig: rates in units per *second*."""
        self.set_rates(i, *_per_sec(cir, cburst, pir, pburst))

    def get_config(self, i: int) -> tuple[int, int, int, int] | None:
        """``(cir, cburst, pir, pburst)`` per second, or None when unconfigured."""
        return _to_per_sec(self.get_rates(i))


class _Direct:
    """An extern bound to a table; its per-entry state lives on the table's entries,
    so deleting an entry deletes that state too."""

    name: str
    table: Table

    def _entry(self, handle: int) -> Entry:
        try:
            return self.table.get(handle)
        except TableError as exc:
            raise ExternError(f"{self.name}: {exc}") from None


class DirectCounter(_Direct):
    """``direct_counter(kind)`` attached to ``table``: ``Entry.counter`` holds the state."""

    def __init__(self, name: str, table: Table, kind: str = "packets_and_bytes") -> None:
        _check_kind(name, kind, COUNTER_KINDS)
        self.name, self.table, self.kind = name, table, kind

    def count(self, entry: Entry, nbytes: int) -> None:
        """Packet path: the table hit ``entry`` with a packet of ``nbytes``."""
        c = entry.counter
        c[0] += 1
        c[1] += nbytes

    def read(self, handle: int) -> tuple[int, int]:
        """(packets, bytes) of the entry with ``handle``."""
        c = self._entry(handle).counter
        return c[0], c[1]

    def write(self, handle: int, packets: int, nbytes: int) -> None:
        self._entry(handle).counter[:] = [packets, nbytes]

    def reset(self) -> None:
        for e in self.table.entries():
            e.counter[:] = [0, 0]


class DirectMeter(_Direct, _MeterTime):
    """``direct_meter(kind)`` attached to ``table``: ``Entry.meter`` holds a MeterState.

    As in BMv2, the default (miss) entry has no meter: misses are not metered.
    """

    def __init__(self, name: str, table: Table, kind: str = "bytes") -> None:
        _check_kind(name, kind, METER_KINDS)
        self.name, self.table, self.kind = name, table, kind

    def execute(self, entry: Entry, nbytes: int, now_us: int, pre_color: int = GREEN) -> int:
        """Colour for one packet that hit ``entry``; GREEN when its meter is unset."""
        st = entry.meter
        if st is None:
            return GREEN
        units = 1 if self.kind == "packets" else nbytes
        return st.execute(units, int(now_us) - self.time_origin_us, pre_color)

    def set_rates(self, handle: int, committed: tuple[float, int], peak: tuple[float, int]) -> None:
        """Configure the entry's meter; rates per microsecond."""
        e = self._entry(handle)
        st = e.meter if e.meter is not None else MeterState()
        st.set_rates(self.name, committed, peak)
        e.meter = st

    def get_rates(self, handle: int) -> list[tuple[float, int]]:
        st = self._entry(handle).meter
        return [] if st is None else st.get_rates()

    def reset_rates(self, handle: int) -> None:
        self._entry(handle).meter = None

    def set_config(self, handle: int, cir: float, cburst: int, pir: float, pburst: int) -> None:
        """P4Runtime MeterConfig (per-second rates) for the entry with ``handle``."""
        self.set_rates(handle, *_per_sec(cir, cburst, pir, pburst))

    def get_config(self, handle: int) -> tuple[int, int, int, int] | None:
        return _to_per_sec(self.get_rates(handle))
