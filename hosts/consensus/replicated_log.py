"""The replicated log's command line: a replica, or a client appending one entry at a time.

Example (on Mininet hosts; ``topologies/consensus.py`` and the tests start them so)::

    python -m hosts.consensus.replicated_log replica --controller unix:run/d.sock \\
        --job-id 1 --replica-id 0 --sequencer switch
    python -m hosts.consensus.replicated_log client --controller unix:run/d.sock \\
        --job-id 1 --worker-id 0 --count 100 --read

The replica (``replica.py``) runs until SIGTERM and then prints its summary (session, view,
log, counters) as one JSON line; the client (``log_client.py``) prints its rate, latencies
and commits. The protocol: ``replica.py`` and docs/protocol.md, "Consensus".
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

import numpy as np

from hosts.consensus.log_client import LogClient, LogConfig
from hosts.consensus.log_wire import LogError
from hosts.consensus.replica import Replica


def replica_main(args: argparse.Namespace) -> int:
    from controller.api_client import ControllerApi

    job = ControllerApi(args.controller).job(args.job_id)
    params = job["params"]
    clients = {int(w["worker_id"]): str(w["ip"]) for w in job["workers"]}
    group = None if args.sequencer == "host" else str(params["group_ip"])
    key = ControllerApi(args.controller).control_key(args.job_id)
    rep = Replica(args.job_id, args.replica_id, list(params["replicas"]), clients, group, key=key)
    stop = [False]

    def _stop(*_: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"replica {args.replica_id}: job {args.job_id} ready", flush=True)
    rep.run(stop)
    print(json.dumps(rep.summary()), flush=True)
    return 0


def client_main(args: argparse.Namespace) -> int:
    cfg = LogConfig.from_controller(
        args.controller, args.job_id, args.worker_id, args.sequencer == "host"
    )
    client = LogClient(cfg)
    try:
        lat, done = [], []
        start = time.monotonic()
        for i in range(args.count):
            t = time.monotonic()
            session, index = client.append(f"c{args.worker_id}-{i}".encode())
            lat.append(time.monotonic() - t)
            done.append([session, index, args.worker_id, client.req, f"c{args.worker_id}-{i}"])
        wall = time.monotonic() - start
        out: dict[str, Any] = {
            "appends": args.count,
            "ops_per_s": args.count / wall if wall > 0 else 0.0,
            "p50_us": float(np.percentile(lat, 50) * 1e6) if lat else 0.0,
            "p99_us": float(np.percentile(lat, 99) * 1e6) if lat else 0.0,
            "retransmissions": client.retransmissions,
        }
        if args.read:
            out["log"] = [[e.client, e.req, e.data.decode(errors="replace")] for e in client.read()]
        out["committed"] = done
        print(json.dumps(out), flush=True)
        return 0
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hosts.consensus.replicated_log", description=__doc__.split("\n")[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("replica", "client"):
        p = sub.add_parser(name)
        p.add_argument("--controller", required=True, help="the daemon's URL (unix:PATH)")
        p.add_argument("--job-id", type=int, required=True)
        p.add_argument("--sequencer", choices=("switch", "host"), default="switch")
    sub.choices["replica"].add_argument("--replica-id", type=int, required=True)
    cl = sub.choices["client"]
    cl.add_argument("--worker-id", type=int, required=True)
    cl.add_argument("--count", type=int, default=100, help="appends, one after another")
    cl.add_argument("--read", action="store_true", help="read the log from the leader at the end")
    args = ap.parse_args(argv)
    try:
        return replica_main(args) if args.cmd == "replica" else client_main(args)
    except (LogError, OSError, KeyError) as err:
        print(f"consensus: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
