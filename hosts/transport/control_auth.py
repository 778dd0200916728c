"""A per-job key on a host control channel (JSON lines over TCP): every line is signed.

Example:
    >>> key = bytes(32)   # a job's key: ControllerApi.control_key(job_id)
    >>> mapper, reducer = ChannelAuth(key, "n0", "mapper"), ChannelAuth(key, "n0", "reducer")
    >>> reducer.open(mapper.seal({"hello": 0}))
    {'hello': 0}
    >>> reducer.open(mapper.seal({"moved": 2}))["moved"]
    2
    >>> line = mapper.seal({"done": 0})
    >>> reducer.open(line) == {"done": 0}, reducer.open(line)   # a replay
    Traceback (most recent call last):
    ...
    ConnectionError: control line 3 out of order (expected 4)

The key is the job's control key (``GET /jobs/{id}/key``, which takes the job's token or
the operator's: ``controller/api/tenants.py``), the one the replicated log's datagrams are
sealed with too (``control_mac.py``), so only the job's own hosts hold it. The listening side
gives each connection a random ``nonce`` first; a line then carries ``msg``, its sender's
``seq`` (1, 2, ... per direction) and ``mac``, HMAC-SHA256 over (nonce, sender's role,
seq, msg): a line from another connection, the other direction, out of order or changed
does not verify, and the connection is dropped (``ConnectionError``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

ROLES = ("mapper", "reducer")


class ChannelAuth:
    """One end of one connection: ``seal`` what it sends, ``open`` what it reads."""

    def __init__(self, key: bytes, nonce: str, role: str) -> None:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        self.key, self.nonce, self.role = key, nonce, role
        self.peer = ROLES[1 - ROLES.index(role)]
        self.sent = self.got = 0

    def _mac(self, role: str, seq: int, msg: Any) -> str:
        text = json.dumps([self.nonce, role, seq, msg], sort_keys=True, separators=(",", ":"))
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def seal(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.sent += 1
        return {"msg": msg, "seq": self.sent, "mac": self._mac(self.role, self.sent, msg)}

    def open(self, line: dict[str, Any]) -> dict[str, Any]:
        msg, seq, mac = line.get("msg"), line.get("seq"), line.get("mac")
        if not isinstance(msg, dict) or not isinstance(seq, int) or not isinstance(mac, str):
            raise ConnectionError("an unsigned control line on a signed channel")
        if seq != self.got + 1:
            raise ConnectionError(f"control line {seq} out of order (expected {self.got + 1})")
        if not hmac.compare_digest(mac, self._mac(self.peer, seq, msg)):
            raise ConnectionError("a control line whose MAC does not verify (not the job's key)")
        self.got = seq
        return msg
