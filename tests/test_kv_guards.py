"""The key-value agents take only what their job's members sent them (docs/protocol.md,
*Isolation*, I-KV): the server changes no value or version for a host that is no client
of its job, or that names a client from another address, behind the switch's cache and on
the host path without it (``inclib.KvStorage``); a client completes a request only with
its server's reply. Every forgery is counted by reason, over real loopback
sockets (each host its own 127.0.0.x address, every client on the same UDP port as on
Mininet)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import pytest

from hosts.kv.pipelined_client import PipelinedKvClient, Workload
from hosts.kv.store import KvClient, KvConfig, KvServer, _values
from hosts.transport.udp import Endpoint
from inclib.kv import HOST_JOB_ID, KvStorage
from inclib.plan import Plan
from wire.header import (
    HOST_DROPS,
    KV_VALUE_WORDS,
    SLOTS,
    Flag,
    Header,
    HostDrop,
    Op,
    pack,
    pack_header,
    unpack,
)

JOB = 5
SERVER_IP, CLIENT_IPS, FORGER_IP = "127.0.0.5", ("127.0.0.1", "127.0.0.3"), "127.0.0.2"
KEY, WRONG = 42, 666


def _port() -> int:
    """A UDP port free on every address used here."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def _udp(ip: str, port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, port))
    s.settimeout(5.0)
    return s


def _write(worker: int, psn: int, **change: int) -> bytes:
    h = Header(op=Op.KV_WRITE, job_id=JOB, worker_id=worker, psn=psn)
    return pack(replace(h, **change), _values(KEY, [WRONG] * KV_VALUE_WORDS))


@pytest.fixture
def port() -> int:
    return _port()


@pytest.fixture
def server(port: int) -> Iterator[KvServer]:
    srv = KvServer(JOB, Endpoint((SERVER_IP, port)), dict(enumerate(CLIENT_IPS)), port)
    t = threading.Thread(target=srv.serve, args=(3.0,), daemon=True)
    t.start()
    yield srv
    t.join(5)
    srv.endpoint.close()


def test_server_changes_nothing_for_a_host_that_is_no_client_of_its_job(
    server: KvServer, port: int
) -> None:
    cfg = [KvConfig(JOB, w, SERVER_IP, port=port) for w in range(2)]
    clients = [KvClient(c, Endpoint((ip, port))) for c, ip in zip(cfg, CLIENT_IPS, strict=True)]
    other_port, other_ip = _udp(CLIENT_IPS[0]), _udp(FORGER_IP, port)
    try:
        version = clients[1].put(KEY, [7] * KV_VALUE_WORDS)
        psn = clients[0].psn + 1000  # ahead: a repeat of it could be answered from memory
        own = clients[0].endpoint  # what a host spoofing client 0's address and port sends
        forged: dict[HostDrop, list[tuple[Callable[[bytes], object], bytes]]] = {
            HostDrop.FOREIGN_ADDRESS: [
                (lambda d: other_ip.sendto(d, server.endpoint.address), _write(0, psn))
            ],  # fmt: skip
            HostDrop.FOREIGN_PORT: [
                (lambda d: other_port.sendto(d, server.endpoint.address), _write(0, psn))
            ],  # fmt: skip
            HostDrop.NOT_A_MEMBER: [
                (lambda d: own.send_many([(d, server.endpoint.address)]), _write(w, psn))
                for w in (2, 200)
            ],  # fmt: skip
        }
        send_own = forged[HostDrop.NOT_A_MEMBER][0][0]
        forged[HostDrop.OTHER_JOB] = [(send_own, _write(0, psn, job_id=JOB + 1))] + [
            (send_own, _write(0, psn, op=op)) for op in Op if op not in (Op.KV_READ, Op.KV_WRITE)
        ]
        forged[HostDrop.FORGED_FLAGS] = [
            (send_own, _write(0, psn, flags=f)) for f in range(256) if f & ~Flag.RETX
        ]
        forged[HostDrop.BAD_SLOT_COUNT] = [
            (send_own, pack(Header(op=Op.KV_WRITE, job_id=JOB, psn=psn), np.full(2, WRONG)))
        ]
        forged[HostDrop.MALFORMED] = [
            (send_own, pack_header(Header(op=Op.KV_WRITE, job_id=JOB), SLOTS))
        ]
        for datagrams in forged.values():
            for send, datagram in datagrams:
                send(datagram)
        got = clients[0].read(KEY)
        # psn ahead of client 0's: had a forgery been applied, this write's reply would be it
        clients[0].psn = psn - 1
        assert clients[0].put(KEY, [8] * KV_VALUE_WORDS) == version + 1
    finally:
        for c in clients:
            c.close()
        other_port.close()
        other_ip.close()
    assert got.value == [7] * KV_VALUE_WORDS and got.version == version
    assert server.stats.writes == 2 and server.stats.repeats == 0
    assert server.stats.drops == [len(forged.get(HostDrop(i), [])) for i in range(HOST_DROPS)]


class ForgingServer:
    """A server of one key that lets forgeries of each reply reach the client first."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.socks = {
            "server": _udp(SERVER_IP, port),
            "same_ip": _udp(SERVER_IP),
            "other_ip": _udp(FORGER_IP, port),
        }
        self.forged = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        srv = self.socks["server"]
        srv.settimeout(0.05)
        while not self._stop.is_set():
            try:
                data, src = srv.recvfrom(4096)
            except TimeoutError:
                continue
            h, v = unpack(data)
            real = replace(h, flags=Flag.RESULT, bitmap=3)
            body = v.copy()
            body[1 : 1 + KV_VALUE_WORDS] = 9
            for which, datagram in self.forgeries(real, body):
                self.socks[which].sendto(datagram, src)
                self.forged += 1
            srv.sendto(pack(real, body), src)

    def forgeries(self, h: Header, v: np.ndarray) -> list[tuple[str, bytes]]:
        wrong = v.copy()
        wrong[1:] = WRONG
        other_key = wrong.copy()
        other_key[0] = KEY + 1
        return [
            ("same_ip", pack(h, wrong)),  # FOREIGN_PORT
            ("other_ip", pack(h, wrong)),  # FOREIGN_ADDRESS
            ("server", pack(replace(h, job_id=JOB + 1), wrong)),  # OTHER_JOB
            ("server", pack(replace(h, worker_id=h.worker_id + 1), wrong)),  # NOT_A_MEMBER
            *[
                ("server", pack(replace(h, flags=f), wrong))
                for f in range(256)
                if f & ~Flag.RETX != Flag.RESULT
            ],  # FORGED_FLAGS  # fmt: skip
            ("server", pack(h, wrong[:4])),  # BAD_SLOT_COUNT
            ("server", pack_header(h, SLOTS)),  # MALFORMED
            ("server", pack(replace(h, psn=(h.psn + 2**20) & 0xFFFFFFFF), wrong)),  # NOT_IN_FLIGHT
            ("server", pack(h, other_key)),  # NOT_IN_FLIGHT: another key
        ]

    def expected(self) -> list[int]:
        per = [0] * HOST_DROPS
        reasons = [HostDrop.FOREIGN_PORT, HostDrop.FOREIGN_ADDRESS, HostDrop.OTHER_JOB,
                   HostDrop.NOT_A_MEMBER] + [HostDrop.FORGED_FLAGS] * 254 + [
                   HostDrop.BAD_SLOT_COUNT, HostDrop.MALFORMED, HostDrop.NOT_IN_FLIGHT,
                   HostDrop.NOT_IN_FLIGHT]  # fmt: skip
        for r in reasons:
            per[r] += 1
        return per

    def __enter__(self) -> ForgingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.socks.values():
            s.close()


def test_client_completes_a_request_only_with_its_servers_reply(port: int) -> None:
    with ForgingServer(port) as srv:
        client = KvClient(KvConfig(JOB, 0, SERVER_IP, rto=1.0, port=port),
                          Endpoint((CLIENT_IPS[0], port)))  # fmt: skip
        try:
            got = [client.read(KEY), client.read(KEY)]
        finally:
            client.close()
    assert all(r.value == [9] * KV_VALUE_WORDS and r.version == 3 for r in got)
    assert client.retransmissions == 0
    assert client.drops == [2 * n for n in srv.expected()] and sum(client.drops) == srv.forged


def test_pipelined_client_completes_requests_only_with_its_servers_replies(port: int) -> None:
    with ForgingServer(port) as srv:
        client = PipelinedKvClient(
            KvConfig(JOB, 0, SERVER_IP, rto=1.0, port=port),
            Workload(count=6, keys=1, window=2, write_share=0.5),
            Endpoint((CLIENT_IPS[0], port)),
        )
        try:
            out = client.run()
            hist = client.history()
        finally:
            client.close()
    assert out["ops"] == 6 and out["retransmissions"] == 0
    assert (hist["value"] == 9).all() and (hist["version"] == 3).all()
    assert client.window.drops == [6 * n for n in srv.expected()]


def test_host_path_storage_takes_requests_only_from_its_plans_workers(port: int) -> None:
    """Without the switch (a host-only plan, ``inclib.KvStorage``), nothing but the server
    keeps other hosts out: a write in client 0's name from another address, from client
    0's address but another port, and one naming a worker the plan does not have change
    no value and no version."""
    plan = Plan("", 2, CLIENT_IPS, kind="kv_cache", reducer=SERVER_IP)  # no job id: hosts
    storage = KvStorage(plan, (SERVER_IP, port))
    serving = threading.Thread(target=storage.serve, args=(3.0,), daemon=True)
    serving.start()
    clients = [KvClient(KvConfig(HOST_JOB_ID, w, SERVER_IP, port=port), Endpoint((ip, port)))
               for w, ip in enumerate(CLIENT_IPS)]  # fmt: skip
    other_ip, other_port = _udp(FORGER_IP, port), _udp(CLIENT_IPS[0])
    to = (SERVER_IP, port)
    try:
        version = clients[1].put(KEY, [7] * KV_VALUE_WORDS)
        psn = clients[0].psn + 1000  # ahead: a repeat of it could be answered from memory
        other_ip.sendto(_write(0, psn, job_id=HOST_JOB_ID), to)
        other_port.sendto(_write(0, psn, job_id=HOST_JOB_ID), to)
        clients[0].endpoint.send_many([(_write(2, psn, job_id=HOST_JOB_ID), to)])
        got = clients[0].read(KEY)
        clients[0].psn = psn - 1  # had a forgery been applied, this write's reply would be it
        assert clients[0].put(KEY, [8] * KV_VALUE_WORDS) == version + 1
    finally:
        for c in clients:
            c.close()
        other_ip.close()
        other_port.close()
        serving.join(5)
        storage.close()
    assert got.value == [7] * KV_VALUE_WORDS and got.version == version
    drops = storage.server.stats.drops
    want = {HostDrop.FOREIGN_ADDRESS: 1, HostDrop.FOREIGN_PORT: 1, HostDrop.NOT_A_MEMBER: 1}
    assert drops == [want.get(HostDrop(i), 0) for i in range(HOST_DROPS)], drops
