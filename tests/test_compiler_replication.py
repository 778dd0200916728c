"""Multicast, clones, resubmit, recirculate and truncate (tests/compiler_programs/
replicate.p4), with BMv2's instance_type values (0 normal, 1 ingress clone, 2 egress
clone, 4 recirculated, 5 replica, 6 resubmitted).

Output: rep_t = marker(8) instance_type(32) rid(16) passes(8) kept(8) lost(8), then req.
Every test runs on both back ends (the native one runs the same work queues in C).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim import Switch

PROG = Path(__file__).parent / "compiler_programs" / "replicate.p4"


@pytest.fixture(params=["python", "native"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def load(backend: str, src: str | None = None, name: str = "replicate.p4") -> Switch:
    """replicate.p4 (or ``src``) on ``backend``; native must not fall back."""
    if src is None:
        s = Switch.from_file(str(PROG), backend=backend)
    else:
        s = Switch.from_source(src, name, backend=backend)
    assert s.backend == backend, s.backend_notice
    return s


def rep(data: bytes) -> dict[str, int]:
    assert data[0] == 0xFF
    return {
        "itype": int.from_bytes(data[1:5], "big"),
        "rid": int.from_bytes(data[5:7], "big"),
        "passes": data[7],
        "kept": data[8],
        "lost": data[9],
        "req": data[10:],
    }


@pytest.fixture
def sw(backend: str) -> Switch:
    s = load(backend)
    s.mc_group_create(3, [(2, 10), (4, 11)])
    s.clone_session_set(5, [(7, 0)])
    return s


def test_multicast_sends_one_copy_per_replica_with_rid(sw: Switch) -> None:
    out = sw.send(0, bytes([1, 3]))
    assert [p for p, _ in out] == [2, 4]
    assert [rep(d)["rid"] for _, d in out] == [10, 11]


def test_multicast_to_unknown_group_sends_nothing(sw: Switch) -> None:
    assert sw.send(0, bytes([1, 9])) == []


def test_ingress_clone_is_original_packet_with_field_list(sw: Switch) -> None:
    out = dict(sw.send(0, bytes([2, 0])))
    assert set(out) == {1, 7}
    clone = rep(out[7])
    assert clone["itype"] == 1
    assert clone["kept"] == 42 and clone["lost"] == 0  # only @field_list(2) fields kept
    assert clone["req"] == bytes([2, 0])  # the packet as received
    orig = rep(out[1])
    assert orig["itype"] == 0 and orig["lost"] == 7


def test_egress_clone_carries_egress_headers(sw: Switch) -> None:
    out = dict(sw.send(0, bytes([3, 0])))
    assert rep(out[7])["itype"] == 2 and rep(out[7])["kept"] == 43
    assert rep(out[1])["itype"] == 0


def test_clone_without_session_makes_no_copy(backend: str) -> None:
    s = load(backend)
    assert [p for p, _ in s.send(0, bytes([2, 0]))] == [1]


def test_resubmit_preserves_field_list_and_sets_instance_type(sw: Switch) -> None:
    out = sw.send(0, bytes([4, 3]))
    assert len(out) == 1
    r = rep(out[0][1])
    assert r["itype"] == 6 and r["passes"] == 3
    assert r["kept"] == 9 and r["lost"] == 0


def test_recirculate_reparses_deparsed_packet(sw: Switch) -> None:
    out = sw.send(0, bytes([5, 0]))
    assert len(out) == 1
    r = rep(out[0][1])
    assert r["itype"] == 4 and r["passes"] == 1 and r["kept"] == 11
    assert r["req"] == bytes([0, 0])  # egress rewrote op before recirculating


def test_endless_resubmit_is_cut_after_pass_limit(sw: Switch) -> None:
    assert sw.send(0, bytes([7, 0])) == []
    assert sw.send(0, bytes([1, 3]))  # and the switch goes on


def test_the_pass_limit_is_logged() -> None:
    lines: list[str] = []
    s = Switch.from_file(str(PROG), log=lines.append)
    assert s.send(0, bytes([7, 0])) == []
    assert any("too many" in x for x in lines)


def test_mark_to_drop_in_ingress_and_egress(sw: Switch) -> None:
    assert sw.send(0, bytes([6, 0])) == []
    assert sw.send(0, bytes([9, 0])) == []


def test_truncate_cuts_output(sw: Switch) -> None:
    out = sw.send(0, bytes([8, 0]))
    assert out == [(1, bytes([0xFF, 0, 0]))]


def test_clone_session_truncation(backend: str) -> None:
    s = load(backend)
    s.clone_session_set(5, [(7, 0)], truncate_bytes=1)
    out = dict(s.send(0, bytes([2, 0])))
    assert out[7] == bytes([0xFF]) and len(out[1]) == 12


def test_deprecated_resubmit_with_field_list_argument(backend: str) -> None:
    src = PROG.read_text().replace(
        "                resubmit_preserving_field_list(1);",
        "                resubmit({meta.passes, meta.kept});",
    )
    s = load(backend, src, "old_resubmit.p4")
    r = rep(s.send(0, bytes([4, 2]))[0][1])
    assert r["itype"] == 6 and r["passes"] == 2 and r["kept"] == 9 and r["lost"] == 0


def test_deprecated_clone3_preserves_named_struct(backend: str) -> None:
    src = PROG.read_text().replace(
        "clone_preserving_field_list(CloneType.I2E, 5, 2);", "clone3(CloneType.I2E, 5, meta);"
    )
    s = load(backend, src, "old_clone.p4")
    s.clone_session_set(5, [(7, 0)])
    clone = rep(dict(s.send(0, bytes([2, 0])))[7])
    assert clone["kept"] == 42 and clone["lost"] == 7  # the whole struct was preserved
