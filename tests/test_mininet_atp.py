"""ATP on Mininet (root): integer all-reduce through the shared pool equals the host sum bit
for bit, with collisions forced (a pool range smaller than the jobs' windows), jobs sharing
the pool, a NetReduce job beside them, and loss, duplication and reordering on every link.

Every worker runs ``python -m hosts.vector_job`` (its job's kind ``atp`` selects
``hosts.atp_worker.AtpClient``); the PS host runs ``python -m hosts.atp_ps`` for the ATP
jobs. The switch's ``atp_events`` counter shows that collisions and fallbacks happened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topologies.impair_relay import Impairment

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/atp-test")


def start_net(hosts: int, impairment: Impairment | None = None) -> Any:
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(star(hosts), impairment=impairment, run_dir=RUN_DIR, log=lambda s: None)
    return Experiment(cfg).__enter__()


def test_two_atp_jobs_sharing_a_small_pool_and_a_netreduce_job_are_all_exact(
    tmp_path: Path,
) -> None:
    from topologies.atp import AtpJob, exact, pool_events, run_jobs, start_ps, submit_atp

    ex = start_net(7)
    try:
        # Two ATP jobs share 8 aggregators with windows of 16: collisions are certain.
        a = submit_atp(ex, "a", [1, 2], ps_host=7, window=16, pool=(0, 8))
        b = submit_atp(ex, "b", [3, 4], ps_host=7, window=16, pool=(0, 8))
        nr = ex.submit("nr", workers=2, window=16, worker_ports=[5, 6],
                       worker_ips=["10.0.0.5", "10.0.0.6"],
                       worker_macs=["00:00:00:00:00:05", "00:00:00:00:00:06"],
                       agg_ip="10.0.0.7", agg_mac="00:00:00:00:00:07")  # fmt: skip
        start_ps(ex, 7, [a.job_id, b.job_id])
        size, calls = 4000, 2
        jobs = [a, b, AtpJob(nr, (5, 6), "netreduce")]
        got = run_jobs(ex, jobs, tmp_path, size, calls, 40, "--bits", "24")
        events = pool_events(ex)
        drops_seen = ex.drop_counters()
    finally:
        ex.close()
    for j in (a.job_id, b.job_id, nr):
        assert exact(got[j], 40 + j, size, calls, bits=24) == [], j
    assert events["collision"] > 0 and events["completed"] > 0, f"{events} {drops_seen}"
    assert events["released"] > 0, events


@pytest.mark.parametrize("p", [0.01, 0.05], ids=["1pct", "5pct"])
def test_atp_sum_is_exact_with_loss_duplication_and_reordering_on_every_link(
    tmp_path: Path, p: float
) -> None:
    from topologies.atp import exact, pool_events, run_jobs, start_ps, submit_atp

    ex = start_net(3, Impairment(loss=p, dup=p, reorder=p, seed=9))
    try:
        job = submit_atp(ex, f"lossy-{p}", [1, 2], ps_host=3, window=16, pool=(0, 64))
        start_ps(ex, 3, [job.job_id])
        size, calls = 3000, 2
        got = run_jobs(ex, [job], tmp_path, size, calls, 50, "--timeout", "0.1", "--bits", "24")
        events = pool_events(ex)
    finally:
        ex.close()
    assert exact(got[job.job_id], 50 + job.job_id, size, calls, bits=24) == []
    stats = ex.relay_stats()
    assert sorted(stats) == ["r1", "r2", "r3"], stats
    assert all(s["dropped"] > 0 for s in stats.values()), stats
    assert events["retx_fallback"] > 0, events  # lost packets were finished by the PS
