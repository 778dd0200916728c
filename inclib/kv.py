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
the same messages on ``HOST_KV_PORT``, which the switch forwards as plain UDP, past its
bindings: there the server alone keeps other hosts out. It takes a request only from the
address the plan gives the worker it names (``Plan.peers``) and the clients' port, of its
job, with a client's flags (docs/protocol.md, *Isolation*, I-KV).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hosts.kv.store import KvClient, KvConfig, KvServer
from hosts.transport.udp import Address, Endpoint
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
    """The storage server of a key-value job, on the port its plan's path uses: requests
    only from its plan's workers (``KvServer``'s checks, each worker at its peer address),
    sent from that port, where it answers them."""

    def __init__(self, plan: Plan, address: Address | None = None) -> None:
        """``address``: where to listen (default: every address, the path's port); the
        clients send from, and are answered on, its port."""
        self.plan = plan
        self.port = address[1] if address else INC_UDP_PORT if plan.on_switch else HOST_KV_PORT
        job_id = plan.job_id if plan.job_id is not None else HOST_JOB_ID
        clients = {w: _ip(peer) for w, peer in enumerate(plan.peers)}
        endpoint = Endpoint(address or ("0.0.0.0", self.port))
        self.server = KvServer(job_id, endpoint, clients, client_port=self.port)

    def serve(self, seconds: float | None = None) -> None:
        """Answer requests for ``seconds`` (None: until interrupted)."""
        self.server.serve(seconds)

    def close(self) -> None:
        self.server.endpoint.close()
