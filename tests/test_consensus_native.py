"""The replica's request path in C (``hosts/consensus/native_replica.c``) does what
``Replica.on_request`` does: the same datagrams, sent over real loopback sockets to a
replica on the native path and handed to one on the Python path, leave the same log, state
and counters and produce the same answers (and, at a host sequencer's leader, the same
frames to the followers), byte for byte. The datagrams mix requests in order (the C case),
gaps, repeats, a newer session, malformed frames and forged senders (the guards of
``tests/test_consensus_guards.py``), in two pumps."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

import pytest

from hosts.consensus import native_replica
from hosts.consensus import replica as replica_code
from hosts.consensus.log_wire import HOST_SESSION, encode_data
from hosts.consensus.replica import Replica
from wire.header import Flag, Header, Op, pack

JOB = 3
KEY = bytes(range(32))
REPLICAS = [{"id": i, "ip": f"127.0.0.{3 + i}"} for i in range(3)]
CLIENTS = {0: "127.0.0.1", 1: "127.0.0.2"}
STRANGER = "127.0.0.6"


@dataclass
class Recorder:
    """The Python replica's sockets: what it sends."""

    sent: list[tuple[bytes, tuple[str, int]]] = field(default_factory=list)

    def sendto(self, data: bytes, addr: tuple[str, int]) -> int:
        self.sent.append((bytes(data), addr))
        return len(data)

    def close(self) -> None:
        pass


def bound(ip: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((ip, port))
    s.setblocking(False)
    return s


@pytest.fixture
def port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def request(client: int, psn: int, seq: int, session: int, **kw: Any) -> bytes:
    h = Header(op=kw.get("op", Op.CONSENSUS), flags=kw.get("flags", 0),
               job_id=kw.get("job", JOB), worker_id=client, psn=psn, agg_idx=seq,
               epoch=session)  # fmt: skip
    return pack(h, encode_data(b"entry %d" % psn))


def make(rid: int, group: str | None, port: int, native: bool, mp: pytest.MonkeyPatch) -> Replica:
    me = REPLICAS[rid]["ip"]

    def sockets(p: int, g: str | None = None, ip: str | None = None) -> Any:
        return bound(me, port) if native and p == port else Recorder()

    mp.setattr(replica_code, "udp_socket", sockets)
    rep = Replica(JOB, rid, REPLICAS, dict(CLIENTS), group, port=port, key=KEY)
    rep.syncing = rep.fresh = False
    rep.timers.clear()
    rep.start_session(7 if group else HOST_SESSION)
    return rep


def drain(s: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(s.recv(65535))
        except BlockingIOError:
            return out


def both(
    rid: int, group: str | None, phases: list[list[tuple[bytes, tuple[str, int]]]],
    port: int, mp: pytest.MonkeyPatch,
) -> tuple[Replica, Replica, dict[str, list[bytes]], dict[str, list[bytes]]]:  # fmt: skip
    """The Python replica and the native one after ``phases`` (one pump each), and what each
    sent, by destination IP."""
    py = make(rid, group, port, False, mp)
    nat = make(rid, group, port, True, mp)
    fast = native_replica.NativeRequests(nat)
    me = REPLICAS[rid]["ip"]
    peers = {ip for ip in [*CLIENTS.values(), *(r["ip"] for r in REPLICAS)] if ip != me}
    senders = {ip: bound(ip, port) for ip in peers | {STRANGER}}
    other_port = {ip: bound(ip, 0) for ip in CLIENTS.values()}
    try:
        for phase in phases:
            for data, (ip, p) in phase:
                py.on_request(data, (ip, p))
                (senders[ip] if p == port else other_port[ip]).sendto(data, (me, port))
            read = fast.pump(nat)  # loopback delivers within sendto: one pump reads all
            assert read == len(phase)
        got = {ip: drain(senders[ip]) for ip in peers}
    finally:
        fast.close()
        nat.req.close()
        for s in [*senders.values(), *other_port.values()]:
            s.close()
    want: dict[str, list[bytes]] = {ip: [] for ip in peers}
    assert isinstance(py.req, Recorder)
    for data, (ip, p) in py.req.sent:
        assert p == port
        want[ip].append(data)
    return py, nat, want, got


def same_state(py: Replica, nat: Replica) -> None:
    assert nat.log == py.log and nat.log
    assert (nat.session, nat.next_seq, nat.host_seq, nat.syncing) == (
        py.session, py.next_seq, py.host_seq, py.syncing)  # fmt: skip
    assert nat.pending == py.pending and nat.early == py.early
    assert nat.stats == py.stats


def test_a_follower_logs_answers_and_drops_as_the_python_path(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    c0, c1 = (CLIENTS[0], port), (CLIENTS[1], port)
    first = [
        (request(0, 1, 1, 7), c0),  # in order: logged in C
        (request(1, 2, 2, 7), c1),
        (request(0, 3, 3, 7), (STRANGER, port)),  # forged senders: dropped, counted
        (request(0, 3, 3, 7), (CLIENTS[0], 0)),  # (the client's address, another port)
        (request(1, 3, 3, 7), c0),  # client 1's request from client 0
        (request(0, 3, 3, 7, job=JOB + 1), c0),  # another job, RESULT, another op: ignored
        (request(0, 3, 3, 7, flags=Flag.RESULT), c0),
        (request(0, 3, 3, 7, op=Op.KV_READ), c0),
        (request(0, 3, 3, 7)[:-4], c0),  # short
        (request(0, 3, 3, 7), c0),
        (request(0, 5, 5, 7), c0),  # a gap (4 missing): Python from here on
        (request(1, 6, 3, 7), c1),  # an old sequence number
        (request(1, 4, 4, 7), c1),  # fills the gap: 4 and 5 logged
    ]
    second = [
        (request(0, 7, 6, 7), c0),  # in order again: C
        (request(0, 7, 6, 7), c0),  # a repeat of a sequence number: ignored
        (request(1, 8, 7, 7), c1),
        (request(1, 9, 1, 8), c1),  # a newer session: the follower copies the leader's log
        (request(0, 10, 8, 7), c0),
    ]
    py, nat, want, got = both(1, "239.100.0.3", [first, second], port, monkeypatch)
    same_state(py, nat)
    assert [e.req for e in nat.log] == [1, 2, 3, 4, 5, 7, 8] and nat.syncing
    assert nat.stats["dropped_sender"] == 3
    assert got == want and len(got[CLIENTS[0]]) == 4 and len(got[CLIENTS[1]]) == 3


def test_a_host_sequencers_leader_numbers_forwards_and_answers_as_the_python_path(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    c0, c1 = (CLIENTS[0], port), (CLIENTS[1], port)
    fb = Flag.FALLBACK
    first = [
        (request(0, 1, 0, 0, flags=fb), c0),
        (request(1, 2, 0, 0, flags=fb), c1),
        (request(0, 3, 0, 0, flags=fb), (STRANGER, port)),  # not a client
        (request(1, 4, 9, HOST_SESSION, flags=fb), (REPLICAS[1]["ip"], port)),  # no sequencer
        (request(0, 5, 0, 0, flags=fb), c0),
    ]
    second = [(request(1, 6 + i, 0, 0, flags=fb), c1) for i in range(70)]  # over a batch
    py, nat, want, got = both(0, None, [first, second], port, monkeypatch)
    same_state(py, nat)
    assert nat.host_seq == 73 and len(nat.log) == 73 and nat.stats["dropped_sender"] == 2
    assert got == want and all(len(got[r["ip"]]) == 73 for r in REPLICAS[1:])


def test_a_host_sequencers_follower_takes_numbered_frames_from_the_leader_only(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader = (REPLICAS[0]["ip"], port)
    fb = Flag.FALLBACK
    frames = [
        (request(0, 9, 0, 0, flags=fb), (CLIENTS[0], port)),  # a client's: only the leader's
        (request(1, 1, 1, HOST_SESSION, flags=fb), leader),
        (request(1, 2, 2, HOST_SESSION, flags=fb), (REPLICAS[2]["ip"], port)),  # a follower
        (request(1, 2, 2, HOST_SESSION, flags=fb), (CLIENTS[1], port)),  # a client
        (request(0, 2, 2, HOST_SESSION, flags=fb), leader),
        (request(0, 3, 4, HOST_SESSION, flags=fb), leader),  # a gap: to Python, pending
    ]
    py, nat, want, got = both(1, None, [frames], port, monkeypatch)
    same_state(py, nat)
    assert [e.req for e in nat.log] == [1, 2] and nat.pending and nat.stats["dropped_sender"] == 2
    assert got == want


def test_serve_handles_requests_until_a_control_datagram_or_the_deadline(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve`` waits in C: it returns at the replica's next timer, or as soon as its control
    socket has a datagram (Python's to read), having logged what came meanwhile."""
    import time

    rep = make(1, "239.100.0.3", port, True, monkeypatch)
    rep.ctl = bound(REPLICAS[1]["ip"], 0)
    fast = native_replica.NativeRequests(rep)
    client = bound(CLIENTS[0], port)
    try:
        t = time.monotonic()
        assert fast.serve(rep, t + 0.05) == 0 and time.monotonic() - t >= 0.05
        for seq in (1, 2):
            client.sendto(request(0, seq, seq, 7), (REPLICAS[1]["ip"], port))
        client.sendto(b"control", rep.ctl.getsockname())
        t = time.monotonic()
        assert fast.serve(rep, t + 5.0) == 2 and time.monotonic() - t < 1.0
        assert [e.req for e in rep.log] == [1, 2] and len(drain(client)) == 2
    finally:
        fast.close()
        for s in (rep.req, rep.ctl, client):
            s.close()
