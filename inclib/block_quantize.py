"""Float all-reduce over an integer sum with one scale per block (as SwitchML does).

Example (one worker; any int32 all-reduce will do, here the identity):
    >>> import numpy as np
    >>> x = np.array([1e-6, -2e-6, 3e-6, 4e-6, 500.0, -250.0, 0.5, 0.0], dtype=np.float32)
    >>> r = block_allreduce(lambda q: q, 1, x, block=4)
    >>> r.scales.tolist() == [2.0**48, 2.0**22]   # small block, fine scale; large, coarse
    True
    >>> bool(np.all(np.abs(r.values - x) <= r.error_bound() + np.abs(x) * 2.0**-24))
    True

A single scale for a whole gradient is set by its largest value, so every small value is
rounded to a few bits. Here each block of ``block`` consecutive values gets its own
power-of-two scale ``s_b``, agreed by all workers through the same integer sum the values
use (the switch only adds):

1. one exponent vote gives a bound ``M`` on every worker's ``|x|``
   (``hosts.netreduce.allreduce.agree_bound``);
2. each worker sends, per block, its block maximum ``m_{w,b}`` rounded *up* to a multiple
   of ``M / 2**k`` (``k`` such that ``n * 2**k <= 2**31 - 1``); the sum gives every worker
   the same ``B_b >= sum_w m_{w,b}``;
3. ``s_b`` is the largest power of two with ``s_b * B_b + n / 2 <= 2**31 - 1``. Rounding to
   nearest gives ``|q_{w,i}| <= m_{w,b} s_b + 1/2``, so the switch's int32 sum of the n
   contributions cannot overflow;
4. the values, quantised with ``s_b``, are summed, and divided by ``s_b``.

Error bound (``BlockQuantized.error_bound``): for every element i of block b,
``|result_i - sum_w x_{w,i}| <= n / (2 s_b) + 2**-24 |result_i|`` (quantisation, plus
rounding the exact quotient to float32), and since ``s_b > (2**31 - 1 - n/2) / (2 B_b)``,
``n / (2 s_b) < n * B_b / (2**31 - 1 - n/2)`` with
``B_b <= sum_w max_{i in b} |x_{w,i}| + n M 2**-k``: the error of a block is relative to the
magnitudes *in that block*, not to the largest value of the vector. The cost is one extra
int32 per block (1/256 of the traffic with the default block) and the vote.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hosts.netreduce.allreduce import agree_bound

IntAllReduce = Callable[[np.ndarray], np.ndarray]
INT32_MAX = 2**31 - 1
DEFAULT_BLOCK = 256  # 8 packets of 32 slots
MAX_SCALE_EXP = 120  # a block that is zero on every worker: any scale works; keep it finite


@dataclass(frozen=True)
class BlockQuantized:
    """The float32 sum and the scale every block was quantised with."""

    values: np.ndarray  # float32, the shape of the input
    scales: np.ndarray  # float64, one power of two per block
    block: int
    n_workers: int

    def error_bound(self) -> np.ndarray:
        """Per-element bound on |values - exact sum| from quantisation: n / (2 s_b)."""
        per_block = self.n_workers / (2.0 * self.scales)
        return np.repeat(per_block, self.block)[: self.values.size].reshape(self.values.shape)


def block_scales(bounds: np.ndarray, n_workers: int) -> np.ndarray:
    """Largest power of two s per block with ``s * bound + n/2 <= 2**31 - 1``.

    >>> block_scales(np.array([1.0, 0.0, 3.0]), 4).tolist() == [2.0**30, 2.0**120, 2.0**29]
    True
    """
    b = np.asarray(bounds, dtype=np.float64)
    room = INT32_MAX - n_workers / 2
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(room / np.where(b > 0, b, 1.0)))
    e = np.where(b > 0, np.minimum(e, MAX_SCALE_EXP), MAX_SCALE_EXP)
    s = np.exp2(e)
    over = s * b + n_workers / 2 > INT32_MAX  # log2 rounded up: one step down
    return np.where(over, s / 2, s)


def block_allreduce(
    int_fn: IntAllReduce, n_workers: int, x: np.ndarray, block: int = DEFAULT_BLOCK
) -> BlockQuantized:
    """Sum ``x`` over the workers through ``int_fn`` (an int32 all-reduce that every worker
    calls with vectors of the same length), one scale per ``block`` values."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    shape = np.shape(x)
    v = np.asarray(x, dtype=np.float32).reshape(-1)
    if not np.isfinite(v).all():
        raise ValueError("allreduce: the vector holds NaN or infinite values")
    nb = -(-v.size // block)
    padded = np.zeros(nb * block, dtype=np.float64)
    padded[: v.size] = v
    blocks = padded.reshape(nb, block)
    maxima = np.abs(blocks).max(axis=1) if nb else np.zeros(0)
    bound = agree_bound(int_fn, float(maxima.max()) if nb else 0.0)  # a power of two
    k = int(math.floor(math.log2(INT32_MAX // n_workers)))
    votes = np.ceil(maxima / bound * 2.0**k).astype(np.int32)  # exact: bound, 2**k are 2**e
    bounds = int_fn(votes).astype(np.float64) * (bound / 2.0**k)
    scales = block_scales(bounds, n_workers)
    q = np.rint(blocks * scales[:, None]).astype(np.int32).reshape(-1)
    total = np.asarray(int_fn(q), dtype=np.float64).reshape(nb, block)
    out = (total / scales[:, None]).reshape(-1)[: v.size].astype(np.float32)
    return BlockQuantized(out.reshape(shape), scales, block, n_workers)
