"""Scheduled jobs on Mininet: a running job's region is resized by the scheduler while it
all-reduces through the p4sim switch, next to a NetReduce job, and every sum stays exact
(root).

Workers run ``python -m hosts.scheduled_job`` (scheduled jobs: one region per epoch from the
daemon, every epoch's sum checked bit for bit) and ``python -m hosts.vector_job`` (the
NetReduce job, fixed region) in their Mininet hosts; the daemon runs ``--policy edf`` on a
pool of 16 aggregators.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/scheduling-test")


def hosts_fields(hosts: list[int], agg: int) -> dict[str, Any]:
    from topologies.experiment import host_ip, host_mac

    return {
        "workers": len(hosts),
        "worker_ports": hosts,
        "worker_ips": [host_ip(h) for h in hosts],
        "worker_macs": [host_mac(h) for h in hosts],
        "agg_ip": host_ip(agg),
        "agg_mac": host_mac(agg),
    }


def start_workers(ex: Any, module: str, job: int, hosts: list[int], out: Path, *extra: str):
    procs = []
    for w, h in enumerate(hosts):
        cmd = [sys.executable, "-m", module, "--controller", ex.controller_url,
               "--job-id", str(job), "--worker-id", str(w), *extra]  # fmt: skip
        if module == "hosts.scheduled_job":
            cmd += ["--out", str(out / f"job{job}-w{w}.json"), "--seed", "5"]
        else:
            cmd += ["--out", str(out / f"job{job}-w{w}")]
        procs.append(ex.popen(f"h{h}", cmd))
    return procs


def started_epoch(ex: Any, job: int) -> int:
    for sw in ex.api.schedule()["switches"]:
        for j in sw["jobs"]:
            if j["job_id"] == job:
                return min(j["worker_epochs"].values())
    return -1


def test_a_region_resized_mid_job_keeps_sums_exact_beside_a_netreduce_job(tmp_path: Path):
    from hosts.vector_job import expected_sum
    from topologies.experiment import Experiment, ExperimentConfig, star

    daemon_args = ("--policy", "edf", "--pool-size", "16", "--rtt-ms", "1", "--line-mbps", "100")
    cfg = ExperimentConfig(star(7), run_dir=RUN_DIR, daemon_args=daemon_args, log=lambda s: None)
    with Experiment(cfg) as ex:
        nr = ex.submit("netreduce", window=4, **hosts_fields([5, 6], 7))
        nr_procs = start_workers(ex, "hosts.vector_job", nr, [5, 6], tmp_path,
                                 "--size", "4096", "--calls", "30", "--seed", "9")  # fmt: skip
        be = ex.submit("be", **{"class": "be", "epochs": 40, "model_bytes": 16384,
                                "compute_ms": 20}, **hosts_fields([1, 2], 7))  # fmt: skip
        assert ex.api.job(be)["region"]["size"] == 12  # what the NetReduce job leaves
        be_procs = start_workers(ex, "hosts.scheduled_job", be, [1, 2], tmp_path)
        end = time.monotonic() + 120
        while started_epoch(ex, be) < 4:
            assert time.monotonic() < end, "the BE job did not get going"
            assert all(p.poll() is None for p in be_procs), "a BE worker ended early"
            time.sleep(0.1)
        md = ex.submit("md", **{"class": "md", "epochs": 10, "model_bytes": 16384,
                                "compute_ms": 20, "deadline": "60s"},
                       **hosts_fields([3, 4], 7))  # fmt: skip
        md_procs = start_workers(ex, "hosts.scheduled_job", md, [3, 4], tmp_path)
        codes = [p.wait(timeout=200) for p in be_procs + md_procs + nr_procs]
        finished = {f["job_id"]: f for f in ex.api.schedule()["finished"]}
        drops = ex.drop_counters()
    records = {(j, w): json.loads((tmp_path / f"job{j}-w{w}.json").read_text())
               for j in (be, md) for w in (0, 1)}  # fmt: skip
    assert codes == [0] * 6, [r.get("error") for r in records.values()]
    for (job, w), rec in records.items():
        assert rec["mismatches"] == 0 and all(e["exact"] for e in rec["epochs"]), (job, w)
    # The BE job ran under more than one layout, or paused, while it was running.
    be_epochs = records[(be, 0)]["epochs"]
    regions = {tuple(e["region"]) for e in be_epochs}
    assert len(regions) > 1 or any(e["wait_s"] > 0.1 for e in be_epochs[5:]), regions
    assert finished[md]["met"] is True and finished[be]["state"] == "finished"
    for w in (0, 1):  # the NetReduce job beside them: every call exact
        got = np.load(tmp_path / f"job{nr}-w{w}.npy")
        want = np.stack([expected_sum(9, 2, c, 4096) for c in range(30)])
        assert np.array_equal(got, want)
    assert drops["UNKNOWN_JOB"] == 0 and drops["UNKNOWN_WORKER"] == 0
