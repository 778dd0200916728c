"""A worker's session: the operations of in-network computing, on the switch or the hosts.

Example (one worker, no controller: the all-reduce runs on the hosts, a ring of one):
    >>> import numpy as np
    >>> from inclib.plan import admit
    >>> plan = admit("unix:/nonexistent.sock", workers=1, peers=["127.0.0.1:0"])
    >>> with join(plan, worker_id=0) as s:
    ...     s.on_switch, s.allreduce(np.array([1, 2, 3], dtype=np.int32)).tolist()
    (False, [1, 2, 3])

``join`` opens the transport the plan names: for a job the switch serves, it asks the
controller for this worker's settings (``GET /jobs/{id}/workers/{w}``) and talks to the
switch by packets (``hosts/netreduce/allreduce.py`` for NetReduce and Serene, whose epoch, the
round of its synchronisation mode, is the number of the all-reduce call;
``hosts/atp/worker.py`` for ATP, whose parameter server the application runs); for a host-only
plan it uses the host implementation (ring all-reduce, ``hosts/netreduce/ring.py``) and writes one
line to stderr, once per process and job, saying that the switch cannot serve and why.

``allreduce(x)`` keeps x's shape. Integer arrays are summed exactly as int32 (wrapping as
the switch does). Float arrays go through per-block fixed point
(``inclib/block_quantize.py``, error bound there); ``last_error_bound`` is the bound of the
last float call, per element. Every worker must make the same sequence of calls with the
same shapes, as data-parallel training does.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import deque
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from controller.api_client import ApiError, ControllerApi
from inclib.block_quantize import DEFAULT_BLOCK, Prior, block_allreduce
from inclib.host_reduce import CHUNK, HOST_REDUCE_PORT, HostReducer, combine, send_pairs
from inclib.kv import KvHandle
from inclib.log import LogHandle
from inclib.plan import Plan

#: Kinds whose all-reduce this library drives through the switch.
ALLREDUCE_KINDS = ("netreduce", "serene", "atp")
#: What runs on the hosts, per kind, when the switch cannot serve (the notice says it).
HOST_PATHS = {
    "netreduce": "all-reduce runs as a ring all-reduce among the workers",
    "serene": "all-reduce runs as a ring all-reduce among the workers",
    "atp": "all-reduce runs as a ring all-reduce among the workers",
    "ask": "reduce-by-key sends each mapper's combined pairs to the reducer over TCP",
    "kv_cache": "get/put go straight to the storage server (no switch cache)",
    "consensus": "the leader replica sequences the log's appends, not the switch",
}
_noticed: set[tuple[str, int, str]] = set()
INT_CALL_LOG = 4096  # integer calls a session remembers (Session.int_calls)


def notice(plan: Plan, what: str, out: TextIO | None = None) -> None:
    """Say once per process and job, on one line, that the switch cannot serve ``plan``
    and what runs on the hosts instead."""
    key = (plan.name, plan.n_workers, plan.reason)
    if key in _noticed:
        return
    _noticed.add(key)
    job = f"job {plan.name!r}" if plan.name else "this job"
    print(
        f"inclib: the switch cannot serve {job} ({plan.reason}); on the hosts: {what}",
        file=out if out is not None else sys.stderr,
        flush=True,
    )


class SessionError(RuntimeError):
    """The session cannot start as planned (e.g. the controller forgot the job)."""


class _IntAllReduce(Protocol):
    def allreduce_int(self, x: np.ndarray) -> np.ndarray: ...

    def close(self) -> None: ...


def peer_address(text: str, default_port: int) -> tuple[str, int]:
    """``"10.0.0.1"`` or ``"10.0.0.1:4000"`` as (ip, port).

    >>> peer_address("10.0.0.1", 20052), peer_address("127.0.0.1:0", 20052)
    (('10.0.0.1', 20052), ('127.0.0.1', 0))
    """
    ip, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    try:
        return ip, int(port)
    except ValueError:
        raise ValueError(f"bad peer address {text!r}: expected IP or IP:PORT") from None


class Session:
    """Worker ``worker_id``'s end of the job ``plan`` describes (see the module docstring)."""

    def __init__(
        self,
        plan: Plan,
        worker_id: int,
        *,
        block: int = DEFAULT_BLOCK,
        timeout: float = 0.05,
        total_timeout: float = 60.0,
        notice: TextIO | None = None,
    ) -> None:
        if not 0 <= worker_id < plan.n_workers:
            raise ValueError(f"worker_id must be in 0..{plan.n_workers - 1}, got {worker_id}")
        self.plan, self.worker_id, self.block = plan, worker_id, block
        self.timeout, self.total_timeout = timeout, total_timeout
        self._notice_to = notice
        self._allreduce: _IntAllReduce | None = None
        self._priors: dict[int, Prior | None] = {}  # vector length -> its last block bounds
        self._kv: KvHandle | None = None
        self._log: LogHandle | None = None
        # (values, seconds) of the latest integer calls under allreduce: where its time went
        self.int_calls: deque[tuple[int, float]] = deque(maxlen=INT_CALL_LOG)
        self.calls = 0  # all-reduce calls so far: a Serene job's epoch (its round)
        self.last_error_bound: np.ndarray | None = None
        self.config: dict[str, Any] = {}
        if plan.on_switch:
            assert plan.job_id is not None
            try:
                api = ControllerApi(plan.controller, timeout=30.0, token=plan.token or None)
                self.config = api.worker_config(plan.job_id, worker_id)
            except ApiError as err:
                raise SessionError(
                    f"job {plan.job_id} was admitted but its settings cannot be read: {err}"
                ) from None
        else:
            self._notice(HOST_PATHS.get(plan.kind, "it runs on the hosts"))

    @property
    def on_switch(self) -> bool:
        return self.plan.on_switch

    @property
    def n_workers(self) -> int:
        return self.plan.n_workers

    # --- synchronous aggregation ----------------------------------------------------------
    def allreduce(self, x: np.ndarray) -> np.ndarray:
        """Element-wise sum of ``x`` over the job's workers, in x's shape."""
        v = np.asarray(x)
        backend = self._allreduce_backend()
        if self.plan.kind == "serene" and self.plan.on_switch:
            backend.epoch = self.calls  # type: ignore[attr-defined]
        self.calls += 1
        if np.issubdtype(v.dtype, np.integer):
            return backend.allreduce_int(v.reshape(-1).astype(np.int32)).reshape(v.shape)
        # A vector of a length seen before (DDP's buckets) reuses that call's agreed block
        # bounds: one integer call instead of two (inclib/block_quantize.py). Every kind alike,
        # so that Serene's sync mode sums exactly what NetReduce sums; its partial modes may sum
        # a packet over a subset of the workers, for the bounds as for the values.
        prior = self._priors.get(v.size)

        def timed(q: np.ndarray) -> np.ndarray:
            t0 = time.perf_counter()
            out = backend.allreduce_int(q)
            self.int_calls.append((q.size, time.perf_counter() - t0))
            return out

        r = block_allreduce(timed, self.n_workers, v, self.block, prior)
        self._priors[v.size] = r.prior
        self.last_error_bound = r.error_bound()
        return r.values

    def transport_stats(self) -> dict[str, Any]:
        """The all-reduce transport's counters so far (calls, packets, retransmissions...;
        none before the first call) and the latest float calls' integer calls as
        ``int_calls``: [values, seconds] each."""
        stats = getattr(self._allreduce, "stats", None)
        out = dict(vars(stats)) if stats is not None else {}
        out["int_calls"] = [[n, round(t, 6)] for n, t in self.int_calls]
        return out

    def prepare_allreduce(self) -> None:
        """Open the all-reduce transport now (its socket, the native packet loop) instead
        of in the first call: a caller that times its calls keeps this one-time set-up out,
        as gloo's connections are made before training starts."""
        self._allreduce_backend()

    def _allreduce_backend(self) -> _IntAllReduce:
        if self._allreduce is None:
            self._allreduce = self._open_allreduce()
        return self._allreduce

    def _open_allreduce(self) -> _IntAllReduce:
        from hosts.netreduce.allreduce import AllReduceClient
        from hosts.netreduce.ring import RING_UDP_PORT, RingAllReduce

        plan, cfg = self.plan, self.config
        if not plan.on_switch:
            peers = [peer_address(p, RING_UDP_PORT) for p in plan.peers]
            return RingAllReduce(
                self.worker_id, peers, timeout=self.timeout, total_timeout=self.total_timeout
            )
        if plan.kind not in ALLREDUCE_KINDS:
            raise SessionError(f"a {plan.kind} job has no all-reduce (kinds: {ALLREDUCE_KINDS})")
        if plan.kind == "atp":  # hashed addressing into a shared pool, the PS behind it
            from hosts.atp.worker import AtpClient

            return AtpClient(
                cfg["job_id"], cfg["worker_id"], cfg["n_workers"], cfg["region_offset"],
                cfg["region_size"], cfg["window"], dest=(cfg["agg_ip"], cfg["udp_port"]),
                slots=cfg["slots"], timeout=self.timeout, total_timeout=self.total_timeout,
            )  # fmt: skip
        return AllReduceClient(
            cfg["job_id"], cfg["worker_id"], cfg["n_workers"], cfg["region_offset"],
            cfg["region_size"], cfg["window"], dest=(cfg["agg_ip"], cfg["udp_port"]),
            slots=cfg["slots"], timeout=self.timeout, total_timeout=self.total_timeout,
            max_retries=10**6 if plan.kind == "serene" else 100,  # WAIT replies resend too
        )  # fmt: skip

    # --- asynchronous aggregation (key-value streams) -------------------------------------
    def reduce_by_key(self, pairs: Iterable[tuple[Hashable, int]]) -> int:
        """Send this mapper's (key, value) pairs to be summed per key at the job's reducer
        (``inclib.reducer(plan).collect()``); returns once they are delivered. Returns the
        number of distinct keys sent."""
        if self.plan.on_switch:
            return self._ask_mapper(pairs)
        to = peer_address(self.plan.reducer, HOST_REDUCE_PORT)
        return send_pairs(to, pairs, self.total_timeout)

    def _ask_mapper(self, pairs: Iterable[tuple[Hashable, int]]) -> int:
        from hosts.ask.mapper_process import send_partition

        plan = self.plan
        assert plan.job_id is not None
        items = list(combine(pairs).items())
        chunks = (dict(items[i : i + CHUNK]) for i in range(0, len(items), CHUNK))
        send_partition(plan.controller, plan.job_id, self.worker_id, chunks)
        return len(items)

    # --- key-value read/write and consensus -------------------------------------------------
    def kv(self) -> KvHandle:
        """This client's handle on the job's key-value store (``get``/``put``)."""
        if self._kv is None:
            self._kv = KvHandle(self.plan, self.config, self.worker_id)
        return self._kv

    def log(self) -> LogHandle:
        """This client's handle on the job's replicated log (``append``/``read``)."""
        if self._log is None:
            self._log = LogHandle(self.plan, self.config, self.worker_id)
        return self._log

    # --- life cycle -----------------------------------------------------------------------
    def _notice(self, what: str) -> None:
        notice(self.plan, what, self._notice_to)

    def close(self) -> None:
        if self._allreduce is not None:
            self._allreduce.close()
            self._allreduce = None
        for handle in (self._kv, self._log):
            if handle is not None:
                handle.close()
        self._kv = self._log = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReducerSession:
    """The reducer of a key-value aggregation job: ``collect()`` gives every key's total."""

    def __init__(self, plan: Plan, *, bind: tuple[str, int] | None = None) -> None:
        self.plan = plan
        self._host: HostReducer | None = None
        if not plan.on_switch:
            port = peer_address(plan.reducer, HOST_REDUCE_PORT)[1]
            self._host = HostReducer(bind or ("0.0.0.0", port), plan.n_workers)

    def collect(self, timeout: float = 600.0) -> dict[Hashable, int]:
        """Wait for every mapper and return key -> sum of its values; prints a line with
        "reducer ready" once mappers can connect. Through the switch (ASK:
        ``hosts/ask/reducer_process.py``, which drains the switch's array; its mappers are
        ``send_partition``) as on the hosts, keys come back as they were sent
        (``hosts/ask/keys.py``); ``timeout`` bounds the host path."""
        if self._host is not None:
            host, port = self._host.address
            print(f"inclib reducer ready: {self.plan.n_workers} mappers, TCP {port}", flush=True)
            return self._host.collect(timeout)
        from hosts.ask import run as ask_run

        plan = self.plan
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "result.json")
            argv = ["reducer", "--controller", plan.controller, "--job-id", str(plan.job_id),
                    "--out", out]  # fmt: skip
            if ask_run.run_reducer(ask_run.parser().parse_args(argv)) != 0:
                raise SessionError(f"the reducer of job {plan.job_id} failed")
            result: dict[Hashable, int] = ask_run.read_record(Path(out))["result"]
            return result

    def close(self) -> None:
        if self._host is not None:
            self._host.close()

    def __enter__(self) -> ReducerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def reducer(plan: Plan | str, **options: Any) -> ReducerSession:
    """Open the reducer's end of the key-value aggregation job ``plan`` describes."""
    p = Plan.from_json(plan) if isinstance(plan, str) else plan
    return ReducerSession(p, **options)


def join(plan: Plan | str, worker_id: int, **options: Any) -> Session:
    """Open worker ``worker_id``'s session on ``plan`` (a Plan or its JSON)."""
    p = Plan.from_json(plan) if isinstance(plan, str) else plan
    return Session(p, worker_id, **options)
