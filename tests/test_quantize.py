"""Fixed-point quantisation: the documented error bound holds and sums never overflow."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.transport.quantize import (
    INT32_MAX,
    agreed_bound,
    choose_scale,
    dequantize,
    error_bound,
    exponent_vote,
    quantize,
    worker_limit,
)

bounds = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
workers = st.integers(min_value=1, max_value=256)
F32_EPS = float(np.finfo(np.float32).eps)


@settings(max_examples=80, deadline=None)
@given(bound=bounds, n=workers, frac=st.lists(st.floats(-1, 1), min_size=1, max_size=64))
def test_quantisation_error_is_within_documented_bound(bound, n, frac) -> None:
    x = np.array(frac) * bound  # |x| <= bound
    s = choose_scale(bound, n)
    back = np.asarray(quantize(x, s, n), dtype=np.float64) / s
    assert np.all(np.abs(x - back) <= error_bound(s))
    # The bound in closed form (docs/protocol.md): 1/(2s) < n*B / (2**31 - 1 - n/2).
    assert error_bound(s) < n * bound / (INT32_MAX - n / 2)


@settings(max_examples=80, deadline=None)
@given(bound=bounds, n=workers)
def test_n_workers_at_maximum_magnitude_do_not_overflow_int32(bound, n) -> None:
    s = choose_scale(bound, n)
    for sign in (1.0, -1.0):
        q = quantize(np.array([sign * bound]), s, n)
        total = n * int(q[0])
        assert abs(total) < 2**31
    # Scale is the largest power of two that keeps the guarantee.
    assert n * (bound * 2 * s + 0.5) > INT32_MAX


def test_values_beyond_the_bound_saturate_instead_of_wrapping() -> None:
    n = 8
    s = choose_scale(1.0, n)
    q = quantize(np.array([1e9, -1e9]), s, n)
    assert q.tolist() == [worker_limit(n), -worker_limit(n)]
    assert n * int(q[0]) <= INT32_MAX


def test_aggregated_sum_dequantizes_to_float_sum_within_n_error_bounds() -> None:
    rng = np.random.default_rng(7)
    n, bound = 4, 2.0
    xs = rng.uniform(-bound, bound, size=(n, 1000)).astype(np.float32)
    s = choose_scale(bound, n)
    summed = np.sum([quantize(x, s, n) for x in xs], axis=0, dtype=np.int64)
    assert np.all(np.abs(summed) <= INT32_MAX)
    got = dequantize(summed.astype(np.int32), s)
    exact = xs.astype(np.float64).sum(axis=0)
    assert got.dtype == np.float32
    assert np.all(np.abs(got - exact) <= n * error_bound(s) + F32_EPS * np.abs(exact))


def test_all_workers_derive_the_same_bound_covering_everyone_from_votes() -> None:
    maxima = [0.003, 1.7, 0.25, 1e-9]
    total = np.sum([exponent_vote(m) for m in maxima], axis=0)
    b = agreed_bound(total)
    assert max(maxima) <= b < 2 * max(maxima)


def test_exact_power_of_two_votes_for_itself() -> None:
    assert agreed_bound(exponent_vote(4.0)) == 4.0


def test_user_errors_raise_value_error() -> None:
    with pytest.raises(ValueError, match="n_workers"):
        choose_scale(1.0, 0)
    with pytest.raises(ValueError, match="finite"):
        choose_scale(float("inf"), 2)
    with pytest.raises(ValueError, match="NaN"):
        quantize(np.array([np.nan]), 1.0)
    with pytest.raises(ValueError, match="raise exp_min"):
        exponent_vote(1e6)
    with pytest.raises(ValueError, match="no votes"):
        agreed_bound(np.zeros(32, dtype=np.int32))
