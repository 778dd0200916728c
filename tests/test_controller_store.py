"""Jobs persist in SQLite across a controller restart (real files in tmp_path)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from controller.job_manager import JobManager
from controller.jobs.job import Job, Worker
from controller.jobs.memory_manager import Region
from controller.jobs.store import JobStore, StoreError


def make_job(job_id: int, offset: int, size: int) -> Job:
    workers = tuple(
        Worker(i, i + 1, f"10.0.0.{i + 1}", f"00:00:00:00:00:0{i + 1}") for i in range(3)
    )
    return Job(
        job_id=job_id,
        name=f"j{job_id}",
        device_id=0,
        window=size,
        slots=32,
        region=Region(offset, size),
        quorum=3,
        mcast_grp=job_id,
        agg_ip="10.0.0.4",
        agg_mac="00:00:00:00:00:04",
        workers=workers,
        created_at=1234.5,
    )


def test_jobs_survive_closing_and_reopening_the_database(tmp_path: Path) -> None:
    db = tmp_path / "run" / "controller.db"
    store = JobStore(db)
    jobs = [make_job(1, 0, 8), make_job(2, 8, 16)]
    for job in jobs:
        store.add(job)
    store.close()

    again = JobStore(db)
    assert again.jobs() == jobs
    assert again.get(2) == jobs[1]
    again.close()


def test_removed_job_stays_removed_after_restart(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = JobStore(db)
    store.add(make_job(1, 0, 8))
    store.add(make_job(2, 8, 8))
    assert store.remove(1)
    assert not store.remove(1)
    store.close()
    assert [j.job_id for j in JobStore(db).jobs()] == [2]


def test_same_job_id_cannot_be_stored_twice(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "c.db")
    store.add(make_job(1, 0, 8))
    with pytest.raises(sqlite3.IntegrityError):
        store.add(make_job(1, 8, 8))


def test_database_from_a_newer_controller_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 99")
    con.close()
    with pytest.raises(StoreError, match="newer controller"):
        JobStore(db)


def test_garbage_file_is_reported_not_crashed_on(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=str(db.name)):
        JobStore(db)


def test_restarted_manager_keeps_stored_regions_allocated(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = JobStore(db)
    store.add(make_job(1, 0, 8))
    store.add(make_job(3, 8, 4))
    store.close()

    no_switch: Any = object()  # the constructor only reads the store
    manager = JobManager({0: no_switch}, JobStore(db), pool_size=64)
    assert [j.job_id for j in manager.jobs()] == [1, 3]
    segs = manager.memory_view()[0]["segments"]
    assert [(s["offset"], s["size"], s["job_id"]) for s in segs] == [
        (0, 8, 1),
        (8, 4, 3),
        (12, 52, None),
    ]
    assert manager._free_job_id() == 2  # ids are reused from the lowest free one


def test_database_of_schema_1_is_migrated_and_its_jobs_are_netreduce_jobs(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.execute(
        "CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, name TEXT NOT NULL, device_id INTEGER"
        " NOT NULL, window INTEGER NOT NULL, slots INTEGER NOT NULL, region_offset INTEGER NOT"
        " NULL, region_size INTEGER NOT NULL, quorum INTEGER NOT NULL, mcast_grp INTEGER NOT"
        " NULL, agg_ip TEXT NOT NULL, agg_mac TEXT NOT NULL, workers TEXT NOT NULL, created_at"
        " REAL NOT NULL)"
    )
    con.execute(
        "INSERT INTO jobs VALUES (3, 'old', 0, 8, 32, 16, 8, 2, 3, '10.0.0.3',"
        " '00:00:00:00:00:03', '[[0, 1, \"10.0.0.1\", \"00:00:00:00:00:01\"]]', 1.5)"
    )
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    store = JobStore(db)
    (job,) = store.jobs()
    assert (job.job_id, job.kind, dict(job.params), job.region) == (
        3,
        "netreduce",
        {},
        Region(16, 8),
    )
    store.add(make_job(4, 0, 8))
    store.close()
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 2


def test_kind_and_params_of_a_job_survive_a_restart(tmp_path: Path) -> None:
    import dataclasses

    store = JobStore(tmp_path / "c.db")
    job = dataclasses.replace(make_job(1, 0, 8), kind="netreduce", params={"mode": [1, "x"]})
    store.add(job)
    store.close()
    assert JobStore(tmp_path / "c.db").jobs() == [job]
