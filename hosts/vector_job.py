"""A worker that all-reduces seeded integer vectors and records results and call times.

Example (inside a Mininet host; tests and benchmarks start one per worker)::

    python -m hosts.vector_job --controller unix:run/netreduce/controller.sock \\
        --job-id 1 --worker-id 0 --size 4096 --calls 2 --seed 7 --out /tmp/w0

It asks the controller for its job settings, all-reduces ``--calls`` vectors per size with
``--method`` (switch, ps, ring), and writes ``PREFIX.npy`` (the results, one row per call,
when a single size is given) and ``PREFIX.json`` (call times, the CPU seconds of each
call, and ``error`` if a call failed). ``make_vector`` and ``expected_sum`` give every
worker's input and the exact host-side sum, so that whoever started the workers can check
the switch bit for bit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

METHODS = ("switch", "ps", "ring")


def make_vector(seed: int, worker_id: int, call: int, size: int, bits: int = 32) -> np.ndarray:
    """The int32 vector worker ``worker_id`` all-reduces in call ``call``: values of
    ``bits`` bits (full int32 range by default; fewer keep sums from overflowing)."""
    rng = np.random.default_rng((seed, worker_id, call))
    top = 1 << (bits - 1)
    return rng.integers(-top, top, size=size, dtype=np.int64).astype(np.int32)


def expected_sum(seed: int, workers: int, call: int, size: int, bits: int = 32) -> np.ndarray:
    """The host-side int32 sum (wrapping, like the switch) of every worker's vector.

    >>> a, b = make_vector(1, 0, 0, 3), make_vector(1, 1, 0, 3)
    >>> expected_sum(1, 2, 0, 3).tolist() == (a + b).tolist()
    True
    """
    total = np.zeros(size, dtype=np.int32)
    for w in range(workers):
        total += make_vector(seed, w, call, size, bits)
    return total


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m hosts.vector_job")
    ap.add_argument("--method", choices=METHODS, default="switch")
    ap.add_argument("--controller", required=True, help="daemon URL (unix:PATH)")
    ap.add_argument("--job-id", type=int, required=True)
    ap.add_argument("--worker-id", type=int, required=True)
    ap.add_argument("--size", default="4096", help="int32 values per call (list: 64,4096)")
    ap.add_argument("--calls", type=int, default=2, help="calls per size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bits", type=int, default=32, choices=range(2, 33), metavar="2..32",
                    help="bits of each value (32: full int32 range)")  # fmt: skip
    ap.add_argument("--peers", help="ring: every worker's IP in rank order (default 10.0.0.1..)")
    ap.add_argument("--timeout", type=float, default=0.05, help="retransmission timeout, s")
    ap.add_argument("--total-timeout", type=float, default=30.0, help="bound of one call, s")
    ap.add_argument("--window", type=int, default=0,
                    help="ps and ring: packets in flight (default 0: the job's window); the"
                         " switch methods' window is bound by the job's switch memory")  # fmt: skip
    ap.add_argument("--compute-ms", type=float, default=0.0,
                    help="a compute phase before each call: uniform in [0.5, 1.5] x this, the"
                         " same for the job's workers (seeded by --seed and the call)")  # fmt: skip
    ap.add_argument("--out", required=True, help="PREFIX: writes PREFIX.npy and PREFIX.json")
    ap.add_argument("--barrier", nargs=2, metavar=("DIR", "N"),
                    help="before the first call, wait until N workers (of any jobs) are"
                         " ready, each a file in DIR: concurrent jobs' calls overlap")  # fmt: skip
    ap.add_argument("--warmup", type=int, default=0, metavar="N",
                    help="N untimed calls (zeros, the first size) before the timed ones: they"
                         " end at about the same time for every worker of the job, so the"
                         " first timed call starts no more apart than later ones")  # fmt: skip
    return ap


def wait_barrier(directory: str, n: int, name: str, limit_s: float = 60.0) -> None:
    """Mark this worker ready in ``directory`` and wait (at most ``limit_s``) until ``n``
    workers are: every worker's first call then starts within a few ms of the others'."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / f"ready.{name}").touch()
    end = time.monotonic() + limit_s
    while len(list(d.glob("ready.*"))) < n and time.monotonic() < end:
        time.sleep(0.002)


def _client(a: argparse.Namespace, cfg: dict[str, Any]) -> Any:
    from hosts.netreduce.allreduce import AllReduceClient
    from hosts.netreduce.ps import PS_UDP_PORT
    from hosts.netreduce.ring import RING_UDP_PORT, RingAllReduce
    from wire.header import INC_UDP_PORT

    n = cfg["n_workers"]
    if a.window:  # the job's memory does not bound a host's window: its region grows along
        cfg = {**cfg, "window": a.window, "region_size": max(cfg["region_size"], a.window)}
    if a.method == "ring":
        ips = a.peers.split(",") if a.peers else [f"10.0.0.{i + 1}" for i in range(n)]
        peers = [(ip, RING_UDP_PORT) for ip in ips]
        return RingAllReduce(
            a.worker_id, peers, job_id=a.job_id, slots=cfg["slots"], window=cfg["window"],
            timeout=a.timeout, total_timeout=a.total_timeout,
        )  # fmt: skip
    port = cfg["udp_port"] if a.method == "switch" else PS_UDP_PORT
    if cfg.get("kind") == "atp" and a.method == "switch":
        from hosts.atp.worker import AtpClient

        return AtpClient(
            a.job_id, a.worker_id, n, cfg["region_offset"], cfg["region_size"], cfg["window"],
            dest=(cfg["agg_ip"], port), slots=cfg["slots"], timeout=a.timeout,
            total_timeout=a.total_timeout,
        )  # fmt: skip
    # A ps worker listens on PS_UDP_PORT, so that the server's results cross the switch as
    # plain UDP (as INC results of a job the switch aggregates they would be forged).
    bind = ("0.0.0.0", INC_UDP_PORT if a.method == "switch" else PS_UDP_PORT)
    return AllReduceClient(
        a.job_id, a.worker_id, n, cfg["region_offset"], cfg["region_size"], cfg["window"],
        dest=(cfg["agg_ip"], port), slots=cfg["slots"], timeout=a.timeout,
        total_timeout=a.total_timeout, bind=bind,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from controller.api_client import ApiError, ControllerApi
    from hosts.netreduce.allreduce import AllReduceTimeout

    ap = parser()
    a = ap.parse_args(argv)
    if a.window < 0 or (a.window and a.method == "switch"):
        ap.error("--window: a positive count, for --method ps or ring only")
    sizes = [int(x) for x in a.size.split(",")]
    by_size: dict[str, list[float]] = {str(n): [] for n in sizes}
    out: dict[str, Any] = {"method": a.method, "worker_id": a.worker_id, "times": []}
    out["times_by_size"] = by_size
    out["cpu"] = []
    out[
        "starts"
    ] = []  # wall clock (time.time()) at each call's start: the workers' skew, the jobs' overlap
    results = []
    try:
        cfg = ControllerApi(a.controller, timeout=30.0).worker_config(a.job_id, a.worker_id)
        a.job_id = cfg.get("job_id", a.job_id)  # the id on the wire (ATP leaves: the spine's)
        client = _client(a, cfg)
        # every input made before the first call: no call's start waits for the next vector
        inputs = {(size, call): make_vector(a.seed, a.worker_id, call, size, a.bits)
                  for size in sizes for call in range(a.calls)}  # fmt: skip
        if a.barrier:
            wait_barrier(a.barrier[0], int(a.barrier[1]), f"{a.job_id}.{a.worker_id}")
        try:
            for _ in range(a.warmup):
                client.allreduce_int(np.zeros(sizes[0], dtype=np.int32))
            for size in sizes:
                for call in range(a.calls):
                    x = inputs[(size, call)]
                    if a.compute_ms > 0:
                        phase = np.random.default_rng((a.seed, call)).uniform(0.5, 1.5)
                        time.sleep(a.compute_ms * phase / 1e3)
                    out["starts"].append(time.time())
                    t0, c0 = time.perf_counter(), time.process_time()
                    results.append(client.allreduce_int(x))
                    by_size[str(size)].append(time.perf_counter() - t0)
                    out["times"].append(by_size[str(size)][-1])
                    out["cpu"].append(time.process_time() - c0)  # this worker's CPU, s
        finally:
            stats = getattr(client, "stats", None)
            if stats is not None:
                out["stats"] = dict(vars(stats))
            client.close()
    except (ApiError, AllReduceTimeout, ValueError, OSError) as e:
        out["error"] = str(e)
        print(f"vector_job: {e}", file=sys.stderr, flush=True)
    if results and len(sizes) == 1:
        np.save(a.out + ".npy", np.stack(results))
    Path(a.out + ".json").write_text(json.dumps(out))
    return 1 if "error" in out else 0


if __name__ == "__main__":
    sys.exit(main())
