"""Admission: ask the controller for switch resources, or plan to run on the hosts.

Example (no controller at that address, so the plan runs on the hosts and says why):
    >>> plan = admit("unix:/nonexistent/controller.sock", workers=2, name="demo")
    >>> plan.on_switch, plan.peers
    (False, ('10.0.0.1', '10.0.0.2'))
    >>> plan.reason
    'cannot reach the controller at unix:/nonexistent/controller.sock: ...'
    >>> Plan.from_json(plan.to_json()) == plan
    True

A plan is what every worker of one job needs to open its session (``inclib.join``): the
controller's URL and the job id when the switch serves the job, and the peers' addresses
for the host-only implementations. One process admits (a launcher, or rank 0), and hands
the plan, as JSON, to the workers, so that all of them take the same path.

The switch "cannot serve" when the controller cannot be reached, has no switch that
answers, or has no free memory for the job (HTTP 409: ``OutOfMemory``); then the plan is
host-only and ``reason`` holds the controller's one-line answer. A request that is wrong
(a bad field: HTTP 400) is the application's mistake and raises ``AdmissionError``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from controller.api_client import ApiError, ControllerApi

#: HTTP statuses meaning "the switch cannot serve this job now" (not the request's fault).
CANNOT_SERVE = (0, 409, 502, 503)
DEFAULT_WINDOW = 64
WINDOWED_KINDS = ("netreduce", "serene")  # kinds that need a window (the default above)


class AdmissionError(ValueError):
    """The controller refused the request itself (a bad field); the message says which."""


@dataclass(frozen=True)
class Plan:
    """How the workers of one job communicate: through the switch (``job_id``) or not."""

    controller: str
    n_workers: int
    peers: tuple[str, ...]  # worker i's address for host-only paths: "IP" or "IP:PORT"
    kind: str = "netreduce"
    name: str = ""
    job_id: int | None = None  # None: host-only
    reason: str = ""  # why host-only
    reducer: str = ""  # the job's aggregation address: ASK's reducer, the KV storage server
    replicas: tuple[str, ...] = ()  # consensus: the replicas' IPs by id
    # The job's token (it owns the job: docs/deploy.md); the plan carries it to the workers,
    # which pass it to the controller. "": none (host-only, or found on the daemon's machine).
    token: str = field(default="", repr=False)

    @property
    def on_switch(self) -> bool:
        return self.job_id is not None

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        try:
            raw = json.loads(text)
            raw["peers"] = tuple(raw["peers"])
            raw["replicas"] = tuple(raw.get("replicas", ()))
            return cls(**raw)
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"not an inclib plan: {err}") from None

    def release(self) -> None:
        """Give the switch resources back (cancel the job); nothing to do on the hosts."""
        if self.job_id is not None:
            ControllerApi(self.controller, timeout=30.0, token=self.token or None).cancel(
                self.job_id
            )


def default_peers(n_workers: int) -> tuple[str, ...]:
    """Mininet's star convention: worker i is host h{i+1} at 10.0.0.{i+1}."""
    return tuple(f"10.0.0.{i + 1}" for i in range(n_workers))


def admit(
    controller: str,
    workers: int,
    *,
    kind: str = "netreduce",
    name: str = "",
    peers: tuple[str, ...] | list[str] | None = None,
    window: int | None = None,
    reducer_address: str | None = None,
    **fields: Any,
) -> Plan:
    """Ask ``controller`` to admit a job of ``kind`` for ``workers`` workers.

    ``peers`` are the workers' addresses (default 10.0.0.1, 10.0.0.2, ...); their IPs are
    also the job's ``worker_ips``. ``reducer_address`` ("IP" or "IP:PORT"): where a
    key-value aggregation's reducer listens on the host path (default: the job's
    ``agg_ip``, else the next host after the workers). ``fields`` go into the request as
    they are (e.g. ``worker_ports``, ``agg_ip``, ``region_size``: docs/protocol.md).
    """
    if workers < 1:
        raise AdmissionError(f"workers must be >= 1, got {workers}")
    addrs = tuple(peers) if peers is not None else default_peers(workers)
    if len(addrs) != workers:
        raise AdmissionError(f"{len(addrs)} peers given for {workers} workers")
    request: dict[str, Any] = {"kind": kind, "workers": workers, "name": name, **fields}
    if window is None and kind in WINDOWED_KINDS:
        window = DEFAULT_WINDOW
    if window is not None:
        request["window"] = window
    if peers is not None and "worker_ips" not in fields:
        request["worker_ips"] = [a.rsplit(":", 1)[0] if a.count(":") == 1 else a for a in addrs]
    reducer = str(reducer_address or fields.get("agg_ip") or f"10.0.0.{workers + 1}")
    replicas: tuple[str, ...] = ()
    if kind == "consensus":  # the controller's default: the hosts after the clients
        n_rep = int(fields.get("replicas", 3))
        replicas = tuple(fields.get("replica_ips") or default_peers(workers + n_rep)[workers:])
    plan = Plan(controller, workers, addrs, kind, name, reducer=reducer, replicas=replicas)
    api = ControllerApi(controller, timeout=60.0)
    try:
        job = api.submit(request)
    except ApiError as err:
        if err.status in CANNOT_SERVE:
            return _replace(plan, reason=str(err))
        raise AdmissionError(f"the controller refused the job: {err}") from None
    job_id = int(job["job_id"])
    return _replace(plan, job_id=job_id, token=api.job_tokens.get(job_id, ""))


def _replace(plan: Plan, **changes: Any) -> Plan:
    return Plan(**{**asdict(plan), **changes})
