"""The main job behind ``make run``, end to end through its command line, on a small run.

``python -m topologies.demo`` (what ``make run`` starts) with two workers and one epoch:
Mininet, the switch, the controller daemon, ``incctl``, and the three trainings (switch,
parameter server, ring). Checked: it exits 0, ``results/run.json`` has the documented
schema, the plots are written, and the three methods agree. They must agree exactly, not
within a tolerance: all three sum the same fixed-point integers
(hosts/transport/quantize.py), so the workers hold bit-identical parameters and every
epoch's accuracy is the same number.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from topologies.netreduce import targets

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("switch", "ps", "ring")
WORKERS, EPOCHS, BW_MBPS = 2, 1, 20.0
SLOTS = 64  # not the default (32): --slots reaches the job, the PS and the ring
PNG = b"\x89PNG\r\n\x1a\n"


def check_schema(run: dict[str, Any], switch: str) -> None:
    """results/run.json: per method the figures of the table, the network, the curves."""
    assert set(run) == {*METHODS, "network", "curves"}, sorted(run)
    for m in METHODS:
        r = run[m]
        assert set(r) == {"final_accuracy", "time_to_target_s", "iter_time_s",
                          "busiest_link_bytes"}, (m, sorted(r))  # fmt: skip
        assert 0.0 <= r["final_accuracy"] <= 1.0, (m, r)
        assert r["time_to_target_s"] is None or r["time_to_target_s"] > 0, (m, r)
        assert math.isfinite(r["iter_time_s"]) and r["iter_time_s"] > 0, (m, r)
        assert isinstance(r["busiest_link_bytes"], int) and r["busiest_link_bytes"] > 0, (m, r)
        curve = run["curves"][m]
        assert len(curve["epoch_accuracy"]) == len(curve["epoch_end_s"]) == EPOCHS, (m, curve)
        assert curve["epoch_end_s"] == sorted(curve["epoch_end_s"]), (m, curve)
        assert curve["epoch_accuracy"][-1] == r["final_accuracy"], (m, curve)
    net = run["network"]
    assert net["workers"] == WORKERS and net["link_bandwidth_mbps"] == BW_MBPS, net
    assert isinstance(net["link_rate"], str) and net["link_rate"], net  # how it was chosen
    assert net["K"] == SLOTS and net["window"] > 0 and net["switch"] == switch, net
    # every method on the same host packet loop, set-up outside the timed region for all
    assert net["host_backend"] in ("native", "python") and net["setup_timed"] is False, net


def test_main_job_writes_its_results_and_the_three_methods_train_the_same_model(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "topologies.demo", "--workers", str(WORKERS),
           "--epochs", str(EPOCHS), "--bw", str(BW_MBPS), "--results", str(results),
           "--slots", str(SLOTS)]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=540, check=False)
    log = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, log
    kinds = targets()  # SWITCH=both: one run per switch, each in results/<switch>/
    for kind in kinds:
        out = results / kind if len(kinds) > 1 else results
        run = json.loads((out / "run.json").read_text())
        check_schema(run, kind)
        for png in ("accuracy_vs_time.png", "iteration_and_traffic.png"):
            assert (out / png).read_bytes().startswith(PNG), png
        curves = {m: run["curves"][m]["epoch_accuracy"] for m in METHODS}
        assert curves["switch"] == curves["ps"] == curves["ring"], (kind, curves)
        assert run["switch"]["final_accuracy"] > 0.5, run["switch"]  # it learned something
    # The table the user reads is printed with the same figures.
    assert all(m in done.stdout for m in METHODS) and "final accuracy" in done.stdout, log
