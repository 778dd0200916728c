"""ASK's agents take only what their job's members and switch sent them (docs/protocol.md,
*Isolation*, I-ASK): the reducer counts no tuple and marks no psn seen from a forger, the
mapper forgets no packet in flight on a forged ACK; every forgery is counted by reason.

The mapper and the reducer run over real loopback sockets here, with nothing between them
(the reducer's ACKs stand in for the switch's too, which echo the same header): what a
host can do where the switch does not parse its packets (an ACK to a mapper's ephemeral
port) or from the machine of a member."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from controller.api_client import ApiError, ControllerApi
from hosts.ask.mapper import MapperConfig, MapperFlow
from hosts.ask.reducer import DRAINED_FLAGS, MAPPER_FLAGS, Reducer
from hosts.ask.wire import kv_packet
from hosts.transport.control_auth import ChannelAuth
from wire.header import (
    ASK_TUPLES,
    HOST_DROPS,
    SLOTS,
    Flag,
    Header,
    HostDrop,
    Op,
    pack,
    pack_header,
    unpack,
)

JOB = 3
MAPPERS = 2  # flows 0 and 1; the reducer is flow 2
WRONG = 1_000_000
Forge = Callable[[Header, bytes], list[tuple[str, bytes]]]  # (which socket, datagram)


def _udp(ip: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 0))
    s.settimeout(2.0)
    return s


def _forged_tuples(payload: bytes, **change: int) -> bytes:
    """A copy of mapper packet ``payload`` that adds WRONG to each key it carries."""
    h, values = unpack(payload)
    keys = values[0::2].view(np.uint32)
    return kv_packet(replace(h, **change), keys.tolist(), np.where(keys != 0, WRONG, 0).tolist())


def _every_forged_mapper_flag() -> list[int]:
    """Flag bytes no mapper sets, except the drained row's (checked on its own)."""
    return [f for f in range(256) if f & ~MAPPER_FLAGS and f & ~Flag.RETX != DRAINED_FLAGS]


# What a forger sends the reducer just before each mapper packet, named by the reason the
# reducer must count it under. Each copies the packet's psn and adds WRONG to its keys.
REDUCER_FORGERIES: dict[HostDrop, Forge] = {
    # The mapper's IP (loopback), another port: another process on the mapper's host.
    HostDrop.FOREIGN_PORT: lambda h, p: [("same_ip", _forged_tuples(p))],
    # Another host, FALLBACK as a mapper's cold keys: the case of issue 25.
    HostDrop.FOREIGN_ADDRESS: lambda h, p: [
        ("other_ip", _forged_tuples(p, flags=Flag.FALLBACK)),
        ("other_ip", _forged_tuples(p)),
    ],
    # From the mapper's own address and port (a host spoofing both): another job's, a flow
    # that is no mapper's (the reducer's own id and beyond), flags no mapper sets.
    HostDrop.OTHER_JOB: lambda h, p: [("mapper", _forged_tuples(p, job_id=JOB + 1))],
    HostDrop.NOT_A_MEMBER: lambda h, p: [
        ("mapper", _forged_tuples(p, worker_id=w, flags=Flag.FALLBACK)) for w in (MAPPERS, 7)
    ],
    HostDrop.FORGED_FLAGS: lambda h, p: [
        ("mapper", _forged_tuples(p, flags=f)) for f in _every_forged_mapper_flag()
    ],
    HostDrop.BAD_SLOT_COUNT: lambda h, p: [("mapper", pack(h, np.full(2, WRONG)))],
    HostDrop.MALFORMED: lambda h, p: [("mapper", pack_header(h, SLOTS) + b"\0" * 8)],
}


def _ack(h: Header, **change: int) -> bytes:
    a = Header(op=Op.AGG_KV, flags=Flag.ACK, job_id=h.job_id, worker_id=h.worker_id,
               psn=h.psn, epoch=h.epoch, bitmap=h.bitmap)  # fmt: skip
    return pack(replace(a, **change), np.zeros(0, np.int32))


# What a forger sends the mapper for each packet it has in flight: ACKs that would make it
# forget the packet (its tuples never reach the reducer).
MAPPER_FORGERIES: dict[HostDrop, Forge] = {
    HostDrop.FOREIGN_PORT: lambda h, _: [("same_ip", _ack(h))],
    HostDrop.FOREIGN_ADDRESS: lambda h, _: [("other_ip", _ack(h))],
    # From the reducer's own address and port: what a host spoofing both would send.
    HostDrop.OTHER_JOB: lambda h, _: [("reducer", _ack(h, job_id=JOB + 1))],
    HostDrop.NOT_A_MEMBER: lambda h, _: [("reducer", _ack(h, worker_id=h.worker_id + 1))],
    HostDrop.FORGED_FLAGS: lambda h, _: [
        ("reducer", _ack(h, flags=f)) for f in range(256) if f & ~Flag.RETX != Flag.ACK
    ],
    HostDrop.BAD_SLOT_COUNT: lambda h, _: [
        ("reducer", pack(replace(h, flags=Flag.ACK), np.zeros(SLOTS, np.int32)))
    ],
    HostDrop.MALFORMED: lambda h, _: [("reducer", _ack(h)[:20])],
    # The right header but not the packet's nonce or epoch, or a psn never sent: a guess.
    HostDrop.NOT_IN_FLIGHT: lambda h, _: [
        ("reducer", _ack(h, bitmap=(h.bitmap + 1) & 0xFFFFFFFF)),
        ("reducer", _ack(h, bitmap=0)),
        ("reducer", _ack(h, epoch=h.epoch + 1)),
        ("reducer", _ack(h, psn=h.psn + 1000)),
    ],
}


class Loop:
    """Two mappers and a reducer over loopback, and a forger beside them. Each datagram is
    taken by its receiver as soon as it is sent (loopback delivers it at once), so the
    order is the send order: forgeries of a packet first, then the packet."""

    def __init__(self, stack: ExitStack) -> None:
        self.socks = {
            "reducer": stack.enter_context(_udp()),
            "same_ip": stack.enter_context(_udp()),
            "other_ip": stack.enter_context(_udp("127.0.0.2")),
        }
        self.mapper_socks = [stack.enter_context(_udp()) for _ in range(MAPPERS)]
        reducer_at = self.socks["reducer"].getsockname()
        self.mappers = [
            MapperFlow(
                MapperConfig(
                    job_id=JOB,
                    flow=w,
                    part_base=0,
                    part_size=4,
                    window=4,
                    hot_threshold=2,
                    reducer=reducer_at,
                )
            )  # fmt: skip
            for w in range(MAPPERS)
        ]
        self.red = Reducer(JOB, MAPPERS, range(0, 4))
        for w, s in enumerate(self.mapper_socks):
            self.red.bind_flow(w, s.getsockname())
        self.forged = 0

    def run(
        self, inputs: list[Counter[str]], to_reducer: Forge | None = None,
        to_mapper: Forge | None = None, lose_first: bool = False,
    ) -> None:  # fmt: skip
        """Every mapper packet reaches the reducer after ``to_reducer``'s forgeries of it;
        the mapper gets ``to_mapper``'s forged ACKs of it as it sends it, its own ACK after.
        ``lose_first``: each packet's first transmission is lost (only a mapper that still
        has it in flight sends it again)."""
        for m, counts in zip(self.mappers, inputs, strict=True):
            m.add_counts(counts)
            m.flush()
        sent: set[tuple[int, int]] = set()
        now = 0.0
        while not all(m.idle for m in self.mappers):
            now += 1.0  # every packet in flight is due again
            for w, m in enumerate(self.mappers):
                self.socks["mapper"] = self.mapper_socks[w]
                for payload in m.to_send(now):
                    h = unpack(payload)[0]
                    for which, datagram in to_reducer(h, payload) if to_reducer else []:
                        self._to_reducer(which, datagram)
                    for which, datagram in to_mapper(h, payload) if to_mapper else []:
                        self._to_mapper(w, which, datagram)
                    if lose_first and (w, h.psn) not in sent:
                        sent.add((w, h.psn))
                        continue
                    self._to_reducer("mapper", payload, forged=False)

    def _to_reducer(self, which: str, datagram: bytes, forged: bool = True) -> None:
        self.forged += forged
        r = self.socks["reducer"]
        self.socks[which].sendto(datagram, r.getsockname())
        data, src = r.recvfrom(4096)
        ack = self.red.on_packet(data, src)
        if ack is not None:
            r.sendto(ack, src)
            w = next((w for w, s in enumerate(self.mapper_socks) if s.getsockname() == src), None)
            if w is not None:
                self._mapper_takes(w)

    def _to_mapper(self, w: int, which: str, datagram: bytes) -> None:
        self.forged += 1
        self.socks[which].sendto(datagram, self.mapper_socks[w].getsockname())
        self._mapper_takes(w)

    def _mapper_takes(self, w: int) -> None:
        data, src = self.mapper_socks[w].recvfrom(4096)
        self.mappers[w].on_datagram(data, src)


def _inputs() -> list[Counter[str]]:
    # hot_threshold 2: keys counted once travel as FALLBACK packets (cold keys)
    return [Counter({f"k{i}": (i % 3) + 1 for i in range(40 * w, 40 * w + 60)}) for w in range(2)]


@pytest.fixture
def loop() -> Iterator[Loop]:
    with ExitStack() as stack:
        yield Loop(stack)


def _result(lp: Loop) -> dict[object, int]:
    return lp.red.result(
        [m.vocab for m in lp.mappers], lambda fps: [m.counts_for(fps) for m in lp.mappers]
    )


@pytest.mark.parametrize("reason", list(REDUCER_FORGERIES), ids=lambda r: r.name.lower())
def test_reducer_counts_no_forged_tuple_and_marks_no_forged_psn_seen(
    loop: Loop, reason: HostDrop
) -> None:
    inputs = _inputs()
    loop.run(inputs, to_reducer=REDUCER_FORGERIES[reason])
    assert _result(loop) == inputs[0] + inputs[1]
    st = loop.red.stats
    assert st.bypass_tuples > 0 and st.passed_tuples > 0, "both kinds of packet were sent"
    assert st.duplicates == 0, "a forgery marked a psn seen: the real packet was a duplicate"
    sent = loop.forged
    assert sent > 0 and st.drops[reason] == sent and sum(st.drops) == sent


@pytest.mark.parametrize("reason", list(MAPPER_FORGERIES), ids=lambda r: r.name.lower())
def test_mapper_forgets_a_packet_in_flight_only_on_its_own_ack(
    loop: Loop, reason: HostDrop
) -> None:
    inputs = _inputs()
    loop.run(inputs, to_mapper=MAPPER_FORGERIES[reason], lose_first=True)
    assert _result(loop) == inputs[0] + inputs[1]
    drops = [sum(m.stats.drops[i] for m in loop.mappers) for i in range(HOST_DROPS)]
    sent = loop.forged
    assert sent > 0 and drops[reason] == sent and sum(drops) == sent
    # every packet's first transmission was lost: a mapper that forgot none resent them all
    st = [m.stats for m in loop.mappers]
    assert sum(x.retransmissions for x in st) == sum(x.packets for x in st)


def test_reducer_without_sockets_still_refuses_flows_that_are_no_mappers() -> None:
    """In process (``topologies/ask_local.py``: no addresses), a packet naming the reducer's
    own flow or beyond adds nothing and marks nothing seen; a mapper's then counts."""
    m = MapperFlow(MapperConfig(job_id=JOB, flow=0, part_base=0, part_size=4, window=4))
    m.add_counts({"a": 3})
    m.flush()
    real = m.to_send(0.0)[0]
    red = Reducer(JOB, MAPPERS, range(0, 4))
    for w in (MAPPERS, 9):
        assert red.on_packet(_forged_tuples(real, worker_id=w, flags=Flag.FALLBACK)) is None
    assert red.on_packet(real) is not None
    assert red.result([m.vocab], lambda fps: [m.counts_for(fps)]) == {"a": 3}
    assert red.stats.drops[HostDrop.NOT_A_MEMBER] == 2 and sum(red.stats.drops) == 2


def test_reducer_takes_drained_rows_only_from_where_its_drains_went() -> None:
    """A drained row (``RESULT|DRAIN``) counts only from the address the DRAINs were sent
    to, naming the reducer, for a row still pending in the epoch being drained; once."""
    red = Reducer(JOB, MAPPERS, range(0, 2))
    switch, other = ("10.0.0.1", 20050), ("10.0.0.9", 20050)
    red.drain_source = switch
    red.start_drain(1)
    (req, _) = red.drain_requests(0.0)
    row = unpack(req)[0]

    def answer(**change: int) -> bytes:
        h = replace(row, **{"flags": Flag.RESULT | Flag.DRAIN, **change})
        return kv_packet(h, [5] + [0] * (ASK_TUPLES - 1), [WRONG] + [0] * (ASK_TUPLES - 1))

    forged = {
        HostDrop.FOREIGN_ADDRESS: [(answer(), other)],
        HostDrop.FOREIGN_PORT: [(answer(), (switch[0], 1234))],
        HostDrop.NOT_A_MEMBER: [(answer(worker_id=0), switch)],
        HostDrop.NOT_IN_FLIGHT: [(answer(epoch=3), switch), (answer(agg_idx=7), switch)],
        HostDrop.FORGED_FLAGS: [(answer(flags=Flag.DRAIN | Flag.ACK), switch)],
    }
    for datagrams in forged.values():
        for payload, src in datagrams:
            assert red.on_packet(payload, src) is None
    assert red.totals == {} and red.stats.drained_rows == 0
    pad = [0] * (ASK_TUPLES - 1)
    real = kv_packet(replace(row, flags=Flag.RESULT | Flag.DRAIN), [5, *pad], [4, *pad])
    red.on_packet(real, switch)
    red.on_packet(real, switch)  # a repeated answer: the row is taken already
    assert red.totals == {5: 4} and red.stats.drained_rows == 1
    want = {r: len(d) for r, d in forged.items()}
    want[HostDrop.NOT_IN_FLIGHT] += 1
    assert red.stats.drops == [want.get(HostDrop(i), 0) for i in range(HOST_DROPS)]


@pytest.mark.parametrize("token", [None, "the-jobs-token"], ids=["no_key", "job_key"])
def test_reducer_control_channel_survives_strangers_and_takes_only_its_mappers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, token: str | None
) -> None:
    """The reducer process (``hosts/ask/run.py``) over the loopback, the controller's
    answers stubbed (mappers declared at 127.0.0.1): a connection that closes at once, one
    that sends what is not JSON, a hello from an address no mapper is declared at or for a
    mapper the job does not have, and a mapper's messages from a connection that is no
    mapper's are each closed; the reducer goes on and its result is exact. With the job's
    token (the mappers and the reducer hold it, ``$INC_TOKEN``), a hello from a mapper's
    own address that is unsigned, signed with another key or for another connection is
    refused too: only the job's hosts speak for its mappers."""
    from hosts.ask import control, run

    monkeypatch.setenv("INC_TOKEN_DIR", str(tmp_path))  # no token files but the test's
    if token is None:
        monkeypatch.delenv("INC_TOKEN", raising=False)
    else:
        monkeypatch.setenv("INC_TOKEN", token)

    udp, tcp = _free_port(socket.SOCK_DGRAM), _free_port(socket.SOCK_STREAM)
    monkeypatch.setattr(control, "INC_UDP_PORT", udp)
    monkeypatch.setattr(control, "CONTROL_PORT", tcp)
    monkeypatch.setattr(ControllerApi, "job", lambda self, job_id: {
        "n_workers": 2, "region": {"offset": 0, "size": 0},
        "workers": [{"worker_id": w, "ip": "127.0.0.1"} for w in range(2)],
    })  # fmt: skip

    def key(token: str) -> bytes:  # the daemon's key for a token's job (a stand-in)
        return hashlib.sha256(token.encode()).digest()

    def control_key(self: ControllerApi, job_id: int) -> bytes:
        if token is None:
            raise ApiError("this host holds no token of the job", 401)
        return key(token)

    monkeypatch.setattr(ControllerApi, "control_key", control_key)
    monkeypatch.setattr(ControllerApi, "worker_config", lambda self, job_id, worker_id: {
        "part_base": 0, "part_size": 4, "window": 4, "agg_ip": "127.0.0.1",
    })  # fmt: skip
    out = tmp_path / "result.json"
    argv = ["reducer", "--controller", "unix:/nonexistent", "--job-id", str(JOB), "--out", str(out)]
    reducer = threading.Thread(target=run.main, args=(argv,), daemon=True)
    reducer.start()

    def connect(ip: str = "127.0.0.1") -> socket.socket:
        deadline = time.monotonic() + 30
        while True:
            try:
                return socket.create_connection(("127.0.0.1", tcp), 5, source_address=(ip, 0))
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "the reducer never listened"
                time.sleep(0.05)

    def refused(s: socket.socket) -> bool:
        """Whether the reducer said why and closed the connection."""
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        s.close()
        return b"refused" in data

    connect().close()  # connect, then close
    strangers = [connect(), connect("127.0.0.2"), connect(), connect()]
    strangers[0].sendall(b"not json\n")
    strangers[1].sendall(b'{"hello": 0, "port": 9}\n')  # mapper 0 is declared at 127.0.0.1
    strangers[2].sendall(b'{"counts": {}}\n{"done": 1, "vocab": [[1, ["x"]]]}\n')
    strangers[3].sendall(b'{"hello": 2, "port": 9}\n')  # the job has mappers 0 and 1
    if token is not None:  # from mapper 0's own address, without the job's key
        unsigned, other_key, other_conn = connect(), connect(), connect()
        unsigned.sendall(b'{"hello": 0, "port": 9}\n')
        for s, k, nonce in ((other_key, key("another-token"), None),
                            (other_conn, key(token), "another-connection")):  # fmt: skip
            first = json.loads(s.recv(4096).split(b"\n")[0])["nonce"]
            line = ChannelAuth(k, nonce or first, "mapper").seal({"hello": 0, "port": 9})
            s.sendall(json.dumps(line).encode() + b"\n")
        strangers += [unsigned, other_key, other_conn]
    assert all(refused(s) for s in strangers)
    errors: list[BaseException] = []
    inputs = _inputs()

    def mapper(w: int) -> None:
        try:
            run.send_partition("unix:/nonexistent", JOB, w, [inputs[w]], rto=0.02)
        except BaseException as err:  # the test reports it
            errors.append(err)

    mappers = [threading.Thread(target=mapper, args=(w,), daemon=True) for w in range(2)]
    for t in mappers:
        t.start()
    for t in [*mappers, reducer]:
        t.join(60)
    assert not errors, errors
    assert run.read_record(out)["result"] == inputs[0] + inputs[1]


def _free_port(kind: socket.SocketKind) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
