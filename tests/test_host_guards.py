"""Host agents take only what their switch or PS sent them (docs/protocol.md, *Isolation*,
I-HOST): a forger's results, with another job's id, a spoofed source port or address,
forged flags or a wrong slot count, change no sum and are counted by reason, on the Python
and the native loops alike; the PS keeps each worker bound to its address."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import pytest

from hosts.netreduce.allreduce import AllReduceClient
from hosts.netreduce.ps import ParameterServer
from hosts.serene.ssp_client import PipelinedAllReduce
from hosts.transport.native_window import choose_backend
from hosts.transport.result_filter import answer_flags_valid
from wire.header import (
    HOST_DROPS,
    SLOTS,
    DropReason,
    Flag,
    Header,
    HostDrop,
    aggregator_address,
    pack,
    pack_header,
    unpack,
)

JOB = 4
WRONG = 666
BACKENDS = ["python", "native"]
# Every flag byte with RESULT that no switch or PS sets on a NetReduce or Serene answer.
FORGED_RESULT_FLAGS = [f for f in range(256) if f & Flag.RESULT and not answer_flags_valid(f)]

Forgery = Callable[[Header], list[tuple[str, bytes]]]  # (which socket, datagram) per packet


def _result(h: Header, **change: int) -> Header:
    return replace(h, **{"flags": Flag.RESULT | (h.flags & Flag.RETX), **change})


def _wrong(h: Header, slots: int = SLOTS) -> np.ndarray:
    return np.full(slots, WRONG, dtype=np.int32)


FORGERIES: dict[HostDrop, Forgery] = {
    # The aggregation address itself, but another job's result.
    HostDrop.OTHER_JOB: lambda h: [("agg", pack(_result(h, job_id=JOB + 1), _wrong(h)))],
    # Another process on the aggregator's host (same IP, another port).
    HostDrop.FOREIGN_PORT: lambda h: [("same_ip", pack(_result(h), _wrong(h)))],
    # Another host.
    HostDrop.FOREIGN_ADDRESS: lambda h: [("other_ip", pack(_result(h), _wrong(h)))],
    # From the aggregation address and port (what a spoofer of both would send): every
    # result flag combination no switch or PS sets.
    HostDrop.FORGED_FLAGS: lambda h: [
        ("agg", pack(_result(h, flags=f), _wrong(h))) for f in FORGED_RESULT_FLAGS
    ],
    HostDrop.BAD_SLOT_COUNT: lambda h: [("agg", pack(_result(h), _wrong(h, 2)))],
    # A header that promises more values than it has.
    HostDrop.MALFORMED: lambda h: [("agg", pack_header(_result(h), SLOTS) + b"\0" * 8)],
}


class ForgingAggregator:
    """A one-worker aggregator (the sum is the worker's own vector) that lets forgeries of
    each packet's result reach the worker just before the real one."""

    def __init__(self, forge: Forgery) -> None:
        self.forge = forge
        agg = _udp("127.0.0.1")
        self.socks = {
            "agg": agg,
            "same_ip": _udp("127.0.0.1"),  # another port of the aggregator's host
            "other_ip": _udp("127.0.0.2", agg.getsockname()[1]),  # another host, same port
        }
        self.forged = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        return self.socks["agg"].getsockname()  # type: ignore[no-any-return]

    def _serve(self) -> None:
        agg = self.socks["agg"]
        agg.settimeout(0.05)
        while not self._stop.is_set():
            try:
                data, src = agg.recvfrom(4096)
            except TimeoutError:
                continue
            h, values = unpack(data)
            for which, datagram in self.forge(h):
                self.socks[which].sendto(datagram, src)
                self.forged += 1
            agg.sendto(pack(_result(h), values), src)

    def __enter__(self) -> ForgingAggregator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.socks.values():
            s.close()


def _udp(ip: str, port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, port))
    return s


def _client(dest: tuple[str, int], backend: str, **kw: object) -> AllReduceClient:
    return AllReduceClient(JOB, 0, 1, 0, 8, 4, dest=dest, bind=("127.0.0.1", 0),
                           timeout=1.0, total_timeout=10.0, backend=backend, **kw)  # type: ignore[arg-type]  # fmt: skip


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "native" and choose_backend("native") != "native":
        pytest.fail("the native host loop does not build here")
    yield request.param


@pytest.mark.parametrize("reason", list(FORGERIES), ids=lambda r: r.name.lower())
def test_forged_results_change_no_sum_and_are_counted_by_reason(
    reason: HostDrop, backend: str
) -> None:
    x = np.arange(3 * SLOTS, dtype=np.int32) - 40
    with ForgingAggregator(FORGERIES[reason]) as agg:
        c = _client(agg.address, backend)
        try:
            got = c.allreduce_int(x)
        finally:
            c.close()
    assert got.tolist() == x.tolist()
    assert agg.forged > 0 and c.stats.drops[reason] == agg.forged
    assert sum(c.stats.drops) == agg.forged  # each counted once, under its own reason
    assert c.stats.results == 3 and c.stats.duplicate_results == 0


def test_pipelined_client_takes_only_its_aggregators_results() -> None:
    """Serene's pipelined client (several epochs in flight) applies the same filter."""

    def every(h: Header) -> list[tuple[str, bytes]]:
        return [d for forge in FORGERIES.values() for d in forge(h)]

    x = [np.arange(2 * SLOTS, dtype=np.int32) * (e + 1) for e in range(2)]
    with ForgingAggregator(every) as agg:
        c = _client(agg.address, "python")
        pipe = PipelinedAllReduce(c)
        try:
            for e in range(2):
                pipe.submit(e, x[e], bound=None)
            got = [pipe.result(e)[0] for e in range(2)]
        finally:
            pipe.close()
            c.close()
    assert [g.tolist() for g in got] == [v.tolist() for v in x]
    per_packet = {r: len(f(Header())) for r, f in FORGERIES.items()}
    assert c.stats.drops == [per_packet.get(HostDrop(i), 0) * 4 for i in range(HOST_DROPS)]


@pytest.mark.parametrize("ps_backend", BACKENDS)
def test_ps_keeps_each_worker_bound_to_its_address(ps_backend: str) -> None:
    """After a worker's first packet, another address claiming that worker adds nothing to
    the sums and takes no result; contributions with flags no worker sets are dropped."""
    if ps_backend == "native" and choose_backend("native") != "native":
        pytest.fail("the native host loop does not build here")
    ps = ParameterServer(n_workers=2, bind=("127.0.0.1", 0), backend=ps_backend).start()
    clients = [
        AllReduceClient(
            JOB,
            w,
            2,
            0,
            8,
            4,
            dest=ps.address,
            bind=("127.0.0.1", 0),
            timeout=0.5,
            total_timeout=10.0,
            backend=ps_backend,
        )  # fmt: skip
        for w in range(2)
    ]
    forger = _udp("127.0.0.1")
    x = [np.arange(SLOTS, dtype=np.int32) + 100 * w for w in range(2)]

    def run_all(first: bool) -> list[list[int]]:
        out: list[list[int]] = [[], []]

        def one(w: int) -> None:
            out[w] = clients[w].allreduce_int(x[w]).tolist()

        threads = [threading.Thread(target=one, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        return out

    try:
        assert run_all(True) == [(x[0] + x[1]).tolist()] * 2  # binds both workers
        psn = clients[0].next_psn
        idx, ver = aggregator_address(psn, 0, 8)
        wrong = np.full(SLOTS, WRONG, dtype=np.int32)
        for flags in (Flag.NONE, Flag.RETX):  # worker 1's next packet, from another port
            h = Header(job_id=JOB, worker_id=1, psn=psn, agg_idx=idx, ver=ver, flags=flags)
            forger.sendto(pack(h, wrong), ps.address)
        for flags in (Flag.WAIT, Flag.COLLISION, Flag.RUNNING):  # from worker 1's own port
            h = Header(job_id=JOB, worker_id=1, psn=psn, agg_idx=idx, ver=ver, flags=flags)
            clients[1].endpoint.send_many([(pack(h, wrong), ps.address)])
        got = run_all(False)
        stats = ps.stats
    finally:
        for c in clients:
            c.close()
        forger.close()
        ps.stop()
    assert got == [(x[0] + x[1]).tolist()] * 2
    assert stats.spoofed == 2  # NONE and RETX: the claim itself is refused
    assert stats.drops[DropReason.FORGED_RESULT] == 3
    assert stats.drops[DropReason.DUPLICATE] == 0


@pytest.mark.parametrize("ring_backend", BACKENDS)
def test_ring_rank_takes_data_only_from_its_left_neighbour(ring_backend: str) -> None:
    """The ring baseline's packets cross the switch as plain UDP: a rank takes data only
    from its left neighbour's address and port, of its job, with a worker's flags."""
    from hosts.netreduce.ring import RingAllReduce
    from hosts.transport.udp import Endpoint

    if ring_backend == "native" and choose_backend("native") != "native":
        pytest.fail("the native host loop does not build here")
    eps = [Endpoint(("127.0.0.1", 0)) for _ in range(2)]
    peers = [ep.address for ep in eps]
    ranks = [
        RingAllReduce(
            r,
            peers,
            job_id=JOB,
            endpoint=eps[r],
            timeout=0.5,
            total_timeout=10.0,
            backend=ring_backend,
        )  # fmt: skip
        for r in range(2)
    ]
    # Another port of rank 1's host, another host on rank 1's port, and rank 1's own
    # socket (what a host spoofing both would send).
    same_ip, other_ip = _udp("127.0.0.1"), _udp("127.0.0.2", peers[1][1])
    # What rank 1 sends rank 0 first (epoch 1, step 0, packet 0), with wrong values.
    data = Header(job_id=JOB, worker_id=1, epoch=1, agg_idx=0, psn=0)
    wrong = np.full(SLOTS, WRONG, dtype=np.int32)
    sent = {
        HostDrop.FOREIGN_PORT: [(same_ip, pack(data, wrong))],
        HostDrop.FOREIGN_ADDRESS: [(other_ip, pack(data, wrong))],
        HostDrop.OTHER_JOB: [(None, pack(replace(data, job_id=JOB + 1), wrong))],
        HostDrop.FORGED_FLAGS: [
            (None, pack(replace(data, flags=f), wrong)) for f in range(256) if f & ~Flag.RETX
        ],
    }
    for forged in sent.values():
        for sock, datagram in forged:
            if sock is None:
                eps[1].send_many([(datagram, peers[0])])
            else:
                sock.sendto(datagram, peers[0])
    x = [np.arange(2 * SLOTS, dtype=np.int32) + 1000 * r for r in range(2)]
    out: list[list[int]] = [[], []]

    def one(r: int) -> None:
        out[r] = ranks[r].allreduce_int(x[r]).tolist()

    threads = [threading.Thread(target=one, args=(r,)) for r in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
    finally:
        for rk in ranks:
            rk.close()
        same_ip.close()
        other_ip.close()
    assert out == [(x[0] + x[1]).tolist()] * 2
    assert ranks[0].stats.drops == [len(sent.get(HostDrop(i), [])) for i in range(HOST_DROPS)]


@pytest.mark.parametrize("ps_backend", BACKENDS)
def test_ps_takes_a_worker_only_from_its_declared_host_even_when_a_forger_claims_first(
    ps_backend: str,
) -> None:
    """Given the plan's worker IPs, a host elsewhere that claims every worker before they
    send anything binds none of them: its packets add nothing, count as ``spoofed``, and the
    workers' own first packets bind them."""
    if ps_backend == "native" and choose_backend("native") != "native":
        pytest.fail("the native host loop does not build here")
    ps = ParameterServer(n_workers=2, bind=("127.0.0.1", 0), backend=ps_backend,
                         worker_ips=["127.0.0.1", "127.0.0.1"]).start()  # fmt: skip
    forger = _udp("127.0.0.2")
    wrong = np.full(SLOTS, WRONG, dtype=np.int32)
    claims = [
        Header(
            job_id=JOB,
            worker_id=w,
            psn=p,
            agg_idx=aggregator_address(p, 0, 8)[0],
            ver=aggregator_address(p, 0, 8)[1],
            flags=f,
        )  # fmt: skip
        for w in range(2)
        for p in range(4)
        for f in (Flag.NONE, Flag.RETX)
    ]
    for h in claims:
        forger.sendto(pack(h, wrong), ps.address)
    clients = [
        AllReduceClient(
            JOB,
            w,
            2,
            0,
            8,
            4,
            dest=ps.address,
            bind=("127.0.0.1", 0),
            timeout=0.5,
            total_timeout=5.0,
            backend=ps_backend,
        )  # fmt: skip
        for w in range(2)
    ]
    x = [np.arange(2 * SLOTS, dtype=np.int32) - 7 * w for w in range(2)]
    out: list[list[int]] = [[], []]

    def one(w: int) -> None:
        out[w] = clients[w].allreduce_int(x[w]).tolist()

    threads = [threading.Thread(target=one, args=(w,)) for w in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        stats = ps.stats
    finally:
        for c in clients:
            c.close()
        forger.close()
        ps.stop()
    assert out == [(x[0] + x[1]).tolist()] * 2
    assert stats.spoofed == len(claims)


def test_atp_ps_drops_pieces_naming_workers_the_job_does_not_have() -> None:
    """A piece whose bitmap (or, without one, worker id) names a worker beyond the job's
    count holds no state and completes nothing; it is counted ``forged``. The job's own
    pieces then complete it with the exact sum."""
    from hosts.atp.ps import AtpAggregator, AtpJobSpec

    ps = AtpAggregator({JOB: AtpJobSpec(n_workers=2, result_ip="10.0.0.1")}, slots=2)
    wrong = np.full(2, WRONG, dtype=np.int32)
    forged = [
        Header(job_id=JOB, psn=5, bitmap=0b111, flags=Flag.FALLBACK, slot_count=2),
        Header(job_id=JOB, psn=5, bitmap=0b100, flags=Flag.FALLBACK, slot_count=2),
        Header(job_id=JOB, psn=6, worker_id=2, flags=Flag.FALLBACK, slot_count=2),
        Header(job_id=JOB, psn=7, worker_id=200, flags=Flag.FALLBACK | Flag.RETX, slot_count=2),
    ]
    for h in forged:
        assert ps.process(h, wrong) == []
    assert ps._pending == {} and ps.stats.forged == len(forged)
    for w in range(2):
        h = Header(job_id=JOB, worker_id=w, psn=5, bitmap=1 << w, flags=Flag.FALLBACK,
                   slot_count=2)  # fmt: skip
        out = ps.process(h, np.array([w + 1, 10 * (w + 1)], dtype=np.int32))
    assert unpack(out[0][0])[1].tolist() == [3, 30]
