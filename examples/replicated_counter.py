"""A replicated counter with inclib: every client appends "+1" to the log; the counter is
the number of committed increments, read back from the log.

One command runs it on the Mininet network (clients h1..h4, replicas h5..h7)::

    python -m examples.run replicated_counter

Roles: ``admit`` (prints the plan), ``replica`` (one replica of the log), ``client``. The
switch sequences the appends when it serves the job; otherwise the leader replica does,
and the client says so on one line.
"""

from __future__ import annotations

import argparse
import json
import signal
import time

import inclib


def client(plan: str, rank: int, world: int, count: int, out: str | None) -> int:
    with inclib.join(plan, worker_id=rank) as s:
        log = s.log()
        for _ in range(count):
            log.append(b"+1")
        value, deadline = 0, time.monotonic() + 30
        while value < world * count and time.monotonic() < deadline:
            value = sum(1 for e in log.read() if e == b"+1")  # the others may still append
            time.sleep(0.2)
        rec = {"on_switch": s.on_switch, "counter": value, "expected": world * count}
    if out:
        with open(out, "w") as f:
            json.dump(rec, f)
    return 0 if value == world * count else 1


def replica(plan: str, replica_id: int) -> int:
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    r = inclib.LogReplica(inclib.Plan.from_json(plan), replica_id)
    print(f"replica {replica_id}: ready", flush=True)
    r.run(stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.replicated_counter")
    ap.add_argument("role", choices=("admit", "replica", "client"))
    ap.add_argument("--controller", default="")
    ap.add_argument("--plan", default="")
    ap.add_argument("--rank", type=int, default=0, help="client id, or replica id")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.role == "admit":
        print(inclib.admit(a.controller, a.world, kind="consensus", name="counter").to_json())
        return 0
    if a.role == "replica":
        return replica(a.plan, a.rank)
    return client(a.plan, a.rank, a.world, a.count, a.out)


if __name__ == "__main__":
    raise SystemExit(main())
