"""The replicated log's hosts trust no other host (issue 25): a replica logs a request only
from the client's own address (or, numbered by a host sequencer, the leader's), takes
control messages only sealed with the job's key and from a replica's address, and answers
reads only to holders of the key; a client counts an answer only from the replica whose bit
it carries. Forged datagrams are dropped and counted and change nothing.

The replicas' and client's code runs as on Mininet; only their sockets are replaced (they
record what is sent, and hand the client what a test queues)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from hosts.consensus import log_client
from hosts.consensus import replica as replica_code
from hosts.consensus.log_client import LogClient, LogConfig
from hosts.consensus.log_wire import CTL_PORT, HOST_SESSION, LogError, encode_data
from hosts.consensus.pipelined_client import PipelinedLogClient  # its sockets stay real
from hosts.consensus.replica import Replica
from hosts.transport.control_mac import ControlMac
from wire.header import INC_UDP_PORT, SLOTS, Flag, Header, Op, pack

JOB = 3
KEY = bytes(range(32))
REPLICAS = [{"id": i, "ip": f"10.0.0.{3 + i}"} for i in range(3)]
CLIENTS = {0: "10.0.0.1", 1: "10.0.0.2"}
PORT = INC_UDP_PORT
STRANGER = ("10.0.0.6", PORT)


@dataclass
class Sock:
    sent: list[tuple[bytes, tuple[str, int]]] = field(default_factory=list)
    inbox: list[tuple[bytes, tuple[str, int]]] = field(default_factory=list)

    def sendto(self, data: bytes, addr: tuple[str, int]) -> int:
        self.sent.append((bytes(data), addr))
        return len(data)

    def recvfrom(self, _: int) -> tuple[bytes, tuple[str, int]]:
        if not self.inbox:
            raise BlockingIOError
        return self.inbox.pop(0)

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def fake_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    # the replica's and the blocking client's sockets (each module opens its own)
    monkeypatch.setattr(replica_code, "udp_socket", lambda *a, **k: Sock())
    monkeypatch.setattr(replica_code, "queued", lambda sock: False)
    monkeypatch.setattr(log_client, "udp_socket", lambda *a, **k: Sock())


def replica(rid: int, group: str | None = "239.100.0.3") -> Replica:
    """Replica ``rid`` in view 0, with state (as after a sync): in session 7 under the
    switch's sequencer, in the host sequencer's session without it."""
    rep = Replica(JOB, rid, REPLICAS, dict(CLIENTS), group, key=KEY)
    rep.syncing = rep.fresh = False
    rep.timers.clear()
    rep.start_session(7 if group else HOST_SESSION)
    return rep


def request(client: int, psn: int, seq: int, session: int, flags: int = 0) -> bytes:
    h = Header(op=Op.CONSENSUS, flags=flags, job_id=JOB, worker_id=client, psn=psn,
               agg_idx=seq, epoch=session)  # fmt: skip
    return pack(h, encode_data(b"data %d" % psn))


def sealed(msg: dict[str, Any], key: bytes | None = KEY) -> bytes:
    return ControlMac(key).seal(json.dumps(msg).encode())


def test_a_request_is_logged_only_from_its_clients_own_address() -> None:
    rep = replica(1)
    forged = [
        (request(0, 1, 1, 7), STRANGER),  # the next entry, from another host
        (request(0, 1, 1, 7), (CLIENTS[0], PORT + 5)),  # the client's address, another port
        (request(1, 1, 1, 7), (CLIENTS[0], PORT)),  # client 0's address in client 1's name
        (request(0, 2, 2, 7), STRANGER),  # a future entry: logged once its predecessor came
        (request(0, 3, 1, 0x7FFFFFF0), STRANGER),  # a session far ahead: stalls the group
    ]
    for data, addr in forged:
        rep.on_request(data, addr)
    assert rep.log == [] and rep.session == 7 and not rep.pending and not rep.syncing
    assert rep.stats["dropped_sender"] == len(forged)
    rep.on_request(request(0, 1, 1, 7), (CLIENTS[0], PORT))  # the real one
    rep.on_request(request(0, 2, 2, 7), (CLIENTS[0], PORT))
    assert [(e.client, e.req) for e in rep.log] == [(0, 1), (0, 2)]
    answers = [a for _, a in rep.req.sent]  # answered to the client, not to the sender
    assert answers == [(CLIENTS[0], PORT)] * 2


def test_host_sequenced_entries_come_from_the_leader_only() -> None:
    rep = replica(1, group=None)
    frame = request(1, 9, 1, HOST_SESSION, Flag.FALLBACK)
    rep.on_request(frame, (REPLICAS[2]["ip"], PORT))  # a follower is no sequencer
    rep.on_request(frame, (CLIENTS[1], PORT))  # nor is a client
    assert rep.log == [] and rep.stats["dropped_sender"] == 2
    rep.on_request(frame, (REPLICAS[0]["ip"], PORT))
    assert [(e.client, e.req) for e in rep.log] == [(1, 9)]


def test_control_messages_take_the_jobs_key_and_a_replicas_address() -> None:
    rep = replica(1)
    for seq in (1, 2):
        rep.on_request(request(0, seq, seq, 7), (CLIENTS[0], PORT))
    before = list(rep.log)
    # START of view 5 (led by replica 2) replacing the log with a forged one
    start = {"t": "START", "s": 7, "base": 0, "e": [[0, 66, "66"]], "r": 2, "v": 5}
    leader = (REPLICAS[2]["ip"], CTL_PORT)
    rep.on_ctl_datagram(json.dumps(start).encode(), leader)  # not sealed
    rep.on_ctl_datagram(sealed(start, b"another job's key!!!"), leader)
    rep.on_ctl_datagram(sealed(start)[:-1] + b"?", leader)  # tag altered
    assert rep.stats["dropped_tag"] == 3
    rep.on_ctl_datagram(sealed(start), ("10.0.0.6", CTL_PORT))  # key, but not replica 2
    rep.on_ctl_datagram(sealed(start | {"r": 7}), leader)  # no such replica
    assert rep.stats["dropped_sender"] == 2
    for broken in ({"t": "START", "r": 2, "v": 5}, {"t": "VC", "r": 2, "v": "x"}, [1]):
        rep.on_ctl_datagram(ControlMac(KEY).seal(json.dumps(broken).encode()), leader)
    assert rep.stats["dropped_malformed"] == 3
    assert rep.log == before and rep.view == 0 and rep.normal
    rep.on_ctl_datagram(sealed(start), leader)  # replica 2's own START is followed
    assert rep.view == 5 and [(e.client, e.req) for e in rep.log] == [(0, 66)]


def test_the_log_is_read_only_with_the_jobs_key_and_answers_are_sealed() -> None:
    rep = replica(0)
    rep.on_request(request(0, 1, 1, 7), (CLIENTS[0], PORT))
    reader = ("10.0.0.1", 40000)
    rep.on_ctl_datagram(json.dumps({"t": "READ", "from": 0}).encode(), reader)
    rep.on_ctl_datagram(sealed({"t": "READ", "from": 0}, b"x" * 32), reader)
    assert rep.ctl.sent == [] and rep.stats["dropped_tag"] == 2
    rep.on_ctl_datagram(sealed({"t": "READ", "from": -5}), reader)
    ((data, to),) = rep.ctl.sent
    answer = json.loads(ControlMac(KEY).open(data) or b"null")
    assert to == reader and answer["len"] == 1 and answer["from"] == 0 and len(answer["e"]) == 1


def client() -> LogClient:
    ips = tuple(r["ip"] for r in REPLICAS)
    return LogClient(LogConfig(JOB, 0, CLIENTS[0], "239.100.0.3", ips, key=KEY))


def answer(rid: int, psn: int, index: int, bits: int | None = None) -> bytes:
    bitmap = 1 << rid if bits is None else bits
    h = Header(op=Op.CONSENSUS, flags=Flag.RESULT, job_id=JOB, worker_id=0, psn=psn,
               agg_idx=index, epoch=7, bitmap=bitmap)  # fmt: skip
    return pack(h, np.zeros(SLOTS, np.int32))


def test_a_client_counts_an_answer_only_from_the_replica_whose_bit_it_carries() -> None:
    c = client()
    c.req = 41
    votes: dict[tuple[int, int, int], int] = {}
    ip = [r["ip"] for r in REPLICAS]
    c.sock.inbox += [
        (answer(0, 41, 5, bits=0b111), STRANGER),  # one forged vote of all three
        (answer(0, 41, 5, bits=0b111), (ip[0], PORT)),  # from a replica, but three bits
        (answer(0, 41, 5), STRANGER),  # the leader's bit from another host
        (answer(2, 41, 5), (ip[1], PORT)),  # replica 2's bit from replica 1
        (answer(1, 41, 5), (ip[1], PORT + 1)),  # replica 1, another port
    ]
    assert c._votes(votes) is None and c.dropped == 5 and votes == {}
    c.sock.inbox += [(answer(0, 41, 5), (ip[0], PORT)), (answer(2, 41, 5), (ip[2], PORT))]
    assert c._votes(votes) == (7, 5)


class Select:
    """``select.select`` over the fake sockets: ready when something is queued."""

    @staticmethod
    def select(
        r: list[Sock], w: list[Any], x: list[Any], t: float
    ) -> tuple[list[Sock], list[Any], list[Any]]:
        return [s for s in r if s.inbox], [], []


def test_a_client_reads_only_sealed_entries_from_a_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_client, "select", Select)
    c = client()
    entries = {"t": "ENTRIES", "from": 0, "len": 1, "e": [[0, 1, "66"]], "r": 0, "leader": True}
    c.ctl.inbox += [
        (json.dumps(entries).encode(), (REPLICAS[0]["ip"], CTL_PORT)),
        (sealed(entries), ("10.0.0.6", CTL_PORT)),
    ]
    with pytest.raises(LogError, match="no leader answered"):
        c.read(timeout=0.05)
    assert c.dropped == 2
    c.ctl.inbox.append((sealed(entries), (REPLICAS[0]["ip"], CTL_PORT)))
    assert [(e.client, e.req, e.data) for e in c.read(timeout=0.05)] == [(0, 1, b"f")]


def test_a_pipelined_client_commits_only_with_answers_from_the_replicas_addresses() -> None:
    """Real loopback sockets: three replicas at 127.0.0.3-5 answer each request; before them
    a forger at 127.0.0.6 answers it in all three replicas' names at another index. The
    client commits every append at the replicas' index and counts each forged answer."""
    import socket
    import threading

    from wire.header import HostDrop, unpack

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ips = ("127.0.0.3", "127.0.0.4", "127.0.0.5")
    socks = []
    for ip in (*ips, "127.0.0.6"):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((ip, port))
        s.settimeout(0.2)
        socks.append(s)
    cfg = LogConfig(JOB, 0, "127.0.0.1", ips[0], ips, key=KEY, port=port)
    client = PipelinedLogClient(cfg, count=5, window=2)
    stop = threading.Event()

    def replicas() -> None:
        index = 0
        while not stop.is_set():
            try:
                data, src = socks[0].recvfrom(65535)
            except TimeoutError:
                continue
            h, _ = unpack(data)
            for bits in (0b111, 0b001, 0b010):  # the forger's answers first
                socks[3].sendto(answer(0, h.psn, 900 + index, bits=bits), src)
            for rid in range(3):
                socks[rid].sendto(answer(rid, h.psn, index), src)
            index += 1

    t = threading.Thread(target=replicas, daemon=True)
    t.start()
    try:
        out = client.run()
        history = client.history()
    finally:
        stop.set()
        t.join(5)
        client.close()
        for s in socks:
            s.close()
    assert out["appends"] == 5 and out["retransmissions"] == 0
    assert sorted(c[4] for c in history) == [0, 1, 2, 3, 4]  # no forged index (900 + ...)
    assert client.window.drops[HostDrop.FOREIGN_ADDRESS] == 3 * 5
