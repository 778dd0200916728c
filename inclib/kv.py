"""Key-value read/write through the switch's cache, or straight to the storage server.

Example (the storage server and a client on two Mininet hosts; ``examples/kv_client.py``)::

    server = KvStorage(plan)                 # the storage host: serves the job's keys
    threading.Thread(target=server.serve, daemon=True).start()
    with inclib.join(plan, worker_id=0) as s:
        s.kv().put(7, [1, 2, 3])             # returns the value's version
        s.kv().get(7)                        # [1, 2, 3, 0, 0, 0, 0, 0]

On the switch path (a ``kv_cache`` job) the client and server are those of
``hosts/kv/store.py``: requests to the server at ``INC_UDP_PORT`` pass the switch, which
answers reads of hot keys from its cache and keeps them consistent with writes
(docs/protocol.md, "Key-value cache"). On the host path the same client and server speak
the same messages on ``HOST_KV_PORT``, which the switch forwards as plain UDP.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from hosts.kv.store import KvClient, KvConfig, KvServer
from hosts.transport.udp import Endpoint
from inclib.plan import Plan
from wire.header import INC_UDP_PORT

HOST_KV_PORT = INC_UDP_PORT + 3
HOST_JOB_ID = 1  # host-only plans have no controller job id; both ends use this one


def _ip(address: str) -> str:
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


class KvHandle:
    """``get``/``put`` of one client (worker) of a key-value job."""

    def __init__(self, plan: Plan, cfg: dict[str, Any], worker_id: int) -> None:
        """``cfg``: the worker's configuration from the controller (unused off the switch)."""
        if plan.on_switch:
            config = KvConfig(int(cfg["job_id"]), worker_id, str(cfg["agg_ip"]))
            self.client = KvClient(config)
        else:
            config = KvConfig(HOST_JOB_ID, worker_id, _ip(plan.reducer))
            self.client = KvClient(config, Endpoint(("0.0.0.0", HOST_KV_PORT)))
            self.client.server = (config.server_ip, HOST_KV_PORT)

    def get(self, key: int) -> list[int]:
        """The value of ``key`` (zeros if never written)."""
        return self.client.get(key)

    def put(self, key: int, value: Sequence[int]) -> int:
        """Write ``value`` (up to KV_VALUE_WORDS int32 words); returns its version."""
        return self.client.put(key, value)

    def close(self) -> None:
        self.client.close()


class KvStorage:
    """The storage server of a key-value job, on the port its plan's path uses."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.port = INC_UDP_PORT if plan.on_switch else HOST_KV_PORT
        job_id = plan.job_id if plan.job_id is not None else HOST_JOB_ID
        self.server = KvServer(job_id, Endpoint(("0.0.0.0", self.port)))

    def serve(self, seconds: float | None = None) -> None:
        """Answer requests for ``seconds`` (None: until interrupted)."""
        end = None if seconds is None else time.monotonic() + seconds
        ep = self.server.endpoint
        while end is None or time.monotonic() < end:
            if not ep.wait(0.2):
                continue
            out = []
            for data, (ip, _) in ep.recv_many():
                reply = self.server.handle(data)
                if reply is not None:
                    out.append((reply, (ip, self.port)))
            if out:
                ep.send_many(out)

    def close(self) -> None:
        self.server.endpoint.close()
