"""Client arbitration on StreamChannel: election IDs, primary and backups (default role).

Example::

    arb = Arbiter(device_id=1)
    arb.join(stream, election_id=5)      # -> streams to notify (the new primary, ...)
    arb.is_primary_election_id(5)        # True: Write/SetForwardingPipelineConfig allowed
"""

from __future__ import annotations

import queue
import threading
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

    def send(self, msg: p4r.StreamMessageResponse | None) -> None:
        self.out.put(msg)


def _election_key(s: Stream) -> int:
    return -1 if s.election_id is None else s.election_id


class Arbiter:
    """Tracks the streams of one device; the primary has the highest election ID."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.lock = threading.Lock()
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
            if eid is not None and any(
                s is not stream and s.election_id == eid and s.arbitrated for s in self.streams
            ):
                raise P4RTError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"election id {eid} is already used by another client",
                )
            before = self.primary()
            if stream not in self.streams:
                self.streams.append(stream)
            stream.election_id, stream.arbitrated = eid, True
            if eid is not None and (self.highest_seen is None or eid > self.highest_seen):
                self.highest_seen = eid
            self._notify(before, stream)

    def leave(self, stream: Stream) -> None:
        with self.lock:
            if stream not in self.streams:
                return
            before = self.primary()
            self.streams.remove(stream)
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
