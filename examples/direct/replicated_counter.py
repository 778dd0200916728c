"""A replicated counter written directly against the transport: the same application as
``examples/replicated_counter.py`` with the controller's API and
``hosts/consensus/replica.py`` and ``log_client.py`` by hand.

Run on Mininet: ``python -m examples.run replicated_counter --direct``. Next to the
library version it has no host-only path: without the switch's job it stops.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from controller.api_client import ControllerApi
from hosts.consensus.log_client import LogClient, LogConfig
from hosts.consensus.replica import Replica


def client(plan: dict, rank: int, world: int, count: int, out: str | None) -> int:
    log = LogClient(LogConfig.from_controller(plan["controller"], plan["job_id"], rank))
    try:
        for _ in range(count):
            log.append(b"+1")
        value, deadline = 0, time.monotonic() + 30
        while value < world * count and time.monotonic() < deadline:
            value = sum(1 for e in log.read() if e.data == b"+1")
            time.sleep(0.2)
        rec = {"on_switch": True, "counter": value, "expected": world * count}
    finally:
        log.close()
    if out:
        with open(out, "w") as f:
            json.dump(rec, f)
    return 0 if value == world * count else 1


def replica(plan: dict, rid: int) -> int:
    api = ControllerApi(plan["controller"])
    job = api.job(plan["job_id"])
    clients = {int(w["worker_id"]): str(w["ip"]) for w in job["workers"]}
    params = job["params"]
    key = api.control_key(plan["job_id"])
    rep = Replica(
        plan["job_id"], rid, list(params["replicas"]), clients, params["group_ip"], key=key
    )
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    print(f"replica {rid}: ready", flush=True)
    rep.run(stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.direct.replicated_counter")
    ap.add_argument("role", choices=("admit", "replica", "client"))
    ap.add_argument("--controller", default="")
    ap.add_argument("--plan", default="")
    ap.add_argument("--rank", type=int, default=0, help="client id, or replica id")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.role == "admit":
        req = {"kind": "consensus", "workers": a.world, "name": "counter"}
        job = ControllerApi(a.controller).submit(req)
        print(json.dumps({"controller": a.controller, "job_id": job["job_id"]}))
        return 0
    plan = json.loads(a.plan)
    if a.role == "replica":
        return replica(plan, a.rank)
    return client(plan, a.rank, a.world, a.count, a.out)


if __name__ == "__main__":
    sys.exit(main())
