"""A worker of a scheduled job: every epoch it asks the controller for its region, computes,
and all-reduces its gradient through the switch.

Example (inside a Mininet host; ``topologies/scheduling.py`` starts one per worker)::

    python -m hosts.scheduled_job --controller unix:run/sched/controller.sock \\
        --job-id 3 --worker-id 0 --seed 7 --out run/sched/job3-w0.json

The job was submitted with a class (``incctl job submit --class md --deadline 90s
--epochs 40 --model-bytes 256K --compute-ms 30 ...``); the worker learns its epochs, model
size and compute time from the controller (``GET /jobs/{id}/workers/{w}``). Each epoch:

1. ``POST /jobs/{id}/workers/{w}/epoch`` with the epoch and the smallest RTT measured
   in the previous one; the reply is the region of this epoch. While it says ``wait``
   (no memory for the job now, or a new region waiting for the other workers to leave the
   old one: ``controller/sched/switchover.py``) the worker asks again; the daemon holds each
   request until something changes.
2. Compute for ``compute_ms``: the stand-in for a GPU's forward and backward pass, which
   leaves the host CPU idle just like this sleep does.
3. All-reduce the epoch's gradient, ``model_bytes`` of int32 values
   (``hosts.vector_job.make_vector``), through the switch with the epoch in every header,
   and compare the result with the exact sum of every worker's vector
   (``expected_sum``): every epoch is checked bit for bit, whatever region it used.

After the last epoch it reports ``epoch == epochs`` (done: the controller frees the
memory) and writes ``--out``: start and end times, per epoch the region, the wait, the
compute and all-reduce times, and the count of epochs whose sum was not exact.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from controller.api_client import ApiError, ControllerApi
from hosts.atp.worker import AtpClient
from hosts.netreduce.allreduce import AllReduceClient, AllReduceTimeout
from hosts.vector_job import expected_sum, make_vector

ASK_WAIT_S = 20.0  # how long one epoch request may be held by the daemon
RETRY_S = 0.5  # between attempts to reach a controller that is not answering


def ask_epoch(
    api: ControllerApi,
    job_id: int,
    worker_id: int,
    epoch: int,
    rtt_s: float | None,
    give_up_s: float,
) -> tuple[dict[str, Any], float]:
    """The region of ``epoch`` once the worker may send (the reply, seconds waited). A
    controller that cannot be reached (restarting) is asked again until ``give_up_s``."""
    start = time.monotonic()
    while True:
        try:
            reply = api.epoch(job_id, worker_id, epoch, rtt_s, wait=ASK_WAIT_S)
        except ApiError as err:
            if err.status != 0 or time.monotonic() - start > give_up_s:
                raise
            time.sleep(RETRY_S)
            continue
        if not reply["wait"]:
            return reply, time.monotonic() - start
        if time.monotonic() - start > give_up_s:
            raise TimeoutError(
                f"job {job_id}, worker {worker_id}: no region for epoch {epoch} after"
                f" {give_up_s:g} s (is the pool large enough for the job's share?)"
            )


def train(
    api: ControllerApi,
    client: AllReduceClient,
    cfg: dict[str, Any],
    seed: int = 0,
    give_up_s: float = 600.0,
) -> dict[str, Any]:
    """Run every epoch of the job ``cfg`` describes (``worker_config``) with ``client``."""
    job_id, worker_id = int(cfg["job_id"]), int(cfg["worker_id"])
    epochs, n = int(cfg["epochs"]), int(cfg["n_workers"])
    values = -(-int(cfg["model_bytes"]) // 4)
    compute_s = float(cfg["compute_ms"]) / 1e3
    record: dict[str, Any] = {
        "job_id": job_id,
        "worker_id": worker_id,
        "epochs": [],
        "mismatches": 0,
        "start": time.time(),
    }
    rtt: float | None = None
    for e in range(epochs):
        reply, waited = ask_epoch(api, job_id, worker_id, e, rtt, give_up_s)
        client.set_layout(
            e,
            reply["region_offset"],
            reply["region_size"],
            reply["window"],
            str(cfg.get("addressing") or "modulo"),
        )
        t0 = time.monotonic()
        time.sleep(compute_s)
        t1 = time.monotonic()
        got = client.allreduce_int(make_vector(seed + job_id, worker_id, e, values))
        t2 = time.monotonic()
        exact = bool(np.array_equal(got, expected_sum(seed + job_id, n, e, values)))
        record["mismatches"] += 0 if exact else 1
        rtt = client.take_min_rtt() or rtt
        record["epochs"].append(
            {
                "epoch": e,
                "region": [reply["region_offset"], reply["region_size"]],
                "wait_s": waited,
                "compute_s": t1 - t0,
                "allreduce_s": t2 - t1,
                "rtt_s": rtt,
                "exact": exact,
            }
        )
    ask_epoch(api, job_id, worker_id, epochs, rtt, give_up_s)  # done: the memory goes back
    record["end"] = time.time()
    record["stats"] = vars(client.stats)
    return record


def run(args: argparse.Namespace) -> dict[str, Any]:
    api = ControllerApi(args.controller)
    cfg = api.worker_config(args.job_id, args.worker_id)
    if not cfg.get("scheduled"):
        raise ValueError(f"job {args.job_id} was not submitted with a class (not scheduled)")
    # An ATP job hashes into its range of the ATP pool and sends to its parameter server
    # (agg_ip), which answers collisions and retransmissions (hosts/atp/ps.py).
    cls = AtpClient if cfg.get("kind") == "atp" else AllReduceClient
    client = cls(
        args.job_id,
        args.worker_id,
        int(cfg["n_workers"]),
        0,
        1,
        1,
        dest=(cfg["agg_ip"], cfg["udp_port"]),
        slots=cfg["slots"],
        timeout=args.timeout,
        total_timeout=args.total_timeout,
    )
    with client:
        return train(api, client, cfg, args.seed, args.give_up)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m hosts.scheduled_job", description=__doc__)
    ap.add_argument("--controller", required=True, help="daemon URL (unix:PATH or http://..)")
    ap.add_argument("--job-id", type=int, required=True)
    ap.add_argument("--worker-id", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0, help="vectors: make_vector(seed + job id, ..)")
    ap.add_argument("--timeout", type=float, default=0.2, help="retransmission timeout, s")
    ap.add_argument("--total-timeout", type=float, default=60.0, help="bound of one all-reduce")
    ap.add_argument("--give-up", type=float, default=600.0, help="longest wait for a region, s")
    ap.add_argument("--out", type=Path, required=True, help="JSON record of the run")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        record = run(args)
    except (ApiError, AllReduceTimeout, TimeoutError, ValueError) as err:
        print(f"scheduled_job: {err}", file=sys.stderr)
        args.out.write_text(json.dumps({"error": str(err)}))
        return 1
    args.out.write_text(json.dumps(record))
    bad = record["mismatches"]
    print(
        f"job {args.job_id} worker {args.worker_id}: {len(record['epochs'])} epochs in"
        f" {record['end'] - record['start']:.1f} s, {bad} inexact"
    )
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
