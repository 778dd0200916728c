"""Serene's experiment at its smallest (root): 4 workers train the digits MLP through the
switch in Mininet (``hosts/serene/train.py``), worker 4 twice as slow for the first half
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
    slow_until = iterations // 2
    # Partial while it straggles, sync once it is back to normal speed, and no partial after.
    # While it straggles the policy may return to sync for a few epochs (docs/architecture.md:
    # a straggler that skips every other compute sometimes arrives with the others).
    assert changes and changes[0][0] == "partial 3" and changes[0][1] < slow_until, changes
    # The last swap is to sync, no earlier than the straggler's recovery: a swap at epoch
    # slow_until itself was decided on the last slow epochs' clocks, and no partial follows.
    assert changes[-1][0] == "sync" and changes[-1][1] >= slow_until, changes
    assert all(b < slow_until for m, b in changes if m != "sync"), changes
    partial = 0  # epochs of the slow phase run partial
    for (m, b), nxt in zip(changes, [*changes[1:], ("end", iterations)], strict=True):
        if m != "sync":
            partial += min(nxt[1], slow_until) - b
    assert partial >= slow_until // 2, changes
    assert sum(row["late_rounds"][:3]) < row["late_rounds"][3]  # partial left worker 4 out
    assert row["replicas_identical"]
