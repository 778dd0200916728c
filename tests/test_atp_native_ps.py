"""ATP's parameter server in C (hosts/atp/native_ps.c) against the Python reference
(hosts/atp/ps.py's AtpAggregator): the same datagrams out for every datagram in, and the
same sums for ATP workers through a relay that loses, duplicates and reorders both ways."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from hosts.atp.native_ps import NativeAtpAggregator
from hosts.atp.ps import (
    KEEP_RESULTS,
    AtpAggregator,
    AtpJobSpec,
    AtpParameterServer,
    AtpPsStats,
)
from hosts.atp.worker import AtpClient
from tests.impairing_relay import MulticastRelay
from tests.worker_threads import run_threads
from wire.header import Flag, Header, Op, pack

LOCAL = ("127.0.0.1", 0)
JOBS = {3: AtpJobSpec(2, "10.0.0.1"), 9: AtpJobSpec(4, "10.0.0.2", result_port=4000)}


def _piece(job: int, psn: int, x: np.ndarray, bits: int, flags: int = Flag.FALLBACK) -> bytes:
    """The sum of the workers ``bits`` names (rows of ``x``) as a datagram of ``job``."""
    v = x[[w for w in range(len(x)) if bits >> w & 1]].sum(axis=0)
    h = Header(job_id=job, psn=psn, agg_idx=psn % 16, epoch=psn // 7, bitmap=bits, flags=flags,
               slot_count=x.shape[1])  # fmt: skip
    return pack(h, v.astype(np.int32))


def datagrams(seed: int, slots: int, psns: int) -> list[bytes]:
    """What may reach an ATP PS, shuffled and repeated: per psn of job 3 (2 workers) and
    job 9 (4 workers in two racks) the switch's copy of a result, or pieces of single
    workers, of racks and of all workers, retransmissions; and what it must ignore or
    drop: unknown jobs, wrong slot counts, ACKs, short datagrams, foreign workers."""
    rng = np.random.default_rng(seed)
    out = []
    for job, spec in JOBS.items():
        racks = [0b0011, 0b1100] if spec.n_workers == 4 else []
        for psn in range(psns):
            x = rng.integers(-(2**30), 2**30, size=(spec.n_workers, slots), dtype=np.int64)

            piece = functools.partial(_piece, job, psn, x)

            kind = rng.integers(4)
            if kind == 0:  # the switch summed it: its copy, sometimes resent with RETX
                out.append(piece(spec.full, Flag.RESULT))
                out.append(piece(spec.full, Flag.RESULT | Flag.RETX))
            elif kind == 1:  # every worker fell back, one piece each (bitmap or worker id)
                for w in range(spec.n_workers):
                    h = Header(job_id=job, worker_id=w, psn=psn, slot_count=slots,
                               flags=Flag.FALLBACK | Flag.COLLISION)  # fmt: skip
                    out.append(pack(h, x[w].astype(np.int32)) if w % 2 else piece(1 << w))
            elif kind == 2 and racks:  # a rack's aggregate, the other rack's workers alone
                out += [piece(racks[0]), piece(0b0001), piece(0b0100), piece(0b1000)]
            else:  # the aggregate, retransmitted pieces after it
                out += [piece(spec.full, Flag.RETX), piece(0b01, Flag.FALLBACK | Flag.RETX)]
    bad = [
        pack(Header(job_id=5, psn=1, bitmap=1, slot_count=slots), np.zeros(slots, np.int32)),
        pack(Header(job_id=3, psn=1, bitmap=1, slot_count=1), np.zeros(1, np.int32)),
        pack(Header(job_id=3, psn=10**6, bitmap=0b100, slot_count=slots), np.ones(slots, np.int32)),
        pack(Header(job_id=3, psn=10**6, worker_id=40, slot_count=slots), np.ones(slots, np.int32)),
        pack(Header(job_id=3, psn=3, bitmap=3, flags=Flag.ACK, slot_count=0), np.zeros(0)),
        pack(
            Header(op=Op.AGG_KV, job_id=3, psn=3, bitmap=1, slot_count=slots),
            np.ones(slots, np.int32),
        ),  # fmt: skip
        pack(
            Header(job_id=9, psn=4, bitmap=0b1111, flags=Flag.RESULT | Flag.ACK, slot_count=slots),
            np.ones(slots, np.int32),
        ),  # fmt: skip
        b"\x01\x10\x00\x03",
    ]
    out += bad
    out += [out[i] for i in rng.integers(len(out), size=len(out) // 3)]  # duplicates
    rng.shuffle(out)  # reordered
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_native_and_python_ps_send_the_same_datagrams_for_every_datagram(seed: int) -> None:
    slots = 4
    ref = AtpAggregator(JOBS, slots=slots)
    native = NativeAtpAggregator(-1, JOBS, slots, KEEP_RESULTS)
    try:
        sent = 0
        for i, d in enumerate(datagrams(seed, slots, psns=60)):
            want = ref.process_payload(d)
            assert native.process_payload(d) == want, f"datagram {i}: {d.hex()}"
            sent += len(want)
        assert sent > 100
        assert AtpPsStats(**native.counts()) == ref.stats
        st = ref.stats
        assert st.multicast and st.reserved and st.duplicates and st.forged and st.ignored
        assert st.aggregates > st.multicast  # rack and whole aggregates were pieces too
    finally:
        native.close()


def allreduce(
    ps_backend: str, workers: list[str], impair: tuple[float, float, float],
    calls: list[list[np.ndarray]],
) -> tuple[list[list[np.ndarray]], AtpParameterServer]:  # fmt: skip
    with MulticastRelay(("127.0.0.1", 9), *impair, seed=11) as relay:  # the PS: set below
        spec = AtpJobSpec(len(workers), *relay.back.address)
        ps = AtpParameterServer({6: spec}, bind=LOCAL, backend=ps_backend).start()
        assert (ps._native is not None) == (ps_backend == "native")
        relay.server = ps.address
        clients = [
            AtpClient(6, w, len(workers), 0, 16, 16, dest=relay.front.address, bind=LOCAL,
                      timeout=0.02, max_retries=200, total_timeout=30.0, backend=b)
            for w, b in enumerate(workers)
        ]  # fmt: skip
        try:
            got = run_threads(
                len(workers), lambda w: [clients[w].allreduce_int(xs[w]) for xs in calls], 60.0
            )
            return got, ps  # type: ignore[return-value]
        finally:
            ps.stop()
            for c in clients:
                c.close()


@pytest.mark.parametrize("impair", [(0.0, 0.0, 0.0), (0.1, 0.05, 0.1)])
def test_native_and_python_ps_give_atp_workers_identical_sums_under_loss_dup_and_reorder(
    impair: tuple[float, float, float],
) -> None:
    rng = np.random.default_rng(4)
    calls = [[rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
              for _ in range(3)] for n in (1, 500, 2000)]  # fmt: skip
    want = [np.sum(np.stack(xs).astype(np.int64), axis=0).astype(np.int32) for xs in calls]
    got: dict[str, list[list[np.ndarray]]] = {}
    for ps_backend, workers in [("python", ["python", "native", "python"]),
                                ("native", ["native", "python", "native"])]:  # fmt: skip
        results, ps = allreduce(ps_backend, workers, impair, calls)
        got[ps_backend] = results
        for w, rows in enumerate(results):
            for k, row in enumerate(rows):
                assert row.tobytes() == want[k].tobytes(), f"{ps_backend} PS, w{w} #{k}"
        assert ps.stats.results == sum(-(-x[0].size // 32) for x in calls)
        if any(impair):  # the impairments were really felt
            assert ps.stats.reserved > 0 and ps.stats.duplicates > 0
    assert [[r.tobytes() for r in rows] for rows in got["native"]] == [  # type: ignore[attr-defined]
        [r.tobytes() for r in rows]
        for rows in got["python"]  # type: ignore[attr-defined]
    ]


def test_the_ps_backend_is_chosen_like_the_workers_and_bad_jobs_are_refused() -> None:
    ps = AtpParameterServer(JOBS, bind=LOCAL, backend="python")
    assert ps._native is None and ps.backend == "python"
    ps.close()
    with pytest.raises(ValueError, match="slots"):
        NativeAtpAggregator(-1, JOBS, 0, KEEP_RESULTS)
    with pytest.raises(ValueError, match="job 3"):
        NativeAtpAggregator(-1, {3: AtpJobSpec(40, "10.0.0.1")}, 4, 16)


def test_a_ps_for_more_jobs_than_the_c_loop_serves_stays_in_python() -> None:
    from hosts.atp.native_ps import MAX_JOBS

    many = {j: AtpJobSpec(2, "10.0.0.1") for j in range(1, MAX_JOBS + 2)}
    ps = AtpParameterServer(many, bind=LOCAL, backend="native")
    assert ps._native is None and ps.stats.packets == 0
    ps.close()
    ps = AtpParameterServer(dict(list(many.items())[:MAX_JOBS]), bind=LOCAL, backend="native")
    assert ps._native is not None
    ps.close()
