"""Float all-reduce over an integer sum with one scale per block (as SwitchML does).

Example (one worker; any int32 all-reduce will do, here the identity):
    >>> import numpy as np
    >>> x = np.array([1e-6, -2e-6, 3e-6, 4e-6, 500.0, -250.0, 0.5, 0.0], dtype=np.float32)
    >>> r = block_allreduce(lambda q: q, 1, x, block=4)
    >>> r.scales.tolist() == [2.0**44, 2.0**18]   # small block, fine scale; large, coarse
    True
    >>> bool(np.all(np.abs(r.values - x) <= r.error_bound() + np.abs(x) * 2.0**-24))
    True

A single scale for a whole gradient is set by its largest value, so every small value is
rounded to a few bits. Here each block of ``block`` consecutive values gets its own
power-of-two scale ``s_b``, agreed by all workers through the same integer sum the values
use (the switch only adds), in two integer all-reduce calls:

1. each worker w sends, per block b, ``2**e_{w,b}`` with ``e_{w,b}`` three above the smallest
   exponent with ``max_{i in b} |x_{w,i}| <= 2**e_{w,b}`` (for a block of zeros the largest
   ``e_{w,b}`` of the worker's other blocks; none if all are zero), split over
   ``words(n)`` int32 words by exponent range, so that no word's sum can overflow: a word
   covers ``k + 1`` exponents, ``k`` such that ``n * 2**k <= 2**31 - 1``. The sum gives
   every worker the same ``B_b = sum_w 2**e_{w,b}``, with
   ``8 sum_w m_{w,b} <= B_b < 16 sum_w m_{w,b}``, ``m_{w,b}`` the block's maximum (for a
   block of zeros the worker's largest block maximum). One int32 more per call says whether a
   worker's ``|x|`` exceeds the supported range: then every worker fails alike;
2. ``s_b`` is the largest power of two with ``s_b * B_b + n / 2 <= 2**31 - 1``. Rounding to
   nearest gives ``|q_{w,i}| <= m_{w,b} s_b + 1/2``, so the switch's int32 sum of the n
   contributions cannot overflow; the values, quantised with ``s_b``, are summed, and
   divided by ``s_b``.

Error bound (``BlockQuantized.error_bound``): for every element i of block b,
``|result_i - sum_w x_{w,i}| <= n / (2 s_b) + 2**-24 |result_i|`` (quantisation, plus
rounding the exact quotient to float32), and since ``s_b > (2**31 - 1 - n/2) / (2 B_b)``,
``n / (2 s_b) < n B_b / (2**31 - 1 - n/2) < 16 n sum_w m_{w,b} / (2**31 - 1 - n/2)`` (a
block maximum below ``2**EXP_MIN`` counts as ``2**EXP_MIN``): the error of a block is relative
to the magnitudes *in that block*, not to the largest value of the vector (a block of zeros
is summed exactly whatever its scale). The cost is
``words(n)`` int32 per block (3 in 256 with the default block and up to 1,024 workers) and no
extra round trip: one call for the bounds, one for the values.

The next call of the same length (DDP's buckets, every iteration) takes **one** call: it
quantises with the bounds the last call agreed (``prior``) and sends, after the values, this
call's bound words and one flag word per block saying whether the block's maximum exceeds
what the worker promised last time (``2**e_{w,b}``, eight times its maximum then, rounded up). A
block no worker flagged sums to at most ``sum_w 2**e_{w,b} = B_b``, so its values' sum is
valid, and the words are the next call's bounds. The flagged blocks (the same on every
worker: the flags are summed too; a worker sends zeros for its own) are sent again, alone,
with the bounds just received: a second call as long as those blocks. Gradients need it:
in the large digits MLP (``hosts/mlp.py``) 250-1,600 of 4,401 blocks outgrew a promise of
twice their maximum at each step, mostly blocks that were all zero (ReLU units that were
off), so one flag for the whole vector sent every bucket twice; with ``HEADROOM_EXP`` and
the promise for blocks of zeros, a few dozen do. The cost is one int32 per block (1 in 256). The
error bound holds as stated for the scales used (``scales``); a block whose gradients shrank
keeps a coarser scale for one call.

The work on the host is vectorised over the whole vector and kept to a few passes: the
values are quantised in float32 (multiplying by a power of two and rounding to an integer
are exact there, as in float64, for every value this range admits) and the sums divided
back in float32 (one rounding, as before).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

IntAllReduce = Callable[[np.ndarray], np.ndarray]
INT32_MAX = 2**31 - 1
DEFAULT_BLOCK = 256  # 8 packets of 32 slots
MAX_SCALE_EXP = 120  # a block that is zero on every worker: any scale works; keep it finite
EXP_MIN = -40  # block maxima at or below 2**EXP_MIN count as 2**EXP_MIN
EXP_MAX = 22  # |x| above 2**EXP_MAX is beyond the range: every worker fails alike
MAX_FLOAT_ABS = 2.0**EXP_MAX
#: A worker promises eight times its block maximum (rounded up to a power of two), and for a
#: block of zeros as much as for its largest block. Counted over the large MLP's first 48
#: steps (4 epochs) with 4 workers (``outgrown_blocks`` in tests/bench/ddp_hook.py): with four
#: times the maximum and nothing for zeros a median of 1,053 of its 4,401 blocks outgrew
#: their promise per step (mostly blocks of zeros at first: ReLU units that were off; up to
#: 3,866 late), now 376 (up to 2,932). The cost: one bit of precision (a block's error stays
#: below 2**-25 of its promise at n = 4), and a block that was all zero is quantised, the call
#: after, at its worker's largest block's scale.
HEADROOM_EXP = 3


@dataclass(frozen=True)
class BlockQuantized:
    """The float32 sum and the scale every block was quantised with."""

    values: np.ndarray  # float32, the shape of the input
    scales: np.ndarray  # float64, one power of two per block
    block: int
    n_workers: int
    prior: Prior | None = None  # for the next call of the same length (one call instead of two)

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


def words(n_workers: int) -> int:
    """int32 words per block for the bounds of ``n_workers``: each covers ``k + 1``
    exponents of ``EXP_MIN..EXP_MAX``, ``k`` the largest with ``n * 2**k <= 2**31 - 1``.

    >>> words(1), words(4), words(2**20)
    (3, 3, 6)
    """
    return -(-(EXP_MAX - EXP_MIN + 1) // _span(n_workers))


def _span(n_workers: int) -> int:
    return int(math.floor(math.log2(INT32_MAX // n_workers))) + 1


def _bound_words(n_workers: int, maxima: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(this worker's words for ``B_b`` and its range flag, the ``2**e`` it promised per
    block). ``e`` is three above the smallest exponent with ``max <= 2**e``: the headroom lets
    the next call reuse the bounds while a block's maximum grows by less than 8x, and a block
    of zeros promises what the largest block does, so that it may turn nonzero."""
    nb, span, w = maxima.size, _span(n_workers), words(n_workers)
    nonzero = maxima > 0
    with np.errstate(divide="ignore"):
        e = np.ceil(np.log2(np.where(nonzero, maxima, 1.0))) + HEADROOM_EXP
    e = np.clip(e, EXP_MIN, EXP_MAX).astype(np.int64)
    promising = nonzero
    if nonzero.any():  # a block of zeros promises what the largest block does
        e = np.where(nonzero, e, e[nonzero].max())
        promising = np.ones(nb, dtype=bool)
    word, shift = np.divmod(e - EXP_MIN, span)
    msg = np.zeros(nb * w + 1, dtype=np.int32)
    msg[: nb * w].reshape(nb, w)[np.arange(nb), word] = np.where(promising, 1 << shift, 0)
    msg[-1] = bool(nb) and float(maxima.max()) > MAX_FLOAT_ABS
    return msg, np.where(promising, np.exp2(e.astype(np.float64)), 0.0)


def promises(n_workers: int, maxima: np.ndarray) -> np.ndarray:
    """The ``2**e`` a worker with these block maxima promises per block; the next call resends
    a block whose maximum then exceeds it on any worker.

    >>> promises(4, np.array([0.3, 0.0, 1.0])).tolist()
    [4.0, 8.0, 8.0]
    """
    return _bound_words(n_workers, np.asarray(maxima, dtype=np.float64))[1]


def _bounds_of(n_workers: int, got: np.ndarray) -> np.ndarray:
    """``B_b`` from the summed words and range flag of ``_bound_words``."""
    if got[-1] != 0:
        raise ValueError(
            f"a worker's vector has |x| > {MAX_FLOAT_ABS:g}, beyond what the fixed-point "
            f"all-reduce supports; scale the values down first"
        )
    w = words(n_workers)
    base = np.exp2(EXP_MIN + _span(n_workers) * np.arange(w, dtype=np.float64))
    bounds = got[:-1].reshape(-1, w).astype(np.float64) @ base
    return bounds * (1 + 2.0**-50)  # float64 rounding of the sum must not make it smaller


def block_bounds(int_fn: IntAllReduce, n_workers: int, maxima: np.ndarray) -> np.ndarray:
    """Every worker's ``B_b = sum_w 2**e_{w,b}`` from its own block maxima, in one call."""
    msg, _ = _bound_words(n_workers, maxima)
    return _bounds_of(n_workers, np.asarray(int_fn(msg)))


@dataclass(frozen=True)
class Prior:
    """What one call leaves for the next of the same length: the agreed bounds and the
    ``2**e`` this worker promised per block (``sum_w`` of them is the bound)."""

    bounds: np.ndarray
    promised: np.ndarray


def _quantise(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The blocks times their scales, rounded, as one int32 vector (``blocks`` is reused)."""
    s32 = scales.astype(np.float32)[:, None]  # powers of two up to 2**120: exact in float32
    np.multiply(blocks, s32, out=blocks)
    return np.rint(blocks, out=blocks).astype(np.int32).reshape(-1)


def _dequantise(total: np.ndarray, scales: np.ndarray, size: int) -> np.ndarray:
    out = np.asarray(total).reshape(scales.size, -1).astype(np.float32)
    out /= scales.astype(np.float32)[:, None]
    return out.reshape(-1)[:size]


def block_allreduce(
    int_fn: IntAllReduce,
    n_workers: int,
    x: np.ndarray,
    block: int = DEFAULT_BLOCK,
    prior: Prior | None = None,
) -> BlockQuantized:
    """Sum ``x`` over the workers through ``int_fn`` (an int32 all-reduce that every worker
    calls with vectors of the same length), one scale per ``block`` values. With ``prior``
    (the last call's ``BlockQuantized.prior``, on every worker alike) it takes one call."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    shape = np.shape(x)
    v = np.asarray(x, dtype=np.float32).reshape(-1)
    nb = -(-v.size // block)
    blocks = np.zeros((nb, block), dtype=np.float32)
    blocks.reshape(-1)[: v.size] = v
    maxima = (
        np.maximum(blocks.max(axis=1), -blocks.min(axis=1)).astype(np.float64)
        if nb
        else np.zeros(0)
    )
    if not np.isfinite(maxima).all():  # a NaN or an infinity makes its block's maximum so
        raise ValueError("allreduce: the vector holds NaN or infinite values")
    words_msg, promised = _bound_words(n_workers, maxima)
    if prior is not None and prior.bounds.size == nb:
        r = _with_prior(int_fn, n_workers, v, blocks, maxima, words_msg, promised, prior)
        return replace(r, values=r.values.reshape(shape))
    bounds = _bounds_of(n_workers, np.asarray(int_fn(words_msg)))
    scales = block_scales(bounds, n_workers)
    out = _dequantise(int_fn(_quantise(blocks, scales)), scales, v.size)
    return BlockQuantized(out.reshape(shape), scales, block, n_workers, Prior(bounds, promised))


def _with_prior(
    int_fn: IntAllReduce,
    n_workers: int,
    v: np.ndarray,
    blocks: np.ndarray,
    maxima: np.ndarray,
    words_msg: np.ndarray,
    promised: np.ndarray,
    prior: Prior,
) -> BlockQuantized:
    """One call with the last call's bounds: values, the next bounds, a flag per block; then
    the flagged blocks alone again, with the bounds just agreed (a second, shorter call)."""
    nb, block = blocks.shape
    scales = block_scales(prior.bounds, n_workers)
    exceeds = maxima > prior.promised  # these blocks' sums could overflow: resent
    size, nw = nb * block, words_msg.size
    msg = np.zeros(size + nw + nb, dtype=np.int32)
    blocks[exceeds] = 0  # beyond the promise the values would not fit: sent as zeros
    np.multiply(blocks, scales.astype(np.float32)[:, None], out=blocks)
    msg[:size] = np.rint(blocks, out=blocks).reshape(-1)  # exact integers: one pass
    msg[size : size + nw], msg[size + nw :] = words_msg, exceeds
    got = np.asarray(int_fn(msg))
    bounds = _bounds_of(n_workers, got[size : size + nw])
    out = got[:size].reshape(nb, block).astype(np.float32)
    out /= scales.astype(np.float32)[:, None]
    redo = got[size + nw :] != 0  # flagged by some worker: the same blocks on every worker
    if redo.any():
        blocks.reshape(-1)[: v.size] = v  # the values again, for the fresh bounds
        fresh = block_scales(bounds[redo], n_workers)
        again = np.asarray(int_fn(_quantise(blocks[redo], fresh))).reshape(-1, block)
        out[redo] = again.astype(np.float32) / fresh.astype(np.float32)[:, None]
        scales = scales.copy()
        scales[redo] = fresh
    values = out.reshape(-1)[: v.size]
    return BlockQuantized(values, scales, block, n_workers, Prior(bounds, promised))
