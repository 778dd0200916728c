"""Data-parallel training of a small MLP on scikit-learn's digits, with a pluggable all-reduce.

Example (two workers as threads, summing in-process):
    >>> import threading
    >>> from hosts.netreduce.allreduce import LocalGroup
    >>> g, out = LocalGroup(2), {}
    >>> def work(w): out[w] = train(g.allreduce_fn(w), w, 2, epochs=1)
    >>> ts = [threading.Thread(target=work, args=(w,)) for w in range(2)]
    >>> _ = [t.start() for t in ts]; _ = [t.join() for t in ts]
    >>> out[0].final_accuracy == out[1].final_accuracy > 0.5
    True

Every worker shuffles with the same seed, takes its shard of each global mini-batch,
computes the gradient of (its part of the batch loss) / (global batch size), all-reduces
that flat float32 vector (the sum is the batch-mean gradient) and applies the same SGD
momentum step, so all workers hold the same parameters and every all-reduce method that
returns the same sum trains the same model.

Command line, one process per worker (inside a Mininet host)::

    python -m hosts.train --method switch --worker-id 0 --workers 4 --dest 10.0.0.100 \\
        --job-id 1 --offset 0 --size 64 --window 64
    python -m hosts.train --method ps --worker-id 0 --workers 4 --dest 10.0.0.5:20051
    python -m hosts.train --method ring --worker-id 0 --workers 4 \\
        --peers 10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4
    python -m hosts.train --method local --workers 4      # all workers as threads here
    python -m hosts.train --method switch --controller unix:run/netreduce/controller.sock \
        --job-id 1 --worker-id 0    # workers, region, window, dest: asked from the daemon

Flags: ``--method`` switch|ps|ring|local; ``--worker-id``, ``--workers``; ``--dest``
IP[:PORT] of the aggregation address (switch: port INC_UDP_PORT by default; ps: port
PS_UDP_PORT); ``--peers`` comma-separated IP[:PORT] of every worker in rank order (ring,
port RING_UDP_PORT by default); ``--bind`` local IP:PORT to listen on (default all
addresses, port INC_UDP_PORT for switch, PS_UDP_PORT for ps, the rank's port in --peers for ring);
``--job-id``, ``--offset``, ``--size``, ``--window``, ``--slots`` the job's region and
window as admitted by the controller; ``--controller URL`` (``http://...`` or
``unix:PATH``) asks the daemon for them instead (``GET /jobs/{id}/workers/{wid}``), and for
``--workers`` and the aggregation address (switch, ps) unless ``--dest`` is given, and a
switch worker then reports its progress to the daemon once a second (the dashboard);
``--timeout`` retransmission timeout and ``--total-timeout`` bound of one all-reduce
(seconds);
``--epochs``, ``--batch-size``, ``--lr``, ``--momentum``, ``--model`` (small or large,
``hosts/mlp.py``), ``--seed``, ``--target`` training settings (identical on all workers
and methods); ``--host-backend`` native|python the packet loop (default
``$INC_HOST_BACKEND``, else native: C, see hosts/transport/native_window.py); ``--json PATH``
writes the history. Progress goes to stdout, one line per epoch.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from hosts.mlp import MLP, MODELS, layer_sizes
from hosts.netreduce.allreduce import AllReduceFn, AllReduceTimeout, LocalGroup

Progress = Callable[[dict[str, Any]], None]


@dataclass
class History:
    """What one worker measured; times exclude evaluation on the test set."""

    method: str
    worker_id: int
    n_workers: int
    iter_times: list[float] = field(default_factory=list)  # seconds per iteration
    comm_times: list[float] = field(default_factory=list)  # seconds in all-reduce per iteration
    epoch_accuracy: list[float] = field(default_factory=list)
    epoch_loss: list[float] = field(default_factory=list)
    epoch_end_s: list[float] = field(default_factory=list)  # training time at each epoch end
    target_accuracy: float = 0.9
    time_to_target_s: float | None = None

    @property
    def final_accuracy(self) -> float:
        return self.epoch_accuracy[-1] if self.epoch_accuracy else 0.0

    @property
    def iter_time_s(self) -> float:
        """Median time per iteration (robust to the first call's set-up)."""
        return float(np.median(self.iter_times)) if self.iter_times else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["final_accuracy"] = self.final_accuracy
        d["iter_time_s"] = self.iter_time_s
        return d


def load_digits_split(seed: int = 0, test_fraction: float = 0.2) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test) from the bundled digits, pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits  # imported late: slow, and only training needs it

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(y))
    n_test = int(len(y) * test_fraction)
    test, tr = perm[:n_test], perm[n_test:]
    return x[tr], y[tr], x[test], y[test]


def train(
    allreduce_fn: AllReduceFn,
    worker_id: int,
    n_workers: int,
    epochs: int = 10,
    *,
    batch_size: int = 64,
    lr: float = 0.1,
    momentum: float = 0.9,
    model: str = "small",
    seed: int = 0,
    target_accuracy: float = 0.9,
    method: str = "",
    on_progress: Progress | None = None,
) -> History:
    """Train worker ``worker_id`` of ``n_workers``; ``allreduce_fn`` sums float32 vectors.

    Times count training only: one untimed all-reduce first is every method's start barrier.
    """
    if not 0 <= worker_id < n_workers:
        raise ValueError(f"worker_id must be in 0..{n_workers - 1}, got {worker_id}")
    x_tr, y_tr, x_te, y_te = load_digits_split(seed)
    net = MLP(layer_sizes(model, x_tr.shape[1]), seed=seed)
    velocity = np.zeros_like(net.theta)
    # Start barrier, outside the timed region for every method alike: the first all-reduce
    # waits for the slowest worker to start (imports, data) and warms the path (ARP, the
    # native loop's build); timed, it was a one-time cost of up to ~0.8 s in the first epoch.
    allreduce_fn(np.zeros_like(net.theta))
    hist = History(method, worker_id, n_workers, target_accuracy=target_accuracy)
    trained = 0.0
    for epoch in range(epochs):
        order = np.random.default_rng((seed, epoch)).permutation(len(y_tr))
        losses = []
        for start in range(0, len(order), batch_size):
            t0 = time.perf_counter()
            batch = order[start : start + batch_size]
            mine = np.array_split(batch, n_workers)[worker_id]
            loss, grad = net.loss_and_grad(x_tr[mine], y_tr[mine], denom=len(batch))
            t1 = time.perf_counter()
            total = np.asarray(allreduce_fn(grad), dtype=np.float32)
            t2 = time.perf_counter()
            velocity *= momentum
            velocity += total
            net.theta -= lr * velocity
            losses.append(loss)
            hist.comm_times.append(t2 - t1)
            hist.iter_times.append(time.perf_counter() - t0)
            trained += hist.iter_times[-1]
        acc = net.accuracy(x_te, y_te)
        hist.epoch_accuracy.append(acc)
        hist.epoch_loss.append(float(np.sum(losses)))  # this worker's share of the loss
        hist.epoch_end_s.append(trained)
        if hist.time_to_target_s is None and acc >= target_accuracy:
            hist.time_to_target_s = trained
        if on_progress is not None:
            on_progress(
                {
                    "method": method,
                    "worker_id": worker_id,
                    "epoch": epoch + 1,
                    "accuracy": acc,
                    "elapsed_s": trained,
                    "iter_time_s": hist.iter_time_s,
                }
            )
    return hist


# --- command line ---------------------------------------------------------------------------
def _addr(text: str, default_port: int) -> tuple[str, int]:
    host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    try:
        return host, int(port) if port else default_port
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad address {text!r}: expected IP[:PORT]") from None


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m hosts.train", description="data-parallel MLP training on digits"
    )
    ap.add_argument("--method", choices=["switch", "ps", "ring", "local"], required=True)
    ap.add_argument("--worker-id", type=int, default=0)
    ap.add_argument("--workers", type=int, help="required unless --controller gives it")
    ap.add_argument("--controller", help="daemon API URL: take the job's settings from it")
    ap.add_argument("--dest", help="switch/ps: aggregation address IP[:PORT]")
    ap.add_argument("--peers", help="ring: IP[:PORT] of every worker, comma-separated")
    ap.add_argument("--bind", help="local IP:PORT (default 0.0.0.0 and the method's port)")
    ap.add_argument("--job-id", type=int, default=1)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--size", type=int, default=64, help="region size (aggregators)")
    ap.add_argument("--window", type=int, default=64, help="packets in flight")
    ap.add_argument("--slots", type=int, default=32, help="values per packet (K)")
    ap.add_argument("--timeout", type=float, default=0.05, help="retransmission timeout, s")
    ap.add_argument("--total-timeout", type=float, default=30.0, help="bound of one call, s")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument(
        "--model",
        choices=list(MODELS),
        default="small",
        help="small (2,410 parameters) or large (1.1M)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", type=float, default=0.9, help="target test accuracy")
    ap.add_argument(
        "--host-backend",
        choices=["native", "python"],
        help="the packet loop: native (C) or python; default $INC_HOST_BACKEND, else native",
    )
    ap.add_argument("--json", help="write the history as JSON to this path")
    return ap


def _settings(a: argparse.Namespace) -> dict[str, Any]:
    return dict(
        epochs=a.epochs,
        batch_size=a.batch_size,
        lr=a.lr,
        momentum=a.momentum,
        model=a.model,
        seed=a.seed,
        target_accuracy=a.target,
        method=a.method,
    )


def _print_progress(p: dict[str, Any]) -> None:
    print(
        f"[{p['method']} w{p['worker_id']}] epoch {p['epoch']:3d}  acc {p['accuracy']:.4f}  "
        f"time {p['elapsed_s']:7.2f}s  iter {p['iter_time_s'] * 1e3:7.2f}ms",
        flush=True,
    )


def _from_controller(a: argparse.Namespace) -> None:
    """Fill the job's settings from the controller daemon (``--controller``)."""
    from controller.api_client import ApiError, ControllerApi
    from hosts.netreduce.ps import PS_UDP_PORT
    from wire.header import INC_UDP_PORT

    try:
        cfg = ControllerApi(a.controller, timeout=30.0).worker_config(a.job_id, a.worker_id)
    except ApiError as e:
        raise ValueError(f"job {a.job_id} worker {a.worker_id}: {e}") from None
    a.workers = cfg["n_workers"]
    a.offset, a.size, a.window = cfg["region_offset"], cfg["region_size"], cfg["window"]
    a.slots = cfg["slots"]
    if not a.dest and a.method in ("switch", "ps"):
        port = cfg["udp_port"] if a.method == "switch" else PS_UDP_PORT
        a.dest = f"{cfg['agg_ip']}:{port if port else INC_UDP_PORT}"


def _make_allreduce(
    a: argparse.Namespace, progress: dict[str, float] | None = None
) -> tuple[AllReduceFn, Callable[[], None]]:
    """The all-reduce of ``--method`` and what closes it. With ``--controller`` and
    ``progress`` (epoch, accuracy, updated by the caller), a switch worker reports its
    figures to the daemon once a second."""
    from wire.header import INC_UDP_PORT

    if a.method in ("switch", "ps"):
        from hosts.netreduce.allreduce import AllReduceClient
        from hosts.netreduce.ps import PS_UDP_PORT

        if not a.dest:
            raise ValueError(f"--method {a.method} needs --dest IP[:PORT]")
        # A ps worker listens on PS_UDP_PORT: the server's results then cross the switch as
        # plain UDP, never as INC results of a job the switch aggregates (result_guard.p4
        # drops those as forged).
        port = INC_UDP_PORT if a.method == "switch" else PS_UDP_PORT
        dest = _addr(a.dest, port)
        bind = _addr(a.bind, port) if a.bind else ("0.0.0.0", port)
        c = AllReduceClient(
            a.job_id, a.worker_id, a.workers, a.offset, a.size, a.window, dest=dest,
            slots=a.slots, timeout=a.timeout, total_timeout=a.total_timeout, bind=bind,
            backend=a.host_backend,
        )  # fmt: skip
        if a.controller and progress is not None and a.method == "switch":
            from controller.api_client import ControllerApi
            from hosts.transport.progress_report import ProgressReporter

            def figures() -> tuple[dict[str, int], dict[str, float]]:
                st = c.stats
                counters = {
                    "sent": st.packets_sent,
                    "results": st.results,
                    "retransmissions": st.retransmissions,
                    "duplicate_results": st.duplicate_results,
                }
                return counters, dict(progress)

            reporter = ProgressReporter(
                ControllerApi(a.controller), a.job_id, a.worker_id, figures
            ).start()

            def close() -> None:
                reporter.stop()
                c.close()
                _log_drops(a, c.stats.drops)

            return c.allreduce, close

        def close_client() -> None:
            c.close()
            _log_drops(a, c.stats.drops)

        return c.allreduce, close_client
    from hosts.netreduce.ring import RING_UDP_PORT, RingAllReduce

    if not a.peers:
        raise ValueError("--method ring needs --peers IP[:PORT],... (all workers, rank order)")
    peers = [_addr(p.strip(), RING_UDP_PORT) for p in a.peers.split(",")]
    if len(peers) != a.workers:
        raise ValueError(f"--peers lists {len(peers)} workers, --workers says {a.workers}")
    r = RingAllReduce(
        a.worker_id, peers, job_id=a.job_id, slots=a.slots, window=a.window,
        timeout=a.timeout, total_timeout=a.total_timeout,
        bind=_addr(a.bind, peers[a.worker_id][1]) if a.bind else None, backend=a.host_backend,
    )  # fmt: skip

    def close_ring() -> None:
        r.close()
        _log_drops(a, r.stats.drops)

    return r.allreduce, close_ring


def _log_drops(a: argparse.Namespace, drops: list[int]) -> None:
    """One line on stderr with the datagrams this worker dropped, by reason (none: quiet)."""
    from wire.header import HostDrop

    counted = ", ".join(f"{r.name.lower()} {drops[r]}" for r in HostDrop if drops[r])
    if counted:
        print(f"hosts.train [{a.method} w{a.worker_id}]: dropped {counted}", file=sys.stderr)


def _run_local(a: argparse.Namespace) -> History:
    group, out = LocalGroup(a.workers), {}
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            cb = _print_progress if w == 0 else None
            out[w] = train(group.allreduce_fn(w), w, a.workers, on_progress=cb, **_settings(a))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(a.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out[0]


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    a = ap.parse_args(argv)
    if a.workers is None and not a.controller:
        ap.error("--workers is required unless --controller gives it")
    try:
        if a.controller:
            _from_controller(a)
        if a.method == "local":
            hist = _run_local(a)
        else:
            progress: dict[str, float] = {}

            def on_progress(p: dict[str, Any]) -> None:
                progress.update(epoch=p["epoch"], accuracy=p["accuracy"])
                _print_progress(p)

            fn, close = _make_allreduce(a, progress)
            try:
                hist = train(fn, a.worker_id, a.workers, on_progress=on_progress, **_settings(a))
            finally:
                close()
    except (ValueError, OSError, AllReduceTimeout) as e:
        print(f"hosts.train: {e}", file=sys.stderr)
        return 1
    ttt = "not reached" if hist.time_to_target_s is None else f"{hist.time_to_target_s:.2f}s"
    print(
        f"[{a.method} w{hist.worker_id}] final accuracy {hist.final_accuracy:.4f}, "
        f"iter {hist.iter_time_s * 1e3:.2f}ms, time to {a.target:.0%}: {ttt}",
        flush=True,
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"settings": vars(a), "history": hist.to_dict()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
