"""The cold keys' reducers (``hosts/ask/cold_reducers.py``) over the loopback, each mapper a
thread: every key is owned by exactly one reducer, and the switch's share (the hot keys)
plus the owners' results are the exact totals, also where the cold tail is nearly all of
the keys; a sender without the job's key, or naming another mapper, changes nothing."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from hosts.ask import control  # noqa: E402
from hosts.ask.cold_reducers import (  # noqa: E402
    MAC,
    NONCE,
    ColdReducers,
    merged,
    owners,
    split_hot_cold,
)


@pytest.fixture(autouse=True)
def free_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reducer ``w`` listens on ``COLD_PORT + w``: a base with a few free ports after it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
    monkeypatch.setattr(control, "COLD_PORT", base)


def zipf_partials(seed: int, rows: int, keys: int, alpha: float = 1.2) -> Any:
    """One mapper's partial sums ``k``, ``s``, ``c`` of ``rows`` rows, keys Zipf over
    ``keys`` ints (negative ones too), values in [-1000, 1000]."""
    rng = np.random.default_rng(seed)
    k = (rng.zipf(alpha, rows) % keys) - keys // 3
    v = rng.integers(-1000, 1001, rows)
    t = pa.table({"k": k, "v": v}).group_by("k").aggregate([("v", "sum"), ("v", "count")])
    return pa.table({"k": t.column("k"), "s": t.column("v_sum"), "c": t.column("v_count")})


def exchange(parts: list[list[Any]], key: bytes | None, budget: int, threshold: int
             ) -> tuple[list[Any], Any, list[dict[str, Any]]]:  # fmt: skip
    """Mapper ``w`` (a thread) splits each of ``parts[w]``'s tables into hot and cold, routes
    the cold keys to their owners and gathers its own; returns each owner's result, the hot
    keys' sums (what the switch would add up) and each reducer's figures."""
    n = len(parts)
    ips = ["127.0.0.1"] * n
    results: list[Any] = [None] * n
    stats: list[dict[str, Any]] = [{}] * n
    hot: list[Any] = []
    errors: list[BaseException] = []

    def mapper(w: int) -> None:
        try:
            with ColdReducers(w, ips, timeout=30) as cold:
                cold.keyed(key)
                for t in parts[w]:
                    h, c = split_hot_cold(t, budget, threshold)
                    hot.append(h)
                    cold.route(c)
                cold.finish()
                results[w] = cold.gathered()
                stats[w] = cold.stats
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=mapper, args=(w,)) for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a mapper hung"
    if errors:
        raise errors[0]
    return results, merged(hot), stats


def totals(tables: list[Any]) -> dict[int, tuple[int, int]]:
    t = merged([x for x in tables if x is not None and x.num_rows])
    k, s, c = (t.column(x).to_pylist() for x in "ksc")
    return dict(zip(k, zip(s, c, strict=True), strict=True))


@pytest.mark.parametrize(("keys", "budget"), [(300, 64), (50_000, 16)])
def test_owners_split_the_cold_keys_and_every_key_is_counted_once(keys: int, budget: int) -> None:
    # three mappers, two tables each (a key may be hot in one table and cold in another)
    parts = [[zipf_partials(10 * w + i, 20_000, keys) for i in range(2)] for w in range(3)]
    want = totals([t for ts in parts for t in ts])
    results, hot, stats = exchange(parts, bytes(range(32)), budget, threshold=2)
    owned = [set(r.column("k").to_pylist()) if r is not None else set() for r in results]
    assert sum(map(len, owned)) == len(set().union(*owned)), "a key with two owners"
    for w, mine in enumerate(owned):  # each reducer holds only the keys that hash to it
        assert set(owners(pa.array(sorted(mine), pa.int64()), 3).tolist()) <= {w}
    assert totals([*results, hot]) == want
    cold_keys = sum(len(o) for o in owned)
    if keys == 50_000:  # the cold tail is nearly every key: the case the split is for
        assert cold_keys > 0.9 * len(want) and all(len(o) > 0.25 * cold_keys for o in owned)
    assert sum(s["keys_out"] for s in stats) == sum(s["keys_in"] for s in stats) > 0
    assert all(s["refused"] == 0 for s in stats)


def test_one_mapper_keeps_its_cold_keys_and_no_cold_key_means_no_rows() -> None:
    t = zipf_partials(1, 5000, 2000)
    (mine,), hot, _ = exchange([[t]], None, 10, 2)
    assert totals([mine, hot]) == totals([t])
    (nothing, _), _, _ = exchange([[t.slice(0, 3)], []], None, 100, 1)
    assert nothing is None, "every key went through the switch: the reducer holds none"


def test_a_sender_without_the_jobs_key_is_refused_and_changes_nothing() -> None:
    key = b"k" * 32
    ips = ["127.0.0.1"] * 2
    t = pa.table({"k": pa.array([5, 6, 7], pa.int64()), "s": [1, 2, 3], "c": [1, 1, 1]})
    with ColdReducers(0, ips, timeout=30) as owner:
        owner.keyed(key)
        for claimed in (1, 0, 9):  # mapper 1 with a wrong MAC; itself; no such mapper
            with socket.create_connection(("127.0.0.1", control.COLD_PORT)) as s:
                s.recv(NONCE)
                data = b"\xff" * 40
                s.sendall(struct.pack("!I", claimed) + struct.pack("!Q", len(data)) + data
                          + struct.pack("!Q", 0) + bytes(MAC))  # fmt: skip
                try:
                    s.recv(1)  # the owner closes it (a reset: bytes it did not read)
                except ConnectionResetError:
                    pass
        with ColdReducers(1, ips, timeout=30) as honest:
            honest.keyed(key)
            honest.route(t)
            honest.finish()
            owner.finish()
            got = owner.gathered()  # mapper 1's keys that mapper 0 owns, once
    assert owner.stats["refused"] == 3
    mine = {k: s for k, s, o in zip([5, 6, 7], [1, 2, 3], owners(t.column("k"), 2).tolist(),
                                    strict=True) if o == 0}  # fmt: skip
    held = {}
    if got is not None:
        held = dict(zip(got.column("k").to_pylist(), got.column("s").to_pylist(), strict=True))
    assert held == mine


def test_a_closed_reducer_frees_its_port_for_the_next_job() -> None:
    # a Spark Python worker is reused: the next job's task binds the same port at once
    for _ in range(3):
        ColdReducers(0, ["127.0.0.1"] * 2, timeout=5).close()


def test_a_port_taken_is_a_one_line_error() -> None:
    with ColdReducers(0, ["127.0.0.1"] * 2, timeout=5), pytest.raises(OSError, match="port"):
        ColdReducers(0, ["127.0.0.1"] * 2, timeout=5)
