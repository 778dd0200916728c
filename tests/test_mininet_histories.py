"""Pipelined clients on Mininet (root), their recorded histories checked: the key-value
store linearizable (``hosts/kv/linearizability.py``), the replicated log in one order with
every acknowledged append once (``hosts/consensus/log_check.py``). Every link loses,
duplicates and reorders frames (impairment relays), and the switch restarts while the
clients run: its cache and sequencer counter are lost and rebuilt by the controller.

Key-value: three clients with several requests in flight each, a fifth of them writes,
over more hot keys than the job's cache entries (a flat Zipf), so the controller keeps
evicting keys and caching them again in other entries.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/histories-test")
LOSSY = {"loss": 0.01, "dup": 0.01, "reorder": 0.02}
START_DELAY = 3.0
COUNT = 1500  # key-value operations per client: the run outlasts the switch's restart
APPENDS = 1000  # appends per client, likewise


def restart_switch_at(ex: Any, when: float, done: list[float]) -> threading.Thread:
    """Crash and start the switch at ``when`` (monotonic), in the background; ``done`` gets
    the times it stopped and started again."""

    def restart() -> None:
        time.sleep(max(0.0, when - time.monotonic()))
        sw = ex.switch("s1")
        if sw.proc is not None:
            sw.proc.kill()  # a crash: the switch's state is gone at once (by its PID)
        sw.stop_process()
        done.append(time.monotonic())
        sw.start([])
        done.append(time.monotonic())

    t = threading.Thread(target=restart, daemon=True)
    t.start()
    return t


def test_pipelined_kv_history_is_linearizable_across_evictions_loss_and_a_switch_restart():
    from hosts.kv.linearizability import check_files, load
    from topologies.experiment import Experiment, ExperimentConfig, host_ip, host_mac, star
    from topologies.impair_relay import Impairment

    clients, server = [1, 2, 3], 4
    cfg = ExperimentConfig(star(4), impairment=Impairment(seed=3, **LOSSY), run_dir=RUN_DIR,
                           log=lambda s: None)  # fmt: skip
    with Experiment(cfg) as ex:
        job = ex.api.submit({
            "kind": "kv_cache", "workers": 3, "worker_ports": clients, "server": server,
            "worker_ips": [host_ip(h) for h in clients],
            "worker_macs": [host_mac(h) for h in clients],
            "agg_ip": host_ip(server), "agg_mac": host_mac(server),
            "cache_size": 4, "refresh_ms": 100,
        })["job_id"]  # fmt: skip
        srv = [sys.executable, "-m", "hosts.kv.store", "server", "--job-id", str(job),
               "--controller", ex.controller_url]  # fmt: skip
        ex.start_service(f"h{server}", srv, ready="kv server", log_name="kv-server")
        paths = [ex.run_dir / f"kv-history-{c}.npz" for c in clients]
        start_at = time.monotonic() + START_DELAY
        restarted: list[float] = []
        restart = restart_switch_at(ex, start_at + 0.5, restarted)
        runs = ex.run_hosts([
            (f"h{c}", [sys.executable, "-m", "hosts.kv.pipelined_client", "--controller",
                       ex.controller_url, "--job-id", str(job), "--worker-id", str(i),
                       "--count", str(COUNT), "--window", "4", "--write-share", "0.2",
                       "--keys", "12", "--alpha", "0.5", "--seed", str(c),
                       "--start-at", str(start_at), "--history", str(paths[i])])
            for i, c in enumerate(clients)
        ], timeout=240)  # fmt: skip
        restart.join(60)
        for r in runs:
            assert r.code == 0, (r.host, r.lines[-5:])
        assert len(restarted) == 2, "the switch did not restart"
    relays = ex.relay_stats()  # complete once the relays stopped
    result = check_files(paths)
    assert result.ok, result.violations
    assert result.ops == 3 * COUNT
    ops = [op for p in paths for op in load(p)]
    assert sum(op.write for op in ops) > 300
    # The switch answered reads of more keys than it has entries: keys were evicted and
    # cached again, and it answered before and after its restart.
    summaries = [json.loads(r.lines[-1]) for r in runs]
    assert sum(s["cached"] for s in summaries) > 100, summaries
    import numpy as np

    served: set[int] = set()
    times = []
    for p in paths:
        with np.load(p) as d:
            hit = d["cached"] & d["done"]
            served |= set(d["key"][hit].tolist())
            times.extend(d["start"][hit].tolist())
    assert len(served) > 4, served
    assert min(times) < restarted[0] and max(times) > restarted[1], (start_at, restarted)
    assert sum(s.get("dropped", 0) + s.get("duplicated", 0) for s in relays.values()) > 0


def test_pipelined_log_history_has_one_order_and_every_commit_once_across_a_switch_restart():
    from hosts.consensus.log_check import Ack, check_log
    from hosts.consensus.log_wire import Entry
    from topologies.experiment import Experiment, ExperimentConfig, host_ip, host_mac, star
    from topologies.impair_relay import Impairment

    clients, reps = [1, 2, 3], [4, 5, 6]
    cfg = ExperimentConfig(star(6), impairment=Impairment(seed=4, **LOSSY), run_dir=RUN_DIR,
                           log=lambda s: None)  # fmt: skip
    with Experiment(cfg) as ex:
        job = ex.api.submit({
            "kind": "consensus", "workers": 3, "worker_ports": clients,
            "worker_ips": [host_ip(h) for h in clients],
            "worker_macs": [host_mac(h) for h in clients],
            "replicas": 3, "replica_ports": reps, "replica_ips": [host_ip(h) for h in reps],
            "replica_macs": [host_mac(h) for h in reps],
        })["job_id"]  # fmt: skip
        common = ["--controller", ex.controller_url, "--job-id", str(job)]
        procs = [
            ex.start_service(f"h{h}", [sys.executable, "-m", "hosts.consensus.replicated_log",
                                       "replica", *common, "--replica-id", str(r)],
                             "ready", f"replica-{r}")
            for r, h in enumerate(reps)
        ]  # fmt: skip
        time.sleep(1.5)  # replica 0 leads the new group
        paths = [ex.run_dir / f"log-history-{c}.json" for c in clients]
        start_at = time.monotonic() + START_DELAY
        restarted: list[float] = []
        restart = restart_switch_at(ex, start_at + 0.3, restarted)
        runs = ex.run_hosts([
            (f"h{c}", [sys.executable, "-m", "hosts.consensus.pipelined_client", *common,
                       "--worker-id", str(i), "--count", str(APPENDS), "--window", "4",
                       "--start-at", str(start_at), "--history", str(paths[i])])
            for i, c in enumerate(clients)
        ], timeout=240)  # fmt: skip
        restart.join(60)
        for r in runs:
            assert r.code == 0, (r.host, r.lines[-5:])
        assert len(restarted) == 2, "the switch did not restart"
        time.sleep(1.0)  # heartbeats let every follower fetch the tail
        for p in procs:
            ex.stop(p)
    logs, sessions = [], set()
    for r in range(3):
        lines = (ex.logs / f"replica-{r}.log").read_text().splitlines()
        summary = json.loads(next(x for x in reversed(lines) if x.startswith("{")))
        logs.append([Entry.of(e) for e in summary["log"]])
        sessions.add(summary["session"])
    commits = [c for p in paths for c in json.loads(p.read_text())]
    assert len(commits) == 3 * APPENDS
    acks = [Ack(int(c[0]), int(c[1]), str(c[2]).encode(), int(c[4])) for c in commits]
    issued = {(int(c[0]), int(c[1])) for c in commits}
    result = check_log(logs, acks)
    assert result.ok, result.violations[:5]
    assert result.entries >= len(issued)
    # the switch restart gave the group a new session, which commits used
    span = (min(c[5] for c in commits), max(c[6] for c in commits))
    assert len({c[3] for c in commits}) >= 2, (sorted({c[3] for c in commits}), span, restarted)
