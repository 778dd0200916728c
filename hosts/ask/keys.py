"""ASK keys between hosts: one JSON form per key that decodes to exactly that key.

Example:
    >>> encode(1), encode("1"), encode(b"1"), encode((1, ("1",)))
    (1, '1', ['b', 'MQ=='], ['t', [1, ['t', ['1']]]])
    >>> decode(encode(("a", (b"\\x00", -(2**70))))) == ("a", (b"\\x00", -(2**70)))
    True
    >>> encode(1.5)
    Traceback (most recent call last):
    ...
    ValueError: ASK keys are str, bytes, int or tuples of them, not float (1.5)

A key is a str (a JSON string), an int (a JSON number, any size), bytes (``["b",
base64]``) or a tuple of keys, nested (``["t", [...]]``). A JSON list is never a key by
itself, so each form belongs to one type: 1 and "1" stay two keys, a tuple comes back a
tuple, bytes come back bytes. Anything else is refused: bool and float (``True == 1`` and
``1.0 == 1`` in Python, so they would merge with int keys), None, lists, sets and other
objects. The mappers' vocabularies and exact counts, and the reducer's result
(``hosts/ask/control.py``), carry keys in this form; so does the host-only path
(``inclib/host_reduce.py``). A result is a list of ``[key, total]`` pairs: a JSON object's
names would be strings only.
"""

from __future__ import annotations

import base64
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

ACCEPTED = "ASK keys are str, bytes, int or tuples of them"


def encode(key: Hashable) -> Any:
    """The JSON form of ``key``; ValueError for a type ASK does not carry."""
    if isinstance(key, str):  # subclasses (numpy.str_) as the plain type, equal to them
        return str(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return int(key)
    if isinstance(key, bytes):
        return ["b", base64.b64encode(key).decode("ascii")]
    if isinstance(key, tuple):
        return ["t", [encode(k) for k in key]]
    raise ValueError(f"{ACCEPTED}, not {type(key).__name__} ({key!r:.60})")


def decode(value: Any) -> Hashable:
    """The key whose JSON form is ``value``."""
    if type(value) is str or type(value) is int:
        return value
    if type(value) is list and len(value) == 2:
        tag, body = value
        if tag == "b" and type(body) is str:
            return base64.b64decode(body, validate=True)
        if tag == "t" and type(body) is list:
            return tuple(decode(v) for v in body)
    raise ValueError(f"not an encoded ASK key: {value!r:.60}")


def encode_counts(counts: Mapping[Hashable, int]) -> list[list[Any]]:
    """``[[key, value], ...]`` in JSON form."""
    return [[encode(k), v] for k, v in counts.items()]


def decode_counts(pairs: Iterable[Any]) -> dict[Hashable, int]:
    """Key -> value of ``encode_counts``'s pairs."""
    return {decode(k): int(v) for k, v in pairs}
