"""Run N workers as threads in a test, with a bound so that a hung worker fails the test."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_threads(n: int, fn: Callable[[int], object], limit: float = 20.0) -> list[object]:
    """fn(w) for w in 0..n-1 on threads; results in order, or the first exception raised."""
    out: list[object] = [None] * n
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            out[w] = fn(w)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(limit)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    if errors:
        raise errors[0]
    return out
