"""Training under Serene: the digits MLP, one switch all-reduce per iteration (= epoch in the
header), an injected straggler, and what partial rounds ask of a worker.

Example (inside a Mininet host; ``topologies/serene.py`` starts one per worker)::

    python -m hosts.serene.train --controller unix:run/serene/controller.sock \\
        --job-id 1 --worker-id 3 --iterations 150 --compute 0.05 \\
        --slow 2 --straggle fixed --json /tmp/w3.json

Per iteration ``e``: the worker's shard of the global batch gives its gradient (as in
``hosts/train.py``), clipped to ``--clip`` so that one agreed bound serves the fixed-point
sum; it "computes" for ``--compute`` seconds (x ``--slow`` while it straggles: ``fixed``
all the time, ``transient`` from ``--slow-from`` to ``--slow-until``, ``random`` with
probability 1/2 per iteration, seeded); then all-reduces with ``epoch = e``.

Partial rounds: each packet's result carries the bitmap of its contributors, so the sum is
rescaled by ``N / contributors`` (the mean gradient of those who made it). A worker
whose bit is missing in every packet was late: it skips the next iteration's compute and
sends its previous gradient again (stale by one iteration) to catch up, as the rounds go
on without it (only when not one of its packets made it: losing the race for the last place on a
few packets is ordinary). Every worker applies the same results, so all replicas stay identical.

Async (the answers are flagged RUNNING): the switch holds the running sum of every
gradient of the async period; the worker's step is what it gained since the worker last
looked (its own gradient and whatever the others added meanwhile), through its momentum.
Replicas then differ (each sees the others' gradients at its own times); no one waits.

With ``--ahead S`` (bounded staleness) the worker computes epoch e on a model that has the
results up to e - S - 1 (``hosts/serene/ssp_client.py`` keeps up to S + 1 epochs in flight), with
the learning rate divided by 1 + S.

The learning rate drops to a tenth after ``--decay-at`` of the run's data (0.75), the same
point for every worker (they count the same rounds), so the last evaluations measure a
model that settled rather than one step of a momentum oscillation.

``--same-data``: the run is ``--iterations`` full batches' worth of gradients rather than
``--iterations`` rounds: a partial round counts for its contributors' share, so partial
modes run more rounds (the same data as sync; at most twice the rounds), with the same
stopping epoch on every worker (they apply the same bitmaps). Async counts each worker's
own iterations.

``--json``: per evaluation (every ``--eval-every`` iterations) the iteration, the training
time so far (evaluation excluded) and the test accuracy; the cumulative time spent in
all-reduce calls (waiting for the others included), WAIT replies, late rounds, skips.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m hosts.serene.train")
    ap.add_argument("--controller", required=True, help="daemon URL (unix:PATH)")
    ap.add_argument("--job-id", type=int, required=True)
    ap.add_argument("--worker-id", type=int, required=True)
    ap.add_argument("--iterations", type=int, default=150)
    ap.add_argument("--compute", type=float, default=0.05, help="seconds of compute per iteration")
    ap.add_argument("--slow", type=float, default=1.0, help="straggler slow-down factor")
    ap.add_argument("--straggle", choices=("fixed", "transient", "random"), default="fixed")
    ap.add_argument("--slow-from", type=int, default=0)
    ap.add_argument("--slow-until", type=int, default=-1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clip", type=float, default=1.0, help="|gradient| bound (fixed point)")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument(
        "--ahead",
        type=int,
        default=0,
        help="epochs this worker may compute before it needs a result (bounded staleness)",
    )
    ap.add_argument(
        "--same-data",
        action="store_true",
        help="train on --iterations full batches' worth of gradients: a partial round "
        "counts for its contributors only, so partial modes run more rounds",
    )
    ap.add_argument(
        "--decay-at",
        type=float,
        default=0.75,
        help="fraction of the run's data after which the learning rate is divided by 10",
    )
    ap.add_argument("--timeout", type=float, default=0.05, help="retransmission timeout, s")
    ap.add_argument("--json", required=True)
    return ap


def slow_now(a: argparse.Namespace, it: int, rng: random.Random) -> bool:
    if a.slow <= 1.0:
        return False
    if a.straggle == "fixed":
        return True
    if a.straggle == "transient":
        return it >= a.slow_from and (a.slow_until < 0 or it < a.slow_until)
    return rng.random() < 0.5


def popcounts(bitmaps: np.ndarray) -> np.ndarray:
    return np.array([bin(int(b)).count("1") for b in bitmaps], dtype=np.float32)


def rescale(total: np.ndarray, bitmaps: np.ndarray, n: int, slots: int) -> tuple[np.ndarray, bool]:
    """The sum over the contributors of each packet, times N / contributors; and whether
    any packet came from a round that completed without everyone (partial)."""
    counts = popcounts(bitmaps)
    scale = np.repeat(n / np.maximum(counts, 1), slots)[: total.size]
    return total * scale, bool((counts < n).any())


def main(argv: list[str] | None = None) -> int:
    from controller.api_client import ApiError, ControllerApi
    from hosts.mlp import MLP
    from hosts.netreduce.allreduce import AllReduceClient, AllReduceTimeout
    from hosts.serene.ssp_client import PipelinedAllReduce
    from hosts.train import load_digits_split

    a = parser().parse_args(argv)
    out: dict[str, Any] = {"worker_id": a.worker_id, "evals": [], "comm_s": 0.0, "skips": 0}
    rng = random.Random(a.seed * 1000 + a.worker_id)
    try:
        cfg = ControllerApi(a.controller, timeout=30.0).worker_config(a.job_id, a.worker_id)
        n = cfg["n_workers"]
        client = AllReduceClient(
            a.job_id, a.worker_id, n, cfg["region_offset"], cfg["region_size"], cfg["window"],
            dest=(cfg["agg_ip"], cfg["udp_port"]), slots=cfg["slots"], timeout=a.timeout,
            total_timeout=120.0, max_retries=10**6,
        )  # fmt: skip
        pipe = PipelinedAllReduce(client)
        x_tr, y_tr, x_te, y_te = load_digits_split(a.seed)
        model = MLP((x_tr.shape[1], a.hidden, 10), seed=a.seed)
        velocity = np.zeros_like(model.theta)
        per_epoch = (len(y_tr) + a.batch_size - 1) // a.batch_size
        grad = np.zeros_like(model.theta)
        # A gradient up to `ahead` steps stale: a step 1 / (1 + ahead) as large keeps
        # momentum SGD stable (staleness-aware learning rate).
        lr = a.lr / (1 + a.ahead)
        state: dict[str, Any] = {
            "applied": 0, "late": False, "late_rounds": 0, "eval_s": 0.0, "async": False,
            "data": 0.0,  # full batches' worth of gradients applied
        }  # fmt: skip
        seen = np.zeros_like(model.theta)  # async: the running aggregate last received
        t_start = time.perf_counter()

        def step_size() -> float:
            """The learning rate, a tenth of it for the last quarter of the run's data
            (--decay-at), so that the final model settles instead of oscillating."""
            return lr * (0.1 if state["data"] >= a.decay_at * a.iterations else 1.0)

        def apply_next() -> None:
            """Wait for the oldest epoch not applied yet and take its step (all workers
            take the same steps in the same order)."""
            t0 = time.perf_counter()
            total, bitmaps = pipe.result(state["applied"])
            out["comm_s"] += time.perf_counter() - t0
            if pipe.running(state["applied"]):
                # async: the switch's running aggregate of every gradient of the async
                # period so far; what is new since this worker last looked is its step.
                if not state["async"]:
                    seen[:] = 0.0  # a new async period starts from zero in the switch
                state["async"] = True
                total, seen[:] = total - seen, total
                state["data"] += 1.0  # its own iteration: the others count theirs
                velocity[:] = a.momentum * velocity + total
                model.theta -= step_size() * velocity
                state["applied"] += 1
                evaluate()
                return
            state["async"] = False
            state["data"] += float(np.mean(popcounts(bitmaps))) / n
            total, partial = rescale(total, bitmaps, n, client.slots)
            # Late for the whole round (not one packet of it counted): the rounds are
            # going on without this worker, which then skips a compute to catch up.
            # Missing a few packets only is the ordinary race for the last place.
            mine_in = any(int(b) >> a.worker_id & 1 for b in bitmaps)
            state["late"] = partial and not mine_in
            state["late_rounds"] += int(not mine_in)
            velocity[:] = a.momentum * velocity + total
            model.theta -= step_size() * velocity
            state["applied"] += 1
            evaluate()

        def evaluate(final: bool = False) -> None:
            done = state["applied"]
            last = out["evals"][-1]["iteration"] if out["evals"] else -1
            if (done % a.eval_every == 0 or final) and done != last:
                t1 = time.perf_counter()
                trained = t1 - t_start - state["eval_s"]  # evaluation time excluded
                acc = model.accuracy(x_te, y_te)
                state["eval_s"] += time.perf_counter() - t1
                out["evals"].append({"iteration": done, "time_s": trained, "accuracy": acc})

        order = np.arange(len(y_tr))
        # --same-data: each worker stops once the rounds it applied hold --iterations full
        # batches (every worker sees the same bitmaps, so all stop after the same epoch).
        rounds = a.iterations * (2 if a.same_data and a.ahead == 0 else 1)
        submitted = 0
        try:
            for it in range(rounds):
                # Bounded staleness on the host: compute epoch `it` on a model that has
                # every result up to it - ahead - 1 (ahead 0: the last one, synchronous).
                while state["applied"] < it - a.ahead or (
                    state["applied"] < it and pipe.ready(state["applied"])
                ):
                    apply_next()
                if it >= a.iterations and state["data"] >= a.iterations - 1e-6:
                    break
                if it % per_epoch == 0:
                    order = np.random.default_rng((a.seed, it // per_epoch)).permutation(len(y_tr))
                start = (it % per_epoch) * a.batch_size
                batch = order[start : start + a.batch_size]
                if state["late"]:
                    out["skips"] += 1  # catch up: last iteration's gradient again, no compute
                    state["late"] = False
                else:
                    mine = np.array_split(batch, n)[a.worker_id]
                    _, g = model.loss_and_grad(x_tr[mine], y_tr[mine], denom=len(batch))
                    grad = np.clip(g, -a.clip, a.clip)
                    time.sleep(a.compute * (a.slow if slow_now(a, it, rng) else 1.0))
                # Room for every gradient of the run in one sum (async's running aggregate).
                pipe.submit(it, grad, bound=a.clip, terms=n * rounds)
                submitted += 1
            while state["applied"] < submitted:
                apply_next()
            evaluate(final=True)
        finally:
            pipe.close()
            out["waits"] = pipe.waits
            out["late_rounds"] = state["late_rounds"]
            client.close()
        out["theta_sum"] = float(np.sum(model.theta, dtype=np.float64))
    except (ApiError, AllReduceTimeout, ValueError, OSError) as e:
        out["error"] = str(e)
        print(f"serene_train: {e}", file=sys.stderr, flush=True)
    Path(a.json).write_text(json.dumps(out))
    return 1 if "error" in out else 0


if __name__ == "__main__":
    sys.exit(main())
