"""A key-value client written directly against the transport: the same application as
``examples/kv_client.py`` with the controller's API and ``hosts/kv/store.py`` by hand.

Run on Mininet: ``python -m examples.run kv_client --direct``. Next to the library version
it has no host-only path: without the switch's job it stops.
"""

from __future__ import annotations

import argparse
import json
import sys

from controller.api_client import ControllerApi
from hosts.kv.store import KvClient, KvConfig, KvServer
from hosts.transport.udp import Endpoint
from wire.header import INC_UDP_PORT


def client(plan: dict, rank: int, count: int, out: str | None) -> int:
    kv = KvClient(KvConfig.from_controller(plan["controller"], plan["job_id"], rank))
    try:
        for i in range(count):
            kv.put(1000 * (rank + 1) + i, [i, rank, i * rank])
        wrong = [
            i for i in range(count) if kv.get(1000 * (rank + 1) + i)[:3] != [i, rank, i * rank]
        ]
        hot = [kv.get(1000 * (rank + 1))[:3] for _ in range(count)]
        wrong += [i for i, v in enumerate(hot) if v != [0, rank, 0]]
        rec = {"on_switch": True, "puts": count, "gets": 2 * count, "wrong": wrong}
    finally:
        kv.close()
    if out:
        with open(out, "w") as f:
            json.dump(rec, f)
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.direct.kv_client")
    ap.add_argument("role", choices=("admit", "serve", "client"))
    ap.add_argument("--controller", default="")
    ap.add_argument("--plan", default="")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.role == "admit":
        req = {"kind": "kv_cache", "workers": a.world, "name": "kv"}
        job = ControllerApi(a.controller).submit(req)
        print(json.dumps({"controller": a.controller, "job_id": job["job_id"]}))
        return 0
    plan = json.loads(a.plan)
    if a.role == "serve":
        with Endpoint(("0.0.0.0", INC_UDP_PORT)) as ep:
            server = KvServer(plan["job_id"], ep)
            print("kv storage: ready", flush=True)
            server.serve()
        return 0
    return client(plan, a.rank, a.count, a.out)


if __name__ == "__main__":
    sys.exit(main())
