"""The native (C) host data path against the Python reference: the aggregation client
(native_window.c), the parameter server (native_ps.c) and the ring (native_ring.c).

Loss, duplication and reordering are injected in both directions by a UDP relay between
the workers and the parameter server: two ImpairedEndpoints (hosts/transport/udp.py), one
facing the workers, one facing the server, so the native client's own socket stays plain.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from hosts.netreduce.allreduce import AllReduceClient, AllReduceTimeout
from hosts.netreduce.ps import ParameterServer
from hosts.netreduce.ring import RingAllReduce
from hosts.transport import native_window
from hosts.transport.udp import Address, Endpoint, ImpairedEndpoint
from tests.impairing_relay import ImpairingRelay
from tests.worker_threads import run_threads
from wire.header import unpack

LOCAL = ("127.0.0.1", 0)


def vectors(n: int, sizes: list[int], seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        [rng.integers(-(2**31), 2**31, size=s, dtype=np.int64).astype(np.int32) for _ in range(n)]
        for s in sizes
    ]


def allreduce_through_relay(
    backends: list[str],
    calls: list[list[np.ndarray]],
    impair: tuple[float, float, float],
    ps_backend: str,
) -> tuple[list[list[np.ndarray]], list[AllReduceClient]]:
    n = len(backends)
    ps = ParameterServer(n, bind=LOCAL, backend=ps_backend).start()
    assert (ps._native is not None) == (ps_backend == "native")
    clients = [
        AllReduceClient(
            7,
            w,
            n,
            0,
            16,
            16,
            dest=("127.0.0.1", 0),
            bind=LOCAL,
            timeout=0.02,
            max_retries=200,
            total_timeout=30.0,
            backend=backends[w],
        )  # fmt: skip
        for w in range(n)
    ]
    try:
        with ImpairingRelay(ps.address, *impair, seed=5) as relay:
            for c in clients:
                c.dest = relay.address

            def worker(w: int) -> list[np.ndarray]:
                return [clients[w].allreduce_int(xs[w]) for xs in calls]

            return run_threads(n, worker), clients  # type: ignore[return-value]
    finally:
        ps.stop()
        for c in clients:
            c.close()


@pytest.mark.parametrize("impair", [(0.0, 0.0, 0.0), (0.1, 0.05, 0.1)])
def test_native_and_python_clients_and_ps_give_bit_identical_sums_under_loss_dup_and_reorder(
    impair: tuple[float, float, float],
) -> None:
    calls = vectors(3, [1, 64, 500, 2000], seed=3)
    expected = [np.sum(np.stack(xs).astype(np.int64), axis=0).astype(np.int32) for xs in calls]
    got = {}
    for name, backends, ps_backend in [
        ("python", ["python"] * 3, "python"),
        ("native", ["native"] * 3, "native"),
        ("mixed", ["native", "python", "native"], "python"),
    ]:
        results, clients = allreduce_through_relay(backends, calls, impair, ps_backend)
        assert [c.backend for c in clients] == backends
        got[name] = results
        for w in range(3):
            for k, want in enumerate(expected):
                assert results[w][k].dtype == np.int32
                np.testing.assert_array_equal(results[w][k], want, err_msg=f"{name} w{w} #{k}")
        if any(impair):
            # the impairments were really felt: lost packets or results were sent again
            assert sum(c.stats.retransmissions for c in clients) > 0
            assert sum(c.stats.duplicate_results for c in clients) > 0
    for w in range(3):
        for k in range(len(calls)):
            assert got["native"][w][k].tobytes() == got["python"][w][k].tobytes()


def first_window(backend: str, addressing: str) -> list[bytes]:
    """The datagrams of one call's first window, sent to a socket that never answers."""
    with Endpoint(LOCAL) as sink:
        c = AllReduceClient(
            9, 2, 3, 40, 8, 8, dest=sink.address, bind=LOCAL, timeout=5.0,
            total_timeout=0.2, backend=backend, first_psn=5,
        )  # fmt: skip
        c.set_layout(3, 40, 8, addressing=addressing)
        with c, pytest.raises(AllReduceTimeout) as e:
            c.allreduce_int(np.arange(300, dtype=np.int32) - 150)
        assert e.value.missing[:2] == [5, 6]
        got: list[bytes] = []
        while sink.wait(0.2):
            got += [d for d, _ in sink.recv_many()]
        return got


@pytest.mark.parametrize("addressing", ["modulo", "hashed"])
def test_native_path_puts_the_same_bytes_on_the_wire_as_the_python_path(addressing: str) -> None:
    native, python = first_window("native", addressing), first_window("python", addressing)
    assert len(native) == 8
    assert native == python
    h, values = unpack(native[0])
    assert (h.job_id, h.worker_id, h.psn, h.epoch) == (9, 2, 5, 3)
    assert values.tolist()[:2] == [-150, -149]


def test_native_call_fails_after_max_retries_naming_the_psn() -> None:
    with Endpoint(LOCAL) as sink:
        c = AllReduceClient(
            4, 0, 1, 0, 4, 4, dest=sink.address, bind=LOCAL, timeout=0.01, max_retries=3, slots=4,
            backend="native",
        )  # fmt: skip
        with c, pytest.raises(AllReduceTimeout, match="after 3 retransmissions") as e:
            c.allreduce_int(np.ones(8, dtype=np.int32))
        assert e.value.missing == [0, 1]
        assert c.stats.retransmissions == 3 * 2


def test_host_backend_comes_from_the_environment_and_bad_names_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(native_window.ENV, "python")
    with AllReduceClient(1, 0, 1, 0, 4, 4, dest=("127.0.0.1", 9), bind=LOCAL) as c:
        assert c.backend == "python"
    monkeypatch.setenv(native_window.ENV, "fpga")
    with pytest.raises(ValueError, match="host back end must be one of native, python"):
        AllReduceClient(1, 0, 1, 0, 4, 4, dest=("127.0.0.1", 9), bind=LOCAL)


def test_an_impaired_test_endpoint_keeps_the_python_loop() -> None:
    ep = ImpairedEndpoint(Endpoint(LOCAL), loss=0.0)
    c = AllReduceClient(1, 0, 1, 0, 4, 4, dest=("127.0.0.1", 9), endpoint=ep, backend="native")
    with c:
        assert not c._native_applies()


# --- the ring baseline's native loop ----------------------------------------------------------
class ForwardingRelay:
    """Everything sent to ``address`` goes on to ``target``, impaired (one rank's inbox)."""

    def __init__(self, loss: float, dup: float, reorder: float, seed: int) -> None:
        kw = dict(loss=loss, dup=dup, reorder=reorder)
        self.ep = ImpairedEndpoint(Endpoint(LOCAL), seed=seed, **kw)  # type: ignore[arg-type]
        self.target: Address | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def address(self) -> Address:
        return self.ep.address

    def _serve(self) -> None:
        while not self._stop.is_set():
            got = self.ep.recv_many()
            if got and self.target is not None:
                self.ep.send_many([(p, self.target) for p, _ in got])
            self.ep.flush()
            self.ep.wait(0.001)

    def start(self) -> ForwardingRelay:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self.ep.close()


def ring_through_relays(
    backends: list[str], calls: list[list[np.ndarray]], impair: tuple[float, float, float]
) -> tuple[list[list[np.ndarray]], list[RingAllReduce]]:
    n = len(backends)
    relays = [ForwardingRelay(*impair, seed=10 + r).start() for r in range(n)]
    peers = [r.address for r in relays]
    ranks = [
        RingAllReduce(
            r,
            peers,
            job_id=3,
            slots=8,
            window=8,
            timeout=0.02,
            max_retries=200,
            bind=LOCAL,
            backend=backends[r],
            senders=(peers[r], peers[r]),  # the relay in front of this rank forwards both
        )  # fmt: skip
        for r in range(n)
    ]
    for relay, rank in zip(relays, ranks, strict=True):
        relay.target = rank.endpoint.address
    try:

        def worker(r: int) -> list[np.ndarray]:
            out = [ranks[r].allreduce_int(xs[r]) for xs in calls]
            ranks[r].close(linger=0.5)  # acknowledges a neighbour's late resends, as a worker
            return out

        return run_threads(n, worker), ranks  # type: ignore[return-value]
    finally:
        for relay in relays:
            relay.stop()


@pytest.mark.parametrize("impair", [(0.0, 0.0, 0.0), (0.1, 0.05, 0.1)])
def test_native_and_python_rings_give_bit_identical_sums_under_loss_dup_and_reorder(
    impair: tuple[float, float, float],
) -> None:
    calls = vectors(3, [1, 40, 700], seed=4)
    expected = [np.sum(np.stack(xs).astype(np.int64), axis=0).astype(np.int32) for xs in calls]
    got = {}
    for name, backends in {
        "python": ["python"] * 3,
        "native": ["native"] * 3,
        "mixed": ["python", "native", "native"],
    }.items():
        results, ranks = ring_through_relays(backends, calls, impair)
        assert [r.backend for r in ranks] == backends
        got[name] = results
        for r in range(3):
            for k, want in enumerate(expected):
                np.testing.assert_array_equal(results[r][k], want, err_msg=f"{name} r{r} #{k}")
        if any(impair):
            assert sum(r.stats.retransmissions for r in ranks) > 0
            assert sum(r.stats.duplicates for r in ranks) > 0
    for r in range(3):
        for k in range(len(calls)):
            assert got["native"][r][k].tobytes() == got["python"][r][k].tobytes()


def test_native_ring_names_the_missing_rows_when_the_right_neighbour_is_gone() -> None:
    with Endpoint(LOCAL) as gone:
        peers = [("127.0.0.1", 0), gone.address]
        r = RingAllReduce(0, peers, slots=4, window=4, timeout=0.01, max_retries=2,
                          bind=LOCAL, backend="native")  # fmt: skip
        with pytest.raises(AllReduceTimeout, match="unacknowledged by rank 1 after 2") as e:
            r.allreduce_int(np.ones(16, dtype=np.int32))
        r.close(linger=0.0)
        assert e.value.missing == [0, 1, 2, 3]


def test_without_a_c_compiler_the_native_choice_falls_back_to_python_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("INC_NATIVE_CACHE", str(tmp_path / "cache"))  # nothing built yet
    monkeypatch.setattr(native_window, "_libs", {})
    monkeypatch.setattr(native_window, "_warned", False)
    assert native_window.choose_backend("native") == "python"
    assert native_window.choose_backend(None) == "python"
    err = capsys.readouterr().err
    assert err.count("native data path unavailable") == 1 and "no C compiler" in err


UDP_SEGMENT = 103  # <linux/udp.h>: send one buffer as datagrams of this many bytes


class SegmentingRelay:
    """Workers <-> relay <-> parameter server, the results back to each worker in runs of
    up to 16 sent as one buffer with UDP segmentation offload, as p4sim does with
    P4SIM_UDP_GSO: a socket with UDP_GRO (the native loop's) gets a run whole."""

    def __init__(self, server: Address) -> None:
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for s in (self.front, self.back):
            s.bind(LOCAL)
            s.settimeout(0.005)
        self.server, self.workers, self.runs = server, {}, 0  # type: ignore[var-annotated]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def address(self) -> Address:
        return self.front.getsockname()  # type: ignore[no-any-return]

    def send_run(self, run: list[bytes], dest: Address) -> None:
        seg = struct.pack("H", len(run[0]))
        self.front.sendmsg([b"".join(run)], [(socket.SOL_UDP, UDP_SEGMENT, seg)], 0, dest)
        self.runs += len(run) > 1

    def _serve(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                while True:
                    payload, src = self.front.recvfrom(4096)
                    self.workers[payload[4]] = src
                    self.back.sendto(payload, self.server)
            results: dict[int, list[bytes]] = {}
            with contextlib.suppress(TimeoutError):
                while True:
                    payload, _ = self.back.recvfrom(4096)
                    results.setdefault(payload[4], []).append(payload)
            for w, got in results.items():
                for i in range(0, len(got), 16):
                    self.send_run(got[i : i + 16], self.workers[w])

    def __enter__(self) -> SegmentingRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.front.close()
        self.back.close()


def test_runs_of_results_sent_as_one_buffer_give_the_native_loop_the_same_sums() -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # the kernel keeps runs whole
    probe.bind(LOCAL)
    probe.setsockopt(socket.IPPROTO_UDP, 104, 1)  # UDP_GRO
    ps = ParameterServer(2, bind=LOCAL).start()
    clients = [
        AllReduceClient(7, w, 2, 0, 16, 16, dest=("127.0.0.1", 0), bind=LOCAL, timeout=0.05,
                        max_retries=100, total_timeout=30.0, backend=backend)
        for w, backend in enumerate(("native", "python"))
    ]  # fmt: skip
    calls = vectors(2, [40 * 32, 7 * 32 + 5], seed=11)
    try:
        with SegmentingRelay(ps.address) as relay:
            relay.send_run([b"x" * 100] * 3, probe.getsockname())
            assert len(probe.recv(4096)) == 300
            for c in clients:
                c.dest = relay.address
            got = run_threads(2, lambda w: [clients[w].allreduce_int(xs[w]) for xs in calls])
            assert relay.runs > 1
            native = clients[0].endpoint
            assert isinstance(native, Endpoint) and native.stats.gro_runs > 0  # cut in C
    finally:
        ps.stop()
        probe.close()
        for c in clients:
            c.close()
    for i, xs in enumerate(calls):
        exact = (xs[0].astype(np.int64) + xs[1]).astype(np.int32)
        assert all(np.array_equal(g[i], exact) for g in got)  # type: ignore[index]
