"""A Serene worker: one all-reduce per epoch, the epoch in every header, an optional straggler.

Example (inside a Mininet host; tests start one per worker)::

    python -m hosts.serene.worker --controller unix:run/serene/controller.sock \\
        --job-id 1 --worker-id 2 --epochs 20 --size 64 --seed 7 --slow 0.2 --out /tmp/w2

Per epoch ``e`` (from 0): sleep ``--slow`` seconds (the injected straggler's extra compute;
``--slow-from/--slow-until`` make it transient), then all-reduce
``hosts.vector_job.make_vector(seed, worker_id, e, size)`` with ``epoch = e`` in the header.
Writes ``PREFIX.npz`` (``results``: one row per epoch; ``bitmaps``: per epoch and packet,
the contributors the switch named) and ``PREFIX.json`` (per-epoch times, WAIT replies,
``running``: per epoch whether the answer was async's running aggregate (``--pipeline`` or
``--ahead``), ``error`` if a call failed). Whoever started the workers checks every packet's sum
against the contributors its bitmap names (``hosts.vector_job.make_vector``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m hosts.serene.worker")
    ap.add_argument("--controller", required=True, help="daemon URL (unix:PATH)")
    ap.add_argument("--job-id", type=int, required=True)
    ap.add_argument("--worker-id", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--size", type=int, default=64, help="int32 values per epoch")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=float, default=0.0, help="extra seconds per epoch")
    ap.add_argument("--slow-from", type=int, default=0, help="first slow epoch")
    ap.add_argument("--slow-until", type=int, default=-1, help="first normal epoch again")
    ap.add_argument("--compute", type=float, default=0.0, help="seconds per epoch for all")
    ap.add_argument("--ahead", type=int, default=0, help="epochs in flight beyond the oldest")
    ap.add_argument(
        "--pipeline",
        action="store_true",
        help="send through hosts/serene/ssp_client.py even with --ahead 0 (async needs it)",
    )
    ap.add_argument("--timeout", type=float, default=0.05, help="retransmission timeout, s")
    ap.add_argument("--total-timeout", type=float, default=60.0, help="bound of one call, s")
    ap.add_argument("--out", required=True, help="PREFIX: writes PREFIX.npz and PREFIX.json")
    return ap


def straggling(a: argparse.Namespace, epoch: int) -> bool:
    return epoch >= a.slow_from and (a.slow_until < 0 or epoch < a.slow_until)


def run_ahead(
    a: argparse.Namespace, client: Any, results: list[Any], bitmaps: list[Any], out: Any
) -> None:
    """Up to ``--ahead`` epochs in flight beyond the oldest without its result
    (``hosts/serene/ssp_client.py``), as a bounded-staleness worker sends them."""
    from hosts.serene.ssp_client import PipelinedAllReduce
    from hosts.vector_job import make_vector

    pipe = PipelinedAllReduce(client)
    try:
        for epoch in range(a.epochs + a.ahead):
            if epoch < a.epochs:
                time.sleep(a.compute + (a.slow if straggling(a, epoch) else 0.0))
                pipe.submit(epoch, make_vector(a.seed, a.worker_id, epoch, a.size), None)
            if epoch >= a.ahead:
                total, bms = pipe.result(epoch - a.ahead)
                results.append(total)
                bitmaps.append(bms.copy())
                out.setdefault("running", []).append(pipe.running(epoch - a.ahead))
    finally:
        pipe.close()
        out["waits"] = pipe.waits


def main(argv: list[str] | None = None) -> int:
    from controller.api_client import ApiError, ControllerApi
    from hosts.netreduce.allreduce import AllReduceClient, AllReduceTimeout
    from hosts.vector_job import make_vector

    a = parser().parse_args(argv)
    out: dict[str, Any] = {"worker_id": a.worker_id, "times": [], "waits": 0}
    results: list[np.ndarray] = []
    bitmaps: list[np.ndarray] = []
    try:
        cfg = ControllerApi(a.controller, timeout=30.0).worker_config(a.job_id, a.worker_id)
        client = AllReduceClient(
            a.job_id, a.worker_id, cfg["n_workers"], cfg["region_offset"],
            cfg["region_size"], cfg["window"], dest=(cfg["agg_ip"], cfg["udp_port"]),
            slots=cfg["slots"], timeout=a.timeout, total_timeout=a.total_timeout,
            max_retries=10**6,
        )  # fmt: skip
        pipelined = a.ahead > 0 or a.pipeline
        if pipelined:
            run_ahead(a, client, results, bitmaps, out)
        try:
            for epoch in range(0 if pipelined else a.epochs):
                t0 = time.perf_counter()
                time.sleep(a.compute + (a.slow if straggling(a, epoch) else 0.0))
                client.epoch = epoch
                x = make_vector(a.seed, a.worker_id, epoch, a.size)
                results.append(client.allreduce_int(x))
                bitmaps.append(client.last_bitmaps.copy())
                out["times"].append(time.perf_counter() - t0)
        finally:
            out["waits"] = out.get("waits", 0) + client.stats.waits
            out["dropped"] = client.stats.drops_by_reason()  # hosts/transport/result_filter.py
            client.close()
    except (ApiError, AllReduceTimeout, ValueError, OSError) as e:
        out["error"] = str(e)
        print(f"serene_worker: {e}", file=sys.stderr, flush=True)
    if results:
        np.savez(a.out + ".npz", results=np.stack(results), bitmaps=np.stack(bitmaps))
    Path(a.out + ".json").write_text(json.dumps(out))
    return 1 if "error" in out else 0


if __name__ == "__main__":
    sys.exit(main())
