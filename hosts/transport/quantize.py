"""Float32 <-> int32 fixed point for switch aggregation, without overflow for n workers.

Example:
    >>> import numpy as np
    >>> x = np.array([0.5, -0.25, 1e-3], dtype=np.float32)
    >>> s = choose_scale(max_abs=1.0, n_workers=4)
    >>> s == 2.0**28
    True
    >>> q = quantize(x, s, n_workers=4)
    >>> bool(np.all(np.abs(dequantize(4 * q, s) - 4 * x) <= 4 * error_bound(s) + 1e-6))
    True

Rule (docs/protocol.md, "Quantisation"): all workers of one all-reduce use the same scale
``s = 2**e``, the largest power of two with ``n * (B * s + 1/2) <= 2**31 - 1`` where B is a
bound on |x| agreed by all workers. Then every ``|q| <= B * s + 1/2`` and the switch's sum of
n contributions stays inside int32. Rounding to nearest gives, for ``|x| <= B``,
``|x - q(x) / s| <= 1 / (2 s) < n * B / (2**31 - 1 - n / 2)``. Values beyond B saturate.
Scaling by a power of two is exact in binary floating point, so the only error is rounding.

B is agreed with one extra sum aggregation, since the switch only adds: each worker votes
with a one-hot vector over exponent buckets (``exponent_vote``); the highest bucket with a
non-zero sum is the largest exponent any worker has (``agreed_bound``).
"""

from __future__ import annotations

import math

import numpy as np

INT32_MAX = 2**31 - 1
MAX_SCALE_EXP = 120  # caps the scale for all-zero or tiny data; 2**120 is a normal float32
VOTE_EXP_MIN = -20  # exponent bucket 0 of a vote means |x| <= 2**VOTE_EXP_MIN


def worker_limit(n_workers: int) -> int:
    """Largest |q| one worker may send so that n_workers of them sum inside int32."""
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    return INT32_MAX // n_workers


def choose_scale(max_abs: float, n_workers: int) -> float:
    """Largest power of two s with n_workers * (max_abs * s + 1/2) <= 2**31 - 1."""
    if not 1 <= n_workers <= 2**30:
        raise ValueError(f"n_workers must be in [1, 2**30], got {n_workers}")
    if not math.isfinite(max_abs) or max_abs < 0:
        raise ValueError(f"max_abs must be finite and >= 0, got {max_abs}")
    if max_abs == 0:
        return 2.0**MAX_SCALE_EXP
    e = min(math.floor(math.log2((INT32_MAX / n_workers - 0.5) / max_abs)), MAX_SCALE_EXP)
    # log2 is rounded; step down until the defining inequality holds exactly.
    while n_workers * (max_abs * 2.0**e + 0.5) > INT32_MAX:
        e -= 1
    return 2.0**e


def error_bound(scale: float) -> float:
    """Per-element bound |x - dequantize(quantize(x, scale), scale)| for |x| <= the bound B."""
    return 0.5 / scale


def quantize(x: np.ndarray, scale: float, n_workers: int = 1) -> np.ndarray:
    """Round ``x * scale`` to int32, saturating at ``worker_limit(n_workers)``."""
    lim = worker_limit(n_workers)
    q = np.rint(np.asarray(x, dtype=np.float64) * scale)
    if np.isnan(q).any():
        raise ValueError("cannot quantize NaN values")
    return np.clip(q, -lim, lim).astype(np.int32)


def dequantize(sum_ints: np.ndarray, scale: float) -> np.ndarray:
    """The aggregated integers back to float32 (the sum of the workers' values)."""
    return (np.asarray(sum_ints, dtype=np.float64) / scale).astype(np.float32)


def exponent_vote(max_abs: float, slots: int = 32, exp_min: int = VOTE_EXP_MIN) -> np.ndarray:
    """One-hot int32 vote: bucket j stands for |x| <= 2**(exp_min + j).

    >>> int(np.flatnonzero(exponent_vote(3.0))[0])  # 3 <= 2**2 = 2**(-20 + 22)
    22
    """
    e = exp_min if max_abs <= 0 else math.ceil(math.log2(max_abs))
    if max_abs > 0 and 2.0**e < max_abs:  # guard against log2 rounding down
        e += 1
    if e - exp_min >= slots:
        raise ValueError(
            f"max |x| = {max_abs:g} is above the vote range 2**{exp_min + slots - 1}; "
            f"raise exp_min (now {exp_min}) so that every worker's maximum fits"
        )
    j = max(e - exp_min, 0)  # tiny maxima share bucket 0
    vote = np.zeros(slots, dtype=np.int32)
    vote[j] = 1
    return vote


def agreed_bound(vote_sum: np.ndarray, exp_min: int = VOTE_EXP_MIN) -> float:
    """The bound B that every worker derives from the aggregated votes.

    >>> agreed_bound(exponent_vote(3.0) + exponent_vote(0.1))
    4.0
    """
    hits = np.flatnonzero(np.asarray(vote_sum))
    if hits.size == 0:
        raise ValueError("no votes: the aggregated exponent vote is all zero")
    return 2.0 ** (exp_min + int(hits[-1]))
