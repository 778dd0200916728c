"""Behaviour of p4sim.runtime.pre (BMv2 McSimplePre + P4Runtime PRE view)."""

from __future__ import annotations

import pytest

from p4sim.runtime.pre import PacketReplicationEngine, PREError


def test_p4runtime_group_replicates_by_rid_then_port() -> None:
    pre = PacketReplicationEngine()
    pre.mc_group_set(1, [(3, 7), (2, 0), (1, 7), (1, 0)])
    assert pre.replicas(1) == [(1, 0), (2, 0), (1, 7), (3, 7)]


def test_unknown_group_replicates_to_nothing() -> None:
    assert PacketReplicationEngine().replicas(99) == []


def test_cli_nodes_replicate_in_association_order_with_ports_ascending() -> None:
    pre = PacketReplicationEngine()
    pre.group_create(5)
    a = pre.node_create(9, [4, 2])
    b = pre.node_create(1, [3])
    pre.node_associate(5, a)
    pre.node_associate(5, b)
    assert pre.replicas(5) == [(2, 9), (4, 9), (3, 1)]


def test_node_handles_start_at_zero_and_lowest_free_is_reused() -> None:
    pre = PacketReplicationEngine()
    assert [pre.node_create(0, [1]) for _ in range(3)] == [0, 1, 2]
    pre.node_destroy(1)
    assert pre.node_create(0, [2]) == 1


def test_node_update_changes_group_replicas() -> None:
    pre = PacketReplicationEngine()
    pre.group_create(1)
    h = pre.node_create(0, [1])
    pre.node_associate(1, h)
    assert pre.replicas(1) == [(1, 0)]
    pre.node_update(h, [5, 6])
    assert pre.replicas(1) == [(5, 0), (6, 0)]


def test_dissociate_and_destroy_remove_node_from_group() -> None:
    pre = PacketReplicationEngine()
    pre.group_create(1)
    a, b = pre.node_create(1, [1]), pre.node_create(2, [2])
    pre.node_associate(1, a)
    pre.node_associate(1, b)
    pre.node_dissociate(1, a)
    assert pre.replicas(1) == [(2, 2)]
    pre.node_destroy(b)  # BMv2 lets a node be destroyed while associated
    assert pre.replicas(1) == []
    assert pre.node(a) == (1, (1,), None)


def test_p4runtime_and_cli_views_agree() -> None:
    pre = PacketReplicationEngine()
    pre.mc_group_set(3, [(1, 0), (2, 0), (4, 1)])
    nodes = pre.group_nodes(3)
    assert [pre.node(h) for h in nodes] == [(0, (1, 2), 3), (1, (4,), 3)]
    h = pre.node_create(2, [8])
    pre.node_associate(3, h)
    assert pre.replicas(3) == [(1, 0), (2, 0), (4, 1), (8, 2)]


def test_resetting_group_keeps_surviving_rid_nodes_in_place() -> None:
    pre = PacketReplicationEngine()
    pre.mc_group_set(1, [(1, 5), (2, 9)])
    pre.mc_group_set(1, [(7, 9), (3, 2)])
    # rid 9 keeps its node (updated ports); rid 2 is new, so appended after it
    assert pre.replicas(1) == [(7, 9), (3, 2)]
    assert len(pre.group_nodes(1)) == 2


def test_mc_group_delete_removes_group_and_its_nodes() -> None:
    pre = PacketReplicationEngine()
    pre.mc_group_set(1, [(1, 0)])
    (h,) = pre.group_nodes(1)
    pre.mc_group_delete(1)
    assert not pre.has_group(1) and pre.replicas(1) == []
    with pytest.raises(PREError, match="no multicast node with handle"):
        pre.node(h)


def test_duplicate_replica_rejected() -> None:
    with pytest.raises(PREError, match="duplicate replica \\(port 1, rid 0\\)"):
        PacketReplicationEngine().mc_group_set(1, [(1, 0), (1, 0)])


def test_group_create_twice_rejected() -> None:
    pre = PacketReplicationEngine()
    pre.group_create(1)
    with pytest.raises(PREError, match="multicast group 1 already exists"):
        pre.group_create(1)


def test_errors_on_unknown_handle_group_and_double_association() -> None:
    pre = PacketReplicationEngine()
    pre.group_create(1)
    pre.group_create(2)
    h = pre.node_create(0, [1])
    with pytest.raises(PREError, match="no multicast node with handle 42"):
        pre.node_associate(1, 42)
    with pytest.raises(PREError, match="multicast group 7 does not exist"):
        pre.node_associate(7, h)
    pre.node_associate(1, h)
    with pytest.raises(PREError, match="already associated with group 1"):
        pre.node_associate(2, h)
    with pytest.raises(PREError, match="not associated with group 2"):
        pre.node_dissociate(2, h)
    with pytest.raises(PREError, match="does not exist"):
        pre.mc_group_delete(9)


def test_group_destroy_leaves_nodes_dissociated() -> None:
    pre = PacketReplicationEngine()
    pre.group_create(1)
    h = pre.node_create(3, [1])
    pre.node_associate(1, h)
    pre.group_destroy(1)
    pre.group_create(2)
    pre.node_associate(2, h)
    assert pre.replicas(2) == [(1, 3)]


def test_negative_port_rejected() -> None:
    with pytest.raises(PREError, match="port must be a non-negative integer"):
        PacketReplicationEngine().node_create(0, [-1])


def test_clone_session_stores_replicas_cos_and_truncation() -> None:
    pre = PacketReplicationEngine()
    pre.clone_session_set(5, [(3, 0), (4, 1)], class_of_service=2, truncate_bytes=64)
    s = pre.clone_session(5)
    assert s is not None
    assert (s.replicas, s.class_of_service, s.truncate_bytes) == ([(3, 0), (4, 1)], 2, 64)
    assert pre.clone_replicas(5) == [(3, 0), (4, 1)]


def test_clone_session_replaced_and_deleted() -> None:
    pre = PacketReplicationEngine()
    pre.clone_session_set(5, [(3, 0)])
    pre.clone_session_set(5, [(6, 0)])
    assert pre.clone_replicas(5) == [(6, 0)]
    pre.clone_session_delete(5)
    assert pre.clone_session(5) is None and pre.clone_replicas(5) == []
    with pytest.raises(PREError, match="clone session 5 does not exist"):
        pre.clone_session_delete(5)


def test_clone_session_rejects_negative_truncation() -> None:
    with pytest.raises(PREError, match="truncate_bytes"):
        PacketReplicationEngine().clone_session_set(1, [(1, 0)], truncate_bytes=-1)


def test_mirroring_to_multicast_group_follows_group_changes() -> None:
    pre = PacketReplicationEngine()
    pre.mirroring_add(1, 4)
    pre.mc_group_set(9, [(1, 0)])
    pre.mirroring_add_mc(2, 9)
    assert pre.clone_replicas(1) == [(4, 0)]
    assert pre.clone_replicas(2) == [(1, 0)]
    pre.mc_group_set(9, [(1, 0), (2, 0)])
    assert pre.clone_replicas(2) == [(1, 0), (2, 0)]


def test_replicas_result_is_a_copy() -> None:
    pre = PacketReplicationEngine()
    pre.mc_group_set(1, [(1, 0)])
    pre.replicas(1).append((9, 9))
    assert pre.replicas(1) == [(1, 0)]
