"""The actions of P4Runtime entities: a TableAction (direct, or an action profile's member
or group) decoded into p4sim's (action name, args), and back; shared by table entries
(``tables``) and action profile members (``action_profiles``).

Example::

    name, args = decode_action(pipe, table, te.action, default=False)
    encode_action(pipe, name, args, out.action)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc
from finsy.proto import p4i, p4r

from p4sim.p4runtime.codec import check, decode_int, encode_int
from p4sim.p4runtime.errors import P4RTError, invalid, not_found
from p4sim.runtime.action_profiles import GROUP, MEMBER, ActionProfile

if TYPE_CHECKING:
    from p4sim.p4runtime.pipeline import Pipeline


def profile_by_id(pipe: Pipeline, ident: int) -> tuple[p4i.ActionProfile, ActionProfile]:
    pa = pipe.index.action_profile(ident)
    return pa, pipe.target.action_profile(pa.preamble.name)


def profile_of_table(pipe: Pipeline, table: p4i.Table) -> ActionProfile | None:
    """The runtime profile of an indirect table, None for a direct table."""
    if not table.implementation_id:
        return None
    return profile_by_id(pipe, table.implementation_id)[1]


def decode_action(
    pipe: Pipeline, table: p4i.Table, ta: p4r.TableAction, default: bool, member: bool = False
) -> tuple[str, tuple[int, ...]]:
    """(switch action name, args) of a TableAction, checked against the table's refs;
    an indirect table's entry gives (MEMBER|GROUP, (id,)) unless ``member`` (the action
    of an ActionProfileMember) or ``default``."""
    tname = table.preamble.name
    kind = ta.WhichOneof("type")
    if table.implementation_id and not default and not member:
        return decode_indirect(pipe, table, ta)
    if kind != "action":
        raise P4RTError(
            grpc.StatusCode.UNIMPLEMENTED,
            f"table {tname}: {kind} is not supported here (only a direct action)",
        )
    action = pipe.index.action(ta.action.action_id)
    aname = action.preamble.name
    ref = next((r for r in table.action_refs if r.id == action.preamble.id), None)
    if ref is None:
        raise invalid(f"table {tname}: action {aname} is not one of its actions")
    if default:
        check(ref.scope != p4i.ActionRef.TABLE_ONLY, invalid(f"{aname} is @tableonly in {tname}"))
    else:
        check(
            ref.scope != p4i.ActionRef.DEFAULT_ONLY, invalid(f"{aname} is @defaultonly in {tname}")
        )
    return pipe.target.action_name(aname), decode_params(action, ta.action.params)


def decode_params(action: p4i.Action, params: Any) -> tuple[int, ...]:
    aname = action.preamble.name
    given: dict[int, bytes] = {}
    known = {p.id: p for p in action.params}
    for p in params:
        check(p.param_id in known, invalid(f"action {aname}: no parameter id {p.param_id}"))
        check(p.param_id not in given, invalid(f"action {aname}: parameter {p.param_id} twice"))
        given[p.param_id] = p.value
    args = []
    for p in action.params:
        check(p.id in given, invalid(f"action {aname}: parameter {p.name} is missing"))
        args.append(decode_int(given[p.id], p.bitwidth, f"action {aname}: parameter {p.name}"))
    return tuple(args)


def encode_action(pipe: Pipeline, name: str, args: tuple[int, ...], out: p4r.Action) -> None:
    action = pipe.action_by_switch_name(name)
    out.action_id = action.preamble.id
    for p, v in zip(action.params, args, strict=False):
        out.params.add(param_id=p.id, value=encode_int(v))


def decode_indirect(
    pipe: Pipeline, table: p4i.Table, ta: p4r.TableAction
) -> tuple[str, tuple[int, ...]]:
    """``(MEMBER|GROUP, (id,))`` of an indirect TableAction; the id must exist."""
    tname = table.preamble.name
    ap = profile_of_table(pipe, table)
    kind = ta.WhichOneof("type")
    if ap is None:
        raise invalid(f"table {tname} has no action profile: use a direct action ({kind})")
    if kind == "action_profile_member_id":
        mid = ta.action_profile_member_id
        check(mid in ap.members, not_found(f"table {tname}: no member {mid} in {ap.name}"))
        return MEMBER, (mid,)
    if kind == "action_profile_group_id":
        gid = ta.action_profile_group_id
        check(ap.with_selector, invalid(f"table {tname}: {ap.name} has no groups"))
        check(gid in ap.groups, not_found(f"table {tname}: no group {gid} in {ap.name}"))
        return GROUP, (gid,)
    if kind == "action":
        raise invalid(f"table {tname} is indirect: entries name a member or a group")
    raise P4RTError(grpc.StatusCode.UNIMPLEMENTED, f"table {tname}: {kind} is not supported")


def encode_indirect(kind: str, ident: int, out: p4r.TableAction) -> None:
    if kind == MEMBER:
        out.action_profile_member_id = ident
    else:
        out.action_profile_group_id = ident


def is_indirect(action: str) -> bool:
    return action in (MEMBER, GROUP)
