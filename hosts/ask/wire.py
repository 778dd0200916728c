"""ASK on the wire: key fingerprints, where a key's tuple goes, and AGG_KV packets.

Example:
    >>> fp = fingerprint("spark")
    >>> 0 < fp < 2**32
    True
    >>> place(fp, part_base=64, part_size=32) == place(fp, 64, 32)  # always the same cell
    True
    >>> h, keys, vals = parse(kv_packet(Header(op=Op.AGG_KV), [0] * 16, [0] * 16))
    >>> h.op == Op.AGG_KV, len(keys)
    (True, 16)

A key (str, bytes, int, tuples of those: ``hosts/ask/keys.py``) travels as
a 32-bit *fingerprint*, never 0 (0 marks an empty slot). Two keys may share a fingerprint:
the switch would merge them, so results never trust it: every mapper tells the reducer
which keys it sent under which fingerprint, and a fingerprint claimed by two keys is
resolved from the mappers' own counts (``hosts/ask/reducer.py``). ``fp_bits`` below 32
makes collisions frequent on purpose (tests).

A tuple of key fingerprint ``f`` sent by a mapper whose partition is
``[part_base, part_base + part_size)`` goes to row ``part_base + (f >> 4) % part_size``,
slot/column ``f % ASK_TUPLES`` (end-host tuple order reconstruction: the slot is the key's
column, so the switch compares each slot with one cell only).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence

import numpy as np

from hosts.ask.keys import encode
from wire.header import (
    ASK_TUPLES,
    SLOTS,
    VALUE_DTYPE,
    Flag,
    Header,
    Op,
    ProtocolError,
    pack,
    unpack,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def key_bytes(key: Hashable) -> bytes:
    """What a key's fingerprint hashes; ValueError for a type ASK does not carry
    (``hosts/ask/keys.py``)."""
    if isinstance(key, str):
        return key.encode("utf-8", "surrogatepass")
    if isinstance(key, bytes):
        return b"b" + key
    return b"r" + repr(encode(key)).encode()


def fingerprint(key: Hashable, fp_bits: int = 32) -> int:
    """Non-zero ``fp_bits``-bit fingerprint of ``key`` (BLAKE2b)."""
    h = int.from_bytes(hashlib.blake2b(key_bytes(key), digest_size=8).digest(), "little")
    if fp_bits >= 32:
        return (h % 0xFFFFFFFF) + 1
    return (h % ((1 << fp_bits) - 1)) + 1


def place(fp: int, part_base: int, part_size: int) -> tuple[int, int]:
    """(row, column) of fingerprint ``fp`` in a partition."""
    return part_base + (fp >> 4) % part_size, fp % ASK_TUPLES


def kv_packet(h: Header, keys: Sequence[int], values: Sequence[int]) -> bytes:
    """An AGG_KV payload: ``ASK_TUPLES`` (key, value) tuples in the K slots."""
    slots = np.zeros(SLOTS, dtype=np.int64)
    slots[0::2] = np.asarray(keys, dtype=np.int64)
    slots[1::2] = np.asarray(values, dtype=np.int64)
    return pack(h, slots.astype(np.uint32).view(np.int32))


def kv_bodies(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The slots of many AGG_KV packets at once: rows of ``ASK_TUPLES`` keys and values
    (int32 range) -> one row of ``4 SLOTS`` bytes per packet, what follows its header
    (``kv_packet``'s slots, big-endian)."""
    slots = np.empty((len(keys), SLOTS), dtype=VALUE_DTYPE)
    slots[:, 0::2] = np.asarray(keys, dtype=np.int64).astype(np.uint32).view(np.int32)
    slots[:, 1::2] = np.asarray(values, dtype=np.int64)
    return slots.view(np.uint8).reshape(len(keys), 4 * SLOTS)


def parse(payload: bytes) -> tuple[Header, np.ndarray, np.ndarray]:
    """(header, keys as uint32, values as int32); no slots on an ACK."""
    h, v = unpack(payload)
    if h.op != Op.AGG_KV:
        raise ProtocolError(f"op {h.op} is not AGG_KV")
    if h.slot_count == 0:
        return h, np.zeros(0, np.uint32), np.zeros(0, np.int32)
    if h.slot_count != SLOTS:
        raise ProtocolError(f"an AGG_KV packet has {SLOTS} slots, got {h.slot_count}")
    return h, v[0::2].view(np.uint32), v[1::2]


def is_ack(h: Header) -> bool:
    return bool(h.flags & Flag.ACK)
