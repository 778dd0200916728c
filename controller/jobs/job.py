"""What a job is: its request (as submitted, typed and checked) and the admitted job.

Example:
    >>> req = JobRequest(workers=2)
    >>> req.kind, [w.ip for w in req.worker_specs()], req.aggregation_address()[0]
    ('netreduce', ['10.0.0.1', '10.0.0.2'], '10.0.0.3')
    >>> JobRequest(workers="2")
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for JobRequest
    ...

Every kind of job (``controller/jobs/job_kinds.py``) shares the fields of ``JobRequest``: the
hosts that take part (``workers``, on which switch ports, with which addresses) and the
aggregation address, where they send (the parameter server, reducer or storage server).
A kind adds its own fields in a subclass that pins ``kind`` to its name; ``parse_request``
(``controller/jobs/job_kinds.py``) picks the subclass that ``kind`` names (default
``netreduce``, the first system). Requests are pydantic models: every field is typed and
bounded, so a request that names a string where a number belongs, or a 300 MB name, is
refused with a one-line ``JobError`` before anything touches a switch.

Defaults follow Mininet's conventions for a star around one switch: worker ``i`` (0-based)
is host ``h{i+1}`` on switch port ``i+1`` with IP ``10.0.0.{i+1}`` and MAC
``00:00:00:00:00:{i+1}``; the aggregation address is the next host, ``h{N+1}``. Give
ports, IPs and MACs explicitly for other layouts.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from controller.jobs.memory_manager import Region
from wire.header import MAX_WORKERS

MAX_JOB_ID = 0xFFFF  # job_id is 16 bits; 0 is reserved ("free" in aggregator state)
MAX_PORT = 510  # egress_spec is 9 bits; 511 is BMv2's drop port
MAX_NAME = 64
MAX_DEVICE_ID = 2**32 - 1
NAME_PATTERN = r"^[A-Za-z0-9_.:+-]*$"
MAC_PATTERN = r"^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$"


class JobError(ValueError):
    """A job request that cannot be admitted as given; the message says what to change."""


def _ipv4(text: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4 address") from None


Ipv4 = Annotated[str, Field(strict=True, max_length=15), AfterValidator(_ipv4)]
Mac = Annotated[str, Field(strict=True, pattern=MAC_PATTERN), AfterValidator(lambda m: m.lower())]
Port = Annotated[int, Field(strict=True, ge=0, le=MAX_PORT)]
Count = Annotated[int, Field(strict=True, ge=1)]


@dataclass(frozen=True)
class Worker:
    worker_id: int
    port: int  # switch port the worker is attached to
    ip: str
    mac: str


class JobRequest(BaseModel):
    """Fields every kind of job shares (``incctl job submit``, ``POST /jobs``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = "netreduce"
    workers: Annotated[int, Field(strict=True, ge=1, le=MAX_WORKERS)]
    name: Annotated[str, Field(strict=True, max_length=MAX_NAME, pattern=NAME_PATTERN)] = ""
    device_id: Annotated[int, Field(strict=True, ge=0, le=MAX_DEVICE_ID)] | None = None
    worker_ports: Annotated[tuple[Port, ...], Field(max_length=MAX_WORKERS)] = ()
    worker_ips: Annotated[tuple[Ipv4, ...], Field(max_length=MAX_WORKERS)] = ()
    worker_macs: Annotated[tuple[Mac, ...], Field(max_length=MAX_WORKERS)] = ()
    agg_ip: Ipv4 | None = None
    agg_mac: Mac | None = None

    @model_validator(mode="after")
    def _hosts_agree(self) -> JobRequest:
        for key in ("worker_ports", "worker_ips", "worker_macs"):
            values = getattr(self, key)
            if values and len(values) != self.workers:
                raise ValueError(f"{key} lists {len(values)} values for {self.workers} workers")
        if len(set(self.worker_ports)) != len(self.worker_ports):
            raise ValueError("two workers on the same switch port")
        return self

    def worker_specs(self) -> list[Worker]:
        out = []
        for i in range(self.workers):
            port = self.worker_ports[i] if self.worker_ports else i + 1
            ip = self.worker_ips[i] if self.worker_ips else host_ip(i + 1)
            mac = self.worker_macs[i] if self.worker_macs else host_mac(i + 1)
            out.append(Worker(i, port, ip, mac))
        return out

    def aggregation_address(self) -> tuple[str, str]:
        """(IP, MAC) the workers send to: given, or host ``h{N+1}``."""
        return (
            self.agg_ip or host_ip(self.workers + 1),
            self.agg_mac or host_mac(self.workers + 1),
        )


MAX_EPOCHS = 10**9
MAX_MODEL_BYTES = 1 << 40  # 1 TiB of gradients per iteration: beyond any real model
MAX_SECONDS = 1e8  # about three years
Seconds = Annotated[float, Field(strict=False, gt=0, le=MAX_SECONDS, allow_inf_nan=False)]


class Scheduling(BaseModel):
    """What a job the scheduler sizes declares (``controller/sched/scheduler.py``): its class,
    epochs, model size, compute time per epoch, for MD a deadline (seconds after
    submission), and optionally a throughput target (bytes/s it can use at most). Given
    ``class``, the job's memory is decided by the scheduler and changes while it runs;
    its workers ask for every epoch's region (``JobManager.epoch``)."""

    model_config = ConfigDict(populate_by_name=True)

    job_class: Literal["md", "be"] | None = Field(None, alias="class")
    epochs: Annotated[int, Field(strict=True, ge=1, le=MAX_EPOCHS)] | None = None
    model_bytes: Annotated[int, Field(strict=True, ge=1, le=MAX_MODEL_BYTES)] | None = None
    compute_ms: Annotated[float, Field(ge=0, le=MAX_SECONDS * 1e3, allow_inf_nan=False)] | None = (
        None
    )
    deadline_s: Seconds | None = None
    throughput: Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)] | None = None
    # How the workers place psns in the region (wire.header): "modulo" offset + psn % size,
    # "hashed" Hash(psn, job) % size + offset (a permutation of the region: no collisions).
    addressing: Literal["modulo", "hashed"] | None = None

    @property
    def scheduled(self) -> bool:
        return self.job_class is not None

    @model_validator(mode="after")
    def _complete(self) -> Scheduling:
        profile = ("epochs", "model_bytes", "compute_ms", "deadline_s", "throughput", "addressing")
        if self.job_class is None:
            given = [k for k in profile if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only for a scheduled job (give class)")
            return self
        missing = [k for k in ("epochs", "model_bytes", "compute_ms") if getattr(self, k) is None]
        if missing:
            raise ValueError(f"a {self.job_class} job needs {', '.join(missing)}")
        if self.job_class == "md" and self.deadline_s is None:
            raise ValueError("an md job needs deadline_s")
        if self.job_class == "be" and self.deadline_s is not None:
            raise ValueError("a be job has no deadline (use class md)")
        return self

    def scheduling_params(self, submitted_at: float) -> dict[str, Any]:
        """What the job record keeps (JSON): the declaration and the absolute deadline."""
        return {
            "scheduled": True,
            "class": self.job_class,
            "epochs": self.epochs,
            "model_bytes": self.model_bytes,
            "compute_ms": self.compute_ms,
            "deadline": None if self.deadline_s is None else submitted_at + self.deadline_s,
            "throughput": self.throughput,
            "addressing": self.addressing or "modulo",
        }


def host_ip(n: int) -> str:
    """Mininet's address of host ``h{n}`` (1-based): ``10.0.0.n``."""
    return str(ipaddress.IPv4Address("10.0.0.0") + n)


def host_mac(n: int) -> str:
    return ":".join(f"{b:02x}" for b in n.to_bytes(6, "big"))


@dataclass(frozen=True)
class Job:
    """An admitted job: its kind, switch, region of memory, group and workers.

    ``window``, ``slots`` and ``quorum`` mean what they mean for aggregation kinds (0 where
    a kind has no such notion); ``params`` holds what a kind adds (JSON values only)."""

    job_id: int
    name: str
    device_id: int
    window: int
    slots: int
    region: Region
    quorum: int  # contributions that complete an aggregation (all workers: synchronous)
    mcast_grp: int
    agg_ip: str
    agg_mac: str
    workers: tuple[Worker, ...] = field(default_factory=tuple)
    created_at: float = 0.0
    kind: str = "netreduce"
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    def worker(self, worker_id: int) -> Worker:
        for w in self.workers:
            if w.worker_id == worker_id:
                return w
        raise KeyError(f"job {self.job_id} has no worker {worker_id}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["region"] = {"offset": self.region.offset, "size": self.region.size}
        d["n_workers"] = self.n_workers
        d["params"] = dict(self.params)
        return d
