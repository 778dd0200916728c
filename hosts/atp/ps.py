"""ATP's parameter server: finishes what the switch's shared pool could not, exactly.

Example (the state machine without I/O; worker 1's packet collided in the switch, so the
PS gets both contributions as pieces and answers with the result):
    >>> import numpy as np
    >>> from wire.header import Flag, Header, unpack
    >>> ps = AtpAggregator({7: AtpJobSpec(n_workers=2, result_ip="10.0.0.1")}, slots=2)
    >>> ps.process(Header(job_id=7, psn=3, bitmap=0b01, flags=Flag.FALLBACK, slot_count=2),
    ...            np.array([2**31 - 1, 5]))
    []
    >>> out = ps.process(Header(job_id=7, worker_id=1, psn=3, bitmap=0b10,
    ...                         flags=Flag.FALLBACK | Flag.COLLISION, slot_count=2),
    ...                  np.array([1, -5]))
    >>> h, v = unpack(out[0][0]); h.flags & Flag.RESULT != 0, v.tolist(), out[0][1]
    (True, [-2147483648, 0], ('10.0.0.1', 20050))

Run on the PS host, one process for every ATP job whose aggregation address it is::

    python -m hosts.atp.ps --controller unix:run/x/controller.sock --job-id 1 --job-id 2
        [--host-backend native|python]   # default $INC_HOST_BACKEND, else native (C)

What reaches the PS (docs/protocol.md, "ATP") is a *piece*: values and the bitmap of the
workers whose contributions they sum. A worker packet that collided, was retransmitted or
would have overflowed the switch's int32 sum holds one worker; a switch's completed
aggregate holds all of them (or a rack's, from a leaf whose aggregate collided at the spine).
Per (job, psn) the PS keeps disjoint pieces: a piece whose workers are all covered already
is a duplicate and ignored; a piece that contains every stored piece it overlaps replaces
them (hierarchical bitmaps make that the only other case). Sums are int64, so nothing
overflows on the way; when the pieces cover all the job's workers the result (wrapped to
int32 like a host-side int32 sum) is sent with ``RESULT`` through the switch, which
releases the aggregator and multicasts it to the workers. Finished results are remembered
(the newest ``keep`` per job): a retransmission (``RETX``) of a finished psn gets the result
again (its result was lost), other late copies are ignored. A piece naming workers the job
does not have (``bitmap`` beyond its worker count, or none and a ``worker_id`` beyond it)
is dropped and counted (``forged``), before it holds any state.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from hosts.atp.native_ps import MAX_JOBS as NATIVE_MAX_JOBS
from hosts.atp.native_ps import NativeAtpAggregator
from hosts.transport.native_window import choose_backend
from hosts.transport.udp import Address, Datagram, DatagramEndpoint, Endpoint
from wire.header import (
    _HEADER,
    HEADER_LEN,
    INC_UDP_PORT,
    MAX_WORKERS,
    SLOTS,
    Flag,
    Header,
    Op,
    ProtocolError,
    pack_header,
    unpack,
)

KEEP_RESULTS = 1 << 16  # finished psns remembered per job (results served again)


@dataclass(frozen=True)
class AtpJobSpec:
    """What the PS knows of a job: its worker count and where results are addressed (any
    worker: the switch multicasts them to all; without a switch that worker gets it)."""

    n_workers: int
    result_ip: str
    result_port: int = INC_UDP_PORT

    @property
    def full(self) -> int:
        return (1 << self.n_workers) - 1


@dataclass
class _Pending:
    pieces: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (bitmap, int64 sum)
    covered: int = 0


@dataclass
class AtpPsStats:
    packets: int = 0
    pieces: int = 0  # merged into a pending sum
    aggregates: int = 0  # pieces of more than one worker (the switch's sums)
    duplicates: int = 0  # covered already
    conflicts: int = 0  # overlapping without containing (cannot happen with our roles)
    results: int = 0  # psns completed
    multicast: int = 0  # of those, completed and multicast by the switch (acknowledged)
    reserved: int = 0  # results sent again for a retransmission
    ignored: int = 0  # unknown job, bad slot count, results, other ops
    forged: int = 0  # pieces naming workers the job does not have


class AtpAggregator:
    """The PS's state machine: piece in, result datagrams out (see the module docstring)."""

    def __init__(
        self, jobs: dict[int, AtpJobSpec], slots: int = SLOTS, keep: int = KEEP_RESULTS
    ) -> None:
        for j, spec in jobs.items():
            if not 1 <= spec.n_workers <= MAX_WORKERS:
                raise ValueError(f"job {j}: n_workers must be in 1..{MAX_WORKERS}")
        self.jobs, self.slots, self.keep = dict(jobs), slots, keep
        self._pending: dict[tuple[int, int], _Pending] = {}
        self._done: dict[int, OrderedDict[int, tuple[Header, bytes]]] = {
            j: OrderedDict() for j in jobs
        }
        self.stats = AtpPsStats()

    def process(self, h: Header, values: np.ndarray) -> list[Datagram]:
        self.stats.packets += 1
        spec = self.jobs.get(h.job_id)
        if spec is not None and h.flags & Flag.RESULT and h.bitmap == spec.full:
            return self._multicast(spec, h, values)
        if (
            spec is None
            or h.op != Op.AGG_SYNC
            or h.flags & (Flag.RESULT | Flag.ACK)
            or h.slot_count != self.slots
        ):
            self.stats.ignored += 1
            return []
        done = self._done[h.job_id].get(h.psn)
        if done is not None:
            if h.flags & Flag.RETX:
                self.stats.reserved += 1
                return [self._datagram(spec, *done)]
            self.stats.duplicates += 1
            return []
        piece = h.bitmap or 1 << min(h.worker_id, MAX_WORKERS)
        if piece & ~spec.full:
            self.stats.forged += 1
            return []
        key = (h.job_id, h.psn)
        if piece == spec.full and key not in self._pending:
            # The common case: the switch's complete aggregate, nothing pending (no piece
            # of this psn fell back): its values are the result as they are.
            self.stats.pieces += 1
            self.stats.aggregates += piece & (piece - 1) != 0
            return [self._finish(spec, h, values.astype(">i4").tobytes())]
        st = self._pending.setdefault(key, _Pending())
        if piece == 0 or piece & ~st.covered == 0:
            self.stats.duplicates += 1
            return []
        inside = [p for p in st.pieces if p[0] & piece]
        if any(m & ~piece for m, _ in inside):
            self.stats.conflicts += 1
            return []
        st.pieces = [p for p in st.pieces if not p[0] & piece]
        st.pieces.append((piece, values.astype(np.int64)))
        st.covered |= piece
        self.stats.pieces += 1
        self.stats.aggregates += piece & (piece - 1) != 0
        if st.covered != spec.full:
            return []
        del self._pending[key]
        total = st.pieces[0][1]
        for _, v in st.pieces[1:]:
            total = total + v
        body = total.astype(np.int32).astype(">i4").tobytes()  # int32 wrap, as the host sum
        return [self._finish(spec, h, body)]

    def process_payload(self, payload: bytes) -> list[Datagram]:
        """``process`` of a datagram; the switch's copy of a result it multicast (the
        common case, one per psn the switch summed) is taken from the bytes as they are."""
        n = HEADER_LEN + 4 * self.slots
        if len(payload) >= n and payload[0] == Op.AGG_SYNC and payload[1] == Flag.RESULT:
            _, _, job, _, _, count, _, psn, idx, epoch, bitmap = _HEADER.unpack_from(payload)
            spec = self.jobs.get(job)
            if spec is not None and bitmap == spec.full and count == self.slots:
                self.stats.packets += 1
                return self._copy(spec, job, psn, idx, epoch, payload[HEADER_LEN:n])
        try:
            h, values = unpack(payload)
        except ProtocolError:
            self.stats.packets += 1
            self.stats.ignored += 1
            return []
        return self.process(h, values)

    def _multicast(self, spec: AtpJobSpec, h: Header, values: np.ndarray) -> list[Datagram]:
        if (
            h.op != Op.AGG_SYNC
            or h.flags & ~(Flag.RESULT | Flag.RETX)
            or h.slot_count != self.slots
        ):
            self.stats.ignored += 1
            return []
        body = values.astype(">i4").tobytes()
        return self._copy(spec, h.job_id, h.psn, h.agg_idx, h.epoch, body)

    def _copy(
        self, spec: AtpJobSpec, job: int, psn: int, idx: int, epoch: int, body: bytes
    ) -> list[Datagram]:
        """The PS's copy of a result the switch completed and multicast to the members:
        remembered (a retransmission gets it again), acknowledged (the ACK, no values,
        releases the aggregator); a copy of a finished psn changes nothing."""
        if psn in self._done[job]:
            self.stats.duplicates += 1
            return []
        self._pending.pop((job, psn), None)
        r = Header(op=Op.AGG_SYNC, flags=Flag.RESULT, job_id=job, psn=psn, agg_idx=idx,
                   epoch=epoch, bitmap=spec.full)  # fmt: skip
        self._remember(job, r, body)
        self.stats.pieces += 1
        self.stats.aggregates += 1
        self.stats.multicast += 1
        ack = _HEADER.pack(Op.AGG_SYNC, Flag.ACK, job, 0, 0, 0, 0, psn, idx, epoch, spec.full)
        return [(ack, (spec.result_ip, spec.result_port))]

    def _remember(self, job: int, r: Header, body: bytes) -> None:
        done_jobs = self._done[job]
        done_jobs[r.psn] = (r, body)
        if len(done_jobs) > self.keep:
            done_jobs.popitem(last=False)
        self.stats.results += 1

    def _finish(self, spec: AtpJobSpec, h: Header, body: bytes) -> Datagram:
        """The result of ``h``'s psn (``body``: its values on the wire), remembered."""
        r = Header(
            op=Op.AGG_SYNC,
            flags=Flag.RESULT,
            job_id=h.job_id,
            psn=h.psn,
            agg_idx=h.agg_idx,
            epoch=h.epoch,
            bitmap=spec.full,
        )
        self._remember(h.job_id, r, body)
        return self._datagram(spec, r, body)

    def _datagram(self, spec: AtpJobSpec, r: Header, body: bytes) -> Datagram:
        return pack_header(r, self.slots) + body, (spec.result_ip, spec.result_port)


class AtpParameterServer:
    """An AtpAggregator behind a UDP endpoint on ``INC_UDP_PORT``, in a background thread;
    with the native host back end (the default, ``$INC_HOST_BACKEND``) and a plain socket,
    the same state machine and its socket loop in C (hosts/atp/native_ps.c)."""

    def __init__(
        self,
        jobs: dict[int, AtpJobSpec],
        bind: Address = ("0.0.0.0", INC_UDP_PORT),
        slots: int = SLOTS,
        endpoint: DatagramEndpoint | None = None,
        backend: str | None = None,
    ) -> None:
        self.aggregator = AtpAggregator(jobs, slots)
        self.endpoint: DatagramEndpoint = endpoint if endpoint is not None else Endpoint(bind)
        if isinstance(self.endpoint, Endpoint):
            self.endpoint.enable_ecn()  # results ECN-capable: a congested switch marks them
        self.backend = choose_backend(backend)
        self._native: NativeAtpAggregator | None = None
        if (
            self.backend == "native"
            and type(self.endpoint) is Endpoint
            and len(jobs) <= NATIVE_MAX_JOBS
        ):
            self._native = NativeAtpAggregator(
                self.endpoint.fileno(), jobs, slots, self.aggregator.keep
            )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> Address:
        return self.endpoint.address

    @property
    def stats(self) -> AtpPsStats:
        if self._native is not None:  # the C loop's counters, named as the reference's
            for name, value in self._native.counts().items():
                setattr(self.aggregator.stats, name, value)
        return self.aggregator.stats

    def serve(self) -> None:
        while self._native is not None and not self._stop.is_set():
            self._native.serve(max_ms=50)
        while not self._stop.is_set():
            if not self.endpoint.wait(0.05):
                continue
            out: list[Datagram] = []
            for payload, _src in self.endpoint.recv_many():
                out.extend(self.aggregator.process_payload(payload))
            if out:
                self.endpoint.send_many(out)

    def start(self) -> AtpParameterServer:
        self._thread = threading.Thread(target=self.serve, name="atp-ps", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.close()

    def close(self) -> None:
        self.endpoint.close()
        if self._native is not None:
            _ = self.stats  # the C loop's last counters stay readable
            self._native.close()
            self._native = None


def jobs_from_controller(url: str, job_ids: list[int]) -> dict[int, AtpJobSpec]:
    """Each job's worker count and worker 0's address, from the controller daemon."""
    from controller.api_client import ControllerApi

    api = ControllerApi(url, timeout=30.0)
    out = {}
    for j in job_ids:
        cfg = api.worker_config(j, 0)
        if cfg.get("kind") != "atp":
            raise ValueError(f"job {j} is a {cfg.get('kind')} job, not an ATP job")
        out[j] = AtpJobSpec(int(cfg.get("all_workers", cfg["n_workers"])), cfg["ip"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hosts.atp.ps", description=__doc__.split("\n")[0])
    ap.add_argument("--controller", required=True, help="daemon URL (unix:PATH)")
    ap.add_argument("--job-id", type=int, action="append", required=True, help="ATP job served")
    ap.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    ap.add_argument(
        "--host-backend",
        choices=["native", "python"],
        help="the serve loop: native (C) or python; default $INC_HOST_BACKEND, else native",
    )
    args = ap.parse_args(argv)
    try:
        jobs = jobs_from_controller(args.controller, args.job_id)
        ps = AtpParameterServer(jobs, (args.bind, INC_UDP_PORT), backend=args.host_backend)
    except Exception as e:  # noqa: BLE001 - one line for the user, whatever failed
        print(f"hosts.atp.ps: {e}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: ps._stop.set())
    ids = ", ".join(map(str, sorted(jobs)))
    print(f"atp parameter server on {ps.address[0]}:{ps.address[1]}, jobs {ids}", flush=True)
    try:
        ps.serve()
    finally:
        ps.close()
    print(f"atp ps ({ps.backend}): {ps.stats}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
