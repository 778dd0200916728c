"""What the replicated log's replicas and clients share (``replica.py``, ``log_client.py``,
``pipelined_client.py``): ports, the request and answer frames, log entries, the clients'
vote rule, the chunking of long control messages, and the sockets.

Example::

    frame = pack(Header(op=Op.CONSENSUS, job_id=3, worker_id=0, psn=7), encode_data(b"hi"))
    count_vote(votes, session, index, bitmap, n=3)   # true once (session, index) commits

A request: op ``CONSENSUS``, ``psn`` = the client's request id, slot 0 = the data's length,
slots 1..31 = up to ``MAX_DATA`` bytes; the sequencer writes ``agg_idx`` (sequence number)
and ``epoch`` (session). An answer: flag ``RESULT``, ``agg_idx`` = log index, ``epoch`` =
session, ``bitmap`` = the replica's bit and its view above ``VIEW_SHIFT``
(docs/protocol.md, "Consensus").
"""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from wire.header import HEADER_LEN, INC_UDP_PORT, SLOTS, Flag, Op

CTL_PORT = INC_UDP_PORT + 1  # replica <-> replica and client -> leader (read) messages
#: A log on hosts alone (no job on the switch) sends its requests here: plain UDP that the
#: switch forwards, where INC_UDP_PORT traffic of a job it does not serve is dropped.
HOST_PLAN_PORT = INC_UDP_PORT + 2
LEADER = 0
MAX_DATA = (SLOTS - 1) * 4
RETRY = 0.03  # repeat unanswered control messages (and reads)
CHUNK = 100  # log entries per SYNC / read message
HOST_SESSION = 1  # the session number of --sequencer host
VIEW_SHIFT = 8  # a reply's bitmap: the replica's bit, and the view above this bit
# The request path parses and builds headers with struct (wire/header.py's layout) and
# plain ints: the replicas' per-request cost is what a saturated leader pays.
HEADER_FIELDS = struct.Struct("!BBHBBBBIIII")
#: op, flags, job, worker, slot_count, psn, agg_idx, epoch
REQUEST_FIELDS = struct.Struct("!BBHBxBxIII")
WORD = struct.Struct("!I")
REQUEST_LEN = HEADER_LEN + SLOTS * 4
ZERO_SLOTS = bytes(SLOTS * 4)
CONSENSUS, RESULT, FALLBACK = int(Op.CONSENSUS), int(Flag.RESULT), int(Flag.FALLBACK)


class LogError(RuntimeError):
    """No commit after every retry, or a bad argument."""


class Entry(NamedTuple):
    client: int  # -1: a no-op
    req: int
    data: bytes

    def wire(self) -> list[Any]:
        return [self.client, self.req, self.data.hex()]

    @classmethod
    def of(cls, w: Sequence[Any]) -> Entry:
        return cls(int(w[0]), int(w[1]), bytes.fromhex(str(w[2])))


NOOP = Entry(-1, 0, b"")


def encode_data(data: bytes) -> np.ndarray:
    if len(data) > MAX_DATA:
        raise LogError(f"a log entry holds at most {MAX_DATA} bytes, got {len(data)}")
    raw = struct.pack("!I", len(data)) + data.ljust(MAX_DATA, b"\0")
    return np.frombuffer(raw, dtype=">i4").astype(np.int32)


def decode_data(values: np.ndarray) -> bytes:
    raw = values.astype(">i4").tobytes()
    n = struct.unpack_from("!I", raw)[0]
    return raw[4 : 4 + min(n, MAX_DATA)]


def udp_socket(port: int, group: str | None = None, ip: str | None = None) -> socket.socket:
    """A non-blocking UDP socket on ``port``, a member of multicast ``group`` (on the interface
    of ``ip``), sending multicast from ``ip``."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", port))
    if group is not None:
        mreq = socket.inet_aton(group) + socket.inet_aton(ip or "0.0.0.0")
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    if ip is not None:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ip))
    s.setblocking(False)
    return s


def queued(sock: socket.socket) -> bool:
    """Whether a datagram waits to be read on ``sock`` (FIONREAD: the next one's size)."""
    return struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0" * 4))[0] > 0


def count_vote(
    votes: dict[tuple[int, int, int], int], session: int, index: int, bitmap: int, n: int
) -> bool:
    """Add one replica's answer (its bitmap: its bit, its view above ``VIEW_SHIFT``) for
    (``session``, ``index``) to ``votes``; true once the request is committed there: the
    answers of that view's leader and of ``n // 2`` other replicas of the view."""
    view = bitmap >> VIEW_SHIFT
    key = (session, index, view)
    bits = votes[key] = votes.get(key, 0) | (bitmap & ((1 << VIEW_SHIFT) - 1))
    lead = 1 << (view % n)
    return bool(bits & lead) and bin(bits & ~lead).count("1") >= n // 2


def chunked(msg: dict[str, Any]) -> list[dict[str, Any]]:
    """A VC or START message as datagrams of at most ``CHUNK`` entries each (``from``,
    ``len``): a session's log outgrows one datagram (Replica.assembled joins them)."""
    entries = msg["e"]
    return [
        msg | {"from": i, "len": len(entries), "e": entries[i : i + CHUNK]}
        for i in range(0, max(len(entries), 1), CHUNK)
    ]


def distinct(entries: Sequence[Entry]) -> list[Entry]:
    """Entries without no-ops and without repeats of a (client, request id)."""
    seen, out = set(), []
    for e in entries:
        if e.client >= 0 and (e.client, e.req) not in seen:
            seen.add((e.client, e.req))
            out.append(e)
    return out
