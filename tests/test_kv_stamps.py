"""The key-value cache's fill stamps: a reply can fill only the entry generation its request
passed, never another entry's or one given after a restart (docs/protocol.md, "Key-value
cache", the consistency argument's case 2). In-process p4sim, the controller's own code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.api_client import ControllerApi
from controller.jobs.stamps import Stamps
from controller.jobs.store import JobStore
from controller.systems import kv_cache
from tests.test_controller_daemon import observe, start_daemon
from tests.test_kv_cache import INC_P4, Bench
from topologies.local_switch import LocalSwitch, PipelineFiles, compile_pipeline
from wire.header import KV_ANSWERED_BY_SWITCH, Op, unpack


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    files = compile_pipeline(INC_P4, tmp_path_factory.mktemp("kvstamps"))
    with LocalSwitch(device_id=0) as local:
        b = Bench(local, files)
        try:
            yield b
        finally:
            b.close()


def move(bench: Bench, key: int, entry: int) -> None:
    """The controller evicts ``key``, and at a later refresh caches it at ``entry``."""
    job = bench.jobs[1]
    bench.run(kv_cache.apply_plan(bench.conn, job, kv_cache.Plan((key,), ())))
    bench.run(kv_cache.apply_plan(bench.conn, job, kv_cache.Plan((), ((key, entry),))))


def restart(bench: Bench) -> None:
    """What a switch restart does to the generations: all 0 again."""
    bench.run(bench.conn.fill_register(kv_cache.GEN, range(4, 8), 0))


def test_a_repeated_writes_stored_reply_fills_no_entry(bench: Bench) -> None:
    """The server answers a repeat of a write with the reply it stored, which holds the
    write's version; by then another client's write may have completed, and the entry may
    be a new one stamped on the repeat's way: that reply must fill nothing."""
    key = 90
    bench.run(kv_cache.apply_plan(bench.conn, bench.jobs[1], kv_cache.Plan((), ((key, 4),))))
    first = bench.request(1, 1, Op.KV_WRITE, key, [1] * 8, psn=300)
    bench.reply_of(1, first[0][1])  # applied (version 1); the reply is lost
    bench.round_trip(1, 2, Op.KV_WRITE, key, [2] * 8, psn=301)  # version 2 completes
    move(bench, key, 5)
    again = bench.request(1, 1, Op.KV_WRITE, key, [1] * 8, psn=300)  # stamped again
    bench.sw.send(3, bench.reply_of(1, again[0][1]))  # the stored reply: version 1
    for p in (302, 303):
        _, value = bench.round_trip(1, 2, Op.KV_READ, key, psn=p)
        assert value == [2] * 8
    bench.run(kv_cache.apply_plan(bench.conn, bench.jobs[1], kv_cache.Plan((key,), ())))


@pytest.mark.parametrize("switch_restarts", [False, True])
def test_a_reply_delayed_across_an_eviction_never_fills_the_keys_next_entry(
    bench: Bench, switch_restarts: bool
) -> None:
    """A read of a cached key (entry still empty) is stamped, its reply delayed; a write
    completes; the key is evicted and cached again at an entry never used (or after the
    switch restarted, its generations at 0 again): the delayed reply must not fill it."""
    key = 70 + int(switch_restarts)
    first, second = (4, 5) if switch_restarts else (6, 7)
    old, new = [1] * 8, [2] * 8
    psn = 400 + 100 * int(switch_restarts)
    bench.round_trip(1, 1, Op.KV_WRITE, key, old, psn=psn)
    if switch_restarts:
        restart(bench)
    plan = kv_cache.Plan((), ((key, first),))
    bench.run(kv_cache.apply_plan(bench.conn, bench.jobs[1], plan))
    read = bench.request(1, 2, Op.KV_READ, key, psn=psn + 1)
    assert [p for p, _ in read] == [3]  # stamped, to the server
    delayed = bench.reply_of(1, read[0][1])
    h, _ = bench.round_trip(1, 1, Op.KV_WRITE, key, new, psn=psn + 2)
    assert h.epoch != KV_ANSWERED_BY_SWITCH
    if switch_restarts:
        restart(bench)
    move(bench, key, second)
    back = bench.sw.send(3, delayed)  # the old version reaches the new entry
    assert [p for p, _ in back] == [2] and unpack(back[0][1][42:])[0].bitmap < h.bitmap
    for p in (psn + 3, psn + 4):  # every later read gets the completed write
        _, value = bench.round_trip(1, 1, Op.KV_READ, key, psn=p)
        assert value == new
    bench.run(kv_cache.apply_plan(bench.conn, bench.jobs[1], kv_cache.Plan((key,), ())))


def test_stamps_never_repeat_across_controller_restarts(tmp_path: Path) -> None:
    seen: list[int] = []
    for _ in range(3):  # three runs of a controller on one store
        store = JobStore(tmp_path / "controller.db")
        stamps = Stamps()
        stamps.attach(store.next_run)
        seen += [stamps.next() for _ in range(50)]
        store.close()
    assert len(set(seen)) == len(seen) and 0 not in seen


def test_a_restarted_daemon_recovers_its_cache_job_and_never_stamps_an_entry_again(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    """Three runs of the daemon on one store and one switch: the cache job admitted in the
    first run is recovered from SQLite by the next ones, and each run caches new keys: no
    generation the switch was given repeats one an earlier run gave."""
    db = tmp_path / "controller.db"
    given: list[int] = []
    job = 0
    for run in range(3):
        daemon = start_daemon(switch, files, db)
        try:
            api = ControllerApi(daemon.url)
            if run == 0:
                job = int(api.submit({"kind": "kv_cache", "workers": 2, "cache_size": 4})["job_id"])
            assert [j["job_id"] for j in api.jobs()] == [job]  # recovered, not re-submitted
            manager = daemon.manager
            assert manager is not None
            conn, kjob = manager.switches[0], manager.get(job)
            keys = [100 * (run + 1) + k for k in range(kjob.region.size)]
            daemon.call(kv_cache.cache_keys(conn, kjob, keys))
            cells = range(kjob.region.offset, kjob.region.end)
            given += observe(switch, (kv_cache.GEN, cells))
        finally:
            daemon.stop()
    assert 0 not in given and len(set(given)) == len(given), given
