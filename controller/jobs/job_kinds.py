"""Kinds of jobs: what each system adds to admission, by name.

Example:
    >>> import controller.systems  # loads every kind, and each registers itself
    >>> kind_of("netreduce").pool
    'agg'
    >>> kind_of("gossip")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    controller.jobs.job.JobError: unknown job kind 'gossip' (known: ask, ...)

The job manager (``controller/job_manager.py``) does what every kind shares: pick the switch and
a job id, allocate memory, store the job, roll back on failure. A ``JobKind`` says what
differs: its request model (a subclass of ``controller.jobs.job.JobRequest``), which memory pool
it draws from and how much, how its switch state is installed, checked, removed and
cleared, what its hosts are told at start, and which live figures the dashboard and
``/metrics`` show for it (``live_stats``). A system adds a module to ``controller/systems/``
with one subclass, ending in ``register(TheKind())``, and names it in that package's
``__init__``, which loads every kind. This registry imports no kind: they import it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import ValidationError

from controller.jobs.figures import JobStats
from controller.jobs.job import Job, JobError, JobRequest
from controller.jobs.memory_manager import MemoryManager, Region
from controller.p4rt.p4runtime_client import SwitchConnection
from wire.header import AGG_POOL_SIZE, INC_UDP_PORT

AGG_POOL = "agg"  # the aggregator pool of p4src/aggregator.p4 (AGG_POOL_SIZE aggregators)
TICK_S = 0.05  # how often JobKind.tick runs


class JobKind(ABC):
    """One system's part in admission; subclasses override what they need."""

    name: ClassVar[str]
    request: ClassVar[type[JobRequest]]
    pool: ClassVar[str] = AGG_POOL
    pool_units: ClassVar[int] = AGG_POOL_SIZE  # size of ``pool`` in each switch
    # Jobs of this kind may be submitted with a class (md/be): their region of ``pool`` is
    # then sized by the scheduler and changes at epoch boundaries (scheduled_jobs.py).
    schedulable: ClassVar[bool] = False

    @abstractmethod
    def region_size(self, req: JobRequest) -> int:
        """Units of ``pool`` the job needs."""

    def allocate(self, memory: MemoryManager, job_id: int, req: JobRequest) -> Region:
        """The job's region of ``pool`` (default: an exclusive one of ``region_size``)."""
        return memory.allocate(job_id, self.region_size(req))

    def reserve(self, memory: MemoryManager, job: Job) -> None:
        """Mark a stored job's region as held again (after a controller restart)."""
        memory.reserve(job.job_id, job.region)

    def free(self, memory: MemoryManager, job_id: int) -> None:
        """Give the job's region back to ``pool``."""
        memory.free(job_id)

    @abstractmethod
    def make_job(
        self, req: JobRequest, job_id: int, device_id: int, region: Region, created_at: float
    ) -> Job:
        """The admitted job, before anything is written to the switch."""

    @abstractmethod
    async def clear(self, sw: SwitchConnection, region: Region) -> None:
        """Reset ``region`` of the pool so that its next owner starts clean."""

    async def clear_owned(self, sw: SwitchConnection, region: Region) -> None:
        """Reset ``region``, which the scheduler gave one job alone and now takes back (or
        gives a newly admitted job); the same as ``clear`` unless a kind's regions are
        otherwise shared."""
        await self.clear(sw, region)

    async def follow_window(self, sw: SwitchConnection, job: Job, window: int) -> None:
        """A scheduled job's workers may now use windows up to ``window`` (the largest of its
        epoch slots' and its target's sizes), for a kind whose switch state depends on it."""
        return None

    @abstractmethod
    async def install(self, sw: SwitchConnection, job: Job, idempotent: bool = False) -> None:
        """Write the job's switch state (``idempotent``: overwrite entries that exist)."""

    @abstractmethod
    async def uninstall(self, sw: SwitchConnection, job: Job) -> None:
        """Delete the job's switch state (what is already gone is skipped)."""

    async def installed(self, sw: SwitchConnection, job: Job) -> bool:
        """Whether the switch still holds the job (False after a switch restart)."""
        return True

    async def tick(self, sw: SwitchConnection, job: Job, now: float) -> None:
        """Called about every ``TICK_S`` seconds per job (``now``: the loop's clock) for a
        kind that manages its state at run time (the key-value cache's hot keys)."""
        return None

    async def live_stats(self, sw: SwitchConnection, job: Job) -> JobStats:
        """The job's live figures, read from the switch now (``controller/jobs/figures.py``):
        throughput, per-worker progress, collisions, the current mode... The dashboard and
        ``/metrics`` show whatever a kind returns; by default nothing."""
        return JobStats()

    def worker_config(self, job: Job, worker_id: int, switch_address: str) -> dict[str, Any]:
        """What host ``worker_id`` of ``job`` needs at start (``GET /jobs/{id}/workers/{w}``)."""
        w = job.worker(worker_id)
        return {
            "kind": job.kind,
            "job_id": job.job_id,
            "worker_id": w.worker_id,
            "n_workers": job.n_workers,
            "region_offset": job.region.offset,
            "region_size": job.region.size,
            "window": job.window,
            "slots": job.slots,
            "quorum": job.quorum,
            "agg_ip": job.agg_ip,
            "agg_mac": job.agg_mac,
            "udp_port": INC_UDP_PORT,
            "device_id": job.device_id,
            "switch_address": switch_address,
            "switch_port": w.port,
            "ip": w.ip,
            "mac": w.mac,
            **job.params,
        }


_KINDS: dict[str, JobKind] = {}


def register(kind: JobKind) -> JobKind:
    """Make ``kind`` known by its name (each kind's module calls this as it loads)."""
    known = _KINDS.get(kind.name)
    if known is not None and type(known) is not type(kind):
        raise ValueError(f"job kind {kind.name!r} is already {type(known).__name__}")
    _KINDS[kind.name] = kind
    return kind


def kinds() -> Mapping[str, JobKind]:
    """Every registered kind, by name."""
    return _KINDS


def kind_pools() -> dict[str, int]:
    """Every memory pool a registered kind draws from, with its size in units."""
    return {k.pool: k.pool_units for k in kinds().values()}


def kind_of(name: Any) -> JobKind:
    known = kinds()
    if not isinstance(name, str) or name not in known:
        raise JobError(f"unknown job kind {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


def parse_request(data: Any) -> JobRequest:
    """A request of the kind ``data["kind"]`` names (default ``netreduce``), checked.

    Raises ``JobError`` with one line per problem (field: what is wrong)."""
    if not isinstance(data, Mapping):
        raise JobError("a job request is a JSON object")
    model = kind_of(data.get("kind", "netreduce")).request
    try:
        return model.model_validate(dict(data))
    except ValidationError as err:
        raise JobError(_one_line(err)) from None


def _one_line(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False):
        where = ".".join(str(x) for x in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)
