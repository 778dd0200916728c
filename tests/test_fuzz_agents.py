"""Host agents under random and mutated packets of every kind (docs/protocol.md,
*Isolation*, I-FUZZ): whatever reaches their sockets, no agent raises, a datagram from a
host that is no member of the agent's job or naming another job changes nothing, and every
datagram an agent does not take is counted, once, and changes nothing.

The agents' own entry points are fed in process, each datagram with the source address a
socket would give (``hosts/ask/run.py``, ``KvServer.serve`` and the workers' loops pass
exactly that): valid packets of every op (aggregation contributions and results, AGG_KV
tuples, ACKs and drained rows, KV requests and replies, consensus messages), mutated one
to three times (a byte, the op, flags, job, worker, slot count, length, the source), plus
Scapy's ``fuzz`` of the INC layer and random bytes. The seed is fixed and printed;
``INC_AGENT_FUZZ_SEED=N`` reproduces or varies a run. For the switch's side of the same
space see tests/test_fuzz_inc.py."""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pytest
from scapy.packet import fuzz

from hosts.ask.mapper import MapperConfig, MapperFlow
from hosts.ask.reducer import Reducer
from hosts.ask.wire import kv_packet
from hosts.atp.ps import AtpAggregator, AtpJobSpec
from hosts.kv.store import KvServer, _values
from hosts.netreduce.ps import SoftAggregator
from hosts.transport.result_filter import ResultFilter
from hosts.transport.udp import Address
from wire.header import (
    ASK_TUPLES,
    INC_UDP_PORT,
    SLOTS,
    Flag,
    Header,
    Op,
    ProtocolError,
    pack,
    unpack,
)
from wire.scapy_layers import INC

SEED = int(os.environ.get("INC_AGENT_FUZZ_SEED", "25"))
PER_AGENT = 700  # datagrams per agent: 6 agents, about 4,200 in all
JOB, OTHER = 9, 10
MEMBER_IPS = ("10.0.0.1", "10.0.0.2")  # the job's hosts (workers, mappers, clients)
SERVER_IP = "10.0.0.3"  # its aggregation address (switch or PS, reducer, KV server)
FORGER_IP = "10.0.0.66"


@dataclass
class Agent:
    """One agent behind its entry point: ``feed`` a datagram from an address (True: taken,
    i.e. answered or applied), ``state`` a snapshot of what it holds, ``counted`` every
    datagram it dropped or ignored and counted, ``members`` the addresses it may take
    datagrams from, ``job`` the job id it serves."""

    name: str
    feed: Callable[[bytes, Address], bool]
    state: Callable[[], object]
    counted: Callable[[], int]
    members: set[str]
    job: int | None
    bases: list[tuple[bytes, Address]]


def _values_of(n: int, rng: random.Random) -> np.ndarray:
    return np.array([rng.randrange(-100, 100) for _ in range(n)], dtype=np.int32)


def _every_kind(rng: random.Random) -> list[bytes]:
    """Valid packets of every op, for job JOB (mutations change the job too)."""
    out = []
    for op in Op:
        for flags in (0, Flag.RETX, Flag.RESULT, Flag.ACK, Flag.FALLBACK, Flag.RESULT | Flag.DRAIN):
            h = Header(op=op, flags=flags, job_id=JOB, worker_id=rng.randrange(2),
                       psn=rng.randrange(8), agg_idx=rng.randrange(4), epoch=1)  # fmt: skip
            out.append(pack(h, _values_of(SLOTS, rng)))
    out.append(pack(Header(op=Op.AGG_KV, flags=Flag.ACK, job_id=JOB), np.zeros(0, np.int32)))
    return out


def _mutate(data: bytes, src: Address, rng: random.Random) -> tuple[bytes, Address]:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(10)
        if kind == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == 1 and len(b) > 1:
            b[1] = rng.randrange(256)  # flags
        elif kind == 2 and b:
            b[0] = rng.randrange(256)  # op
        elif kind == 3 and len(b) > 3:
            b[2:4] = rng.choice((JOB, OTHER, 0, rng.randrange(1 << 16))).to_bytes(2, "big")
        elif kind == 4 and len(b) > 4:
            b[4] = rng.randrange(256)  # worker / flow / client
        elif kind == 5 and len(b) > 6:
            b[6] = rng.choice((0, 2, SLOTS, rng.randrange(256)))  # slot count
        elif kind == 6:
            del b[rng.randrange(len(b) + 1) :]
        elif kind == 7:
            b += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        elif kind == 8:
            src = (rng.choice((*MEMBER_IPS, SERVER_IP, FORGER_IP)), src[1])
        else:
            src = (src[0], rng.choice((INC_UDP_PORT, INC_UDP_PORT + 1, rng.randrange(1, 65536))))
    return bytes(b), src


def _datagrams(agent: Agent, rng: random.Random) -> list[tuple[bytes, Address]]:
    kinds = [(p, (rng.choice(MEMBER_IPS), INC_UDP_PORT)) for p in _every_kind(rng)]
    out = []
    for _ in range(PER_AGENT):
        r = rng.random()
        if r < 0.05:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
            out.append((data, (rng.choice((*MEMBER_IPS, FORGER_IP)), INC_UDP_PORT)))
        elif r < 0.15:
            scapy = bytes(fuzz(INC(values=list(range(rng.choice((0, 2, SLOTS)))))))
            out.append((scapy, rng.choice(agent.bases)[1]))
        else:
            out.append(_mutate(*rng.choice(agent.bases + kinds), rng))
    return out


# -- the agents, each with its job's packets in flight or its state filled ------------------


def _result_filter(rng: random.Random) -> Agent:
    f = ResultFilter(JOB, SLOTS, (SERVER_IP, INC_UDP_PORT))
    res = Header(flags=Flag.RESULT, job_id=JOB, psn=3)
    return Agent("netreduce worker", lambda d, s: f.admit(d, s) is not None, lambda: None,
                 lambda: sum(f.drops), {SERVER_IP}, JOB,
                 [(pack(res, _values_of(SLOTS, rng)), (SERVER_IP, INC_UDP_PORT))])  # fmt: skip


def _netreduce_ps(rng: random.Random) -> Agent:
    agg = SoftAggregator(n_workers=2, worker_ips=list(MEMBER_IPS))
    bases = []
    for psn in range(4):
        for w in range(2):
            h = Header(job_id=JOB, worker_id=w, psn=psn, agg_idx=psn)
            bases.append((pack(h, _values_of(SLOTS, rng)), (MEMBER_IPS[w], INC_UDP_PORT)))
    for data, src in bases[:5]:  # psns 0 and 1 done, 2 half way
        agg.process(*unpack(data), src)

    def state() -> tuple[dict[object, object], dict[object, object]]:
        copies = {k: (c.psn, c.bitmap, c.count, c.values.tobytes()) for k, c in agg._copies.items()}
        return copies, dict(agg._workers)

    def feed(data: bytes, src: Address) -> bool:
        try:
            h, values = unpack(data)
        except ProtocolError:
            agg.stats.ignored += 1  # ParameterServer.serve counts these
            return False
        before = state()
        return bool(agg.process(h, values, src)) or state() != before

    st = agg.stats
    return Agent("netreduce ps", feed, state, lambda: st.ignored + st.spoofed + sum(st.drops),
                 set(MEMBER_IPS), None, bases)  # fmt: skip


def _atp_ps(rng: random.Random) -> Agent:
    agg = AtpAggregator({JOB: AtpJobSpec(2, MEMBER_IPS[0]), OTHER: AtpJobSpec(2, FORGER_IP)})
    bases = []
    for psn in range(4):
        for w in range(2):
            h = Header(flags=Flag.FALLBACK, job_id=JOB, worker_id=w, psn=psn, bitmap=1 << w)
            bases.append((pack(h, _values_of(SLOTS, rng)), (MEMBER_IPS[w], INC_UDP_PORT)))
    for data, _ in bases[:5]:
        agg.process(*unpack(data))

    def state() -> tuple[dict[object, object], dict[object, object]]:
        pending = {k: (p.covered, [(m, v.tobytes()) for m, v in p.pieces])
                   for k, p in agg._pending.items()}  # fmt: skip
        return pending, copy.deepcopy(agg._done)

    def feed(data: bytes, src: Address) -> bool:
        try:
            h, values = unpack(data)
        except ProtocolError:
            agg.stats.ignored += 1  # AtpParameterServer.serve counts these
            return False
        before = state()
        return bool(agg.process(h, values)) or state() != before

    st = agg.stats
    counted = lambda: st.ignored + st.duplicates + st.conflicts + st.forged  # noqa: E731
    return Agent("atp ps", feed, state, counted, set(), None, bases)


def _ask_reducer(rng: random.Random) -> Agent:
    red = Reducer(JOB, 2, range(0, 4))
    for w, ip in enumerate(MEMBER_IPS):
        red.bind_flow(w, (ip, 40000 + w))
    red.drain_source = (MEMBER_IPS[0], INC_UDP_PORT)
    red.start_drain(1)
    bases = []
    for w in range(2):
        for psn in range(3):
            keys = [rng.randrange(1, 1 << 32) for _ in range(ASK_TUPLES)]
            h = Header(op=Op.AGG_KV, flags=rng.choice((0, Flag.FALLBACK)), job_id=JOB,
                       worker_id=w, psn=psn, agg_idx=rng.randrange(4), epoch=2)  # fmt: skip
            bases.append((kv_packet(h, keys, _values_of(ASK_TUPLES, rng).tolist()),
                          (MEMBER_IPS[w], 40000 + w)))  # fmt: skip
    for row in range(4):
        h = Header(op=Op.AGG_KV, flags=Flag.RESULT | Flag.DRAIN, job_id=JOB, worker_id=2,
                   agg_idx=row, epoch=1, ver=1)  # fmt: skip
        bases.append((kv_packet(h, [row + 1] * ASK_TUPLES, [1] * ASK_TUPLES),
                      (MEMBER_IPS[0], INC_UDP_PORT)))  # fmt: skip
    red.on_packet(*bases[0])
    st = red.stats

    def state() -> object:
        return (dict(red.totals), copy.deepcopy(red._seen), dict(red._pending), st.packets)

    def feed(data: bytes, src: Address) -> bool:
        before = state()
        return red.on_packet(data, src) is not None or state() != before

    return Agent("ask reducer", feed, state, lambda: sum(st.drops), set(MEMBER_IPS), JOB, bases)


def _ask_mapper(rng: random.Random) -> Agent:
    m = MapperFlow(MapperConfig(job_id=JOB, flow=1, part_base=0, part_size=4, window=16,
                                reducer=(SERVER_IP, INC_UDP_PORT)))  # fmt: skip
    m.add_counts({f"k{i}": i + 1 for i in range(200)})
    m.flush()
    bases = []
    for payload in m.to_send(0.0):
        h = unpack(payload)[0]
        ack = replace(h, flags=Flag.ACK, slot_count=0)
        bases.append((pack(ack, np.zeros(0, np.int32)), (SERVER_IP, INC_UDP_PORT)))
    assert len(bases) >= 8
    m.on_datagram(*bases[0])  # one acknowledged: its ACK again is a late copy
    return Agent("ask mapper", m.on_datagram, lambda: sorted(m._flight),
                 lambda: sum(m.stats.drops), {SERVER_IP}, JOB, bases)  # fmt: skip


def _kv_server(rng: random.Random) -> Agent:
    srv = KvServer(JOB, endpoint=None, clients=dict(enumerate(MEMBER_IPS)))  # type: ignore[arg-type]
    bases = []
    for w in range(2):
        for psn in range(4):
            op = rng.choice((Op.KV_READ, Op.KV_WRITE))
            h = Header(op=op, job_id=JOB, worker_id=w, psn=psn, agg_idx=rng.randrange(3))
            data = pack(h, _values(rng.randrange(3), [rng.randrange(100)] * 8))
            bases.append((data, (MEMBER_IPS[w], INC_UDP_PORT)))
    for data, src in bases[:4]:
        srv.handle(data, src)
    st = srv.stats

    def feed(data: bytes, src: Address) -> bool:
        return srv.handle(data, src) is not None

    return Agent("kv server", feed, lambda: (dict(srv.store), copy.deepcopy(srv.applied)),
                 lambda: sum(st.drops) + st.ignored, set(MEMBER_IPS), JOB, bases)  # fmt: skip


AGENTS = [_result_filter, _netreduce_ps, _atp_ps, _ask_reducer, _ask_mapper, _kv_server]


def _job_of(data: bytes) -> int | None:
    return int.from_bytes(data[2:4], "big") if len(data) >= 4 else None


@pytest.mark.parametrize("make", AGENTS, ids=lambda f: f.__name__.strip("_"))
def test_mutated_packets_never_crash_an_agent_and_what_it_does_not_take_is_counted(
    make: Callable[[random.Random], Agent],
) -> None:
    print(f"agent fuzz seed {SEED} (INC_AGENT_FUZZ_SEED={SEED} reproduces this run)")
    rng = random.Random(f"{SEED}-{make.__name__}")
    agent = make(rng)
    taken = dropped = 0
    for step, (data, src) in enumerate(_datagrams(agent, rng)):
        where = f"{agent.name}, seed {SEED}, datagram {step} from {src}: {data.hex()}"
        state, counted = agent.state(), agent.counted()
        took = agent.feed(data, src)  # must not raise
        delta = agent.counted() - counted
        outsider = bool(agent.members) and src[0] not in agent.members
        other_job = agent.job is not None and _job_of(data) != agent.job
        if outsider or other_job:
            assert not took and delta == 1, f"taken from a non-member or another job: {where}"
        if took:
            taken += 1
            assert delta == 0, f"taken and counted as dropped: {where}"
        else:
            dropped += 1
            assert delta == 1, f"neither taken nor counted once ({delta}): {where}"
            assert agent.state() == state, f"dropped but changed the agent's state: {where}"
    assert dropped > PER_AGENT // 2, "the fuzz reached the agent's guards"
    assert taken > 0, "some mutations are still valid packets: the fuzz reached its state"


@pytest.mark.parametrize("make", [_netreduce_ps, _atp_ps], ids=["netreduce_ps", "atp_ps"])
def test_a_packet_naming_one_job_never_changes_another_jobs_state(
    make: Callable[[random.Random], Agent],
) -> None:
    """The PSs serve several jobs at once (state keyed by job): a datagram naming any job
    but JOB leaves JOB's state as it was."""
    rng = random.Random(f"{SEED}-jobs-{make.__name__}")
    agent = make(rng)

    def job_state() -> object:
        copies, other = agent.state()  # type: ignore[misc]
        if isinstance(copies, dict) and all(isinstance(k, tuple) for k in copies):
            copies = {k: v for k, v in copies.items() if k[0] == JOB}
        if isinstance(other, dict) and JOB in other:
            other = other[JOB]
        elif isinstance(other, dict):
            other = {k: v for k, v in other.items() if k[0] == JOB}
        return copies, other

    for data, src in _datagrams(agent, rng):
        if _job_of(data) in (None, JOB):
            continue
        before = job_state()
        agent.feed(data, src)
        assert job_state() == before, f"{agent.name}: {data.hex()} from {src}"
