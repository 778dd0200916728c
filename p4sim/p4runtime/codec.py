"""P4Runtime bytestrings and a by-ID index of a P4Info.

Example::

    encode_int(0x0A000001)              # b'\\n\\x00\\x00\\x01' (canonical: no leading zeros)
    decode_int(b"\\x00\\x05", 9, "port") # 5 (non-canonical input is accepted)
    idx = P4InfoIndex(p4info); idx.table(0x02000001).preamble.name
"""

from __future__ import annotations

from finsy.proto import p4i

from p4sim.p4runtime.errors import P4RTError, invalid, not_found, out_of_range


def encode_int(value: int) -> bytes:
    """Canonical P4Runtime bytestring: the fewest bytes that hold ``value`` (>= 1 byte)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_int(data: bytes, width: int, what: str) -> int:
    """Decode a bytestring for a ``width``-bit field; OUT_OF_RANGE if it does not fit."""
    if not data:
        raise invalid(f"{what}: empty bytestring (a value needs at least one byte)")
    value = int.from_bytes(data, "big")
    if width and value >> width:
        raise out_of_range(f"{what}: value {value:#x} does not fit in {width} bits")
    return value


def encode_width(value: int, width: int) -> bytes:
    """``value`` in exactly ceil(width/8) bytes (controller header fields on the wire)."""
    return value.to_bytes((width + 7) // 8, "big")


class P4InfoIndex:
    """Entities of a P4Info by ID (each lookup raises NOT_FOUND for an unknown ID)."""

    def __init__(self, p4info: p4i.P4Info) -> None:
        self.p4info = p4info
        self.tables = {t.preamble.id: t for t in p4info.tables}
        self.actions = {a.preamble.id: a for a in p4info.actions}
        self.counters = {c.preamble.id: c for c in p4info.counters}
        self.direct_counters = {c.preamble.id: c for c in p4info.direct_counters}
        self.meters = {m.preamble.id: m for m in p4info.meters}
        self.direct_meters = {m.preamble.id: m for m in p4info.direct_meters}
        self.registers = {r.preamble.id: r for r in p4info.registers}
        self.digests = {d.preamble.id: d for d in p4info.digests}
        self.value_sets = {v.preamble.id: v for v in p4info.value_sets}
        self.action_profiles = {a.preamble.id: a for a in p4info.action_profiles}
        self.action_by_name = {a.preamble.name: a for a in p4info.actions}
        self.digest_by_name = {d.preamble.name: d for d in p4info.digests}
        self.packet_in = self._controller_header("packet_in")
        self.packet_out = self._controller_header("packet_out")

    def _controller_header(self, name: str) -> p4i.ControllerPacketMetadata | None:
        for cpm in self.p4info.controller_packet_metadata:
            if cpm.preamble.name == name:
                return cpm
        return None

    @staticmethod
    def _get(items: dict, ident: int, what: str):  # type: ignore[no-untyped-def]
        try:
            return items[ident]
        except KeyError:
            raise not_found(f"no {what} with id {ident:#x} ({ident}) in the P4Info") from None

    def table(self, ident: int) -> p4i.Table:
        return self._get(self.tables, ident, "table")

    def action(self, ident: int) -> p4i.Action:
        return self._get(self.actions, ident, "action")

    def counter(self, ident: int) -> p4i.Counter:
        return self._get(self.counters, ident, "counter")

    def direct_counter(self, ident: int) -> p4i.DirectCounter:
        return self._get(self.direct_counters, ident, "direct counter")

    def meter(self, ident: int) -> p4i.Meter:
        return self._get(self.meters, ident, "meter")

    def direct_meter(self, ident: int) -> p4i.DirectMeter:
        return self._get(self.direct_meters, ident, "direct meter")

    def register(self, ident: int) -> p4i.Register:
        return self._get(self.registers, ident, "register")

    def digest(self, ident: int) -> p4i.Digest:
        return self._get(self.digests, ident, "digest")

    def action_profile(self, ident: int) -> p4i.ActionProfile:
        return self._get(self.action_profiles, ident, "action profile")

    def value_set(self, ident: int) -> p4i.ValueSet:
        return self._get(self.value_sets, ident, "value set")

    def direct_counter_of(self, table: p4i.Table) -> p4i.DirectCounter | None:
        for rid in table.direct_resource_ids:
            if rid in self.direct_counters:
                return self.direct_counters[rid]
        return None

    def direct_meter_of(self, table: p4i.Table) -> p4i.DirectMeter | None:
        for rid in table.direct_resource_ids:
            if rid in self.direct_meters:
                return self.direct_meters[rid]
        return None


def check(condition: bool, error: P4RTError) -> None:
    """Raise ``error`` unless ``condition``."""
    if not condition:
        raise error
