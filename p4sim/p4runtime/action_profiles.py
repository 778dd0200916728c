"""ActionProfileMember / ActionProfileGroup Write and Read, and the indirect side of
TableEntry (``action_profile_member_id`` / ``action_profile_group_id``).

Example::

    write_member(pipe, p4r.Update.INSERT, member)     # P4RTError on failure
    for ent in read_groups(pipe, p4r.ActionProfileGroup()): ...   # every group

Errors follow the P4Runtime spec: ALREADY_EXISTS on a duplicate INSERT, NOT_FOUND for an
unknown member/group, FAILED_PRECONDITION when deleting a member or group still in use,
RESOURCE_EXHAUSTED when the profile or a group is full.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import grpc
from finsy.proto import p4r

from p4sim.p4runtime.actions import (
    decode_action,
    decode_indirect,
    encode_action,
    encode_indirect,
    is_indirect,
    profile_by_id,
    profile_of_table,
)
from p4sim.p4runtime.codec import check
from p4sim.p4runtime.errors import P4RTError, invalid, not_found
from p4sim.runtime.action_profiles import ActionProfile

if TYPE_CHECKING:
    from p4sim.p4runtime.pipeline import Pipeline

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


def _failed(msg: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.FAILED_PRECONDITION, msg)


# ------------------------------------------------------------------------------ members


def write_member(pipe: Pipeline, op: int, m: p4r.ActionProfileMember) -> None:
    pa, ap = profile_by_id(pipe, m.action_profile_id)
    name = pa.preamble.name
    if op == DELETE:
        check(m.member_id in ap.members, not_found(f"{name}: no member {m.member_id}"))
        refs = ap.members[m.member_id].refs
        check(refs == 0, _failed(f"{name}: member {m.member_id} is used by {refs} entry/group(s)"))
        ap.delete_member(m.member_id)
        return
    check(m.HasField("action"), invalid(f"{name}: a member needs an action"))
    check(bool(pa.table_ids), invalid(f"{name}: no table uses this action profile"))
    ta = p4r.TableAction()
    ta.action.CopyFrom(m.action)
    table = pipe.index.table(pa.table_ids[0])
    action, args = decode_action(pipe, table, ta, default=False, member=True)
    if op == INSERT:
        if m.member_id in ap.members:
            raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"{name}: member {m.member_id} exists")
        if len(ap.members) >= ap.size:
            raise P4RTError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{name} is full ({ap.size})")
        ap.add_member(m.member_id, action, args)
    else:
        check(m.member_id in ap.members, not_found(f"{name}: no member {m.member_id}"))
        ap.modify_member(m.member_id, action, args)


def read_members(pipe: Pipeline, req: p4r.ActionProfileMember) -> Iterator[p4r.Entity]:
    ids = [req.action_profile_id] if req.action_profile_id else list(pipe.index.action_profiles)
    for ident in ids:
        _, ap = profile_by_id(pipe, ident)
        for mid, m in sorted(ap.members.items()):
            if req.member_id and mid != req.member_id:
                continue
            ent = p4r.Entity()
            out = ent.action_profile_member
            out.action_profile_id, out.member_id = ident, mid
            encode_action(pipe, m.action, m.args, out.action)
            yield ent


# ------------------------------------------------------------------------------- groups


def _group_members(name: str, g: p4r.ActionProfileGroup, ap: ActionProfile) -> list[int]:
    ids = []
    for gm in g.members:
        # weight 0 is what clients older than P4Runtime 1.1 send: count it as 1
        if gm.weight not in (0, 1):
            raise P4RTError(
                grpc.StatusCode.UNIMPLEMENTED, f"{name}: p4sim supports member weight 1 only"
            )
        check(gm.member_id in ap.members, not_found(f"{name}: no member {gm.member_id}"))
        check(gm.member_id not in ids, invalid(f"{name}: member {gm.member_id} listed twice"))
        ids.append(gm.member_id)
    if g.max_size and len(ids) > g.max_size:
        raise P4RTError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"{name}: group {g.group_id} has {len(ids)} members, max_size is {g.max_size}",
        )
    return ids


def write_group(pipe: Pipeline, op: int, g: p4r.ActionProfileGroup) -> None:
    pa, ap = profile_by_id(pipe, g.action_profile_id)
    name = pa.preamble.name
    check(pa.with_selector, invalid(f"{name} is not an action selector: it has no groups"))
    if op != INSERT:
        check(g.group_id in ap.groups, not_found(f"{name}: no group {g.group_id}"))
    if op == DELETE:
        refs = ap.groups[g.group_id].refs
        check(refs == 0, _failed(f"{name}: group {g.group_id} is used by {refs} table entries"))
        ap.delete_group(g.group_id)
        return
    if pa.max_group_size and g.max_size > pa.max_group_size:
        raise invalid(f"{name}: max_size {g.max_size} exceeds max_group_size {pa.max_group_size}")
    ids = _group_members(name, g, ap)
    if op == INSERT:
        if g.group_id in ap.groups:
            raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"{name}: group {g.group_id} exists")
        if len(ap.groups) >= ap.size:
            raise P4RTError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{name} is full ({ap.size})")
        ap.add_group(g.group_id, ids, g.max_size)
    else:
        ap.set_group_members(g.group_id, ids)  # ids already fit g.max_size
        ap.groups[g.group_id].max_size = g.max_size


def read_groups(pipe: Pipeline, req: p4r.ActionProfileGroup) -> Iterator[p4r.Entity]:
    ids = [req.action_profile_id] if req.action_profile_id else list(pipe.index.action_profiles)
    for ident in ids:
        _, ap = profile_by_id(pipe, ident)
        for gid, grp in sorted(ap.groups.items()):
            if req.group_id and gid != req.group_id:
                continue
            ent = p4r.Entity()
            out = ent.action_profile_group
            out.action_profile_id, out.group_id, out.max_size = ident, gid, grp.max_size
            for mid in grp.members:
                out.members.add(member_id=mid, weight=1)
            yield ent


__all__ = [
    "write_member",
    "read_members",
    "write_group",
    "read_groups",
    "decode_indirect",
    "encode_indirect",
    "profile_of_table",
    "is_indirect",
]
