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
(``inclib/host_reduce.py``). Many counts (a result, a mapper's cold keys) go as columns,
``{"keys": [...], "values": [...]}`` (``encode_columns``), few as ``[key, value]`` pairs
(``encode_counts``): a JSON object's names would be strings only.
"""

from __future__ import annotations

import base64
from collections.abc import Hashable, Mapping
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


PLAIN = frozenset({str, int})  # key types that are their own JSON form


def encode_counts(counts: Mapping[Hashable, int]) -> list[list[Any]]:
    """``[[key, value], ...]`` in JSON form."""
    return [[encode(k), v] for k, v in counts.items()]


def encode_columns(counts: Mapping[Hashable, int]) -> dict[str, list[Any]]:
    """``{"keys": [...], "values": [...]}``: the keys in JSON form and their values, as two
    lists. For a million keys (a result, a mapper's cold keys) this parses about five
    times faster than ``encode_counts``'s pairs (one list object per pair), and plain str
    and int keys pass as they are, without a Python call each.

    >>> encode_columns({"a": 1, 2: 3, b"x": 4})
    {'keys': ['a', 2, ['b', 'eA==']], 'values': [1, 3, 4]}
    """
    keys = list(counts) if set(map(type, counts)) <= PLAIN else [encode(k) for k in counts]
    return {"keys": keys, "values": list(counts.values())}


def decode_counts(data: Any) -> dict[Hashable, int]:
    """Key -> value of ``encode_counts``'s pairs or ``encode_columns``'s columns.

    >>> decode_counts({"keys": ["a", ["b", "eA=="]], "values": [1, 4]}) == {"a": 1, b"x": 4}
    True
    """
    if not isinstance(data, dict):
        return {decode(k): int(v) for k, v in data}
    keys, values = data.get("keys"), data.get("values")
    if not isinstance(keys, list) or not isinstance(values, list) or len(keys) != len(values):
        raise ValueError("columns of counts: two lists of one length, keys and values")
    if not set(map(type, values)) <= {int}:
        raise ValueError("columns of counts: values that are not integers")
    if not set(map(type, keys)) <= PLAIN:
        keys = [decode(k) for k in keys]
    return dict(zip(keys, values, strict=True))
