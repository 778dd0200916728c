"""Client arbitration on StreamChannel: election IDs, primary and backups (default role).

Example::

    arb = Arbiter(device_id=1)
    arb.join(stream, election_id=5)      # -> streams to notify (the new primary, ...)
    arb.is_primary_election_id(5)        # True: Write/SetForwardingPipelineConfig allowed
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from finsy.proto import U128, p4r

from p4sim.p4runtime.errors import P4RTError, code_number


@dataclass(eq=False)
class Stream:
    """One open StreamChannel: responses are queued here and yielded by the RPC."""

    peer: str = ""
    election_id: int | None = None
    arbitrated: bool = False
    out: queue.Queue = field(default_factory=queue.Queue)
    abort: P4RTError | None = None
    alive: Callable[[], bool] = lambda: True  # False once its client is gone (RPC ended)

    def send(self, msg: p4r.StreamMessageResponse | None) -> None:
        self.out.put(msg)


def _election_key(s: Stream) -> int:
    return -1 if s.election_id is None else s.election_id


#: How long a client that reconnects with its election id waits for its previous stream,
#: whose end gRPC may not have reported yet, to be gone (then the id is free again).
REUSE_WAIT_S = 1.0


class Arbiter:
    """Tracks the streams of one device; the primary has the highest election ID."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # a stream left
        self.streams: list[Stream] = []
        self.highest_seen: int | None = None

    def primary(self) -> Stream | None:
        ranked = [s for s in self.streams if s.arbitrated and s.election_id is not None]
        return max(ranked, key=_election_key, default=None)

    def is_primary_election_id(self, election_id: int) -> bool:
        with self.lock:
            p = self.primary()
            return p is not None and p.election_id == election_id

    def join(self, stream: Stream, arb: p4r.MasterArbitrationUpdate) -> None:
        """Handle a MasterArbitrationUpdate; P4RTError (ends the stream) when refused."""
        if arb.device_id != self.device_id:
            raise P4RTError(
                grpc.StatusCode.NOT_FOUND,
                f"device id {arb.device_id} does not exist (this is device {self.device_id})",
            )
        if arb.role.name or arb.role.HasField("config"):
            raise P4RTError(
                grpc.StatusCode.UNIMPLEMENTED,
                f"role {arb.role.name!r}: p4sim supports only the default role",
            )
        eid = U128.decode(arb.election_id) if arb.HasField("election_id") else None
        with self.lock:
            self._wait_until_free(stream, eid)
            before = self.primary()
            if stream not in self.streams:
                self.streams.append(stream)
            stream.election_id, stream.arbitrated = eid, True
            if eid is not None and (self.highest_seen is None or eid > self.highest_seen):
                self.highest_seen = eid
            self._notify(before, stream)

    def _wait_until_free(self, stream: Stream, eid: int | None) -> None:
        """An election id belongs to one open stream at a time (INVALID_ARGUMENT while
        it does); a stream whose client is gone frees it, also before gRPC says so."""
        deadline = time.monotonic() + REUSE_WAIT_S
        while eid is not None:
            holder = next(
                (
                    s
                    for s in self.streams
                    if s is not stream and s.election_id == eid and s.arbitrated
                ),
                None,
            )
            if holder is None:
                return
            if not holder.alive():
                self._remove(holder)
                holder.send(None)  # ends its RPC
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise P4RTError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"election id {eid} is already used by another client",
                )
            self.changed.wait(left)

    def leave(self, stream: Stream) -> None:
        with self.lock:
            self._remove(stream)

    def _remove(self, stream: Stream) -> None:
        if stream not in self.streams:
            return
        before = self.primary()
        self.streams.remove(stream)
        self.changed.notify_all()
        if before is stream:
            self._notify(before, None)

    def _notify(self, before: Stream | None, joined: Stream | None) -> None:
        after = self.primary()
        targets = self.streams if after is not before else [joined] if joined else []
        for s in targets:
            s.send(self._update_for(s, after))

    def _update_for(self, s: Stream, primary: Stream | None) -> p4r.StreamMessageResponse:
        msg = p4r.StreamMessageResponse()
        upd = msg.arbitration
        upd.device_id = self.device_id
        eid = primary.election_id if primary is not None else self.highest_seen
        if eid is not None:
            upd.election_id.CopyFrom(U128.encode(eid))
        if primary is None:
            upd.status.code = code_number(grpc.StatusCode.NOT_FOUND)
            upd.status.message = "there is no primary client"
        elif primary is s:
            upd.status.code = code_number(grpc.StatusCode.OK)
            upd.status.message = "you are the primary client"
        else:
            upd.status.code = code_number(grpc.StatusCode.ALREADY_EXISTS)
            upd.status.message = "another client is primary"
        return msg

    def primary_stream(self) -> Stream | None:
        with self.lock:
            return self.primary()
