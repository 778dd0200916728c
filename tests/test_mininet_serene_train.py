"""Serene's experiment at its smallest (root): 4 workers train the digits MLP through the
switch in Mininet (``hosts/serene_train.py``), worker 4 twice as slow for the first half
of the run, and the dynamic policy watching the switch's clocks through the daemon swaps
the job to partial rounds while the straggler is slow and back to sync once it is at
normal speed again."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]


def test_dynamic_policy_returns_to_sync_after_a_transient_straggler(tmp_path: Path) -> None:
    from topologies import serene

    iterations = 60  # the straggler is slow for epochs 0..29 (serene.run_mode)
    a = serene.parser().parse_args(
        ["--modes", "dynamic", "--straggle", "transient", "--iterations", str(iterations),
         "--eval-every", "20", "--out", str(tmp_path)]
    )  # fmt: skip
    (row,) = serene.run_all(a, log=lambda s: None)
    changes = [(mode, boundary) for _, mode, boundary in row["mode_changes"]]
    assert len(changes) == 2, changes
    (first, into), (back, out) = changes
    assert first == "partial 3" and into < iterations // 2  # while it straggles
    assert back == "sync" and out > iterations // 2  # once it is back to normal speed
    assert sum(row["late_rounds"][:3]) < row["late_rounds"][3]  # partial left worker 4 out
    assert row["replicas_identical"]
