"""Where the DDP hook's time per bucket goes on the host (no Mininet, no root).

Example::

    python -m tests.bench.ddp_hook            # the small model's bucket and 1.1M floats

For each bucket size: the hook's own work (``inclib/block_quantize.py`` and the write back
into the bucket, with an identity int32 all-reduce: quantisation, packets, byte order,
division), and the whole hook body with the int32 calls going to a parameter server on
loopback (one worker, ``hosts/netreduce/ps.py``), with how many calls a bucket takes (one
once its bounds are agreed). Best of three repetitions; the machine is shared, so the
figures are indicative. Then, over the large model's first 48 training steps with 4
workers, how many of its blocks a bucket's second call sends again per step
(``outgrown_blocks``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
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


def outgrown_blocks(model: str = "large", steps: int = 48, workers: int = 4) -> list[int]:
    """Per training step after the first, how many blocks of the fused gradient some worker's
    maximum put beyond its last promise (``inclib.block_quantize.promises``): the blocks a
    bucket's second call sends again. The workers are simulated in one process: each step
    every worker's gradient on its shard (``examples/training.py``'s data, model, batches and
    SGD), then their mean applied, as DDP does."""
    import torch

    from examples.training import digits, mlp
    from inclib.block_quantize import DEFAULT_BLOCK, promises

    torch.manual_seed(0)
    net = mlp(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.2, momentum=0.9)
    data = [digits(w, workers) for w in range(workers)]
    counts: list[int] = []
    last: list[np.ndarray] | None = None

    def batches(w: int) -> Iterator[torch.Tensor]:
        for epoch in itertools.count():
            gen = torch.Generator().manual_seed(epoch)
            yield from torch.randperm(len(data[w][1]), generator=gen).split(32)

    shards = [batches(w) for w in range(workers)]
    for _ in range(steps + 1):
        grads, maxima = [], []
        for (x, y, _, _), shard in zip(data, shards, strict=True):
            batch = next(shard)
            net.zero_grad()
            torch.nn.functional.cross_entropy(net(x[batch]), y[batch]).backward()
            flat = [p.grad.reshape(-1) for p in net.parameters() if p.grad is not None]
            g: np.ndarray = torch.cat(flat).numpy().copy()
            grads.append(g)
            padded = np.zeros(-(-g.size // DEFAULT_BLOCK) * DEFAULT_BLOCK, dtype=np.float32)
            padded[: g.size] = np.abs(g)
            maxima.append(padded.reshape(-1, DEFAULT_BLOCK).max(axis=1).astype(np.float64))
        if last is not None:
            counts.append(int(np.any([m > p for m, p in zip(maxima, last, strict=True)], 0).sum()))
        last = [promises(workers, m) for m in maxima]
        mean = np.mean(grads, axis=0)
        at = 0
        for p in net.parameters():
            p.grad = torch.from_numpy(mean[at : at + p.numel()].reshape(p.shape).copy())
            at += p.numel()
        opt.step()
    return counts


def main() -> int:
    for model, reps in (("small", 100), ("large", 3)):
        print(profile(parameter_count(layer_sizes(model)), reps))
    counts = outgrown_blocks(steps=48)
    print(
        f"large model, 4 workers: blocks sent again per step (of "
        f"{-(-parameter_count(layer_sizes('large')) // 256):,}), steps 2-{len(counts) + 1}: "
        f"median {int(np.median(counts))}, most {max(counts)}"
    )
    print("shared machine: indicative figures, best of 3")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
