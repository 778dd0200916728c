"""Jobs persisted in SQLite, so that a controller restart keeps them.

Example::

    store = JobStore("run/controller.db")
    store.add(job)
    store.jobs()            # every admitted job, by id
    store.remove(job.job_id)

One row per job; its workers and its kind's parameters are JSON columns (they are only
ever read with their job). ``PRAGMA user_version`` records the schema version; a database
of an older version is migrated in place when opened (version 1 had no kinds: its jobs
are NetReduce jobs).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from pathlib import Path
from typing import Any

from controller.jobs.job import Job, Worker
from controller.jobs.memory_manager import Region

DEFAULT_DB = Path("run/controller.db")
SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id        INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL,
    device_id     INTEGER NOT NULL,
    window        INTEGER NOT NULL,
    slots         INTEGER NOT NULL,
    region_offset INTEGER NOT NULL,
    region_size   INTEGER NOT NULL,
    quorum        INTEGER NOT NULL,
    mcast_grp     INTEGER NOT NULL,
    agg_ip        TEXT    NOT NULL,
    agg_mac       TEXT    NOT NULL,
    workers       TEXT    NOT NULL,
    created_at    REAL    NOT NULL,
    kind          TEXT    NOT NULL DEFAULT 'netreduce',
    params        TEXT    NOT NULL DEFAULT '{}'
)
"""
_TOKENS = (  # created when first used, like ``counters``: older databases need no migration
    "CREATE TABLE IF NOT EXISTS job_tokens"
    " (job_id INTEGER PRIMARY KEY, digest TEXT NOT NULL, created_at REAL NOT NULL)"
)
_MIGRATIONS = {  # from version -> statements that bring it to version + 1
    1: (
        "ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'netreduce'",
        "ALTER TABLE jobs ADD COLUMN params TEXT NOT NULL DEFAULT '{}'",
    ),
}
_COLUMNS = (
    "job_id, name, device_id, window, slots, region_offset, region_size, quorum,"
    " mcast_grp, agg_ip, agg_mac, workers, created_at, kind, params"
)


class StoreError(Exception):
    """The database cannot be used (unreadable, or written by a newer controller)."""


class JobStore:
    """SQLite table of admitted jobs (thread-safe: one connection behind a lock)."""

    def __init__(self, path: str | Path = DEFAULT_DB) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False)
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"{path}: written by a newer controller (schema {version})")
            with self._db:
                if version == 0:  # a new database
                    self._db.execute(_SCHEMA)
                for v in range(version or SCHEMA_VERSION, SCHEMA_VERSION):
                    for statement in _MIGRATIONS[v]:
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{path}: {err}") from None

    def next_run(self) -> int:
        """One more start of the controller: its number (1, 2, ...), kept in the store."""
        with self._lock, self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER)"
            )
            self._db.execute(
                "INSERT INTO counters VALUES ('runs', 1)"
                " ON CONFLICT(name) DO UPDATE SET value = value + 1"
            )
            row = self._db.execute("SELECT value FROM counters WHERE name = 'runs'").fetchone()
        return int(row[0])

    def master_key(self) -> bytes:
        """The controller's secret (32 random bytes, made once, kept in the store): the
        jobs' control-channel keys are derived from it (``controller/api/tenants.py``)."""
        with self._lock, self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL)"
            )
            self._db.execute(
                "INSERT INTO secrets VALUES ('master', ?) ON CONFLICT(name) DO NOTHING",
                (secrets.token_bytes(32),),
            )
            row = self._db.execute("SELECT value FROM secrets WHERE name = 'master'").fetchone()
        return bytes(row[0])

    def set_token(self, job_id: int, digest: str, created_at: float) -> None:
        """The hash of the token that owns job ``job_id`` admitted at ``created_at``
        (``controller/api/tenants.py``); replaces the token of an earlier job of that id."""
        with self._lock, self._db:
            self._db.execute(_TOKENS)
            self._db.execute(
                "INSERT OR REPLACE INTO job_tokens VALUES (?, ?, ?)", (job_id, digest, created_at)
            )

    def token(self, job_id: int) -> tuple[str, float] | None:
        """(hash, admission time) of job ``job_id``'s token, if it has one."""
        with self._lock, self._db:
            self._db.execute(_TOKENS)
            row = self._db.execute(
                "SELECT digest, created_at FROM job_tokens WHERE job_id = ?", (job_id,)
            ).fetchone()
        return (str(row[0]), float(row[1])) if row else None

    def remove_token(self, job_id: int) -> None:
        with self._lock, self._db:
            self._db.execute(_TOKENS)
            self._db.execute("DELETE FROM job_tokens WHERE job_id = ?", (job_id,))

    # -- memory taken back from jobs, not cleared on the switch yet (controller/sched) ----

    def _clearing_table(self) -> None:
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS clearing (key INTEGER PRIMARY KEY AUTOINCREMENT,"
            " device_id INTEGER NOT NULL, kind TEXT NOT NULL, job_id INTEGER NOT NULL,"
            " regions TEXT NOT NULL)"
        )

    def add_clearing(self, device_id: int, kind: str, job_id: int, regions: list[Region]) -> int:
        """Memory of ``kind``'s pool taken back from ``job_id``, to be cleared: its key."""
        spans = json.dumps([[r.offset, r.size] for r in regions])
        with self._lock, self._db:
            self._clearing_table()
            cur = self._db.execute(
                "INSERT INTO clearing (device_id, kind, job_id, regions) VALUES (?, ?, ?, ?)",
                (device_id, kind, job_id, spans),
            )
        return int(cur.lastrowid or 0)

    def remove_clearing(self, key: int) -> None:
        with self._lock, self._db:
            self._clearing_table()
            self._db.execute("DELETE FROM clearing WHERE key = ?", (key,))

    def clearings(self) -> list[tuple[int, int, str, int, list[Region]]]:
        """Every memory still to be cleared: (key, device id, kind, job id, regions)."""
        with self._lock, self._db:
            self._clearing_table()
            rows = self._db.execute(
                "SELECT key, device_id, kind, job_id, regions FROM clearing ORDER BY key"
            ).fetchall()
        return [
            (int(k), int(d), str(kind), int(j), [Region(o, n) for o, n in json.loads(spans)])
            for k, d, kind, j, spans in rows
        ]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, job: Job) -> None:
        workers = json.dumps([[w.worker_id, w.port, w.ip, w.mac] for w in job.workers])
        row = (
            job.job_id,
            job.name,
            job.device_id,
            job.window,
            job.slots,
            job.region.offset,
            job.region.size,
            job.quorum,
            job.mcast_grp,
            job.agg_ip,
            job.agg_mac,
            workers,
            job.created_at,
            job.kind,
            json.dumps(dict(job.params)),
        )
        with self._lock, self._db:
            self._db.execute(f"INSERT INTO jobs ({_COLUMNS}) VALUES ({','.join('?' * 15)})", row)

    def update_region(self, job_id: int, region: Region, window: int) -> None:
        """A scheduled job's new region and window (``controller/sched/scheduler.py``)."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE jobs SET region_offset = ?, region_size = ?, window = ? WHERE job_id = ?",
                (region.offset, region.size, window, job_id),
            )

    def update_params(self, job_id: int, params: dict[str, Any]) -> None:
        """A job's kind-specific parameters as they are now (a serene job's current mode)."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE jobs SET params = ? WHERE job_id = ?", (json.dumps(params), job_id)
            )

    def remove(self, job_id: int) -> bool:
        with self._lock, self._db:
            cur = self._db.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,))
        return cur.rowcount > 0

    def get(self, job_id: int) -> Job | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
        return _job(row) if row else None

    def jobs(self) -> list[Job]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM jobs ORDER BY job_id").fetchall()
        return [_job(r) for r in rows]


def _job(row: tuple) -> Job:
    (
        job_id,
        name,
        device_id,
        window,
        slots,
        offset,
        size,
        quorum,
        mcast_grp,
        agg_ip,
        agg_mac,
        workers,
        created_at,
        kind,
        params,
    ) = row
    return Job(
        job_id=job_id,
        name=name,
        device_id=device_id,
        window=window,
        slots=slots,
        region=Region(offset, size),
        quorum=quorum,
        mcast_grp=mcast_grp,
        agg_ip=agg_ip,
        agg_mac=agg_mac,
        workers=tuple(Worker(*w) for w in json.loads(workers)),
        created_at=created_at,
        kind=kind,
        params=json.loads(params),
    )
