"""v1model ``action_profile`` / ``action_selector`` state, as BMv2 ``simple_switch`` keeps it.

Example::

    ap = ActionProfile("MyIngress.ecmp", size=16, algo="crc16")
    ap.add_member(1, "MyIngress.fwd", (1,))
    ap.add_member(2, "MyIngress.fwd", (2,))
    ap.add_group(10, [1, 2])
    ap.resolve(GROUP, 10, [(0x0A000001, 32)])   # -> ("MyIngress.fwd", (1,)) or (2,)

An indirect table's entry stores ``Entry(matches, MEMBER, (member_id,))`` or
``Entry(matches, GROUP, (group_id,))``; on a hit the generated code calls ``resolve``.
For a group, the member is ``members[hash(selector fields) % len(members)]`` where the
members are ordered by their internal handle (BMv2 keeps a group's members in a sorted
set of member handles, and hands out the lowest free handle on creation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from p4sim.runtime import hashes
from p4sim.runtime.tables import TableError

MEMBER = "$member"
GROUP = "$group"


class ActionProfileError(TableError):
    """A control-plane mistake on an action profile (unknown id, in use, full ...)."""


@dataclass
class Member:
    member_id: int
    action: str
    args: tuple[int, ...]
    handle: int
    refs: int = 0  # table entries + groups using it


@dataclass
class Group:
    group_id: int
    max_size: int
    members: list[int] = field(default_factory=list)  # member ids, in handle order
    refs: int = 0  # table entries using it


class ActionProfile:
    """Members and (with ``algo``, i.e. an action selector) groups of one profile."""

    def __init__(
        self, name: str, size: int, algo: str | None = None, max_group_size: int = 0
    ) -> None:
        self.name = name
        self.size = size
        self.algo = algo
        self.max_group_size = max_group_size
        self.members: dict[int, Member] = {}
        self.groups: dict[int, Group] = {}
        self._calc = hashes.HashCalculator(algo) if algo else None

    @property
    def with_selector(self) -> bool:
        return self.algo is not None

    # -- members -----------------------------------------------------------------------

    def add_member(self, member_id: int, action: str, args: tuple[int, ...]) -> None:
        if member_id in self.members:
            raise ActionProfileError(f"{self.name}: member {member_id} already exists")
        if len(self.members) >= self.size:
            raise ActionProfileError(f"{self.name}: full ({self.size} members)")
        used = {m.handle for m in self.members.values()}
        handle = next(h for h in range(len(used) + 1) if h not in used)
        self.members[member_id] = Member(member_id, action, tuple(args), handle)

    def modify_member(self, member_id: int, action: str, args: tuple[int, ...]) -> None:
        m = self.member(member_id)
        m.action, m.args = action, tuple(args)

    def delete_member(self, member_id: int) -> None:
        m = self.member(member_id)
        if m.refs:
            raise ActionProfileError(
                f"{self.name}: member {member_id} is still used by {m.refs} entry/group(s)"
            )
        del self.members[member_id]

    def member(self, member_id: int) -> Member:
        m = self.members.get(member_id)
        if m is None:
            raise ActionProfileError(f"{self.name}: no member {member_id}")
        return m

    # -- groups ------------------------------------------------------------------------

    def _need_selector(self) -> None:
        if self.algo is None:
            raise ActionProfileError(f"{self.name}: groups need an action_selector")

    def add_group(self, group_id: int, member_ids: Iterable[int] = (), max_size: int = 0) -> None:
        self._need_selector()
        if group_id in self.groups:
            raise ActionProfileError(f"{self.name}: group {group_id} already exists")
        if len(self.groups) >= self.size:
            raise ActionProfileError(f"{self.name}: full ({self.size} groups)")
        if self.max_group_size and max_size > self.max_group_size:
            raise ActionProfileError(
                f"{self.name}: group max_size {max_size} exceeds {self.max_group_size}"
            )
        g = Group(group_id, max_size)
        self.groups[group_id] = g
        try:
            self.set_group_members(group_id, member_ids)
        except ActionProfileError:
            del self.groups[group_id]
            raise

    def set_group_members(self, group_id: int, member_ids: Iterable[int]) -> None:
        """Replace the members of a group (P4Runtime MODIFY semantics)."""
        g = self.group(group_id)
        ids = list(dict.fromkeys(member_ids))
        for mid in ids:
            self.member(mid)
        if g.max_size and len(ids) > g.max_size:
            raise ActionProfileError(
                f"{self.name}: group {group_id} holds at most {g.max_size} members"
            )
        for mid in g.members:
            self.members[mid].refs -= 1
        for mid in ids:
            self.members[mid].refs += 1
        g.members = sorted(ids, key=lambda i: self.members[i].handle)

    def group_add_member(self, group_id: int, member_id: int) -> None:
        self.set_group_members(group_id, [*self.group(group_id).members, member_id])

    def group_remove_member(self, group_id: int, member_id: int) -> None:
        g = self.group(group_id)
        if member_id not in g.members:
            raise ActionProfileError(f"{self.name}: member {member_id} not in group {group_id}")
        self.set_group_members(group_id, [m for m in g.members if m != member_id])

    def delete_group(self, group_id: int) -> None:
        g = self.group(group_id)
        if g.refs:
            raise ActionProfileError(
                f"{self.name}: group {group_id} is still used by {g.refs} table entry(ies)"
            )
        self.set_group_members(group_id, [])
        del self.groups[group_id]

    def group(self, group_id: int) -> Group:
        self._need_selector()
        g = self.groups.get(group_id)
        if g is None:
            raise ActionProfileError(f"{self.name}: no group {group_id}")
        return g

    # -- table entries -----------------------------------------------------------------

    def ref(self, kind: str, ref_id: int, delta: int = 1) -> None:
        """Count a table entry (``delta=1``) or drop one (``-1``) pointing at ``ref_id``."""
        obj: Member | Group = self.member(ref_id) if kind == MEMBER else self.group(ref_id)
        obj.refs += delta

    def resolve(
        self, kind: str, ref_id: int, fields: Sequence[tuple[int | None, int]]
    ) -> tuple[str, tuple[int, ...]]:
        """(action, args) of a hit; an empty group yields ("", ())."""
        if kind == MEMBER:
            m = self.members[ref_id]
            return m.action, m.args
        ids = self.groups[ref_id].members
        if not ids:
            return "", ()
        m = self.members[ids[self.select(fields) % len(ids)]]
        return m.action, m.args

    def select(self, fields: Sequence[tuple[int | None, int]]) -> int:
        """The selector hash of the ``(value, width)`` selector key fields."""
        assert self._calc is not None
        return self._calc.fn(hashes.serialize_fields(fields))

    def clear(self) -> None:
        self.members.clear()
        self.groups.clear()
