"""A replicated log (consensus) sequenced by the switch, or by the leader replica.

Example (inside Mininet hosts; ``examples/replicated_counter.py`` is the whole program)::

    with inclib.join(plan, worker_id=0) as s:          # a client
        session, index = s.log().append(b"+1")       # returns once committed
        entries = s.log().read()                     # [b"+1", ...] in log order
    LogReplica(plan, replica_id=1).run(stop)         # on each replica host

The replicas and the client are those of ``hosts/consensus/replica.py`` and
``log_client.py``. On the switch path (a ``consensus`` job) the switch stamps every request
with a sequence number and multicasts it to the replicas (NOPaxos' ordered unreliable
multicast). On the host path the leader replica numbers the requests itself
(``--sequencer host``: clients send to the leader with the ``FALLBACK`` flag, which the
switch forwards untouched); everything else is the same.
"""

from __future__ import annotations

from typing import Any

from controller.api_client import ControllerApi
from hosts.consensus.log_client import LogClient, LogConfig
from hosts.consensus.log_wire import HOST_PLAN_PORT
from hosts.consensus.replica import Replica
from inclib.plan import Plan

HOST_JOB_ID = 1  # host-only plans have no controller job id; both ends use this one


def _ip(address: str) -> str:
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def _api(plan: Plan) -> ControllerApi:
    return ControllerApi(plan.controller, token=plan.token or None)


class LogHandle:
    """``append``/``read`` of one client (worker) of a consensus job."""

    def __init__(self, plan: Plan, cfg: dict[str, Any], worker_id: int) -> None:
        """``cfg``: the worker's configuration from the controller (unused off the switch)."""
        if plan.on_switch:
            reps = tuple(str(r["ip"]) for r in cfg["replicas"])
            job_id = int(cfg["job_id"])
            config = LogConfig(
                job_id, worker_id, str(cfg["ip"]), str(cfg["group_ip"]), reps,
                key=_api(plan).control_key(job_id),
            )  # fmt: skip
        else:
            me = _ip(plan.peers[worker_id])
            config = LogConfig(
                HOST_JOB_ID, worker_id, me, "", plan.replicas, True, port=HOST_PLAN_PORT
            )
        self.client = LogClient(config)

    def append(self, data: bytes) -> tuple[int, int]:
        """Append ``data`` (up to 124 bytes); returns (session, log index) once committed."""
        return self.client.append(data)

    def read(self) -> list[bytes]:
        """Every committed entry's data, in log order (repeats and no-ops left out)."""
        return [e.data for e in self.client.read()]

    def close(self) -> None:
        self.client.close()


class LogReplica:
    """Replica ``replica_id`` of the log ``plan`` describes (``run`` until stopped)."""

    def __init__(self, plan: Plan, replica_id: int) -> None:
        clients = {i: _ip(p) for i, p in enumerate(plan.peers)}
        if plan.on_switch:
            assert plan.job_id is not None
            api = _api(plan)
            params: dict[str, Any] = api.job(plan.job_id)["params"]
            self.replica = Replica(
                plan.job_id, replica_id, list(params["replicas"]), clients, params["group_ip"],
                key=api.control_key(plan.job_id),
            )  # fmt: skip
        else:
            reps = [{"id": i, "ip": ip} for i, ip in enumerate(plan.replicas)]
            self.replica = Replica(
                HOST_JOB_ID, replica_id, reps, clients, None, port=HOST_PLAN_PORT
            )

    def run(self, stop: list[bool]) -> None:
        """Serve until ``stop[0]`` becomes true."""
        self.replica.run(stop)

    def entries(self) -> list[bytes]:
        return [e.data for e in self.replica.log if e.client >= 0]
