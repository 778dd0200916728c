"""The history checkers themselves: histories that must be flagged and ones that must pass
(``hosts/kv/linearizability.py``, ``hosts/consensus/log_check.py``)."""

from __future__ import annotations

import math
import random

import pytest

from hosts.consensus.log_check import Ack, check_log
from hosts.consensus.log_wire import NOOP, Entry
from hosts.kv.linearizability import Op, Result, by_versions, check, check_key


def w(tag: int, version: int, s: float, e: float, key: int = 1) -> Op:
    return Op(key=key, write=True, tag=tag, version=version, start=s, end=e)


def r(value: int, version: int, s: float, e: float, key: int = 1, whole: bool = True) -> Op:
    return Op(key=key, write=False, tag=0, version=version, start=s, end=e, value=value,
              whole=whole)  # fmt: skip


# -- key-value linearizability -----------------------------------------------------------------
# Every case runs twice: decided by the versions writes returned, and by the general search.


@pytest.fixture(params=[False, True], ids=["by_versions", "search"])
def search(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def lin(ops: list[Op], search: bool) -> Result:
    return check(ops, search=search)


def test_read_after_completed_write_returning_the_older_value_is_a_violation(search):
    res = lin([w(10, 1, 0, 1), w(20, 2, 2, 3), r(10, 1, 4, 5)], search)
    assert not res.ok
    assert "saw version 1 after version 2" in res.violations[0]


def test_read_concurrent_with_a_write_may_return_either_value(search):
    assert lin([w(10, 1, 0, 1), w(20, 2, 2, 6), r(10, 1, 3, 4)], search).ok
    assert lin([w(10, 1, 0, 1), w(20, 2, 2, 6), r(20, 2, 3, 4)], search).ok


def test_read_older_than_an_earlier_read_is_a_violation(search):
    # the write is concurrent with both reads, but once a read saw it a later one may not undo it
    assert not lin([w(20, 1, 0, 10), r(20, 1, 1, 2), r(0, 0, 3, 4)], search).ok
    assert lin([w(20, 1, 0, 10), r(0, 0, 1, 2), r(20, 1, 3, 4)], search).ok


def test_value_no_write_wrote_and_torn_value_are_violations(search):
    assert not lin([w(10, 1, 0, 1), r(11, 1, 2, 3)], search).ok
    assert not lin([w(10, 1, 0, 1), r(10, 1, 2, 3, whole=False)], search).ok
    assert not lin([r(5, 0, 0, 1)], search).ok  # the initial value is 0


def test_two_writes_with_one_version_are_a_violation(search):
    assert not lin([w(10, 1, 0, 1), w(20, 1, 2, 3)], search).ok


def test_unanswered_write_may_take_effect_late_or_never(search):
    lost = w(10, 0, 0, math.inf)
    assert lin([lost, r(0, 0, 1, 2), r(10, 1, 3, 4)], search).ok  # took effect between the reads
    assert lin([lost, r(0, 0, 5, 6)], search).ok  # never took effect
    assert not lin([lost, r(10, 1, 1, 2), r(0, 0, 3, 4)], search).ok  # and cannot be undone


def test_keys_are_checked_apart_and_the_failing_key_is_named(search):
    res = lin([w(10, 1, 0, 1, key=3), r(10, 1, 2, 3, key=3), w(7, 1, 0, 1, key=4),
               r(0, 0, 2, 3, key=4)], search)  # fmt: skip
    assert res.keys == 2 and len(res.violations) == 1
    assert res.violations[0].startswith("key 4:")


def simulated_history(n: int, clients: int, seed: int) -> list[Op]:
    """A linearizable history: each op takes effect at an instant inside a random interval,
    several clients overlapping, three keys."""
    rng = random.Random(seed)
    state: dict[int, tuple[int, int]] = {}
    ops = []
    t = [0.0] * clients
    for i in range(n):
        c = rng.randrange(clients)
        key = rng.randrange(3)
        s = t[c] + rng.random()
        at = s + rng.random()
        e = at + rng.random()
        t[c] = s  # pipelined: the next op may start before this one ends
        ops.append((at, c, key, rng.random() < 0.3, i, s, e))
    ops.sort()
    out = []
    for _, c, key, is_write, i, s, e in ops:
        ver, val = state.get(key, (0, 0))
        if is_write:
            state[key] = (ver + 1, 1000 + i)
            out.append(Op(key, True, 1000 + i, ver + 1, s, e, client=c))
        else:
            out.append(Op(key, False, 0, ver, s, e, value=val, client=c))
    return out


def test_thousands_of_overlapping_operations_pass_and_one_stale_read_among_them_is_found(search):
    ops = simulated_history(3000, clients=6, seed=1)
    assert lin(ops, search).ok
    # make the last read of key 0 return the initial value although writes completed before
    last_read = max((o for o in ops if o.key == 0 and not o.write), key=lambda o: o.start)
    assert any(o.write and o.end < last_read.start for o in ops if o.key == 0)
    bad = [o if o is not last_read else r(0, 0, o.start, o.end, key=0) for o in ops]
    assert not check_key([o for o in bad if o.key == 0], search)


def test_versions_decide_unless_a_version_belongs_to_an_unrevealed_unanswered_write():
    lost = w(10, 0, 0, math.inf)
    assert by_versions([lost, r(10, 1, 1, 2)]) is True  # the read revealed its place
    assert by_versions([lost, w(20, 2, 1, 2)]) is None  # version 1 is lost's, unseen
    assert lin([lost, w(20, 2, 1, 2), r(20, 2, 3, 4)], False).ok  # the search decides


# -- replicated log ----------------------------------------------------------------------------

A, B, C = Entry(0, 1, b"c0-0"), Entry(1, 7, b"c1-0"), Entry(0, 2, b"c0-1")
ACKS = [Ack(0, 1, b"c0-0", 0), Ack(1, 7, b"c1-0", 1), Ack(0, 2, b"c0-1", 2)]


def test_one_order_and_every_acknowledged_append_once_passes():
    res = check_log([[A, B, C], [A, B, C], [A, B]], ACKS, issued=[(0, 1), (1, 7), (0, 2)])
    assert res.ok and res.entries == 3 and res.acked == 3


def test_repeated_request_and_noop_are_not_duplicates():
    assert check_log([[A, NOOP, B, A, C]] * 3, [Ack(0, 1, b"c0-0", 0), Ack(0, 2, b"c0-1", 4)]).ok


def test_replicas_in_different_orders_are_flagged():
    res = check_log([[A, B, C], [A, C, B]], [])
    assert not res.ok and "replicas 0 and 1 differ at index 1" in res.violations[0]


def test_acknowledged_append_missing_from_every_log_is_flagged():
    res = check_log([[A, B], [A, B]], ACKS)
    assert not res.ok
    assert any("acknowledged but is in no log" in v for v in res.violations)


def test_same_append_under_two_request_ids_is_flagged_as_a_duplicate():
    twice = Entry(0, 3, b"c0-0")  # client 0's first append again, under a new request id
    res = check_log([[A, B, twice, C]] * 2, ACKS)
    assert any("in the log 2 times" in v for v in res.violations)


def test_commit_index_holding_another_entry_is_flagged():
    res = check_log([[B, A, C]] * 2, ACKS)
    assert any("committed at index 0, which holds (1, 7," in v for v in res.violations)


def test_entry_no_client_sent_is_flagged():
    res = check_log([[A, B, C]], ACKS, issued=[(0, 1), (1, 7)])
    assert res.violations == ["entry (0, 2, 63302d31) is no client's request"]
