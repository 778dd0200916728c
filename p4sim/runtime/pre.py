"""Packet replication engine (PRE): multicast groups and clone (mirror) sessions.

Example::

    pre = PacketReplicationEngine()
    pre.mc_group_set(1, [(2, 0), (1, 0), (3, 5)])
    pre.replicas(1)            # -> [(1, 0), (2, 0), (3, 5)]

Two views of the same state, as in BMv2 ``simple_switch`` (``McSimplePre``):

* BMv2 CLI view: a *node* is ``(rid, set of ports)`` with a handle; a group is the
  ordered list of nodes associated with it.  A group replicates node by node in
  association order, and within a node in ascending port order.
* P4Runtime view: a group is a list of ``(port, rid)`` replicas.  ``mc_group_set``
  lays it out the way PI does on BMv2: one node per distinct rid, created in
  ascending rid order; re-setting an existing group keeps the nodes of rids that
  stay (in place), updates their ports, appends nodes for new rids and destroys the
  rest.  ``replicas(gid)`` is always the resulting replication order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

Replica = tuple[int, int]  # (egress port, replication id / instance)


class PREError(Exception):
    """A control-plane mistake on the replication engine (unknown group/handle ...)."""


@dataclass
class CloneSession:
    """A clone session: copies go to ``replicas`` (or to multicast group ``mgid``).

    ``truncate_bytes`` (P4Runtime ``packet_length_bytes``): 0 = no truncation, else the
    clone is cut to that many bytes.  ``class_of_service`` is stored for the control
    plane; simple_switch does not act on it.
    """

    session_id: int
    replicas: list[Replica] = field(default_factory=list)
    class_of_service: int = 0
    truncate_bytes: int = 0
    mgid: int | None = None


@dataclass
class _Node:
    rid: int
    ports: tuple[int, ...]  # ascending, no duplicates (BMv2 keeps a port bitmap)
    group: int | None = None


class PacketReplicationEngine:
    """Multicast groups and clone sessions of one switch (see the module docstring)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every group, node and clone session."""
        self._nodes: dict[int, _Node] = {}
        self._groups: dict[int, list[int]] = {}
        self._free: list[int] = []
        self._next = 0
        self._cache: dict[int, list[Replica]] = {}
        self._clones: dict[int, CloneSession] = {}

    # -- packet path ---------------------------------------------------------------

    def replicas(self, gid: int) -> list[Replica]:
        """Replication list of group ``gid``, in order; [] for an unknown group."""
        reps = self._cache.get(gid)
        if reps is None:
            if gid not in self._groups:
                return []
            reps = self._cache[gid] = [
                (p, n.rid) for n in map(self._nodes.__getitem__, self._groups[gid]) for p in n.ports
            ]
        return list(reps)

    def clone_replicas(self, sid: int) -> list[Replica]:
        """Where clones of session ``sid`` go ([] when the session is unknown)."""
        s = self._clones.get(sid)
        if s is None:
            return []
        return self.replicas(s.mgid) if s.mgid is not None else list(s.replicas)

    # -- P4Runtime view ------------------------------------------------------------

    def has_group(self, gid: int) -> bool:
        return gid in self._groups

    def groups(self) -> list[int]:
        return sorted(self._groups)

    def mc_group_set(self, gid: int, replicas: Sequence[Replica]) -> None:
        """Create group ``gid`` or replace its replicas (P4Runtime INSERT/MODIFY)."""
        by_rid = self._group_by_rid(gid, replicas)
        if gid not in self._groups:
            self.group_create(gid)
        have: dict[int, int] = {}
        for h in list(self._groups[gid]):
            rid = self._nodes[h].rid
            if rid in by_rid and rid not in have:
                have[rid] = h
                self.node_update(h, by_rid[rid])
            else:
                self.node_destroy(h)
        for rid in sorted(by_rid):
            if rid not in have:
                self.node_associate(gid, self.node_create(rid, by_rid[rid]))

    def mc_group_delete(self, gid: int) -> None:
        """Delete group ``gid`` and all its nodes."""
        for h in list(self._require_group(gid)):
            self.node_destroy(h)
        self.group_destroy(gid)

    def _group_by_rid(self, gid: int, replicas: Sequence[Replica]) -> dict[int, list[int]]:
        self._check_id("multicast group id", gid)
        by_rid: dict[int, list[int]] = {}
        seen: set[Replica] = set()
        for rep in replicas:
            port, rid = rep
            self._check_id("port", port)
            self._check_id("replication id", rid)
            if (port, rid) in seen:
                raise PREError(f"multicast group {gid}: duplicate replica (port {port}, rid {rid})")
            seen.add((port, rid))
            by_rid.setdefault(rid, []).append(port)
        return by_rid

    # -- BMv2 CLI view -------------------------------------------------------------

    def group_create(self, gid: int) -> int:
        """``mc_mgrp_create``: an empty group; returns its handle (= gid, as BMv2)."""
        self._check_id("multicast group id", gid)
        if gid in self._groups:
            raise PREError(f"multicast group {gid} already exists")
        self._groups[gid] = []
        self._cache.pop(gid, None)
        return gid

    def group_destroy(self, gid: int) -> None:
        """``mc_mgrp_destroy``: the group goes; its nodes stay, dissociated."""
        for h in self._require_group(gid):
            self._nodes[h].group = None
        del self._groups[gid]
        self._cache.pop(gid, None)

    def node_create(self, rid: int, ports: Iterable[int]) -> int:
        """``mc_node_create``: a node (rid, ports); returns the lowest free handle."""
        self._check_id("replication id", rid)
        node = _Node(rid, self._ports(ports))
        h = heapq.heappop(self._free) if self._free else self._next
        if h == self._next:
            self._next += 1
        self._nodes[h] = node
        return h

    def node_update(self, handle: int, ports: Iterable[int]) -> None:
        """``mc_node_update``: replace the node's ports."""
        n = self._require_node(handle)
        n.ports = self._ports(ports)
        self._touch(n)

    def node_destroy(self, handle: int) -> None:
        """``mc_node_destroy``: also dissociates it from its group (BMv2 allows that)."""
        n = self._require_node(handle)
        if n.group is not None:
            self._groups[n.group].remove(handle)
            self._touch(n)
        del self._nodes[handle]
        heapq.heappush(self._free, handle)

    def node_associate(self, gid: int, handle: int) -> None:
        """``mc_node_associate``: append the node to the group's replication list."""
        n = self._require_node(handle)
        nodes = self._require_group(gid)
        if n.group is not None:
            raise PREError(f"multicast node {handle} is already associated with group {n.group}")
        nodes.append(handle)
        n.group = gid
        self._touch(n)

    def node_dissociate(self, gid: int, handle: int) -> None:
        """``mc_node_dissociate``: remove the node from the group (the node stays)."""
        n = self._require_node(handle)
        nodes = self._require_group(gid)
        if n.group != gid:
            raise PREError(f"multicast node {handle} is not associated with group {gid}")
        self._touch(n)
        nodes.remove(handle)
        n.group = None

    def node(self, handle: int) -> tuple[int, tuple[int, ...], int | None]:
        """(rid, ports, group or None) of a node."""
        n = self._require_node(handle)
        return n.rid, n.ports, n.group

    def group_nodes(self, gid: int) -> list[int]:
        """Node handles of group ``gid`` in replication order."""
        return list(self._require_group(gid))

    # -- clone sessions -------------------------------------------------------------

    def clone_session_set(
        self,
        sid: int,
        replicas: Sequence[Replica],
        class_of_service: int = 0,
        truncate_bytes: int = 0,
    ) -> None:
        """Create or replace clone session ``sid`` (P4Runtime CloneSessionEntry)."""
        self._check_id("clone session id", sid)
        if truncate_bytes < 0:
            raise PREError(f"clone session {sid}: truncate_bytes must be >= 0")
        reps = list(replicas)
        if len(set(reps)) != len(reps):
            raise PREError(f"clone session {sid}: duplicate replica in {reps}")
        for port, rid in reps:
            self._check_id("port", port)
            self._check_id("replication id", rid)
        self._clones[sid] = CloneSession(sid, reps, class_of_service, truncate_bytes)

    def mirroring_add(self, sid: int, port: int) -> None:
        """BMv2 CLI ``mirroring_add``: clones of ``sid`` go to ``port``."""
        self.clone_session_set(sid, [(port, 0)])

    def mirroring_add_mc(self, sid: int, mgid: int) -> None:
        """BMv2 CLI ``mirroring_add_mc``: clones of ``sid`` go to multicast group ``mgid``."""
        self._check_id("clone session id", sid)
        self._check_id("multicast group id", mgid)
        self._clones[sid] = CloneSession(sid, [], mgid=mgid)

    def clone_session(self, sid: int) -> CloneSession | None:
        return self._clones.get(sid)

    def clone_sessions(self) -> list[CloneSession]:
        return [self._clones[s] for s in sorted(self._clones)]

    def clone_session_delete(self, sid: int) -> None:
        if self._clones.pop(sid, None) is None:
            raise PREError(f"clone session {sid} does not exist")

    # -- helpers ---------------------------------------------------------------------

    def _touch(self, n: _Node) -> None:
        if n.group is not None:
            self._cache.pop(n.group, None)

    def _require_group(self, gid: int) -> list[int]:
        try:
            return self._groups[gid]
        except KeyError:
            raise PREError(f"multicast group {gid} does not exist") from None

    def _require_node(self, handle: int) -> _Node:
        try:
            return self._nodes[handle]
        except KeyError:
            raise PREError(f"no multicast node with handle {handle}") from None

    def _ports(self, ports: Iterable[int]) -> tuple[int, ...]:
        ps = sorted(set(ports))
        for p in ps:
            self._check_id("port", p)
        return tuple(ps)

    @staticmethod
    def _check_id(what: str, v: object) -> None:
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise PREError(f"{what} must be a non-negative integer, got {v!r}")
