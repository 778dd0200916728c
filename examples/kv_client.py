"""A key-value client with inclib: writes keys, reads them back (and a shared hot key).

One command runs it on the Mininet network (clients h1..h4, storage server h5)::

    python -m examples.run kv_client

Roles: ``admit`` (prints the plan), ``serve`` (the storage server), ``client``. Reads of
hot keys are answered by the switch's cache when it serves the job; otherwise every request
goes to the storage server, and the client says so on one line.
"""

from __future__ import annotations

import argparse
import json

import inclib


def client(plan: str, rank: int, count: int, out: str | None) -> int:
    with inclib.join(plan, worker_id=rank) as s:
        kv = s.kv()
        for i in range(count):
            kv.put(1000 * (rank + 1) + i, [i, rank, i * rank])
        wrong = [
            i for i in range(count) if kv.get(1000 * (rank + 1) + i)[:3] != [i, rank, i * rank]
        ]
        hot = [kv.get(1000 * (rank + 1))[:3] for _ in range(count)]  # a hot key: often read
        wrong += [i for i, v in enumerate(hot) if v != [0, rank, 0]]
        rec = {"on_switch": s.on_switch, "puts": count, "gets": 2 * count, "wrong": wrong}
    if out:
        with open(out, "w") as f:
            json.dump(rec, f)
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.kv_client")
    ap.add_argument("role", choices=("admit", "serve", "client"))
    ap.add_argument("--controller", default="")
    ap.add_argument("--plan", default="")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.role == "admit":
        print(inclib.admit(a.controller, a.world, kind="kv_cache", name="kv").to_json())
        return 0
    if a.role == "serve":
        storage = inclib.KvStorage(inclib.Plan.from_json(a.plan))
        print("kv storage: ready", flush=True)
        storage.serve()
        return 0
    return client(a.plan, a.rank, a.count, a.out)


if __name__ == "__main__":
    raise SystemExit(main())
