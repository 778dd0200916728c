"""Data-parallel MLP training on digits with pluggable all-reduce."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from hosts.mlp import MLP
from hosts.netreduce.allreduce import AllReduceClient, AllReduceFn, LocalGroup
from hosts.netreduce.ps import ParameterServer
from hosts.train import History, main, train

LOCAL = ("127.0.0.1", 0)
EPOCHS = 3


def train_all(fns: list[AllReduceFn], **kw: object) -> list[History]:
    out: list[History | None] = [None] * len(fns)
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            out[w] = train(fns[w], w, len(fns), epochs=EPOCHS, **kw)  # type: ignore[arg-type]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    if errors:
        raise errors[0]
    return out  # type: ignore[return-value]


def test_mlp_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(0)
    m = MLP((5, 4, 3), seed=1)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = rng.integers(0, 3, 6)
    _, g = m.loss_and_grad(x, y, denom=6)
    for i in rng.choice(m.theta.size, 8, replace=False):
        keep = m.theta[i]
        m.theta[i] = keep + 1e-2
        up, _ = m.loss_and_grad(x, y, denom=6)
        m.theta[i] = keep - 1e-2
        down, _ = m.loss_and_grad(x, y, denom=6)
        m.theta[i] = keep
        assert (up - down) / 2e-2 == pytest.approx(float(g[i]), abs=2e-3)


def test_sharded_gradients_sum_to_the_full_batch_gradient() -> None:
    rng = np.random.default_rng(3)
    m = MLP((8, 6, 4), seed=2)
    x = rng.standard_normal((10, 8)).astype(np.float32)
    y = rng.integers(0, 4, 10)
    _, full = m.loss_and_grad(x, y, denom=10)
    parts = [m.loss_and_grad(x[s], y[s], denom=10)[1] for s in np.array_split(np.arange(10), 3)]
    np.testing.assert_allclose(sum(parts), full, atol=1e-6)


def test_local_and_ps_training_reach_the_same_accuracy_above_90_percent() -> None:
    n = 4
    group = LocalGroup(n)
    local = train_all([group.allreduce_fn(w) for w in range(n)])
    ps = ParameterServer(n, bind=LOCAL).start()
    clients = [AllReduceClient(1, w, n, 0, 64, 64, dest=ps.address, bind=LOCAL)
               for w in range(n)]  # fmt: skip
    try:
        via_ps = train_all([c.allreduce for c in clients])
    finally:
        for c in clients:
            c.close()
        ps.stop()
    assert local[0].final_accuracy > 0.90
    assert abs(via_ps[0].final_accuracy - local[0].final_accuracy) <= 0.005
    for h in via_ps[1:]:  # every worker holds the same model
        assert h.epoch_accuracy == via_ps[0].epoch_accuracy


def test_history_records_iterations_epochs_and_time_to_target() -> None:
    events: list[dict] = []
    (h,) = train_all(
        [LocalGroup(1).allreduce_fn(0)], target_accuracy=0.5, on_progress=events.append
    )
    per_epoch = -(-1438 // 64)  # 80 % of the 1797 digits, batches of 64
    assert len(h.iter_times) == len(h.comm_times) == EPOCHS * per_epoch
    assert len(h.epoch_accuracy) == len(h.epoch_end_s) == EPOCHS
    assert h.time_to_target_s is not None and h.time_to_target_s <= h.epoch_end_s[-1]
    assert [e["epoch"] for e in events] == [1, 2, 3]
    d = h.to_dict()
    assert d["final_accuracy"] == h.final_accuracy and d["iter_time_s"] > 0


def test_unreached_target_leaves_time_to_target_empty() -> None:
    (h,) = train_all([LocalGroup(1).allreduce_fn(0)], target_accuracy=1.01)
    assert h.time_to_target_s is None


def test_allreduce_that_changes_the_sum_changes_the_model() -> None:
    def halve(x: np.ndarray) -> np.ndarray:  # a broken all-reduce: the result differs
        return x * 0.5

    ident: Callable[[np.ndarray], np.ndarray] = lambda x: x  # noqa: E731
    (a,) = train_all([ident])
    (b,) = train_all([halve])
    assert a.epoch_loss != b.epoch_loss


def test_command_line_reports_missing_ring_peers_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--method", "ring", "--workers", "2", "--epochs", "1"]) == 1
    assert "--peers" in capsys.readouterr().err


def test_command_line_local_run_writes_the_history_json(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    out = tmp_path / "h.json"
    assert main(["--method", "local", "--workers", "2", "--epochs", "2", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert len(rec["history"]["epoch_accuracy"]) == 2
    assert "epoch   2" in capsys.readouterr().out


def test_a_slow_start_is_the_untimed_start_barrier_not_part_of_the_first_epoch() -> None:
    group = LocalGroup(1)
    inner = group.allreduce_fn(0)
    calls: list[np.ndarray] = []

    def slow_first(x: np.ndarray) -> np.ndarray:
        calls.append(np.array(x, copy=True))
        if len(calls) == 1:
            time.sleep(1.0)  # the slowest worker still starting
        return inner(x)

    h = train(slow_first, 0, 1, epochs=1)
    assert len(calls) == len(h.iter_times) + 1  # one all-reduce before the timed loop
    assert not calls[0].any()  # the barrier carries zeros, not a gradient
    assert h.epoch_end_s[0] < 1.0 and max(h.iter_times) < 1.0
