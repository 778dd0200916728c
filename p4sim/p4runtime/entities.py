"""Write and Read of every P4Runtime entity p4sim supports (tables are in tables.py).

Example::

    write_entity(pipe, p4r.Update.MODIFY, entity)     # P4RTError on failure
    for ent in read_entity(pipe, entity): ...          # wildcards expanded
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc
from finsy.proto import p4d, p4r

from p4sim.p4runtime import action_profiles as aps
from p4sim.p4runtime import tables as tbl
from p4sim.p4runtime.codec import check, decode_int, encode_int
from p4sim.p4runtime.errors import P4RTError, invalid, not_found, out_of_range, unimplemented
from p4sim.runtime.pre import PREError

if TYPE_CHECKING:
    from p4sim.p4runtime.pipeline import Pipeline

_OPS: dict[int, str] = {
    p4r.Update.INSERT: "INSERT",
    p4r.Update.MODIFY: "MODIFY",
    p4r.Update.DELETE: "DELETE",
}


def write_entity(pipe: Pipeline, op: int, entity: p4r.Entity) -> None:
    check(op in _OPS, invalid(f"update type {op} is not INSERT, MODIFY or DELETE"))
    kind = entity.WhichOneof("entity") or ""
    handler = _WRITERS.get(kind)
    if handler is None:
        raise unimplemented(f"p4sim does not support writing {kind or 'an empty entity'}")
    handler(pipe, op, getattr(entity, kind))


def read_entity(pipe: Pipeline, entity: p4r.Entity) -> Iterator[p4r.Entity]:
    kind = entity.WhichOneof("entity") or ""
    handler = _READERS.get(kind)
    if handler is None:
        raise unimplemented(f"p4sim does not support reading {kind or 'an empty entity'}")
    return handler(pipe, getattr(entity, kind))


def _modify_only(op: int, what: str) -> None:
    check(op == p4r.Update.MODIFY, invalid(f"{what} can only be modified (not {_OPS[op]})"))


def _index_range(size: int, req: Any, what: str) -> range:
    if not req.HasField("index"):
        return range(size)
    i = req.index.index
    if not 0 <= i < size:
        raise out_of_range(f"{what}: index {i} is out of range (size {size})")
    return range(i, i + 1)


# ----------------------------------------------------------------- indirect counters


def _write_counter(pipe: Pipeline, op: int, ce: p4r.CounterEntry) -> None:
    info = pipe.index.counter(ce.counter_id)
    name = info.preamble.name
    _modify_only(op, f"counter {name}")
    rt = pipe.target.counter(name)
    for i in _index_range(info.size, ce, f"counter {name}"):
        rt.write(i, ce.data.packet_count, ce.data.byte_count)


def _read_counter(pipe: Pipeline, ce: p4r.CounterEntry) -> Iterator[p4r.Entity]:
    infos = [pipe.index.counter(ce.counter_id)] if ce.counter_id else pipe.index.counters.values()
    for info in list(infos):
        rt = pipe.target.counter(info.preamble.name)
        for i in _index_range(info.size, ce, f"counter {info.preamble.name}"):
            ent = p4r.Entity()
            out = ent.counter_entry
            out.counter_id = info.preamble.id
            out.index.index = i
            tbl.fill_counter_data(out.data, info.spec.unit, rt.read(i))
            yield ent


# ------------------------------------------------------------------ direct counters


def _direct_entry(pipe: Pipeline, te: p4r.TableEntry) -> tuple[Any, Any]:
    table = pipe.index.table(te.table_id)
    rt = pipe.target.table(table.preamble.name)
    matches = tbl.decode_matches(table, te.match, rt.keys)
    prio = te.priority if tbl.needs_priority(table) else 0
    entry = rt.find(matches, prio)
    check(entry is not None, not_found(f"table {table.preamble.name}: no entry with this key"))
    return table, entry


def _write_direct_counter(pipe: Pipeline, op: int, dce: p4r.DirectCounterEntry) -> None:
    _modify_only(op, "a direct counter")
    table, entry = _direct_entry(pipe, dce.table_entry)
    check(
        pipe.index.direct_counter_of(table) is not None,
        invalid(f"table {table.preamble.name} has no direct counter"),
    )
    entry.counter[0] = dce.data.packet_count
    entry.counter[1] = dce.data.byte_count


def _read_direct_counter(pipe: Pipeline, dce: p4r.DirectCounterEntry) -> Iterator[p4r.Entity]:
    te = dce.table_entry
    for table, entry in _direct_targets(pipe, te, pipe.index.direct_counter_of):
        dc = pipe.index.direct_counter_of(table)
        assert dc is not None  # _direct_targets yields only tables that have one
        ent = p4r.Entity()
        out = ent.direct_counter_entry
        out.table_entry.CopyFrom(tbl.entry_entity(pipe, table, entry, None).table_entry)
        tbl.fill_counter_data(out.data, dc.spec.unit, entry.counter)
        yield ent


def _direct_targets(pipe: Pipeline, te: p4r.TableEntry, has: Any) -> Iterator[tuple[Any, Any]]:
    if te.table_id == 0:
        tables = [t for t in pipe.index.tables.values() if has(t) is not None]
    else:
        table = pipe.index.table(te.table_id)
        check(
            has(table) is not None,
            invalid(f"table {table.preamble.name} has no such direct resource"),
        )
        tables = [table]
    for table in tables:
        if te.table_id and te.match:
            yield _direct_entry(pipe, te)
            continue
        for entry in pipe.target.table(table.preamble.name).entries():
            yield table, entry


# -------------------------------------------------------------------------- meters


def _write_meter(pipe: Pipeline, op: int, me: p4r.MeterEntry) -> None:
    info = pipe.index.meter(me.meter_id)
    name = info.preamble.name
    _modify_only(op, f"meter {name}")
    rt = pipe.target.meter(name)
    cfg = me.config if me.HasField("config") else None
    for i in _index_range(info.size, me, f"meter {name}"):
        tbl.set_meter_config(rt, i, cfg)


def _read_meter(pipe: Pipeline, me: p4r.MeterEntry) -> Iterator[p4r.Entity]:
    infos = [pipe.index.meter(me.meter_id)] if me.meter_id else pipe.index.meters.values()
    for info in list(infos):
        rt = pipe.target.meter(info.preamble.name)
        for i in _index_range(info.size, me, f"meter {info.preamble.name}"):
            ent = p4r.Entity()
            out = ent.meter_entry
            out.meter_id = info.preamble.id
            out.index.index = i
            cfg = rt.get_config(i)
            if cfg is not None:
                tbl.fill_meter_config(out.config, cfg)
            yield ent


def _write_direct_meter(pipe: Pipeline, op: int, dme: p4r.DirectMeterEntry) -> None:
    _modify_only(op, "a direct meter")
    table, entry = _direct_entry(pipe, dme.table_entry)
    dm = pipe.index.direct_meter_of(table)
    if dm is None:
        raise invalid(f"table {table.preamble.name} has no direct meter")
    cfg = dme.config if dme.HasField("config") else None
    tbl.set_meter_config(pipe.target.direct_meter(dm.preamble.name), entry.handle, cfg)


def _read_direct_meter(pipe: Pipeline, dme: p4r.DirectMeterEntry) -> Iterator[p4r.Entity]:
    for table, entry in _direct_targets(pipe, dme.table_entry, pipe.index.direct_meter_of):
        dm = pipe.index.direct_meter_of(table)
        assert dm is not None  # _direct_targets yields only tables that have one
        ent = p4r.Entity()
        out = ent.direct_meter_entry
        out.table_entry.CopyFrom(tbl.entry_entity(pipe, table, entry, None).table_entry)
        cfg = pipe.target.direct_meter(dm.preamble.name).get_config(entry.handle)
        if cfg is not None:
            tbl.fill_meter_config(out.config, cfg)
        yield ent


# ------------------------------------------------------------------------ registers


def _register_width(info: Any) -> int:
    return info.type_spec.bitstring.bit.bitwidth or info.type_spec.bitstring.varbit.max_bitwidth


def _write_register(pipe: Pipeline, op: int, re: p4r.RegisterEntry) -> None:
    info = pipe.index.register(re.register_id)
    name = info.preamble.name
    _modify_only(op, f"register {name}")
    check(
        re.data.WhichOneof("data") == "bitstring",
        invalid(f"register {name}: data must be a bitstring"),
    )
    value = decode_int(re.data.bitstring, _register_width(info), f"register {name}")
    rt = pipe.target.register(name)
    for i in _index_range(info.size, re, f"register {name}"):
        rt.cp_write(i, value)


def _read_register(pipe: Pipeline, re: p4r.RegisterEntry) -> Iterator[p4r.Entity]:
    regs = pipe.index.registers
    infos = [pipe.index.register(re.register_id)] if re.register_id else regs.values()
    for info in list(infos):
        rt = pipe.target.register(info.preamble.name)
        for i in _index_range(info.size, re, f"register {info.preamble.name}"):
            ent = p4r.Entity()
            out = ent.register_entry
            out.register_id = info.preamble.id
            out.index.index = i
            out.data.CopyFrom(p4d.P4Data(bitstring=encode_int(rt.cp_read(i))))
            yield ent


# ---------------------------------------------------------------------------- PRE


def _replicas(pipe: Pipeline, reps: Any, what: str) -> tuple[list[tuple[int, int]], bool]:
    """((port, instance) list, True when ports came as bytes)."""
    out: list[tuple[int, int]] = []
    as_bytes = False
    for r in reps:
        if r.WhichOneof("port_kind") == "port":
            as_bytes = True
            port = decode_int(r.port, 32, f"{what}: replica port")
        else:
            port = r.egress_port
        out.append((port, r.instance))
    check(len(set(out)) == len(out), invalid(f"{what}: duplicate (port, instance) replica"))
    return out, as_bytes


def _fill_replicas(out: Any, reps: list[tuple[int, int]], as_bytes: bool) -> None:
    for port, inst in reps:
        r = out.add(instance=inst)
        if as_bytes:
            r.port = encode_int(port)
        else:
            r.egress_port = port


def _write_pre(pipe: Pipeline, op: int, pre_e: p4r.PacketReplicationEngineEntry) -> None:
    kind = pre_e.WhichOneof("type")
    try:
        if kind == "multicast_group_entry":
            _write_mc(pipe, op, pre_e.multicast_group_entry)
        elif kind == "clone_session_entry":
            _write_clone(pipe, op, pre_e.clone_session_entry)
        else:
            raise invalid("PacketReplicationEngineEntry without a multicast group or clone session")
    except PREError as err:
        raise invalid(str(err)) from None


def _write_mc(pipe: Pipeline, op: int, mc: p4r.MulticastGroupEntry) -> None:
    gid, pre = mc.multicast_group_id, pipe.target.pre
    what = f"multicast group {gid}"
    check(gid != 0, invalid("multicast group id 0 is reserved"))
    exists = pre.has_group(gid)
    if op == p4r.Update.INSERT and exists:
        raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"{what} already exists")
    if op != p4r.Update.INSERT and not exists:
        raise not_found(f"{what} does not exist")
    if op == p4r.Update.DELETE:
        pre.mc_group_delete(gid)
        pipe.mc_meta.pop(gid, None)
        return
    reps, as_bytes = _replicas(pipe, mc.replicas, what)
    pre.mc_group_set(gid, reps)
    pipe.mc_meta[gid] = (as_bytes, bytes(mc.metadata))


def _write_clone(pipe: Pipeline, op: int, cs: p4r.CloneSessionEntry) -> None:
    sid, pre = cs.session_id, pipe.target.pre
    what = f"clone session {sid}"
    check(sid != 0, invalid("clone session id 0 is reserved"))
    exists = pre.clone_session(sid) is not None
    if op == p4r.Update.INSERT and exists:
        raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"{what} already exists")
    if op != p4r.Update.INSERT and not exists:
        raise not_found(f"{what} does not exist")
    if op == p4r.Update.DELETE:
        pre.clone_session_delete(sid)
        pipe.clone_bytes.pop(sid, None)
        return
    check(cs.packet_length_bytes >= 0, invalid(f"{what}: packet_length_bytes must be >= 0"))
    reps, as_bytes = _replicas(pipe, cs.replicas, what)
    pre.clone_session_set(sid, reps, cs.class_of_service, cs.packet_length_bytes)
    pipe.clone_bytes[sid] = as_bytes


def _read_pre(pipe: Pipeline, pre_e: p4r.PacketReplicationEngineEntry) -> Iterator[p4r.Entity]:
    kind = pre_e.WhichOneof("type")
    pre = pipe.target.pre
    if kind == "multicast_group_entry":
        gid = pre_e.multicast_group_entry.multicast_group_id
        gids = [gid] if gid else pre.groups()
        check(not gid or pre.has_group(gid), not_found(f"multicast group {gid} does not exist"))
        for g in gids:
            ent = p4r.Entity()
            mc = ent.packet_replication_engine_entry.multicast_group_entry
            mc.multicast_group_id = g
            as_bytes, meta = pipe.mc_meta.get(g, (False, b""))
            _fill_replicas(mc.replicas, pre.replicas(g), as_bytes)
            mc.metadata = meta
            yield ent
    elif kind == "clone_session_entry":
        sid = pre_e.clone_session_entry.session_id
        sessions = [pre.clone_session(sid)] if sid else pre.clone_sessions()
        check(sessions != [None], not_found(f"clone session {sid} does not exist"))
        for s in sessions:
            ent = p4r.Entity()
            cs = ent.packet_replication_engine_entry.clone_session_entry
            cs.session_id = s.session_id
            _fill_replicas(cs.replicas, list(s.replicas), pipe.clone_bytes.get(s.session_id, False))
            cs.class_of_service = s.class_of_service
            cs.packet_length_bytes = s.truncate_bytes
            yield ent
    else:
        raise invalid("PacketReplicationEngineEntry read needs a multicast group or clone session")


# ------------------------------------------------------------------------- digests


def _write_digest(pipe: Pipeline, op: int, de: p4r.DigestEntry) -> None:
    info = pipe.index.digest(de.digest_id)
    did, name = info.preamble.id, info.preamble.name
    configured = did in pipe.digest_config
    if op == p4r.Update.INSERT:
        check(
            not configured,
            P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"digest {name} is already configured"),
        )
    else:
        check(configured, not_found(f"digest {name} is not configured"))
    if op == p4r.Update.DELETE:
        del pipe.digest_config[did]
        return
    cfg = p4r.DigestEntry.Config()
    cfg.CopyFrom(de.config)
    check(
        cfg.max_list_size >= 0 and cfg.max_timeout_ns >= 0 and cfg.ack_timeout_ns >= 0,
        invalid(f"digest {name}: config values must be >= 0"),
    )
    pipe.digest_config[did] = cfg


def _read_digest(pipe: Pipeline, de: p4r.DigestEntry) -> Iterator[p4r.Entity]:
    if de.digest_id:
        info = pipe.index.digest(de.digest_id)
        check(
            info.preamble.id in pipe.digest_config,
            not_found(f"digest {info.preamble.name} is not configured"),
        )
        ids = [de.digest_id]
    else:
        ids = sorted(pipe.digest_config)
    for did in ids:
        ent = p4r.Entity()
        ent.digest_entry.digest_id = did
        ent.digest_entry.config.CopyFrom(pipe.digest_config[did])
        yield ent


# ----------------------------------------------------------------------- value sets


def _vs_member(info: Any, member: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(values, masks) of one ValueSetMember."""
    name = info.preamble.name
    by_id: dict[int, Any] = {fm.field_id: fm for fm in member.match}
    known = {mf.id for mf in info.match}
    check(set(by_id) <= known, invalid(f"value set {name}: unknown match field id"))
    values, masks = [], []
    for mf in info.match:
        w, full = mf.bitwidth, (1 << mf.bitwidth) - 1
        fm: Any = by_id.get(mf.id)
        kind = fm.WhichOneof("field_match_type") if fm is not None else None
        what = f"value set {name}: field {mf.id}"
        if kind is None:
            v, m = 0, 0
        elif kind == "exact":
            v, m = decode_int(fm.exact.value, w, what), full
        elif kind == "ternary":
            v, m = decode_int(fm.ternary.value, w, what), decode_int(fm.ternary.mask, w, what)
        elif kind == "lpm":
            plen = fm.lpm.prefix_len
            check(0 <= plen <= w, invalid(f"{what}: prefix length {plen} not in 0..{w}"))
            v, m = decode_int(fm.lpm.value, w, what), full ^ ((1 << (w - plen)) - 1)
        else:
            raise unimplemented(f"{what}: {kind} matches are not supported in value sets")
        check(v & ~m == 0, invalid(f"{what}: value has bits set outside its mask"))
        values.append(v)
        masks.append(m)
    return tuple(values), tuple(masks)


def _write_value_set(pipe: Pipeline, op: int, vse: p4r.ValueSetEntry) -> None:
    info = pipe.index.value_set(vse.value_set_id)
    name = info.preamble.name
    _modify_only(op, f"value set {name}")
    members = [_vs_member(info, m) for m in vse.members]
    if len(members) > info.size:
        raise P4RTError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"value set {name} holds at most {info.size} members, got {len(members)}",
        )
    rt = pipe.target.value_set(name)
    rt.clear()
    for values, masks in members:
        rt.add(values, masks)


def _read_value_set(pipe: Pipeline, vse: p4r.ValueSetEntry) -> Iterator[p4r.Entity]:
    ids = [vse.value_set_id] if vse.value_set_id else sorted(pipe.index.value_sets)
    for vid in ids:
        info = pipe.index.value_set(vid)
        ent = p4r.Entity()
        ent.value_set_entry.value_set_id = vid
        for member in pipe.target.value_set(info.preamble.name).entries:
            out = ent.value_set_entry.members.add()
            for mf, (v, m) in zip(info.match, member, strict=True):
                if m == 0:
                    continue  # don't care
                fm = out.match.add(field_id=mf.id)
                if m == (1 << mf.bitwidth) - 1:
                    fm.exact.value = encode_int(v)
                else:
                    fm.ternary.value, fm.ternary.mask = encode_int(v), encode_int(m)
        yield ent


def _write_table(pipe: Pipeline, op: int, te: p4r.TableEntry) -> None:
    tbl.write_table_entry(pipe, op, te)


_WRITERS: dict[str, Callable[[Any, int, Any], None]] = {
    "table_entry": _write_table,
    "counter_entry": _write_counter,
    "direct_counter_entry": _write_direct_counter,
    "meter_entry": _write_meter,
    "direct_meter_entry": _write_direct_meter,
    "register_entry": _write_register,
    "packet_replication_engine_entry": _write_pre,
    "digest_entry": _write_digest,
    "value_set_entry": _write_value_set,
    "action_profile_member": aps.write_member,
    "action_profile_group": aps.write_group,
}
_READERS: dict[str, Callable[[Any, Any], Iterator[p4r.Entity]]] = {
    "table_entry": tbl.read_table_entries,
    "counter_entry": _read_counter,
    "direct_counter_entry": _read_direct_counter,
    "meter_entry": _read_meter,
    "direct_meter_entry": _read_direct_meter,
    "register_entry": _read_register,
    "packet_replication_engine_entry": _read_pre,
    "digest_entry": _read_digest,
    "value_set_entry": _read_value_set,
    "action_profile_member": aps.read_members,
    "action_profile_group": aps.read_groups,
}
