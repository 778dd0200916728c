"""Checks a replicated log's history: one order on every replica, every acknowledged append
present exactly once, where its commit said.

Example::

    >>> a, b = Entry(0, 1, b"x"), Entry(1, 1, b"y")
    >>> check_log([[a, b], [a, b], [a]], [Ack(0, 1, b"x", 0), Ack(1, 1, b"y", 1)]).ok
    True
    >>> check_log([[a, b], [b, a]], []).violations[0]
    'replicas 0 and 1 differ at index 0: (0, 1, 78) against (1, 1, 79)'

Replica logs are raw (``Replica.log``): a request repeated by a client's retransmission
may be logged twice under its one request id, which the log's readers drop
(``log_wire.distinct``). The checks:

- **one order**: any two replicas hold the same entry at every index both have (a replica
  may lag behind, never disagree);
- **acknowledged at its index**: the entry at the index its commit named is the append;
- **exactly once**: in the log as readers see it (the longest replica's, repeats of a
  request id dropped) every acknowledged append appears, and once: the same (client, data)
  under two request ids is an append applied twice;
- **nothing invented**: with ``issued``, every entry is a request some client sent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from hosts.consensus.log_wire import Entry, distinct


class Ack(NamedTuple):
    """An append its client saw committed: (client, request id, data) at log index ``at``."""

    client: int
    req: int
    data: bytes
    at: int


@dataclass
class LogResult:
    entries: int = 0  # distinct appends in the log
    acked: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def _show(e: Entry) -> str:
    return f"({e.client}, {e.req}, {e.data.hex()})"


def check_log(
    logs: Sequence[Sequence[Entry]],
    acked: Iterable[Ack],
    issued: Iterable[tuple[int, int]] | None = None,
) -> LogResult:
    res = LogResult()
    out = res.violations
    for i in range(len(logs)):
        for j in range(i + 1, len(logs)):
            for k, (x, y) in enumerate(zip(logs[i], logs[j], strict=False)):
                if x != y:
                    out.append(f"replicas {i} and {j} differ at index {k}: {_show(x)} against"
                               f" {_show(y)}")  # fmt: skip
                    break
    longest = max(logs, key=len) if logs else []
    view = distinct(longest)
    res.entries = len(view)
    where = {(e.client, e.req): e for e in view}
    once = Counter((e.client, e.data) for e in view)
    for ack in acked:
        res.acked += 1
        got = where.get((ack.client, ack.req))
        if got is None:
            out.append(f"client {ack.client}'s append {ack.req} ({ack.data!r}) was acknowledged"
                       " but is in no log")  # fmt: skip
            continue
        if got.data != ack.data:
            out.append(f"client {ack.client}'s append {ack.req} holds {got.data!r}, not"
                       f" {ack.data!r}")  # fmt: skip
        if once[(ack.client, ack.data)] > 1:
            out.append(f"client {ack.client}'s append {ack.data!r} is in the log"
                       f" {once[(ack.client, ack.data)]} times")  # fmt: skip
        at = longest[ack.at] if 0 <= ack.at < len(longest) else None
        if at is None or (at.client, at.req, at.data) != (ack.client, ack.req, ack.data):
            out.append(f"client {ack.client}'s append {ack.req} was committed at index"
                       f" {ack.at}, which holds {_show(at) if at else 'nothing'}")  # fmt: skip
    if issued is not None:
        sent = set(issued)
        for e in view:
            if (e.client, e.req) not in sent:
                out.append(f"entry {_show(e)} is no client's request")
    return res
