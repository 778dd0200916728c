"""Numbers that never repeat across a controller's runs: the key-value cache's generations.

Example:
    >>> s = Stamps()
    >>> s.attach(lambda: 3)
    >>> s.next(), s.next()
    (12582913, 12582914)

A stamp is ``run << COUNT_BITS | n``: ``run`` counts the controller's starts (kept in its
SQLite store, ``JobStore.next_run``), ``n`` the stamps given in this run (from 1). So a
stamp is unique across every entry of every switch and across restarts of the switch
(its registers start at 0 again, the controller's count goes on) and of the controller
(a new run), until ``2 ** RUN_BITS`` runs later, or ``2 ** COUNT_BITS`` stamps in one run,
when a new run is taken from the store. Stamp 0 is never given (0: not cached).
"""

from __future__ import annotations

from collections.abc import Callable

RUN_BITS = 10
COUNT_BITS = 32 - RUN_BITS


class Stamps:
    """One source per process (``STAMPS``): the job manager attaches its store's runs."""

    def __init__(self) -> None:
        self._renew: Callable[[], int] = lambda: 0
        self._run = 0
        self._n = 0

    def attach(self, renew: Callable[[], int]) -> None:
        """Take stamps from a new run of ``renew()`` (the store's next run number)."""
        self._renew = renew
        self._new_run()

    def _new_run(self) -> None:
        self._run = self._renew() % (1 << RUN_BITS)
        self._n = 0

    def next(self) -> int:
        self._n += 1
        if self._n >= 1 << COUNT_BITS:
            self._new_run()
            self._n = 1
        return self._run << COUNT_BITS | self._n


STAMPS = Stamps()
