"""Key-value cache jobs: the switch answers reads of a storage server's hot keys (kv_cache.p4).

Example:
    >>> req = KvCacheRequest(kind="kv_cache", workers=2, cache_size=16)
    >>> KvCache().region_size(req), req.server_port(), req.aggregation_address()
    (16, 3, ('10.0.0.3', '00:00:00:00:00:03'))

A job owns ``cache_size`` entries of the switch's key-value cache (pool ``kv``,
``KV_CACHE_SIZE`` entries). Its hosts: ``workers`` clients (``hosts/kv/store.py``,
``KvClient``) and one storage server at the aggregation address, on ``server_port`` (by
default host ``h{N+1}`` on port ``N+1``). Admission installs ``kv_server`` (the only port
whose replies the switch believes), ``kv_clients``, then ``kv_jobs`` last.

Which keys are hot is decided here, every ``refresh_ms`` (``JobKind.tick``): the switch
counts reads answered per entry (``kv_hits``) and, for uncached keys, reads in a two-row
count sketch whose buckets remember their most read key (``kv_cand_key``/``kv_cand_count``).
The ``cache_size`` keys read most since the last refresh (cached keys win ties) get the
entries; a key that loses its entry has its ``kv_keys`` entry deleted first. A key given an
entry gets a new generation in ``kv_gen`` (``controller/jobs/stamps.py``: never one that
this or another entry had before, on this switch or before a restart of the switch or of
the controller) and an invalid, version-0 entry *before* its
``kv_keys`` entry exists: only replies to requests that pass the switch afterwards can fill
it (docs/protocol.md, "Key-value cache", the consistency argument). Then the counters of
the job's range are zeroed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from finsy import P4RegisterEntry, P4TableAction, P4TableEntry, P4TableMatch
from pydantic import Field, model_validator

from controller.jobs.figures import Figure, JobStats
from controller.jobs.job import Job, JobRequest, Port
from controller.jobs.job_kinds import JobKind, register
from controller.jobs.memory_manager import Region
from controller.jobs.stamps import STAMPS
from controller.p4rt.p4runtime_client import SwitchConnection, table_entry
from wire.header import KV_CACHE_SIZE, KV_VALUE_WORDS, SLOTS

log = logging.getLogger(__name__)

KV_POOL = "kv"
PREFIX = "IncIngress.kv_cache."
KV_JOBS = PREFIX + "kv_jobs"
KV_CLIENTS = PREFIX + "kv_clients"
KV_SERVER = PREFIX + "kv_server"
KV_KEYS = PREFIX + "kv_keys"
VALUE_REGISTERS = tuple(f"{PREFIX}kv_value_{w}" for w in range(1, KV_VALUE_WORDS + 1))
VERSION, VALID, GEN, HITS = (PREFIX + n for n in ("kv_version", "kv_valid", "kv_gen", "kv_hits"))
SKETCH = (PREFIX + "kv_sketch_a", PREFIX + "kv_sketch_b")
CAND_KEY, CAND_COUNT = PREFIX + "kv_cand_key", PREFIX + "kv_cand_count"
COUNTERS = (HITS, *SKETCH, CAND_KEY, CAND_COUNT)  # zeroed at every refresh


class KvCacheRequest(JobRequest):
    """A key-value cache in front of one storage server: ``workers`` clients."""

    kind: Literal["kv_cache"] = "kv_cache"
    cache_size: Annotated[int, Field(strict=True, ge=1, le=KV_CACHE_SIZE)] = 64
    server: Port | None = None  # the storage server's switch port (default: N+1)
    refresh_ms: Annotated[int, Field(strict=True, ge=10, le=600_000)] = 500
    min_reads: Annotated[int, Field(strict=True, ge=1, le=1 << 30)] = 2

    @model_validator(mode="after")
    def _server_is_not_a_client(self) -> KvCacheRequest:
        if self.server_port() in [w.port for w in self.worker_specs()]:
            raise ValueError(f"server: port {self.server_port()} is a client's port")
        return self

    def server_port(self) -> int:
        return self.server if self.server is not None else self.workers + 1


class KvCache(JobKind):
    name = "kv_cache"
    request = KvCacheRequest
    pool = KV_POOL
    pool_units = KV_CACHE_SIZE

    def __init__(self) -> None:
        self._next_refresh: dict[int, float] = {}

    def region_size(self, req: JobRequest) -> int:
        assert isinstance(req, KvCacheRequest)
        return req.cache_size

    def make_job(
        self, req: JobRequest, job_id: int, device_id: int, region: Region, created_at: float
    ) -> Job:
        assert isinstance(req, KvCacheRequest)
        server_ip, server_mac = req.aggregation_address()
        return Job(
            job_id=job_id,
            name=req.name or f"kv{job_id}",
            device_id=device_id,
            window=0,
            slots=SLOTS,
            region=region,
            quorum=0,
            mcast_grp=0,
            agg_ip=server_ip,
            agg_mac=server_mac,
            workers=tuple(req.worker_specs()),
            created_at=created_at,
            kind=self.name,
            params={
                "server_port": req.server_port(),
                "refresh_ms": req.refresh_ms,
                "min_reads": req.min_reads,
                "value_words": KV_VALUE_WORDS,
            },
        )

    async def clear(self, sw: SwitchConnection, region: Region) -> None:
        cells = range(region.offset, region.end)
        for name in (VALID, VERSION, *COUNTERS):
            await sw.fill_register(name, cells, 0)

    async def install(self, sw: SwitchConnection, job: Job, idempotent: bool = False) -> None:
        write = sw.upsert if idempotent else sw.insert
        await write([server_entry(job), *client_entries(job)])
        await write([job_entry(job)])

    async def uninstall(self, sw: SwitchConnection, job: Job) -> None:
        await sw.delete([job_key(job.job_id)], strict=False)
        await sw.delete([key_entry(job.job_id, k, 0) for k in await cached_keys(sw, job)], False)
        await sw.delete([server_entry(job), *client_entries(job)], strict=False)
        self._next_refresh.pop(job.job_id, None)

    async def installed(self, sw: SwitchConnection, job: Job) -> bool:
        return bool(await sw.read(job_key(job.job_id)))

    async def tick(self, sw: SwitchConnection, job: Job, now: float) -> None:
        due = self._next_refresh.get(job.job_id, 0.0)
        if now < due:
            return
        self._next_refresh[job.job_id] = now + job.params["refresh_ms"] / 1e3
        await refresh(sw, job)

    async def live_stats(self, sw: SwitchConnection, job: Job) -> JobStats:
        cached = await cached_keys(sw, job)
        hits = await read_cells(sw, HITS, job.region)
        figures = (
            Figure("cached_keys", len(cached), "keys the switch holds now", counter=False),
            Figure("switch_reads", sum(hits), "reads answered since the refresh", counter=False),
        )
        return JobStats(figures, {"cache": f"{len(cached)} of {job.region.size} entries"})


# -- table entries --------------------------------------------------------------------------


def job_entry(job: Job) -> P4TableEntry:
    return table_entry(
        KV_JOBS,
        {"hdr.inc.job_id": job.job_id},
        PREFIX + "set_kv_job",
        region_offset=job.region.offset,
        region_size=job.region.size,
        sketch_mask=sketch_mask(job.region.size),
    )


def sketch_mask(size: int) -> int:
    """The sketch uses the largest power of two of the job's entries (the switch cannot
    take a remainder by a run-time value).

    >>> sketch_mask(64), sketch_mask(100), sketch_mask(1)
    (63, 63, 0)
    """
    return (1 << (size.bit_length() - 1)) - 1


def job_key(job_id: int) -> P4TableEntry:
    return P4TableEntry(KV_JOBS, match=P4TableMatch({"hdr.inc.job_id": job_id}))


def server_entry(job: Job) -> P4TableEntry:
    match = {
        "hdr.inc.job_id": job.job_id,
        "standard_metadata.ingress_port": job.params["server_port"],
    }
    return table_entry(KV_SERVER, match, "NoAction")


def client_entries(job: Job) -> list[P4TableEntry]:
    return [
        table_entry(
            KV_CLIENTS,
            {
                "hdr.inc.job_id": job.job_id,
                "hdr.inc.worker_id": w.worker_id,
                "standard_metadata.ingress_port": w.port,
            },
            "NoAction",
        )
        for w in job.workers
    ]


def key_entry(job_id: int, key: int, index: int) -> P4TableEntry:
    match = {"hdr.inc.job_id": job_id, "hdr.inc_values.v00": key}
    return table_entry(KV_KEYS, match, PREFIX + "cached", entry=index)


async def cached_keys(sw: SwitchConnection, job: Job) -> dict[int, int]:
    """The job's cached keys as the switch holds them: key -> cache entry index."""
    out = {}
    for e in await sw.read(P4TableEntry(KV_KEYS)):
        match = dict(e.match or {})
        action = e.action
        if int(match["job_id"]) == job.job_id and isinstance(action, P4TableAction):
            out[int(match["v00"])] = int(action.args["entry"])
    return out


async def read_cells(sw: SwitchConnection, name: str, region: Region) -> list[int]:
    """Register ``name`` over ``region``."""
    return (await read_region(sw, (name,), region))[name]


def _over_thrift(sw: SwitchConnection) -> bool:
    from controller.p4rt.registers import ThriftRegisters

    return isinstance(sw.registers, ThriftRegisters)  # BMv2: no registers over P4Runtime


async def read_region(
    sw: SwitchConnection, names: Sequence[str], region: Region
) -> dict[str, list[int]]:
    """Registers ``names`` over ``region``: one P4Runtime read for all of them (BMv2: its
    Thrift interface, cell by cell)."""
    cells = range(region.offset, region.end)
    if _over_thrift(sw):
        return {n: [await sw.read_register(n, i) for i in cells] for n in names}
    by_id = {sw.register_name(n): n for n in names}
    got = await sw.read_many([P4RegisterEntry(n, index=i) for n in names for i in cells])
    out = {n: [0] * len(cells) for n in names}
    for e in got:
        name = by_id.get(sw.register_name(str(e.register_id)))
        if name is not None and e.index is not None and region.offset <= e.index < region.end:
            out[name][e.index - region.offset] = int(e.data or 0)
    return out


async def zero_cells(sw: SwitchConnection, cells: dict[str, list[int]]) -> None:
    """Write 0 to the given cells of each register, in one P4Runtime write."""
    if _over_thrift(sw):
        for name, idxs in cells.items():
            for i in idxs:
                await sw.write_register(name, i, 0)
        return
    entries = [P4RegisterEntry(n, index=i, data=0) for n, idxs in cells.items() for i in idxs]
    if entries:
        await sw.modify(entries)


# -- hot keys ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A refresh's decision: keys to evict, and (key, entry index) to insert."""

    evict: tuple[int, ...]
    insert: tuple[tuple[int, int], ...]


def plan(
    cached: dict[int, int],
    hits: Sequence[int],
    candidates: Iterable[tuple[int, int]],
    region: Region,
    min_reads: int,
) -> Plan:
    """Which keys hold the job's entries next: the most read (cached keys win ties).

    ``hits`` per entry of ``region``; ``candidates`` (key, estimated reads) of uncached keys.

    >>> plan({7: 0}, [1, 0], [(9, 5), (8, 3), (6, 1)], Region(0, 2), min_reads=2)
    Plan(evict=(7,), insert=((9, 0), (8, 1)))
    >>> plan({7: 0}, [4, 0], [(9, 4)], Region(0, 2), min_reads=2).insert
    ((9, 1),)
    """
    score: dict[int, tuple[int, int]] = {}
    for key, idx in cached.items():
        score[key] = (hits[idx - region.offset], 1)
    for key, count in candidates:
        if key not in cached and count >= min_reads:
            score[key] = max(score.get(key, (0, 0)), (count, 0))
    ranked = sorted(score, key=lambda k: (score[k], -k), reverse=True)[: region.size]
    keep = set(ranked)
    evict = tuple(sorted(k for k in cached if k not in keep))
    used = {idx for k, idx in cached.items() if k in keep}
    free = [i for i in range(region.offset, region.end) if i not in used]
    new = [k for k in ranked if k not in cached]
    return Plan(evict, tuple(zip(new, free, strict=False)))


async def refresh(sw: SwitchConnection, job: Job) -> Plan:
    """Read the job's counters, move the cache to the hottest keys, zero the counters."""
    region = job.region
    cached = await cached_keys(sw, job)
    now = await read_region(sw, COUNTERS, region)
    cands = zip(now[CAND_KEY], now[CAND_COUNT], strict=True)
    decided = plan(cached, now[HITS], cands, region, job.params["min_reads"])
    await apply_plan(sw, job, decided)
    # Zero what counted (the packets of this refresh's reads and writes are few cells).
    await zero_cells(
        sw, {n: [region.offset + i for i, v in enumerate(now[n]) if v] for n in COUNTERS}
    )
    if decided.evict or decided.insert:
        log.info(
            "kv job %d: cache now holds %s (evicted %s)",
            job.job_id,
            sorted(set(cached) - set(decided.evict) | {k for k, _ in decided.insert}),
            list(decided.evict),
        )
    return decided


async def apply_plan(sw: SwitchConnection, job: Job, decided: Plan) -> None:
    """Evict, then give each new key a fresh generation and an invalid entry before its
    ``kv_keys`` entry exists (the order the consistency argument needs)."""
    if decided.evict:
        await sw.delete([key_entry(job.job_id, k, 0) for k in decided.evict], strict=False)
    for _, idx in decided.insert:
        gen = STAMPS.next()  # never an earlier stamp of this or another entry
        await sw.write_register(VALID, idx, 0)
        await sw.write_register(VERSION, idx, 0)
        await sw.write_register(GEN, idx, gen)
    if decided.insert:
        await sw.insert([key_entry(job.job_id, k, i) for k, i in decided.insert])


async def cache_keys(sw: SwitchConnection, job: Job, keys: Sequence[int]) -> Plan:
    """Give ``keys`` entries now (tests, warm start), evicting what they need."""
    cached = await cached_keys(sw, job)
    hits = [0] * job.region.size
    cands = [(k, 1 << 31) for k in keys]
    decided = plan(cached, hits, cands, job.region, min_reads=1)
    await apply_plan(sw, job, decided)
    return decided


register(KvCache())
