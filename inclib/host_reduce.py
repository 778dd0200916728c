"""ReduceByKey on the hosts alone: the mappers send their combined counts to the reducer.

Example (a reducer and two mappers in this process, on the loopback):
    >>> import threading
    >>> r = HostReducer(("127.0.0.1", 0), mappers=2)
    >>> for pairs in ([("a", 1), ("b", 2)], [("a", 3)]):
    ...     threading.Thread(target=send_pairs, args=(r.address, pairs)).start()
    >>> sorted(r.collect(timeout=10).items())
    [('a', 4), ('b', 2)]

What inclib uses when the switch cannot serve a key-value aggregation job: each mapper
combines its pairs (a ``collections.Counter``) and sends the result over one TCP
connection to the reducer, as JSON lines of ``[key, value]`` pairs in chunks, then a
``{"done": n}`` line with the number of pairs it sent; the reducer adds them up and checks
the count. Keys are ASK's (str, bytes, int, tuples of them; ``hosts/ask/keys.py``'s form
on the wire, so they come back as sent); values are integers, summed exactly (Python
ints: no overflow).
"""

from __future__ import annotations

import json
import socket
import time
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any

from hosts.ask.keys import decode, encode_counts

HOST_REDUCE_PORT = 20060
CHUNK = 4096  # pairs per JSON line


class ReduceError(RuntimeError):
    """A mapper did not finish, or sent something that is not its pairs."""


def combine(pairs: Iterable[tuple[Hashable, int]]) -> Counter[Hashable]:
    """The map-side combine: one (key, total) per key."""
    out: Counter[Hashable] = Counter()
    for k, v in pairs:
        out[k] += int(v)
    return out


def send_pairs(
    reducer: tuple[str, int], pairs: Iterable[tuple[Hashable, int]], timeout: float = 60.0
) -> int:
    """Send a mapper's pairs (combined) to the reducer; returns the pairs sent."""
    counts = encode_counts(combine(pairs))
    deadline = time.monotonic() + timeout
    while True:  # the reducer may not listen yet
        try:
            sock = socket.create_connection(reducer, timeout=timeout)
            break
        except (ConnectionRefusedError, TimeoutError, OSError) as err:
            if time.monotonic() >= deadline:
                raise ReduceError(f"cannot reach the reducer at {reducer}: {err}") from None
            time.sleep(0.1)
    with sock:
        for i in range(0, len(counts), CHUNK):
            sock.sendall(json.dumps(counts[i : i + CHUNK]).encode() + b"\n")
        sock.sendall(json.dumps({"done": len(counts)}).encode() + b"\n")
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)  # the reducer closes once it has everything
    return len(counts)


class HostReducer:
    """Listens for ``mappers`` connections and sums what they send."""

    def __init__(self, bind: tuple[str, int] = ("0.0.0.0", HOST_REDUCE_PORT), mappers: int = 1):
        self.mappers = mappers
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(bind)
        self.sock.listen(mappers)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return (host, port)

    def collect(self, timeout: float = 600.0) -> dict[Hashable, int]:
        """Every mapper's pairs, summed per key."""
        total: Counter[Hashable] = Counter()
        self.sock.settimeout(timeout)
        for _ in range(self.mappers):
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                raise ReduceError(f"a mapper did not connect within {timeout:g} s") from None
            with conn:
                conn.settimeout(timeout)
                self._read(conn.makefile("rb"), total)
        self.sock.close()
        return dict(total)

    @staticmethod
    def _read(stream: Any, total: Counter[Hashable]) -> None:
        got = 0
        for line in stream:
            msg = json.loads(line)
            if isinstance(msg, dict):
                if msg.get("done") != got:
                    raise ReduceError(f"a mapper said it sent {msg.get('done')}, got {got}")
                return
            for k, v in msg:
                total[decode(k)] += int(v)
            got += len(msg)
        raise ReduceError("a mapper's connection ended before it was done")

    def close(self) -> None:
        self.sock.close()
