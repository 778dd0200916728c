"""Worker all-reduce client: the switch (or the host parameter server) sums vectors.

Example (a single worker against a parameter server in this process):
    >>> import numpy as np
    >>> from hosts.netreduce.ps import ParameterServer
    >>> ps = ParameterServer(n_workers=1, bind=("127.0.0.1", 0)).start()
    >>> c = AllReduceClient(1, 0, 1, 0, 8, 4, dest=ps.address, bind=("127.0.0.1", 0))
    >>> c.allreduce_int(np.arange(40, dtype=np.int32)).tolist()[-3:]
    [37, 38, 39]
    >>> c.close(); ps.stop()

Protocol (docs/protocol.md; wire/header.py is the wire format):
- The vector is cut into packets of ``slots`` (K) int32 values; the last one is zero-padded.
- PSNs run on across calls (the switch compares PSNs with serial-number arithmetic, so a job
  must never restart at 0): every worker of a job must make the same sequence of calls
  with the same vector lengths, which data-parallel training does by construction.
- Packet p goes to aggregator ``region_offset + p % region_size``, copy ``(p // size) & 1``
  (``protocol.aggregator_address``), the rule p4src/aggregator.p4 relies on.
- At most ``window`` packets are in flight and p is sent only once the results of every
  PSN <= p - window are in (``sliding_window.SendWindow``, invariant I1), with
  ``window <= region_size``. A packet whose result does not come back within ``timeout``
  is sent again with the RETX flag; results are reassembled by PSN and duplicates ignored.
- Every call is bounded: after ``max_retries`` retransmissions of one PSN, or after
  ``total_timeout`` seconds, it raises ``AllReduceTimeout`` naming the job, the worker and
  the missing PSNs.

Results come back by multicast from the switch or by unicast from the parameter server;
only ``dest`` differs. On the switch path the worker must listen on ``INC_UDP_PORT`` (the
switch turns the packet around without touching the UDP ports), which is the default bind.
Answers are taken only from ``dest`` (IP and port), of this job, with the flags a switch or
PS sets (hosts/transport/result_filter.py, the same rules in the native loop); the rest is
dropped and counted by reason in ``stats.drops`` (``wire.header.HostDrop``).

Float all-reduce (``allreduce``) first agrees on a bound B of |x| with one extra integer
all-reduce of an exponent vote (hosts/transport/quantize.py), then quantises with the largest scale
``s = 2**e`` for which n workers cannot overflow int32, sums, and dequantises. The result is
the sum of the workers' vectors with per-element error at most ``n / (2 s)``
(``AllReduceClient.error_bound``), plus float32 rounding of the sum.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hosts.transport import native_window
from hosts.transport.native_window import choose_backend, run_call
from hosts.transport.quantize import agreed_bound, choose_scale, dequantize, exponent_vote, quantize
from hosts.transport.result_filter import ResultFilter
from hosts.transport.sliding_window import (
    ResultAssembler,
    SendWindow,
    WindowTimeout,
)
from hosts.transport.udp import Address, DatagramEndpoint, Endpoint
from wire.header import (
    ADDRESSING,
    HOST_DROPS,
    INC_UDP_PORT,
    MAX_JOBS,
    MAX_SLOTS,
    MAX_WORKERS,
    SLOTS,
    Flag,
    Header,
    HostDrop,
    Op,
    aggregator_address,
    hash_params,
    pack_header,
)
from wire.serial import MOD

AllReduceFn = Callable[[np.ndarray], np.ndarray]

# Exponent vote for the float path: bucket j means |x| <= 2**(VOTE_EXP_MIN + j); the last
# bucket means "too large to quantise" for every worker alike, so all of them fail together.
VOTE_BUCKETS = 64
VOTE_EXP_MIN = -40
MAX_FLOAT_ABS = 2.0 ** (VOTE_EXP_MIN + VOTE_BUCKETS - 2)
PSN_MOD = MOD  # PSNs are 32-bit serial numbers (wire/serial.py)
FAST_RETX_RESULTS = 3  # later results seen while the window base is missing: resend it now
RTT_PROBE_EVERY = 8  # one first transmission in 8 is timed until its result (min RTT)
# What a subclass overrides to leave the native loop (ATP's client: its own addressing).
_LOOP_METHODS = ("_run", "_send", "_receive", "_address")


class _Window(SendWindow):
    """SendWindow plus fast retransmission of the PSN that holds the window back.

    Results arrive roughly in PSN order, so when results of several later PSNs arrived
    while the base waited, the base (or its result) was most likely lost; resending it at
    once instead of after ``timeout`` keeps the window moving under loss. A resend that was
    not needed costs one packet: the aggregator drops it as a duplicate or serves the
    finished result again.
    """

    def __init__(self, first_psn: int, count: int, window: int, timeout: float, **kw: int):
        super().__init__(first_psn, count, window, timeout, **kw)  # type: ignore[arg-type]
        self._have = np.zeros(count, dtype=bool)
        self._results = 0
        self._mark: dict[int, int] = {}  # psn -> results above it when it was last sent

    def sent(self, psn: int, retx: bool) -> None:
        # A first send has nothing above it yet: PSNs go out in order the first time.
        i = psn - self.first_psn
        self._mark[psn] = self._results - int(self._have[:i].sum()) if retx else 0

    def on_result(self, psn: int) -> None:
        self._have[psn - self.first_psn] = True
        self._results += 1

    def stalled_base(self) -> int | None:
        """The base PSN when it is due for a fast retransmission, else None."""
        if self.done:
            return None
        b = self.base
        above = self._results - (b - self.first_psn)  # everything below the base is in
        return b if above - self._mark.get(b, above) >= FAST_RETX_RESULTS else None

    def expedite(self, psn: int) -> bool:
        """Make ``psn`` due for retransmission at the next poll; False if it already was."""
        return self.make_due(psn)


class AllReduceTimeout(TimeoutError):
    """An all-reduce call gave up: some results never came back."""

    def __init__(self, job_id: int, worker_id: int, missing: list[int], why: str) -> None:
        shown = ", ".join(map(str, missing[:12])) + (" ..." if len(missing) > 12 else "")
        super().__init__(
            f"all-reduce of job {job_id}, worker {worker_id} timed out ({why}); "
            f"{len(missing)} result(s) missing, psn {shown}. Are all workers running, the "
            f"switch or parameter server reachable, and the job admitted?"
        )
        self.job_id, self.worker_id, self.missing = job_id, worker_id, missing


@dataclass
class ClientStats:
    calls: int = 0
    packets_sent: int = 0
    retransmissions: int = 0
    fast_retransmissions: int = 0
    results: int = 0
    duplicate_results: int = 0
    waits: int = 0  # packets the switch sent back with FLAG_WAIT (sync_modes.p4)
    # Datagrams dropped, by wire.header.HostDrop (hosts/transport/result_filter.py).
    drops: list[int] = field(default_factory=lambda: [0] * HOST_DROPS)

    @property
    def foreign(self) -> int:
        """Datagrams not from the aggregation address (IP or port): another host's."""
        return self.drops[HostDrop.FOREIGN_ADDRESS] + self.drops[HostDrop.FOREIGN_PORT]

    def drops_by_reason(self) -> dict[str, int]:
        """The non-zero drop counters by reason name, for a log line."""
        return {r.name.lower(): self.drops[r] for r in HostDrop if self.drops[r]}


class AllReduceClient:
    """One worker's end of a synchronous aggregation job (see the module docstring)."""

    def __init__(
        self,
        job_id: int,
        worker_id: int,
        n_workers: int,
        region_offset: int,
        region_size: int,
        window: int,
        *,
        dest: Address,
        slots: int = SLOTS,
        timeout: float = 0.05,
        max_retries: int = 100,
        total_timeout: float = 30.0,
        bind: Address = ("0.0.0.0", INC_UDP_PORT),
        endpoint: DatagramEndpoint | None = None,
        first_psn: int = 0,
        backend: str | None = None,
    ) -> None:
        self._check_layout(job_id, worker_id, n_workers, region_size, window, slots)
        # "native" (C, hosts/transport/native_window.c) or "python" (this module's loop);
        # default $INC_HOST_BACKEND, else native where a C compiler exists.
        self.backend = choose_backend(backend)
        self.job_id, self.worker_id, self.n_workers = job_id, worker_id, n_workers
        self.region_offset, self.region_size, self.window = region_offset, region_size, window
        self.slots, self.dest = slots, dest
        self.timeout, self.max_retries, self.total_timeout = timeout, max_retries, total_timeout
        self.endpoint: DatagramEndpoint = endpoint if endpoint is not None else Endpoint(bind)
        self.next_psn = first_psn
        self.epoch = 0  # carried in every header: selects the switch's epoch slot
        self._hash: tuple[int, int] | None = None  # (a, b) when addressing is hashed
        self._probes: dict[int, float] = {}  # psn -> send time of its first transmission
        self._min_rtt: float | None = None
        self.last_scale = 1.0
        # Per packet of the last call, the result's contributor bitmap (partial
        # synchronisation: the workers whose values are in that packet's sums).
        self.last_bitmaps = np.zeros(0, dtype=np.uint32)
        self.stats = ClientStats()
        # Only the aggregation address's answers of this job (hosts/transport/result_filter.py);
        # it counts into self.stats.drops.
        self._filter = ResultFilter(job_id, slots, dest)
        self._filter.drops = self.stats.drops

    def take_min_rtt(self) -> float | None:
        """The smallest round trip (send to result, first transmissions only) since the
        last call, in seconds; None if nothing was timed. The scheduler sizes memory with
        it (``controller/jobs/sizing.py``: Memory = Throughput x RTT)."""
        rtt, self._min_rtt = self._min_rtt, None
        self._probes.clear()
        return rtt

    def set_layout(
        self,
        epoch: int,
        offset: int,
        size: int,
        window: int | None = None,
        addressing: str = "modulo",
    ) -> None:
        """Enter ``epoch`` with the region ``(offset, size)`` and ``window`` (default: the
        size), as the controller fixed them for that epoch (``controller/sched/switchover.py``).
        ``addressing``: ``modulo`` (``offset + psn % size``) or ``hashed``
        (``Hash(psn, job) % size + offset``, ``wire.header.hashed_address``). Call between
        all-reduce calls, on every worker alike."""
        win = size if window is None else window
        self._check_layout(self.job_id, self.worker_id, self.n_workers, size, win, self.slots)
        if addressing not in ADDRESSING:
            raise ValueError(f"addressing must be one of {', '.join(ADDRESSING)}: {addressing!r}")
        self.region_offset, self.region_size, self.window = offset, size, win
        self.epoch = epoch
        self._hash = hash_params(self.job_id, size) if addressing == "hashed" else None

    # Hooks for other addressing schemes (hosts/atp/worker.py: hashed, shared pool).
    def _check_layout(
        self, job_id: int, worker_id: int, n_workers: int, size: int, window: int, slots: int
    ) -> None:
        _check_config(job_id, worker_id, n_workers, size, window, slots)

    def _address(self, psn: int) -> tuple[int, int]:
        """(agg_idx, ver) of ``psn``: NetReduce's ``offset + psn % size`` (or the layout's
        hashed address), two copies."""
        if self._hash is None:
            return aggregator_address(psn, self.region_offset, self.region_size)
        a, b = self._hash  # hashed_address with the job's (a, b) computed once per layout
        size = self.region_size
        return self.region_offset + (a * psn + b) % size, (psn // size) & 1

    # --- integer path -----------------------------------------------------------------------
    def allreduce_int(self, x: np.ndarray) -> np.ndarray:
        """Element-wise int32 sum over the job's workers (wrapping on overflow, as the switch)."""
        v = np.asarray(x)
        if v.ndim != 1 or not np.issubdtype(v.dtype, np.integer):
            raise ValueError(f"allreduce_int needs a 1-D integer vector, got {v.dtype} {v.shape}")
        count = -(-v.size // self.slots)
        first = self.next_psn
        if first + count > PSN_MOD:
            # The switch compares PSNs modulo 2**32, but the window logic does not wrap.
            raise ValueError(f"job {self.job_id} used up its 2**32 PSNs; admit it again")
        self.next_psn = first + count
        self.stats.calls += 1
        if count == 0:
            return np.zeros(0, dtype=np.int32)
        # Straight into the wire's byte order and whole packets (zero padding): one pass.
        wire = np.zeros((count, self.slots), dtype=">i4")
        wire.reshape(-1)[: v.size] = v
        if self._native_applies():
            return self._run_native(first, count, wire, v.size)
        window = _Window(first, count, self.window, self.timeout, max_retries=self.max_retries)
        results = ResultAssembler(first, count, self.slots, length=v.size)
        self.last_bitmaps = np.zeros(count, dtype=np.uint32)
        self._run(window, results, wire)
        return results.result()

    def _native_applies(self) -> bool:
        """The C loop does exactly what ``_run`` would: a plain socket and this class's
        addressing and packet handling (a subclass that changes them stays in Python)."""
        cls = type(self)
        return (
            self.backend == "native"
            and type(self.endpoint) is Endpoint
            and not self.endpoint.ecn
            and all(getattr(cls, m) is getattr(AllReduceClient, m) for m in _LOOP_METHODS)
        )

    def _run_native(self, first: int, count: int, wire: np.ndarray, length: int) -> np.ndarray:
        assert isinstance(self.endpoint, Endpoint)
        r = run_call(
            self.endpoint.fileno(), self.dest, wire,
            job_id=self.job_id, worker_id=self.worker_id, epoch=self.epoch, first_psn=first,
            window=self.window, timeout=self.timeout, max_retries=self.max_retries,
            fast_retx_results=FAST_RETX_RESULTS, rtt_probe_every=RTT_PROBE_EVERY,
            total_timeout=self.total_timeout, offset=self.region_offset,
            size=self.region_size, hashed=self._hash,
        )  # fmt: skip
        native_window.fold_stats(r, self.stats, self.endpoint.stats)
        c = r.stats
        if c.min_rtt >= 0:
            self._min_rtt = c.min_rtt if self._min_rtt is None else min(self._min_rtt, c.min_rtt)
        self.last_bitmaps = r.bitmaps
        if r.status == native_window.RETRIES:
            why = (
                f"psn {c.fail_psn} got no result after {c.fail_tries} retransmissions "
                f"({self.timeout:g} s apart): is the switch running and the job admitted?"
            )
            raise AllReduceTimeout(self.job_id, self.worker_id, r.missing, why)
        if r.status == native_window.DEADLINE:
            why = f"no complete result within {self.total_timeout:g} s"
            raise AllReduceTimeout(self.job_id, self.worker_id, r.missing, why)
        flat = r.out.reshape(-1)  # a fresh array: a view of it is the caller's to keep
        return flat if flat.size == length else flat[:length].copy()

    def _run(self, window: _Window, results: ResultAssembler, wire: np.ndarray) -> None:
        deadline = time.monotonic() + self.total_timeout
        while not results.complete:
            try:
                sends = window.poll()
            except WindowTimeout as e:
                raise self._timeout(results, str(e)) from None
            if sends:
                self._send(sends, window, wire)
            now = time.monotonic()
            if now >= deadline:
                raise self._timeout(results, f"no complete result within {self.total_timeout:g} s")
            due = window.next_deadline()
            wait = deadline - now if due is None else min(deadline, due) - now
            if self.endpoint.wait(max(wait, 0.0)):
                self._receive(window, results)

    def _send(self, sends: list[tuple[int, bool]], window: _Window, wire: np.ndarray) -> None:
        out = []
        first = window.first_psn
        now = time.monotonic()
        for psn, retx in sends:
            window.sent(psn, retx)
            if retx:
                self._probes.pop(psn, None)  # its result may answer either copy
            elif psn % RTT_PROBE_EVERY == 0:
                self._probes[psn] = now
            idx, ver = self._address(psn)
            h = Header(
                op=Op.AGG_SYNC,
                flags=Flag.RETX if retx else Flag.NONE,
                job_id=self.job_id,
                worker_id=self.worker_id,
                ver=ver,
                psn=psn,
                agg_idx=idx,
                epoch=self.epoch,
            )
            out.append((pack_header(h, self.slots) + wire[psn - first].tobytes(), self.dest))
        self.stats.packets_sent += len(out)
        self.stats.retransmissions += sum(1 for _, retx in sends if retx)
        self.endpoint.send_many(out)

    def _receive(self, window: _Window, results: ResultAssembler) -> None:
        admit = self._filter
        admit.source, admit.drops = self.dest, self.stats.drops  # dest may be set later
        for payload, src in self.endpoint.recv_many():
            got = admit.admit(payload, src)  # results of this job from dest only, by reason
            if got is None:
                continue
            h, values = got
            if not h.flags & Flag.RESULT:
                # WAIT: the switch holds this worker back (bounded staleness, a mode swap's
                # fence): resend at the timeout, without spending a retry.
                window.waited(h.psn)
                self.stats.waits += 1
                continue
            if results.accept(h.psn, values):
                self.last_bitmaps[h.psn - window.first_psn] = h.bitmap
                sent = self._probes.pop(h.psn, None)
                if sent is not None:
                    rtt = time.monotonic() - sent
                    self._min_rtt = rtt if self._min_rtt is None else min(self._min_rtt, rtt)
                window.on_result(h.psn)
                window.ack(h.psn)
                self.stats.results += 1
            else:
                self.stats.duplicate_results += 1
        stalled = window.stalled_base()
        if stalled is not None and window.expedite(stalled):
            self.stats.fast_retransmissions += 1

    def _timeout(self, results: ResultAssembler, why: str) -> AllReduceTimeout:
        return AllReduceTimeout(self.job_id, self.worker_id, results.missing(), why)

    # --- float path -------------------------------------------------------------------------
    def allreduce(self, x: np.ndarray, bound: float | None = None) -> np.ndarray:
        """Element-wise float32 sum over the workers, through int32 fixed point.

        ``bound`` (the same on every worker, >= every |x|) skips the exponent vote.
        """
        out, self.last_scale = fixed_point_allreduce(
            self.allreduce_int, self.n_workers, x, bound, self.job_id
        )
        return out

    def error_bound(self, scale: float | None = None) -> float:
        """Per-element bound on |allreduce(x) - exact sum| from quantisation (n / (2 s))."""
        s = self.last_scale if scale is None else scale
        return self.n_workers * 0.5 / s

    def close(self) -> None:
        self.endpoint.close()

    def __enter__(self) -> AllReduceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def agree_bound(int_fn: AllReduceFn, max_abs: float, job_id: int = 0) -> float:
    """The bound B >= every worker's max |x|, from one integer all-reduce of exponent votes."""
    vote = exponent_vote(min(max_abs, MAX_FLOAT_ABS), slots=VOTE_BUCKETS, exp_min=VOTE_EXP_MIN)
    if max_abs > MAX_FLOAT_ABS:
        vote[:] = 0
        vote[-1] = 1  # the overflow bucket: every worker sees it and fails alike
    votes = int_fn(vote)
    if votes[-1] != 0:
        raise ValueError(
            f"job {job_id}: a worker's vector has |x| > {MAX_FLOAT_ABS:g}, beyond what the "
            f"fixed-point all-reduce supports; scale the values down first"
        )
    return agreed_bound(votes, exp_min=VOTE_EXP_MIN)


def fixed_point_allreduce(
    int_fn: AllReduceFn, n_workers: int, x: np.ndarray, bound: float | None, job_id: int = 0
) -> tuple[np.ndarray, float]:
    """Float sum through ``int_fn`` (an int32 all-reduce): (sum as float32, scale used)."""
    v = np.asarray(x, dtype=np.float32).reshape(-1)
    if not np.isfinite(v).all():
        raise ValueError("allreduce: the vector holds NaN or infinite values")
    max_abs = float(np.abs(v).max()) if v.size else 0.0
    b = agree_bound(int_fn, max_abs, job_id) if bound is None else bound
    if max_abs > b:
        raise ValueError(f"allreduce: |x| reaches {max_abs:g}, above the given bound {b:g}")
    scale = choose_scale(b, n_workers)
    q = quantize(v, scale, n_workers)
    return dequantize(int_fn(q), scale), scale


def _check_config(
    job_id: int, worker_id: int, n_workers: int, region_size: int, window: int, slots: int
) -> None:
    if not 0 < job_id < MAX_JOBS:
        raise ValueError(f"job_id must be in 1..{MAX_JOBS - 1} (0 is reserved), got {job_id}")
    if not 1 <= n_workers <= MAX_WORKERS:
        raise ValueError(f"n_workers must be in 1..{MAX_WORKERS}, got {n_workers}")
    if not 0 <= worker_id < n_workers:
        raise ValueError(f"worker_id must be in 0..{n_workers - 1}, got {worker_id}")
    if not 1 <= window <= region_size:
        raise ValueError(
            f"need 1 <= window <= region_size (the switch keeps 2 x region copies), "
            f"got window={window}, region_size={region_size}"
        )
    if not 1 <= slots <= MAX_SLOTS:
        raise ValueError(f"slots must be in 1..{MAX_SLOTS}, got {slots}")


class LocalGroup:
    """An in-process all-reduce for n threads (tests, and the reference for training).

    >>> g = LocalGroup(1)
    >>> g.allreduce_fn(0)(np.ones(2, dtype=np.float32)).tolist()
    [1.0, 1.0]
    """

    def __init__(self, n_workers: int, timeout: float = 30.0) -> None:
        self.n_workers = n_workers
        self._parts: list[np.ndarray | None] = [None] * n_workers
        self._result: np.ndarray | None = None
        self._gather = threading.Barrier(n_workers, action=self._reduce, timeout=timeout)
        self._release = threading.Barrier(n_workers, timeout=timeout)

    def _reduce(self) -> None:
        total = self._parts[0].copy()  # type: ignore[union-attr]
        for p in self._parts[1:]:
            total += p  # fixed order: every worker gets the same bits
        self._result = total

    def allreduce_fn(self, worker_id: int) -> AllReduceFn:
        def fn(x: np.ndarray) -> np.ndarray:
            self._parts[worker_id] = np.array(x, copy=True)
            self._gather.wait()
            out = self._result.copy()  # type: ignore[union-attr]
            self._release.wait()  # nobody overwrites a part before all have read the sum
            return out

        return fn
