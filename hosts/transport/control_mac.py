"""Control messages between a job's hosts, each carrying an HMAC-SHA256 tag under the job's
key (``ControllerApi.control_key``: the job's token gets it), so that a host outside the job
cannot forge one, even with a spoofed source address.

Example:
    >>> mac = ControlMac(b"k" * 32)
    >>> wire = mac.seal(b'{"t": "HB"}')
    >>> mac.open(wire), mac.open(b"x" + wire[1:]), mac.open(b"short")
    (b'{"t": "HB"}', None, None)

A datagram is the message followed by the first ``TAG_BYTES`` bytes of its tag. ``open``
returns the message, or ``None`` for anything else (too short, wrong tag), which the
receiver drops and counts. A tag says who may have sent a message, not when: receivers
still judge each message by its own numbers (views, sessions, offsets), so a replayed one
is as stale as it was.
"""

from __future__ import annotations

import hashlib
import hmac

TAG_BYTES = 16


class ControlMac:
    """Seals and opens one job's control messages (``key=None``: no key, no tags)."""

    def __init__(self, key: bytes | None) -> None:
        if key is not None and len(key) < 16:
            raise ValueError(f"a control key has at least 16 bytes, got {len(key)}")
        self.key = key

    def seal(self, message: bytes) -> bytes:
        if self.key is None:
            return message
        return message + hmac.digest(self.key, message, hashlib.sha256)[:TAG_BYTES]

    def open(self, datagram: bytes) -> bytes | None:
        if self.key is None:
            return datagram
        if len(datagram) < TAG_BYTES:
            return None
        message, tag = datagram[:-TAG_BYTES], datagram[-TAG_BYTES:]
        good = hmac.digest(self.key, message, hashlib.sha256)[:TAG_BYTES]
        return message if hmac.compare_digest(tag, good) else None
