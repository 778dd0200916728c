"""The parameter-server baseline: the switch's aggregator, in software on a host.

Example:
    >>> ps = ParameterServer(n_workers=2, bind=("127.0.0.1", 0)).start()
    >>> ps.address[1] > 0
    True
    >>> ps.stop()

Run on the PS host (the workers' AllReduceClient gets ``dest=(ps_ip, port)``)::

    python -m hosts.netreduce.ps --workers 4 [--port 20051] [--bind 0.0.0.0] [--slots 32]

Flags: ``--workers`` contributions that complete an aggregation (the job's worker count);
``--port``/``--bind`` where to listen (default ``PS_UDP_PORT`` = INC_UDP_PORT + 1, so that
the switch forwards the baseline's packets as plain UDP instead of aggregating them);
``--slots`` values per packet (0 = accept any count); ``--host-backend`` native|python the
serve loop (default ``$INC_HOST_BACKEND``, else native: hosts/netreduce/native_ps.c, the
same state machine in C). It serves until SIGINT/SIGTERM and then prints its counters.

Semantics: the same packets and header as the switch (wire/header.py) and the same
state machine as p4src/aggregator.p4: per (job, aggregator, version) a contributor bitmap,
a count and the PSN of the use it holds; a packet of a newer PSN starts the copy afresh,
an older one is dropped as stale, a repeated contribution to an unfinished use is dropped
as a duplicate, and any packet of a finished use gets the result again by unicast. When
the last contribution arrives the result goes to every worker of the job by unicast (there
is no multicast), to the address each worker's packets came from. Unlike the switch the
state is keyed by job as well, so jobs never share aggregators.

Who may contribute: the PS's packets cross the switch as plain UDP (``PS_UDP_PORT``), past
the switch's bindings, so the PS keeps its own. Given ``worker_ips`` (the job's plan:
worker i's IP, ``--worker-ip`` in order), a packet claiming worker i from any other IP is
dropped and counted (``spoofed``), first or not, so a host elsewhere cannot take a worker's
place by claiming it first. A (job, worker) is bound to the address (IP and port) of its
first admitted packet until ``reset_job``; a packet claiming that worker from any other
address is dropped and counted (``spoofed``), so another host can neither add to a
worker's sums nor take its results. A contribution carrying flags a worker never sets
(anything but ``RETX``: ``WAIT``, ``COLLISION``, ``RUNNING``, ``DRAIN``) is dropped as
``FORGED_RESULT``; results carry ``RESULT`` and the worker's ``RETX`` only, which is what
the workers' ``ResultFilter`` admits.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hosts.netreduce.native_ps import NativeAggregator
from hosts.transport.native_window import choose_backend
from hosts.transport.udp import Address, Datagram, DatagramEndpoint, Endpoint
from wire.header import (
    AGG_POOL_SIZE,
    DROP_REASONS,
    INC_UDP_PORT,
    MAX_WORKERS,
    SLOTS,
    WORKER_FLAGS,
    DropReason,
    Flag,
    Header,
    Op,
    ProtocolError,
    pack_header,
    unpack,
)

PS_UDP_PORT = INC_UDP_PORT + 1
PSN_HALF = 1 << 31
_NOT_AGGREGATED = Flag.RESULT | Flag.ACK | Flag.FALLBACK


@dataclass
class JobRegion:
    """Optional per-job admission, as the switch's job table: quorum and region."""

    quorum: int
    offset: int = 0
    size: int = AGG_POOL_SIZE


@dataclass
class _Copy:
    psn: int
    bitmap: int
    count: int
    values: np.ndarray


@dataclass
class AggregatorStats:
    packets: int = 0
    results: int = 0  # aggregations completed
    reserved: int = 0  # finished results served again to a retransmitting worker
    ignored: int = 0  # not an aggregation packet (results, acks, other ops, garbage)
    spoofed: int = 0  # a (job, worker)'s packets from another address than its declared/bound one
    drops: list[int] = field(default_factory=lambda: [0] * DROP_REASONS)


class SoftAggregator:
    """The aggregation state machine without I/O: packet in, datagrams out.

    >>> agg = SoftAggregator(n_workers=2, slots=2)
    >>> agg.process(Header(job_id=1, slot_count=2), np.array([1, 2]), ("w0", 1))
    []
    >>> h = Header(job_id=1, worker_id=1, slot_count=2)
    >>> out = agg.process(h, np.array([3, 4]), ("w1", 1))
    >>> [(unpack(p)[1].tolist(), a) for p, a in out]
    [([4, 6], ('w0', 1)), ([4, 6], ('w1', 1))]
    """

    def __init__(
        self,
        n_workers: int,
        slots: int | None = SLOTS,
        jobs: dict[int, JobRegion] | None = None,
        worker_ips: Sequence[str] | None = None,
    ) -> None:
        if not 1 <= n_workers <= MAX_WORKERS:
            raise ValueError(f"n_workers must be in 1..{MAX_WORKERS}, got {n_workers}")
        if worker_ips is not None and len(worker_ips) != n_workers:
            raise ValueError(f"{len(worker_ips)} worker IPs for {n_workers} workers")
        self.worker_ips = worker_ips  # worker i's IP, as the job's plan declares it
        self.default = JobRegion(quorum=n_workers)
        self.slots, self.jobs = slots, jobs
        self._copies: dict[tuple[int, int, int], _Copy] = {}
        self._workers: dict[tuple[int, int], Address] = {}  # (job, worker id) -> address
        self.stats = AggregatorStats()

    def _admit(self, h: Header) -> JobRegion | None:
        job = self.default if self.jobs is None else self.jobs.get(h.job_id)
        reason: DropReason | None = None
        if self.slots is not None and h.slot_count != self.slots:
            reason = DropReason.BAD_SLOT_COUNT
        elif job is None or h.job_id == 0:
            reason = DropReason.UNKNOWN_JOB
        elif h.worker_id >= min(job.quorum, MAX_WORKERS):
            reason = DropReason.UNKNOWN_WORKER
        elif (h.agg_idx - job.offset) % (1 << 32) >= job.size or h.agg_idx >= AGG_POOL_SIZE:
            reason = DropReason.OUT_OF_REGION
        if reason is not None:
            self.stats.drops[reason] += 1
            return None
        return job

    def process(self, h: Header, values: np.ndarray, src: Address) -> list[Datagram]:
        """Apply one packet; returns the results to send (none, one or one per worker)."""
        self.stats.packets += 1
        if h.op != Op.AGG_SYNC or h.flags & _NOT_AGGREGATED:
            self.stats.ignored += 1
            return []
        if h.flags & ~WORKER_FLAGS:
            self.stats.drops[DropReason.FORGED_RESULT] += 1  # no worker sets these
            return []
        job = self._admit(h)
        if job is None:
            return []
        ips = self.worker_ips
        if ips is not None and (h.worker_id >= len(ips) or src[0] != ips[h.worker_id]):
            self.stats.spoofed += 1  # not from the worker's declared host
            return []
        bound = self._workers.setdefault((h.job_id, h.worker_id), src)
        if bound != src:
            self.stats.spoofed += 1  # another host claims a bound worker
            return []
        key = (h.job_id, h.agg_idx, h.ver)
        bit = 1 << h.worker_id
        c = self._copies.get(key)
        delta = None if c is None else (h.psn - c.psn) % (1 << 32)
        if c is not None and delta is not None and delta >= PSN_HALF:
            self.stats.drops[DropReason.STALE] += 1
            return []
        if c is not None and delta == 0 and c.count >= job.quorum:
            self.stats.reserved += 1
            return [self._result(h, c, h.worker_id, src)]
        if c is not None and delta == 0 and c.bitmap & bit:
            self.stats.drops[DropReason.DUPLICATE] += 1
            return []
        if c is not None and delta == 0:
            if values.size != c.values.size:
                self.stats.drops[DropReason.BAD_SLOT_COUNT] += 1
                return []
            c.values += values  # int32: wraps on overflow, as the switch's bit<32> sum
        else:
            c = _Copy(h.psn, 0, 0, values.astype(np.int32, copy=True))
            self._copies[key] = c
        c.bitmap |= bit
        c.count += 1
        if c.count < job.quorum:
            return []
        self.stats.results += 1
        return [
            self._result(h, c, w, self._workers[(h.job_id, w)])
            for w in range(job.quorum)
            if (h.job_id, w) in self._workers
        ]

    @staticmethod
    def _result(h: Header, c: _Copy, worker: int, dest: Address) -> Datagram:
        r = Header(
            op=h.op,
            flags=(h.flags & WORKER_FLAGS) | Flag.RESULT,
            job_id=h.job_id,
            worker_id=worker,
            ver=h.ver,
            psn=h.psn,
            agg_idx=h.agg_idx,
            epoch=h.epoch,
            bitmap=c.bitmap,
        )
        return pack_header(r, c.values.size) + c.values.astype(">i4").tobytes(), dest

    def reset_job(self, job_id: int) -> None:
        """Forget a job's state (the controller's region reset)."""
        self._copies = {k: v for k, v in self._copies.items() if k[0] != job_id}
        self._workers = {k: v for k, v in self._workers.items() if k[0] != job_id}


class ParameterServer:
    """A SoftAggregator behind a UDP endpoint, served by a background thread."""

    def __init__(
        self,
        n_workers: int,
        bind: Address = ("0.0.0.0", PS_UDP_PORT),
        slots: int | None = SLOTS,
        jobs: dict[int, JobRegion] | None = None,
        endpoint: DatagramEndpoint | None = None,
        backend: str | None = None,
        worker_ips: Sequence[str] | None = None,
    ) -> None:
        self.aggregator = SoftAggregator(n_workers, slots, jobs, worker_ips)
        self.endpoint: DatagramEndpoint = endpoint if endpoint is not None else Endpoint(bind)
        # The same native transport as the workers' client: the C loop on a plain socket
        # with the default region for every job, SoftAggregator in Python otherwise.
        self.backend = choose_backend(backend)
        self._native: NativeAggregator | None = None
        if self.backend == "native" and jobs is None and type(self.endpoint) is Endpoint:
            self._native = NativeAggregator(
                self.endpoint.fileno(), n_workers, slots, AGG_POOL_SIZE, worker_ips
            )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> Address:
        return self.endpoint.address

    @property
    def stats(self) -> AggregatorStats:
        if self._native is not None:  # the C loop's counters, as SoftAggregator keeps them
            c = self._native.counters
            st = self.aggregator.stats
            st.packets, st.results, st.reserved = c.packets, c.results, c.reserved
            st.ignored, st.spoofed = c.ignored, c.spoofed
            st.drops = [int(c.drops[i]) for i in range(DROP_REASONS)]
        return self.aggregator.stats

    def serve(self) -> None:
        """Process packets until ``stop()`` (or forever)."""
        while self._native is not None and not self._stop.is_set():
            self._native.serve(max_ms=50)
        while not self._stop.is_set():
            if not self.endpoint.wait(0.05):
                continue
            out: list[Datagram] = []
            for payload, src in self.endpoint.recv_many():
                try:
                    h, values = unpack(payload)
                except ProtocolError:
                    self.aggregator.stats.ignored += 1
                    continue
                out.extend(self.aggregator.process(h, values, src))
            if out:
                self.endpoint.send_many(out)

    def start(self) -> ParameterServer:
        self._thread = threading.Thread(target=self.serve, name="ps", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.endpoint.close()
        if self._native is not None:
            _ = self.stats  # the C loop's last counters stay readable
            self._native.close()
            self._native = None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hosts.netreduce.ps", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--workers", type=int, required=True, help="workers per job (quorum)")
    ap.add_argument("--port", type=int, default=PS_UDP_PORT, help="UDP port to listen on")
    ap.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    ap.add_argument("--slots", type=int, default=SLOTS, help="values per packet (0: any)")
    ap.add_argument(
        "--worker-ip",
        action="append",
        metavar="IP",
        help="worker i's IP, once per worker in order (the job's plan): other hosts' claims are"
        " dropped",
    )
    ap.add_argument(
        "--host-backend",
        choices=["native", "python"],
        help="the serve loop: native (C) or python; default $INC_HOST_BACKEND, else native",
    )
    args = ap.parse_args(argv)
    try:
        ps = ParameterServer(
            args.workers, (args.bind, args.port), args.slots or None,
            backend=args.host_backend, worker_ips=args.worker_ip,
        )  # fmt: skip
    except (ValueError, OSError) as e:
        print(f"hosts.netreduce.ps: {e}", file=sys.stderr)
        return 2
    # Both signals end the loop cleanly (a background job may have SIGINT ignored otherwise).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: ps._stop.set())
    # The socket is bound: whoever started us waits for this line (flushed: stdout is a file).
    print(
        f"parameter server on {ps.address[0]}:{ps.address[1]}, {args.workers} workers", flush=True
    )
    try:
        ps.serve()
    finally:
        ps.endpoint.close()
    s = ps.stats
    print(
        f"packets {s.packets} results {s.results} re-served {s.reserved} drops {s.drops} "
        f"spoofed {s.spoofed}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
