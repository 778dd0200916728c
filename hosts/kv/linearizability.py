"""Linearizability of recorded key-value histories (Wing & Gong's search, with Lowe's cache
of visited configurations, as in Porcupine), one register per key.

Example::

    >>> w = Op(key=7, write=True, tag=5, version=1, start=0.0, end=1.0)
    >>> ok = Op(key=7, write=False, tag=0, version=1, value=5, start=2.0, end=3.0)
    >>> stale = Op(key=7, write=False, tag=0, version=0, value=0, start=2.0, end=3.0)
    >>> check([w, ok]).ok, check([w, stale]).ok
    (True, False)

Model: each key is a register holding (version, value), initially (0, 0). A write of tag
``t`` moves it to (version + 1, t) and returns the new version (the server numbers a
key's writes); a read returns the state. A history is linearizable when every operation
can be given one instant inside [invocation, response] such that the sequence of instants
obeys the model. Keys are independent (P-compositionality): each key is searched alone.
An operation that never got an answer (``end`` = inf or NaN) may take effect at any time
after its invocation, or never; its answer is unknown, so its output is not checked.
A read whose eight words differ (``whole`` False) matches no state: a torn value.

Writes return the version the server gave them, which places every write: then one pass
in version order decides (``by_versions``). Where a version's write is unknown (an
unanswered write that no read revealed took it) the general search decides. The search
(per key): events sorted by time; walk the list, at a call try to linearize the
operation now (if the model allows its output), remove it, and go on; at a return of an
operation not yet linearized, undo the last choice. A set of (linearized operations,
state) seen before prunes the search.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

State = tuple[int, int]  # (version, value)
INITIAL: State = (0, 0)


@dataclass(frozen=True)
class Op:
    key: int
    write: bool
    tag: int  # the value a write writes
    version: int  # a write's returned version, a read's version
    start: float
    end: float  # inf or NaN: no answer
    value: int = 0  # what a read returned
    whole: bool = True
    client: int = 0

    @property
    def answered(self) -> bool:
        return not math.isnan(self.end) and not math.isinf(self.end)


@dataclass
class Result:
    ops: int = 0
    keys: int = 0
    violations: list[str] = field(default_factory=list)  # one line per key that failed

    @property
    def ok(self) -> bool:
        return not self.violations


def _step(state: State, op: Op) -> State | None:
    """The state after ``op``, or None when ``op``'s output contradicts ``state``."""
    if op.write:
        nxt = (state[0] + 1, op.tag)
        return nxt if not op.answered or op.version == nxt[0] else None
    if not op.answered:
        return state
    return state if op.whole and (op.version, op.value) == state else None


class _Node:
    __slots__ = ("op", "index", "call", "match", "prev", "next")

    def __init__(self, op: Op | None, index: int, call: bool) -> None:
        self.op, self.index, self.call = op, index, call
        self.match: _Node | None = None
        self.prev: _Node | None = None
        self.next: _Node | None = None


def check_key(ops: Sequence[Op], search: bool = False) -> bool:
    """Whether one key's operations are linearizable from the initial (0, 0). The versions
    writes returned decide it directly when they name every write's place (``by_versions``);
    otherwise, or with ``search``, the general search does."""
    if not search:
        got = by_versions(ops)
        if got is not None:
            return got
    return search_key(ops)


def by_versions(ops: Sequence[Op]) -> bool | None:
    """The check when versions place every write (None when they do not: a version that
    no answered write returned and no read revealed).

    Write ``v`` must be the ``v``-th write to take effect and a read of version ``v`` must
    fall between writes ``v`` and ``v + 1``: a chain of instants, each inside its operation's
    interval. Placing each instant as early as the chain and its invocation allow never
    hurts a later one, so the history is linearizable exactly when this earliest placement
    keeps every instant before its operation's response."""
    writes: dict[int, Op] = {}
    unanswered = {op.tag: op for op in ops if op.write and not op.answered}
    reads: dict[int, list[Op]] = defaultdict(list)
    for op in ops:
        if op.write and op.answered:
            if op.version in writes or op.version < 1:
                return False  # two writes in one place
            writes[op.version] = op
        elif not op.write and op.answered:
            if not op.whole:
                return False
            reads[op.version].append(op)
            w = unanswered.pop(op.value, None)  # a read revealed an unanswered write's place
            if w is not None and op.version > 0:
                if op.version in writes:
                    return False
                writes[op.version] = replace(w, version=op.version)
    top = max([*writes, *reads, 0])
    if len(writes) != top:
        return None  # some version's write is unknown: the search decides
    at = -math.inf  # the latest instant placed so far
    for v in range(top + 1):
        if v > 0:
            w = writes[v]
            at = max(at, w.start)
            if w.answered and at > w.end:
                return False
        tag = writes[v].tag if v > 0 else INITIAL[1]
        last = at
        for r in reads.get(v, ()):
            if r.value != tag:
                return False
            placed = max(at, r.start)
            if placed > r.end:
                return False
            last = max(last, placed)
        at = last
    return True


def search_key(ops: Sequence[Op], initial: State = INITIAL) -> bool:
    """The general search (the module's description) from ``initial``."""
    events: list[tuple[float, int, int]] = []  # (time, 0 = call / 1 = return, op index)
    for i, op in enumerate(ops):
        events.append((op.start, 0, i))
        events.append((op.end if op.answered else math.inf, 1, i))
    events.sort()  # at equal times calls come first: such operations overlap
    head = _Node(None, -1, False)
    calls: dict[int, _Node] = {}
    prev = head
    for _, kind, i in events:
        node = _Node(ops[i], i, kind == 0)
        if kind == 0:
            calls[i] = node
        else:
            calls[i].match = node
        node.prev, prev.next = prev, node
        prev = node
    answered_left = sum(op.answered for op in ops)
    state, linearized = initial, 0
    seen: set[tuple[int, State]] = set()
    stack: list[tuple[_Node, State]] = []
    entry = head.next
    while answered_left:
        if entry is None:  # unreachable: an answered op's return precedes the end
            return False
        if entry.call:
            cur = entry.op
            assert cur is not None
            nxt = _step(state, cur)
            if nxt is not None:
                lin = linearized | (1 << entry.index)
                if (lin, nxt) not in seen:
                    seen.add((lin, nxt))
                    stack.append((entry, state))
                    state, linearized = nxt, lin
                    answered_left -= cur.answered
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
        elif entry.op is not None and not entry.op.answered:
            entry = entry.next  # an unanswered op may also never take effect
        else:
            if not stack:
                return False
            entry, state = stack.pop()
            linearized &= ~(1 << entry.index)
            assert entry.op is not None
            answered_left += entry.op.answered
            _unlift(entry)
            entry = entry.next
    return True


def _lift(call: _Node) -> None:
    for node in (call, call.match):
        assert node is not None and node.prev is not None
        node.prev.next = node.next
        if node.next is not None:
            node.next.prev = node.prev


def _unlift(call: _Node) -> None:
    for node in (call.match, call):
        assert node is not None and node.prev is not None
        node.prev.next = node
        if node.next is not None:
            node.next.prev = node


def check(ops: Iterable[Op], search: bool = False) -> Result:
    """Check every key of a history; a failed key is reported with its operation count
    (``search``: by the general search alone)."""
    by_key: dict[int, list[Op]] = defaultdict(list)
    for op in ops:
        by_key[op.key].append(op)
    res = Result(ops=sum(len(v) for v in by_key.values()), keys=len(by_key))
    for key, key_ops in sorted(by_key.items()):
        if not check_key(key_ops, search):
            res.violations.append(f"key {key}: {len(key_ops)} operations are not linearizable"
                                  f" ({_hint(key_ops)})")  # fmt: skip
    return res


def _hint(ops: Sequence[Op]) -> str:
    """A first suspect for the report: a read older than a write completed before it."""
    for r in ops:
        if r.write or not r.answered:
            continue
        done = [w.version for w in ops if w.write and w.answered and w.end < r.start]
        if done and r.version < max(done):
            return f"client {r.client}'s read at {r.start:.6f} saw version {r.version}" \
                   f" after version {max(done)} was written"  # fmt: skip
        if not r.whole:
            return f"client {r.client}'s read at {r.start:.6f} returned a torn value"
    return "no single stale read: the order of several operations fails"


def load(path: Path) -> list[Op]:
    """The operations of a history written by ``hosts/kv/pipelined_client.py``."""
    import numpy as np

    with np.load(path) as d:
        end = np.where(d["done"], d["end"], math.inf)
        cols = [d["key"], d["write"], d["tag"], d["version"], d["start"], end, d["value"],
                d["whole"], d["client"]]  # fmt: skip
        return [
            Op(int(k), bool(w), int(t), int(v), float(s), float(e), int(x), bool(h), int(c))
            for k, w, t, v, s, e, x, h, c in zip(*(c.tolist() for c in cols), strict=True)
            if not math.isnan(s)  # never sent (a run stopped early): not an operation
        ]


def check_files(paths: Iterable[Path]) -> Result:
    """All histories of one store together (their clients ran against the same server)."""
    ops: list[Op] = []
    for p in paths:
        ops.extend(load(p))
    return check(ops)
