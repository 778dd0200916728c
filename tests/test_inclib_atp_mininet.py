"""inclib's all-reduce on an ATP job (shared pool, hashed addressing, the PS behind the
switch) in Mininet: four workers on h1..h4 sum int32 and float vectors through the same
``Session.allreduce`` as on NetReduce, exactly (int) and within the bound (float) (root)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]

WORKER = r"""
import json, sys
import numpy as np
import inclib
plan, w = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(w)
ints = rng.integers(-1000, 1000, size=3000).astype(np.int32)
floats = (rng.standard_normal(3000) * 10.0 ** rng.uniform(-4, 2, 3000)).astype(np.float32)
with inclib.join(plan, worker_id=w) as s:
    a, b = s.allreduce(ints), s.allreduce(floats)
    print(json.dumps({"on_switch": s.on_switch, "ints": a.tolist(), "floats": b.tolist(),
                      "bound": s.last_error_bound.tolist()}))
"""


def test_allreduce_on_an_atp_job_is_exact(tmp_path: Path) -> None:
    import inclib
    from topologies.atp import start_ps
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(star(5), run_dir=Path("run/inclib-atp"), log=lambda s: None)
    with Experiment(cfg) as ex:
        plan = inclib.admit(ex.controller_url, 4, kind="atp", name="atp-lib", window=16,
                            ps_port=5, pool_size=64)  # fmt: skip
        assert plan.on_switch, plan.reason
        start_ps(ex, 5, [plan.job_id])
        cmds = [(f"h{w + 1}", [sys.executable, "-c", WORKER, plan.to_json(), str(w)])
                for w in range(4)]  # fmt: skip
        runs = ex.run_hosts(cmds, timeout=120)
    outs = []
    for r in runs:
        assert r.code == 0, r.lines[-3:]
        outs.append(json.loads(next(x for x in reversed(r.lines) if x.startswith("{"))))
    rngs = [np.random.default_rng(w) for w in range(4)]
    ints = [g.integers(-1000, 1000, size=3000).astype(np.int32) for g in rngs]
    floats = [
        (g.standard_normal(3000) * 10.0 ** g.uniform(-4, 2, 3000)).astype(np.float32) for g in rngs
    ]
    exact = np.sum([f.astype(np.float64) for f in floats], axis=0)
    for o in outs:
        assert o["on_switch"] and o["ints"] == np.sum(ints, axis=0).tolist()
        got = np.array(o["floats"])
        assert np.all(np.abs(got - exact) <= np.array(o["bound"]) + np.abs(got) * 2.0**-23)
        assert o["floats"] == outs[0]["floats"]
