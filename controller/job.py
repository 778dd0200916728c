"""What a job is: its request (as submitted), and the admitted job with its region.

Example:
    >>> req = JobRequest.from_dict({"workers": 2, "window": 8})
    >>> [w.ip for w in req.worker_specs()], req.region_size_needed()
    (['10.0.0.1', '10.0.0.2'], 8)

Defaults follow Mininet's conventions for a star around one switch: worker ``i`` (0-based)
is host ``h{i+1}`` on switch port ``i+1`` with IP ``10.0.0.{i+1}`` and MAC
``00:00:00:00:00:{i+1}``; the aggregation address (where workers send, the parameter
server) is the next host, ``h{N+1}``. Give ports, IPs and MACs explicitly for other layouts.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from controller.memory_manager import Region
from wire.header import INC_UDP_PORT, MAX_WORKERS, SLOTS

MAX_JOB_ID = 0xFFFF  # job_id is 16 bits; 0 is reserved ("free" in aggregator state)
MAX_PORT = 510  # egress_spec is 9 bits; 511 is BMv2's drop port
_MAC = re.compile(r"^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$")


class JobError(ValueError):
    """A job request that cannot be admitted as given; the message says what to change."""


@dataclass(frozen=True)
class Worker:
    worker_id: int
    port: int  # switch port the worker is attached to
    ip: str
    mac: str


@dataclass(frozen=True)
class JobRequest:
    """A job as submitted (``incctl job submit``, ``POST /jobs``)."""

    workers: int
    window: int
    slots: int = SLOTS
    name: str = ""
    region_size: int | None = None  # aggregators; default = window (NetReduce)
    device_id: int | None = None  # switch; default = the controller's first switch
    worker_ports: tuple[int, ...] = ()
    worker_ips: tuple[str, ...] = ()
    worker_macs: tuple[str, ...] = ()
    agg_ip: str | None = None
    agg_mac: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRequest:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise JobError(f"unknown job field(s): {', '.join(unknown)}")
        if "workers" not in data or "window" not in data:
            raise JobError("a job needs 'workers' and 'window'")
        kw = dict(data)
        for key in ("worker_ports", "worker_ips", "worker_macs"):
            if kw.get(key) is not None:
                if not isinstance(kw[key], list | tuple):
                    raise JobError(f"'{key}' must be a list")
                kw[key] = tuple(kw[key])
            else:
                kw.pop(key, None)
        for key in ("workers", "window", "slots", "region_size", "device_id"):
            if kw.get(key) is not None and (
                not isinstance(kw[key], int) or isinstance(kw[key], bool)
            ):
                raise JobError(f"'{key}' must be an integer, got {kw[key]!r}")
        req = cls(**kw)
        req.validate()
        return req

    def region_size_needed(self) -> int:
        return self.region_size if self.region_size is not None else self.window

    def validate(self) -> None:
        n = self.workers
        if not 1 <= n <= MAX_WORKERS:
            raise JobError(f"workers must be 1..{MAX_WORKERS} (bits of the bitmap), got {n}")
        if self.window < 1:
            raise JobError(f"window must be at least 1, got {self.window}")
        if self.region_size_needed() < self.window:
            raise JobError(
                f"region_size {self.region_size} is smaller than the window {self.window}:"
                " the switch keeps two copies per aggregator, so it needs size >= window"
            )
        if self.slots != SLOTS:
            raise JobError(
                f"the switch aggregates exactly {SLOTS} slots per packet, got {self.slots}"
            )
        for key, values in (
            ("worker_ports", self.worker_ports),
            ("worker_ips", self.worker_ips),
            ("worker_macs", self.worker_macs),
        ):
            if values and len(values) != n:
                raise JobError(f"{key} lists {len(values)} values for {n} workers")
        for port in self.worker_ports:
            if not isinstance(port, int) or not 0 <= port <= MAX_PORT:
                raise JobError(f"worker port {port!r} is not a switch port (0..{MAX_PORT})")
        if len(set(self.worker_ports)) != len(self.worker_ports):
            raise JobError("two workers on the same switch port")
        for ip in (*self.worker_ips, *([self.agg_ip] if self.agg_ip else [])):
            _check_ip(ip)
        for mac in (*self.worker_macs, *([self.agg_mac] if self.agg_mac else [])):
            if not isinstance(mac, str) or not _MAC.match(mac):
                raise JobError(f"{mac!r} is not a MAC address like 00:00:00:00:00:01")

    def worker_specs(self) -> list[Worker]:
        out = []
        for i in range(self.workers):
            port = self.worker_ports[i] if self.worker_ports else i + 1
            ip = self.worker_ips[i] if self.worker_ips else _host_ip(i + 1)
            mac = self.worker_macs[i] if self.worker_macs else _host_mac(i + 1)
            out.append(Worker(i, port, ip, mac.lower()))
        return out

    def aggregation_address(self) -> tuple[str, str]:
        """(IP, MAC) the workers send to: given, or host ``h{N+1}``."""
        return (
            self.agg_ip or _host_ip(self.workers + 1),
            (self.agg_mac or _host_mac(self.workers + 1)).lower(),
        )


def _check_ip(ip: Any) -> None:
    try:
        ipaddress.IPv4Address(ip)
    except (ValueError, TypeError):
        raise JobError(f"{ip!r} is not an IPv4 address") from None


def _host_ip(n: int) -> str:
    return str(ipaddress.IPv4Address("10.0.0.0") + n)


def _host_mac(n: int) -> str:
    return ":".join(f"{b:02x}" for b in n.to_bytes(6, "big"))


@dataclass(frozen=True)
class Job:
    """An admitted job: its switch, region of the aggregator pool, group and workers."""

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
        return d

    def worker_config(self, worker_id: int, switch_address: str = "") -> dict[str, Any]:
        """What a worker agent needs at start (``GET /jobs/{id}/workers/{wid}``)."""
        w = self.worker(worker_id)
        return {
            "job_id": self.job_id,
            "worker_id": w.worker_id,
            "n_workers": self.n_workers,
            "region_offset": self.region.offset,
            "region_size": self.region.size,
            "window": self.window,
            "slots": self.slots,
            "quorum": self.quorum,
            "agg_ip": self.agg_ip,
            "agg_mac": self.agg_mac,
            "udp_port": INC_UDP_PORT,
            "device_id": self.device_id,
            "switch_address": switch_address,
            "switch_port": w.port,
            "ip": w.ip,
            "mac": w.mac,
        }
