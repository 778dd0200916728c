"""Serial-number arithmetic (wire/serial.py), the one copy every host and controller module
uses for PSNs, epochs, sessions and request ids."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wire.serial import HALF, MASK, distance, newer, oldest, wrap

serials = st.integers(min_value=0, max_value=MASK)
steps = st.integers(min_value=1, max_value=HALF - 1)


@given(serials, steps)
def test_a_number_less_than_half_the_circle_ahead_is_newer_across_the_wrap(a: int, k: int) -> None:
    b = wrap(a + k)
    assert newer(b, a) and not newer(a, b)
    assert distance(b, a) == k and distance(a, b) == -k


@given(serials)
def test_a_number_is_not_newer_than_itself(a: int) -> None:
    assert not newer(a, a) and distance(a, a) == 0


def test_the_oldest_clock_is_found_across_the_wrap() -> None:
    assert oldest([2, MASK - 1, 0]) == MASK - 1
    assert oldest([7]) == 7
