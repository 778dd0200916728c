"""PyTorch DDP in Mininet: four processes on h1..h4 train the digits MLP with inclib's comm
hook (gradients summed in the switch) and with gloo's own all-reduce; then, with the
switch's memory taken, the same example runs on the hosts with a one-line notice (root)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="torch==2.13.0 is in the test extra (make setup-test)")
pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(600)]
EPOCHS = 2


@pytest.fixture(scope="module")
def net() -> Iterator[Any]:
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(star(5), run_dir=Path("run/examples-test"), log=lambda s: None)
    with Experiment(cfg) as ex:
        yield ex


def test_switch_hook_trains_to_gloos_accuracy_with_identical_replicas(
    net: Any, tmp_path: Path
) -> None:
    from examples.run import run_app
    from inclib.torch_ddp import DDP_SLOTS
    from wire.header import SLOTS

    gloo, _ = run_app(net, "training", tmp_path / "gloo.json", "gloo", EPOCHS)
    hook, runs = run_app(net, "training", tmp_path / "switch.json", "switch", EPOCHS)
    assert hook["on_switch"] and not any("inclib:" in line for r in runs for line in r.lines)
    assert hook["slots"] == DDP_SLOTS > SLOTS  # wide packets: whole blocks of 32 values
    assert hook["replicas_identical"] and gloo["replicas_identical"]
    assert hook["iterations"] == gloo["iterations"] > 0
    # the averaged gradient is off by at most this per element (inclib/block_quantize.py)
    assert 0 < hook["max_error_bound"] < 1e-6
    acc_hook, acc_gloo = hook["epochs"][-1]["accuracy"], gloo["epochs"][-1]["accuracy"]
    assert acc_gloo > 0.85 and abs(acc_hook - acc_gloo) <= 0.02
    # a Serene job in sync mode (32 values per packet) sums exactly what NetReduce sums in
    # its wide packets: the same model, bit for bit
    serene, _ = run_app(
        net, "training", tmp_path / "serene.json", "switch", EPOCHS, ("--kind", "serene")
    )
    assert serene["on_switch"] and serene["slots"] == SLOTS
    assert serene["params_sha256"] == hook["params_sha256"]


def test_with_switch_memory_exhausted_training_runs_on_the_hosts_with_a_notice(
    net: Any, tmp_path: Path
) -> None:
    from examples.run import run_app, take_all_memory

    take_all_memory(net)
    rec, runs = run_app(net, "training", tmp_path / "fallback.json", "switch", 1)
    assert not rec["on_switch"] and rec["replicas_identical"]
    for r in runs:
        notices = [line for line in r.lines if line.startswith("inclib:")]
        assert len(notices) == 1, (r.host, notices)
        assert "no free region" in notices[0] and "ring all-reduce" in notices[0]
    assert rec["epochs"][0]["accuracy"] > 0.5
