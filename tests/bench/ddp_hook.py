"""Where the DDP hook's time per bucket goes on the host (no Mininet, no root).

Example::

    python -m tests.bench.ddp_hook            # the small model's bucket and 1.1M floats

For each bucket size: the hook's own work (``inclib/block_quantize.py`` and the write back
into the bucket, with an identity int32 all-reduce: quantisation, packets, byte order,
division), and the whole hook body with the int32 calls going to a parameter server on
loopback (one worker, ``hosts/netreduce/ps.py``), with how many calls a bucket takes (one
once its bounds are agreed). Best of three repetitions; the machine is shared, so the
figures are indicative.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hosts.mlp import layer_sizes, parameter_count


def best_ms(fn: Callable[[], object], reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best * 1e3


def profile(n: int, reps: int) -> str:
    from hosts.netreduce.allreduce import AllReduceClient
    from hosts.netreduce.ps import ParameterServer
    from inclib.block_quantize import block_allreduce

    bucket = (np.random.default_rng(0).standard_normal(n) * 1e-2).astype(np.float32)
    averaged = np.empty_like(bucket)  # the real hook writes into the bucket itself
    calls = [0]

    prior: list[Any] = [None]  # as a session keeps it: the last call's bounds

    def hook(int_fn: Callable[[np.ndarray], np.ndarray]) -> None:
        r = block_allreduce(int_fn, 4, bucket, prior=prior[0])
        prior[0] = r.prior
        np.divide(r.values, np.float32(4), out=averaged)

    own = best_ms(lambda: hook(lambda q: np.asarray(q, np.int32).copy()), reps)
    ps = ParameterServer(1, bind=("127.0.0.1", 0)).start()
    c = AllReduceClient(1, 0, 1, 0, 64, 64, dest=ps.address, bind=("127.0.0.1", 0))

    def counted(q: np.ndarray) -> np.ndarray:
        calls[0] += 1
        return c.allreduce_int(q)

    try:
        whole = best_ms(lambda: hook(counted), reps)
    finally:
        c.close()
        ps.stop()
    per_bucket = calls[0] / (1 + 3 * reps)  # the first call agrees its bounds: two calls
    return (
        f"bucket of {n:,} floats: the hook's own work {own:.2f} ms; with the int32 calls to a "
        f"PS on loopback {whole:.2f} ms (calls per bucket: {per_bucket:.2f})"
    )


def main() -> int:
    for model, reps in (("small", 100), ("large", 3)):
        print(profile(parameter_count(layer_sizes(model)), reps))
    print("shared machine: indicative figures, best of 3")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
