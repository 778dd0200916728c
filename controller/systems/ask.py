"""ASK jobs: asynchronous key-value aggregation (op AGG_KV) in rows of ``p4src/ask.p4``.

Example:
    >>> kind = Ask()
    >>> req = AskRequest(workers=2, rows=64, window=8)
    >>> kind.region_size(req)
    64
    >>> job = kind.make_job(req, job_id=3, device_id=0, region=Region(128, 64), created_at=0)
    >>> [layout_of(job, w) for w in (0, 1)]   # doctest: +NORMALIZE_WHITESPACE
    [FlowLayout(part_base=160, part_size=32, seen_base=128, window=8),
     FlowLayout(part_base=160, part_size=32, seen_base=136, window=8)]
    >>> AskRequest(workers=4, rows=16, window=8)
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for AskRequest
      Value error, 4 mappers x window 8 need 32 seen entries, the region has rows=16 ...

A job owns ``rows`` rows of the key-value array (the ``ask`` pool of the memory manager,
``ASK_ROWS`` rows; each has two copies in the switch) and as many seen entries, the same
index range of the seen registers. ``workers`` are the mappers (worker ids ``0..M-1``);
the reducer is the job's aggregation address, flow id ``M``, on ``reducer_port`` (default
``M + 1``, Mininet's ``h{M+1}``).

Key-space partition: the rows are split into ``partitions`` equal, disjoint sub-spaces;
mapper ``w`` writes only the rows of sub-space ``Hash(job, w) % partitions`` (CRC32 of the
flow id), so flows do not fight over rows. Its seen entries are ``[offset + w W, offset +
(w + 1) W)`` for its window ``W`` (a power of two: the switch takes ``psn % W`` as a mask).

Admission clears the region (row epochs and seen state), installs the flows, and the
``ask_jobs`` entry last; removal deletes ``ask_jobs`` first.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from finsy import P4TableEntry, P4TableMatch
from pydantic import Field, model_validator

from controller.jobs.figures import Figure, JobStats
from controller.jobs.job import Job, JobRequest, Port
from controller.jobs.job_kinds import JobKind, register
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import SwitchConnection, table_entry
from controller.systems import result_guard
from wire.header import AGG_VERSIONS, ASK_ROWS, ASK_TUPLES, MAX_WORKERS, Flag, Op

ASK_POOL = "ask"  # rows of p4src/ask.p4's key-value array
PREFIX = "IncIngress.ask."
ASK_JOBS = PREFIX + "ask_jobs"
ASK_FLOWS = PREFIX + "ask_flows"
ROW_EPOCH = PREFIX + "ask_row_epoch"
SEEN_PSN = PREFIX + "ask_seen_psn"
SEEN_MASK = PREFIX + "ask_seen_mask"
KEY_REGISTERS = tuple(f"{PREFIX}ask_key_{j:02d}" for j in range(ASK_TUPLES))
VALUE_REGISTERS = tuple(f"{PREFIX}ask_val_{j:02d}" for j in range(ASK_TUPLES))
MAX_WINDOW = 1024


def _power_of_two(n: int) -> int:
    if n & (n - 1):
        raise ValueError(f"window {n} is not a power of two (the switch takes psn % W as a mask)")
    return n


class AskRequest(JobRequest):
    """A key-value aggregation job: ``workers`` mappers, one reducer (the aggregation
    address), ``rows`` rows of the switch's array, ``window`` packets in flight per mapper."""

    kind: Literal["ask"] = "ask"
    rows: Annotated[int, Field(strict=True, ge=1, le=ASK_ROWS)] = 256
    window: Annotated[int, Field(strict=True, ge=1, le=MAX_WINDOW)] = 16
    partitions: Annotated[int, Field(strict=True, ge=1, le=MAX_WORKERS)] | None = None
    reducer_port: Port | None = None

    @model_validator(mode="after")
    def _hosts_agree(self) -> AskRequest:
        """As for every kind, except that mappers may share a host and its port (the
        partitions of one Spark executor): the port still binds each flow."""
        for key in ("worker_ports", "worker_ips", "worker_macs"):
            values = getattr(self, key)
            if values and len(values) != self.workers:
                raise ValueError(f"{key} lists {len(values)} values for {self.workers} workers")
        return self

    @model_validator(mode="after")
    def _fits(self) -> AskRequest:
        _power_of_two(self.window)
        need = self.workers * self.window
        if need > self.rows:
            raise ValueError(
                f"{self.workers} mappers x window {self.window} need {need} seen entries,"
                f" the region has rows={self.rows} (give more rows or a smaller window)"
            )
        if self.n_partitions > self.rows:
            raise ValueError(f"{self.n_partitions} partitions do not fit in {self.rows} rows")
        if self.reducer_port is not None and self.reducer_port in self.worker_ports:
            raise ValueError(f"reducer_port {self.reducer_port} is also a mapper's port")
        return self

    @property
    def n_partitions(self) -> int:
        return self.partitions if self.partitions is not None else self.workers


@dataclass(frozen=True)
class FlowLayout:
    """What the switch lets mapper ``w`` touch: its rows and its seen entries."""

    part_base: int
    part_size: int
    seen_base: int
    window: int


def partition_of(job_id: int, flow: int, partitions: int) -> int:
    """``Hash(FlowID) % partitions``: the key sub-space of a mapper flow."""
    return zlib.crc32(job_id.to_bytes(2, "big") + flow.to_bytes(1, "big")) % partitions


def layout_of(job: Job, worker_id: int) -> FlowLayout:
    p = int(job.params["partitions"])
    part_size = job.region.size // p
    part = partition_of(job.job_id, worker_id, p)
    return FlowLayout(
        part_base=job.region.offset + part * part_size,
        part_size=part_size,
        seen_base=job.region.offset + worker_id * job.window,
        window=job.window,
    )


def reducer_id(job: Job) -> int:
    return job.n_workers


def job_entry(job: Job) -> P4TableEntry:
    return table_entry(
        ASK_JOBS,
        {"hdr.inc.job_id": job.job_id},
        PREFIX + "ask_job",
        offset=job.region.offset,
        size=job.region.size,
    )


def job_key(job_id: int) -> P4TableEntry:
    return P4TableEntry(ASK_JOBS, match=P4TableMatch({"hdr.inc.job_id": job_id}))


def _flow_match(job: Job, worker_id: int, port: int) -> dict[str, int]:
    return {
        "hdr.inc.job_id": job.job_id,
        "hdr.inc.worker_id": worker_id,
        "standard_metadata.ingress_port": port,
    }


def flow_entries(job: Job) -> list[P4TableEntry]:
    out = []
    for w in job.workers:
        lay = layout_of(job, w.worker_id)
        out.append(
            table_entry(
                ASK_FLOWS,
                _flow_match(job, w.worker_id, w.port),
                PREFIX + "ask_mapper",
                p_base=lay.part_base,
                p_size=lay.part_size,
                s_base=lay.seen_base,
                s_mask=lay.window - 1,
            )
        )
    out.append(
        table_entry(
            ASK_FLOWS,
            _flow_match(job, reducer_id(job), int(job.params["reducer_port"])),
            PREFIX + "ask_reducer",
        )
    )
    return out


def flag_entries(job: Job) -> list[P4TableEntry]:
    """``result_guard.p4``: a mapper sends its cold keys to the reducer as ``FALLBACK`` (resent
    with ``RETX``); the reducer acknowledges what it counted (``ACK``). The switch's own ACKs
    and drained rows are made here and need no binding."""
    reducer = [int(job.params["reducer_port"])]
    return result_guard.worker_entries(
        job, Op.AGG_KV, Flag.FALLBACK | Flag.RETX
    ) + result_guard.port_entries(job.job_id, Op.AGG_KV, reducer, Flag.ACK)


def flow_keys(job: Job) -> list[P4TableEntry]:
    ports = [(w.worker_id, w.port) for w in job.workers]
    ports.append((reducer_id(job), int(job.params["reducer_port"])))
    return [P4TableEntry(ASK_FLOWS, match=P4TableMatch(_flow_match(job, i, p))) for i, p in ports]


async def clear_region(sw: SwitchConnection, region: Region) -> None:
    """Rows of ``region`` empty for every epoch, their seen entries unused."""
    copies = range(AGG_VERSIONS * region.offset, AGG_VERSIONS * region.end)
    await sw.fill_register(ROW_EPOCH, copies, 0)
    rows = range(region.offset, region.end)
    await sw.fill_register(SEEN_MASK, rows, 0)
    await sw.fill_register(SEEN_PSN, rows, 0)


class Ask(JobKind):
    name = "ask"
    request = AskRequest
    pool = ASK_POOL
    pool_units = ASK_ROWS

    def region_size(self, req: JobRequest) -> int:
        assert isinstance(req, AskRequest)
        return req.rows

    def make_job(
        self, req: JobRequest, job_id: int, device_id: int, region: Region, created_at: float
    ) -> Job:
        assert isinstance(req, AskRequest)
        agg_ip, agg_mac = req.aggregation_address()
        reducer_port = req.reducer_port if req.reducer_port is not None else req.workers + 1
        return Job(
            job_id=job_id,
            name=req.name or f"ask{job_id}",
            device_id=device_id,
            window=req.window,
            slots=2 * ASK_TUPLES,
            region=region,
            quorum=0,
            mcast_grp=0,
            agg_ip=agg_ip,
            agg_mac=agg_mac,
            workers=tuple(req.worker_specs()),
            created_at=created_at,
            kind=self.name,
            params={"partitions": req.n_partitions, "reducer_port": reducer_port},
        )

    async def clear(self, sw: SwitchConnection, region: Region) -> None:
        await clear_region(sw, region)

    async def install(self, sw: SwitchConnection, job: Job, idempotent: bool = False) -> None:
        write = sw.upsert if idempotent else sw.insert
        await write(flow_entries(job))
        await write(flag_entries(job))
        await write([job_entry(job)])

    async def uninstall(self, sw: SwitchConnection, job: Job) -> None:
        await sw.delete([job_key(job.job_id)], strict=False)
        await sw.delete(flow_keys(job), strict=False)
        await sw.delete(flag_entries(job), strict=False)

    async def installed(self, sw: SwitchConnection, job: Job) -> bool:
        return bool(await sw.read(job_key(job.job_id)))

    async def live_stats(self, sw: SwitchConnection, job: Job) -> JobStats:
        figures = (Figure("rows", job.region.size, "rows of the key-value array the job owns"),)
        return JobStats(figures, {"partitions": str(job.params["partitions"])})

    def worker_config(self, job: Job, worker_id: int, switch_address: str) -> dict[str, Any]:
        cfg = super().worker_config(job, worker_id, switch_address)
        lay = layout_of(job, worker_id)
        cfg.update(
            part_base=lay.part_base,
            part_size=lay.part_size,
            reducer_id=reducer_id(job),
            tuples=ASK_TUPLES,
        )
        return cfg


register(Ask())
