"""TableEntry <-> p4sim table entries (Write and Read of p4.v1.TableEntry).

Example::

    write_table_entry(pipe, p4r.Update.INSERT, te)   # P4RTError on a bad entry
    for ent in read_table_entries(pipe, te_filter): ...
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import grpc
from finsy.proto import p4i, p4r

from p4sim.p4runtime.actions import (
    decode_action,
    encode_action,
    encode_indirect,
    is_indirect,
    profile_of_table,
)
from p4sim.p4runtime.codec import check, decode_int, encode_int
from p4sim.p4runtime.errors import P4RTError, invalid, not_found
from p4sim.runtime.tables import Entry, TableError

if TYPE_CHECKING:
    from p4sim.p4runtime.pipeline import Pipeline

_KIND = {
    p4i.MatchField.EXACT: "exact",
    p4i.MatchField.LPM: "lpm",
    p4i.MatchField.TERNARY: "ternary",
    p4i.MatchField.RANGE: "range",
    p4i.MatchField.OPTIONAL: "optional",
}
_PRIORITY_KINDS = {"ternary", "range", "optional"}


def match_kind(mf: p4i.MatchField) -> str:
    if mf.WhichOneof("match") == "other_match_type":
        return mf.other_match_type
    return _KIND.get(mf.match_type, "unspecified")


def needs_priority(table: p4i.Table) -> bool:
    return any(match_kind(mf) in _PRIORITY_KINDS for mf in table.match_fields)


# ----------------------------------------------------------------------- match keys


def _key_perm(table: p4i.Table, rt_keys: Any) -> list[int] | None:
    """For each runtime key, the index of its P4Info match field; None when both orders
    agree (or the names cannot be paired, in which case the order is taken as is)."""
    names = [mf.name for mf in table.match_fields]
    rnames = [k.name for k in rt_keys] if rt_keys is not None else names
    if rnames == names or sorted(rnames) != sorted(names) or len(set(names)) != len(names):
        return None
    return [names.index(n) for n in rnames]


def decode_matches(table: p4i.Table, fms: Any, rt_keys: Any = None) -> tuple:
    """``Entry.matches`` (in the order of the runtime table's ``rt_keys``) from repeated
    FieldMatch."""
    tname = table.preamble.name
    by_id: dict[int, p4r.FieldMatch] = {}
    known = {mf.id for mf in table.match_fields}
    for fm in fms:
        check(fm.field_id in known, invalid(f"table {tname}: no match field id {fm.field_id}"))
        check(fm.field_id not in by_id, invalid(f"table {tname}: match field {fm.field_id} twice"))
        by_id[fm.field_id] = fm
    got = tuple(_decode_one(tname, mf, by_id.get(mf.id)) for mf in table.match_fields)
    perm = _key_perm(table, rt_keys)
    return got if perm is None else tuple(got[j] for j in perm)


def _decode_one(tname: str, mf: p4i.MatchField, fm: p4r.FieldMatch | None) -> Any:
    kind, w = match_kind(mf), mf.bitwidth
    what = f"table {tname}: match field {mf.name}"
    if fm is None:  # omitted = don't care
        check(kind != "exact", invalid(f"{what}: an exact match field cannot be omitted"))
        return {"lpm": (0, 0), "ternary": (0, 0), "range": (0, (1 << w) - 1), "optional": None}[
            kind
        ]
    got = fm.WhichOneof("field_match_type")
    check(got == kind, invalid(f"{what}: is a {kind} match, the request gave {got}"))
    if kind == "exact":
        return decode_int(fm.exact.value, w, what)
    if kind == "optional":
        return decode_int(fm.optional.value, w, what)
    if kind == "lpm":
        plen = fm.lpm.prefix_len
        check(0 < plen <= w, invalid(f"{what}: prefix length {plen} not in 1..{w}"))
        value = decode_int(fm.lpm.value, w, what)
        mask = ((1 << plen) - 1) << (w - plen)
        check(value & ~mask == 0, invalid(f"{what}: value has bits set beyond the /{plen}"))
        return (value, plen)
    if kind == "ternary":
        value = decode_int(fm.ternary.value, w, what)
        mask = decode_int(fm.ternary.mask, w, what + " mask")
        check(mask != 0, invalid(f"{what}: an all-zero mask must be sent as an omitted field"))
        check(value & ~mask == 0, invalid(f"{what}: value has bits set outside the mask"))
        return (value, mask)
    lo = decode_int(fm.range.low, w, what + " low")
    hi = decode_int(fm.range.high, w, what + " high")
    check(lo <= hi, invalid(f"{what}: range low {lo} > high {hi}"))
    check((lo, hi) != (0, (1 << w) - 1), invalid(f"{what}: a full range must be omitted"))
    return (lo, hi)


def encode_matches(table: p4i.Table, matches: tuple, out: Any, rt_keys: Any = None) -> None:
    """Append FieldMatch messages for ``matches`` (runtime key order), leaving out
    don't-care fields."""
    perm = _key_perm(table, rt_keys)
    if perm is not None:
        ordered: list[Any] = [None] * len(perm)
        for i, j in enumerate(perm):
            ordered[j] = matches[i]
        matches = tuple(ordered)
    for mf, m in zip(table.match_fields, matches, strict=True):
        kind, w = match_kind(mf), mf.bitwidth
        if kind == "exact":
            out.add(field_id=mf.id).exact.value = encode_int(m)
        elif kind == "optional":
            if m is not None:
                out.add(field_id=mf.id).optional.value = encode_int(m)
        elif kind == "lpm":
            if m[1]:
                fm = out.add(field_id=mf.id)
                fm.lpm.value, fm.lpm.prefix_len = encode_int(m[0]), m[1]
        elif kind == "ternary":
            if m[1]:
                fm = out.add(field_id=mf.id)
                fm.ternary.value, fm.ternary.mask = encode_int(m[0]), encode_int(m[1])
        elif kind == "range" and tuple(m) != (0, (1 << w) - 1):
            fm = out.add(field_id=mf.id)
            fm.range.low, fm.range.high = encode_int(m[0]), encode_int(m[1])


# --------------------------------------------------------------------------- actions


# ----------------------------------------------------------------------------- write


def write_table_entry(pipe: Pipeline, op: int, te: p4r.TableEntry) -> None:
    table = pipe.index.table(te.table_id)
    rt = pipe.target.table(table.preamble.name)
    if te.is_default_action:
        _write_default(pipe, op, table, rt, te)
        return
    tname = table.preamble.name
    check(not table.is_const_table, invalid(f"table {tname} is const: its entries are fixed"))
    matches = decode_matches(table, te.match, rt.keys)
    priority = _priority(table, te)
    if te.idle_timeout_ns and table.idle_timeout_behavior == p4i.Table.NO_TIMEOUT:
        raise invalid(f"table {tname} does not support idle timeouts")
    if op == p4r.Update.INSERT:
        check(te.HasField("action"), invalid(f"table {tname}: INSERT needs an action"))
        name, args = decode_action(pipe, table, te.action, default=False)
        entry = Entry(matches, name, args, priority)
        ap = profile_of_table(pipe, table)
        if ap is not None:
            ap.ref(name, args[0])
        try:
            _insert(pipe, table, rt, entry, te)
        except P4RTError:
            if ap is not None:
                ap.ref(name, args[0], -1)
            raise
        pipe.entry_meta[(tname, entry.handle)] = bytes(te.metadata)
        return
    entry = rt.find(matches, priority)
    check(entry is not None, not_found(f"table {tname}: no entry with this match key"))
    ap = profile_of_table(pipe, table)
    if op == p4r.Update.DELETE:
        rt.delete(entry.handle)
        if ap is not None:
            ap.ref(entry.action, entry.args[0], -1)
        pipe.entry_meta.pop((tname, entry.handle), None)
        return
    if te.HasField("action"):
        name, args = decode_action(pipe, table, te.action, default=False)
        if ap is not None:
            ap.ref(name, args[0])
            ap.ref(entry.action, entry.args[0], -1)
        rt.modify(entry.handle, name, args)
    pipe.entry_meta[(tname, entry.handle)] = bytes(te.metadata)
    _write_direct(pipe, table, entry, te)


def _priority(table: p4i.Table, te: p4r.TableEntry) -> int:
    tname = table.preamble.name
    if needs_priority(table):
        check(te.priority > 0, invalid(f"table {tname}: entries need a priority > 0"))
        return te.priority
    check(
        te.priority == 0,
        invalid(
            f"table {tname}: has no ternary/range/optional key, so "
            f"priority must be 0 (got {te.priority})"
        ),
    )
    return 0


def _insert(pipe: Pipeline, table: p4i.Table, rt: Any, entry: Entry, te: p4r.TableEntry) -> None:
    tname = table.preamble.name
    if rt.find(entry.matches, entry.priority) is not None:
        raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"table {tname}: entry already exists")
    if len(rt) >= rt.size:
        raise P4RTError(
            grpc.StatusCode.RESOURCE_EXHAUSTED, f"table {tname} is full ({rt.size} entries)"
        )
    try:
        rt.add(entry)
    except TableError as err:
        raise invalid(str(err)) from None
    _write_direct(pipe, table, entry, te)


def _write_direct(pipe: Pipeline, table: p4i.Table, entry: Entry, te: p4r.TableEntry) -> None:
    if te.HasField("counter_data"):
        check(
            pipe.index.direct_counter_of(table) is not None,
            invalid(f"table {table.preamble.name} has no direct counter"),
        )
        entry.counter[0] = te.counter_data.packet_count
        entry.counter[1] = te.counter_data.byte_count
    if te.HasField("meter_config"):
        dm = pipe.index.direct_meter_of(table)
        if dm is None:
            raise invalid(f"table {table.preamble.name} has no direct meter")
        set_meter_config(pipe.target.direct_meter(dm.preamble.name), entry.handle, te.meter_config)


def set_meter_config(meter: Any, index: int, cfg: p4r.MeterConfig | None) -> None:
    """Configure (or with ``cfg=None`` reset) one meter cell; INVALID_ARGUMENT if refused."""
    try:
        if cfg is None:
            meter.reset_rates(index)
        else:
            meter.set_config(index, cfg.cir, cfg.cburst, cfg.pir, cfg.pburst)
    except Exception as err:  # ExternError/TableError carry a readable message
        raise invalid(str(err)) from None


def _write_default(pipe: Pipeline, op: int, table: p4i.Table, rt: Any, te: p4r.TableEntry) -> None:
    tname = table.preamble.name
    check(
        op == p4r.Update.MODIFY,
        invalid(f"table {tname}: the default entry can only be modified (not inserted or deleted)"),
    )
    check(len(te.match) == 0, invalid(f"table {tname}: a default entry has no match fields"))
    if te.HasField("action"):
        name, args = decode_action(pipe, table, te.action, default=True)
    else:
        name, args = pipe.target.initial_defaults[pipe.target.table_name(tname)]
    if table.const_default_action_id and (name, args) != (rt.default_action, rt.default_args):
        raise invalid(f"table {tname}: the default action is const")
    try:
        rt.set_default(name, args)
    except TableError as err:
        raise invalid(str(err)) from None


# ------------------------------------------------------------------------------ read


def read_table_entries(pipe: Pipeline, req: p4r.TableEntry) -> Iterator[p4r.Entity]:
    tables = (
        list(pipe.index.tables.values()) if req.table_id == 0 else [pipe.index.table(req.table_id)]
    )
    for table in tables:
        rt = pipe.target.table(table.preamble.name)
        if req.is_default_action:
            yield _default_entity(pipe, table, rt)
            continue
        wanted = decode_matches(table, req.match, rt.keys) if req.match and req.table_id else None
        for entry in rt.entries():
            if wanted is not None and entry.matches != wanted:
                continue
            if req.priority and entry.priority != req.priority:
                continue
            yield entry_entity(pipe, table, entry, req)


def entry_entity(pipe: Pipeline, table: p4i.Table, entry: Entry, req: Any) -> p4r.Entity:
    ent = p4r.Entity()
    te = ent.table_entry
    te.table_id = table.preamble.id
    encode_matches(table, entry.matches, te.match, pipe.target.table(table.preamble.name).keys)
    if is_indirect(entry.action):
        encode_indirect(entry.action, entry.args[0], te.action)
    else:
        encode_action(pipe, entry.action, entry.args, te.action.action)
    te.priority = entry.priority if needs_priority(table) else 0
    te.is_const = table.is_const_table
    te.metadata = pipe.entry_meta.get((table.preamble.name, entry.handle), b"")
    if req is not None and req.HasField("counter_data"):
        dc = pipe.index.direct_counter_of(table)
        if dc is not None:
            fill_counter_data(te.counter_data, dc.spec.unit, entry.counter)
    if req is not None and req.HasField("meter_config"):
        dm = pipe.index.direct_meter_of(table)
        if dm is not None:
            cfg = pipe.target.direct_meter(dm.preamble.name).get_config(entry.handle)
            if cfg is not None:
                fill_meter_config(te.meter_config, cfg)
    return ent


def _default_entity(pipe: Pipeline, table: p4i.Table, rt: Any) -> p4r.Entity:
    ent = p4r.Entity()
    te = ent.table_entry
    te.table_id = table.preamble.id
    te.is_default_action = True
    encode_action(pipe, rt.default_action, tuple(rt.default_args), te.action.action)
    return ent


def fill_counter_data(out: p4r.CounterData, unit: int, counter: Any) -> None:
    packets, nbytes = counter[0], counter[1]
    if unit in (p4i.CounterSpec.PACKETS, p4i.CounterSpec.BOTH):
        out.packet_count = packets
    if unit in (p4i.CounterSpec.BYTES, p4i.CounterSpec.BOTH):
        out.byte_count = nbytes
    out.SetInParent()


def fill_meter_config(out: p4r.MeterConfig, cfg: tuple[int, int, int, int]) -> None:
    out.cir, out.cburst, out.pir, out.pburst = cfg
