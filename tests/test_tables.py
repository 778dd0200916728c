"""Behaviour of p4sim.runtime.tables (BMv2 simple_switch / P4Runtime semantics)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4sim.runtime.tables import Entry, KeyField, Table, TableError


def lpm_table(size: int = 16) -> Table:
    return Table("ipv4_lpm", [KeyField("dst", "lpm", 32)], size, "drop")


def acl_table(size: int = 64) -> Table:
    return Table(
        "acl", [KeyField("src", "ternary", 8), KeyField("port", "range", 16)], size, "allow"
    )


def test_exact_hit_returns_entry_and_miss_returns_none() -> None:
    t = Table("mac", [KeyField("dst", "exact", 48), KeyField("vlan", "exact", 12)], 8, "drop")
    h = t.add(Entry((0xAABB, 5), "fwd", (3,)))
    hit = t.lookup((0xAABB, 5))
    assert hit is not None and hit.handle == h and hit.args == (3,)
    assert t.lookup((0xAABB, 6)) is None


def test_lpm_longest_prefix_wins() -> None:
    t = lpm_table()
    t.add(Entry(((0x0A000000, 8),), "short", ()))
    t.add(Entry(((0x0A010000, 16),), "long", ()))
    t.add(Entry(((0, 0),), "default_route", ()))
    assert t.lookup((0x0A010203,)).action == "long"
    assert t.lookup((0x0A020203,)).action == "short"
    assert t.lookup((0x0B000000,)).action == "default_route"


def test_lpm_with_exact_fields_requires_exact_part_to_match() -> None:
    t = Table("t", [KeyField("vrf", "exact", 8), KeyField("dst", "lpm", 32)], 8, "drop")
    t.add(Entry((1, (0x0A000000, 8)), "vrf1", ()))
    t.add(Entry((2, (0x0A000000, 24)), "vrf2", ()))
    assert t.lookup((1, 0x0A000001)).action == "vrf1"
    assert t.lookup((2, 0x0A000001)).action == "vrf2"
    assert t.lookup((2, 0x0A000101)) is None


def test_lpm_value_with_host_bits_rejected() -> None:
    t = lpm_table()
    with pytest.raises(TableError, match="ipv4_lpm.*outside"):
        t.add(Entry(((0x0A000001, 8),), "fwd", ()))


def test_lpm_host_bits_cleared_when_canonicalize_requested() -> None:
    t = lpm_table()
    t.add(Entry(((0x0A000001, 8),), "fwd", ()), canonicalize=True)
    assert t.entries()[0].matches == ((0x0A000000, 8),)
    assert t.lookup((0x0AFFFFFF,)).action == "fwd"


def test_lpm_prefix_length_out_of_range_rejected() -> None:
    with pytest.raises(TableError, match="prefix length 33"):
        lpm_table().add(Entry(((0, 33),), "fwd", ()))


def test_value_wider_than_key_rejected_with_table_name() -> None:
    t = Table("narrow", [KeyField("f", "exact", 4)], 8, "drop")
    with pytest.raises(TableError, match="narrow.*does not fit in 4 bits"):
        t.add(Entry((16,), "a", ()))


def test_ternary_value_outside_mask_rejected_unless_canonicalized() -> None:
    t = Table("t", [KeyField("f", "ternary", 8)], 8, "drop")
    with pytest.raises(TableError, match="outside its mask"):
        t.add(Entry(((0x13, 0xF0),), "a", (), priority=1))
    t.add(Entry(((0x13, 0xF0),), "a", (), priority=1), canonicalize=True)
    assert t.entries()[0].matches == ((0x10, 0xF0),)


def test_range_low_above_high_rejected() -> None:
    with pytest.raises(TableError, match="range low 9 > high 3"):
        acl_table().add(Entry(((0, 0), (9, 3)), "deny", (), priority=1))


def test_wrong_number_of_match_values_rejected() -> None:
    with pytest.raises(TableError, match="expected 2 match"):
        acl_table().add(Entry(((0, 0),), "deny", (), priority=1))


def test_bare_int_means_exact_match_on_all_bits() -> None:
    t = lpm_table()
    t.add(Entry((0x0A000001,), "host", ()))
    assert t.entries()[0].matches == ((0x0A000001, 32),)
    assert t.lookup((0x0A000001,)).action == "host"
    assert t.lookup((0x0A000002,)) is None


def test_ternary_higher_priority_wins() -> None:
    t = acl_table()
    t.add(Entry(((0, 0), (0, 0xFFFF)), "low", (), priority=1))
    t.add(Entry(((0x10, 0xF0), (0, 0xFFFF)), "high", (), priority=10))
    assert t.lookup((0x12, 80)).action == "high"
    assert t.lookup((0x22, 80)).action == "low"


def test_equal_priority_ties_broken_by_insertion_order() -> None:
    t = acl_table()
    t.add(Entry(((0x10, 0xF0), (0, 0xFFFF)), "first", (), priority=5))
    t.add(Entry(((0x12, 0xFF), (0, 0xFFFF)), "second", (), priority=5))
    assert t.lookup((0x12, 1)).action == "first"


def test_range_key_matches_inclusive_bounds() -> None:
    t = acl_table()
    t.add(Entry(((0, 0), (1000, 2000)), "mid", (), priority=2))
    assert t.lookup((0, 1000)).action == "mid"
    assert t.lookup((0, 2000)).action == "mid"
    assert t.lookup((0, 2001)) is None


def test_optional_none_is_wildcard_and_int_is_exact() -> None:
    t = Table("t", [KeyField("a", "optional", 8), KeyField("b", "exact", 8)], 8, "drop")
    t.add(Entry((None, 1), "any_a", (), priority=1))
    t.add(Entry((7, 1), "a7", (), priority=2))
    assert t.lookup((7, 1)).action == "a7"
    assert t.lookup((8, 1)).action == "any_a"
    assert t.lookup((8, 2)) is None


def test_duplicate_exact_entry_rejected() -> None:
    t = Table("mac", [KeyField("dst", "exact", 48)], 8, "drop")
    t.add(Entry((1,), "a", ()))
    with pytest.raises(TableError, match="mac: entry already exists"):
        t.add(Entry((1,), "b", ()))


def test_duplicate_lpm_entry_rejected() -> None:
    t = lpm_table()
    t.add(Entry(((0x0A000000, 8),), "a", ()))
    with pytest.raises(TableError, match="already exists"):
        t.add(Entry(((0x0A000000, 8),), "b", ()))


def test_same_ternary_key_with_other_priority_is_not_duplicate() -> None:
    t = acl_table()
    t.add(Entry(((1, 0xFF), (0, 5)), "a", (), priority=1))
    t.add(Entry(((1, 0xFF), (0, 5)), "b", (), priority=2))
    with pytest.raises(TableError, match="already exists"):
        t.add(Entry(((1, 0xFF), (0, 5)), "c", (), priority=2))
    assert t.lookup((1, 3)).action == "b"


def test_table_holds_exactly_size_entries_then_full() -> None:
    t = Table("small", [KeyField("k", "exact", 8)], 2, "drop")
    t.add(Entry((1,), "a", ()))
    t.add(Entry((2,), "a", ()))
    with pytest.raises(TableError, match="small: table is full"):
        t.add(Entry((3,), "a", ()))


def test_size_zero_table_accepts_no_entry() -> None:
    t = Table("none", [KeyField("k", "exact", 8)], 0, "drop")
    with pytest.raises(TableError, match="full"):
        t.add(Entry((1,), "a", ()))


def test_const_table_rejects_add_modify_delete_and_still_matches() -> None:
    t = Table(
        "c",
        [KeyField("k", "exact", 8)],
        4,
        "drop",
        const_entries=True,
        entries=[Entry((1,), "one", ()), Entry((2,), "two", ())],
    )
    assert t.lookup((2,)).action == "two"
    for op in (
        lambda: t.add(Entry((3,), "x", ())),
        lambda: t.modify(0, "x", ()),
        lambda: t.delete(0),
        t.clear,
    ):
        with pytest.raises(TableError, match="c: cannot .* const entries"):
            op()
    assert len(t) == 2


def test_const_default_action_cannot_be_changed() -> None:
    t = Table("t", [KeyField("k", "exact", 8)], 4, "drop", default_const=True)
    with pytest.raises(TableError, match="default action is const"):
        t.set_default("fwd", (1,))
    assert t.default_action == "drop"


def test_set_default_changes_miss_action() -> None:
    t = Table("t", [KeyField("k", "exact", 8)], 4, "drop")
    t.set_default("fwd", (2,))
    assert (t.default_action, t.default_args) == ("fwd", (2,))


def test_delete_removes_entry_from_lookup_and_reuses_lowest_handle() -> None:
    t = acl_table()
    h0 = t.add(Entry(((1, 0xFF), (0, 9)), "a", (), priority=1))
    h1 = t.add(Entry(((2, 0xFF), (0, 9)), "b", (), priority=1))
    t.delete(h0)
    assert t.lookup((1, 0)) is None
    assert t.lookup((2, 0)).handle == h1
    assert t.add(Entry(((3, 0xFF), (0, 9)), "c", (), priority=1)) == h0


def test_modify_changes_action_and_keeps_direct_counter() -> None:
    t = lpm_table()
    h = t.add(Entry(((0, 0),), "a", ()))
    t.count_hit(t.get(h), 100)
    t.modify(h, "b", (7,))
    e = t.lookup((5,))
    assert (e.action, e.args, e.counter) == ("b", (7,), [1, 100])


def test_count_hit_adds_packets_and_bytes() -> None:
    t = Table("t", [KeyField("k", "exact", 8)], 4, "drop")
    e = t.get(t.add(Entry((1,), "a", ())))
    t.count_hit(e, 64)
    t.count_hit(e, 1500)
    assert e.counter == [2, 1564]


def test_unknown_handle_is_a_table_error() -> None:
    t = lpm_table()
    with pytest.raises(TableError, match="ipv4_lpm: no entry with handle 9"):
        t.delete(9)


def test_find_returns_entry_by_match_key() -> None:
    t = acl_table()
    t.add(Entry(((1, 0xFF), (0, 9)), "a", (), priority=3))
    assert t.find(((1, 0xFF), (0, 9)), priority=3).action == "a"
    assert t.find(((1, 0xFF), (0, 9)), priority=4) is None


def test_unknown_match_kind_rejected() -> None:
    with pytest.raises(TableError, match="unknown match kind 'fuzzy'"):
        Table("t", [KeyField("k", "fuzzy", 8)], 4, "drop")


# -- property: the indexes agree with a brute-force reference --------------------------

KEYS = [
    KeyField("a", "ternary", 6),
    KeyField("b", "lpm", 6),
    KeyField("c", "range", 6),
    KeyField("d", "optional", 3),
    KeyField("e", "exact", 2),
]


def _matches_field(kind: str, w: int, m: object, v: int) -> bool:
    if kind == "exact":
        return m == v
    if kind == "optional":
        return m is None or m == v
    if kind == "ternary":
        return v & m[1] == m[0]  # type: ignore[index]
    if kind == "lpm":
        mask = ((1 << m[1]) - 1) << (w - m[1])  # type: ignore[index]
        return v & mask == m[0]  # type: ignore[index]
    return m[0] <= v <= m[1]  # type: ignore[index]


def _reference(entries: list[Entry], key: tuple[int, ...]) -> Entry | None:
    best = None
    for e in entries:  # insertion order: strict '>' keeps the earliest on ties
        if all(
            _matches_field(k.match_kind, k.width, m, v)
            for k, m, v in zip(KEYS, e.matches, key, strict=True)
        ):
            if best is None or e.priority > best.priority:
                best = e
    return best


mask6 = st.sampled_from([0, 0x3F, 0x3C, 0x30, 0x0F])
ternary6 = st.tuples(st.integers(0, 63), mask6).map(lambda vm: (vm[0] & vm[1], vm[1]))
lpm6 = st.integers(0, 6).flatmap(
    lambda p: st.integers(0, 63).map(lambda v: (v & (((1 << p) - 1) << (6 - p)), p))
)
range6 = st.one_of(
    st.just((0, 63)),
    st.tuples(st.integers(0, 63), st.integers(0, 63)).map(lambda r: (min(r), max(r))),
)
opt3 = st.one_of(st.none(), st.integers(0, 7))
match_st = st.tuples(ternary6, lpm6, range6, opt3, st.integers(0, 3))
entry_st = st.tuples(match_st, st.integers(1, 4))
key_st = st.tuples(
    st.integers(0, 63), st.integers(0, 63), st.integers(0, 63), st.integers(0, 7), st.integers(0, 3)
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(entry_st, max_size=40),
    st.lists(st.integers(0, 39), max_size=8),
    st.lists(key_st, min_size=1, max_size=30),
)
def test_tuple_space_lookup_agrees_with_brute_force(entries, deletions, keys) -> None:
    t = Table("prop", KEYS, 100, "miss")
    for matches, prio in entries:
        try:
            t.add(Entry(matches, "a", (), priority=prio))
        except TableError:
            pass  # duplicate key+priority drawn twice
    live = t.entries()
    for i in deletions:
        if i < len(live) and live[i].handle in {e.handle for e in t.entries()}:
            t.delete(live[i].handle)
    remaining = t.entries()
    for key in keys:
        assert t.lookup(key) is _reference(remaining, key)


@settings(max_examples=60, deadline=None)
@given(st.lists(lpm6, max_size=30), st.lists(st.integers(0, 63), min_size=1, max_size=20))
def test_lpm_lookup_agrees_with_brute_force_longest_prefix(prefixes, keys) -> None:
    t = Table("lpm6", [KeyField("b", "lpm", 6)], 100, "miss")
    for p in set(prefixes):
        t.add(Entry((p,), "a", ()))
    for k in keys:
        cands = [e for e in t.entries() if _matches_field("lpm", 6, e.matches[0], k)]
        want = max(cands, key=lambda e: e.matches[0][1]) if cands else None
        assert t.lookup((k,)) is want
