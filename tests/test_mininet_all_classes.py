"""Three classes of in-network computing on one p4sim switch at the same time (root): a
NetReduce all-reduce, a key-value cache with a writer and a reader, and a replicated log,
each admitted by the daemon as its own tenant. Every all-reduce sum is exact, every read
is consistent with the writes, every committed append is in the log.

h1, h2: NetReduce workers, h3 their aggregation address; h4, h5: key-value clients, h6
the storage server; h7: log client; h8..h10: replicas.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_mininet_consensus import log_fields
from tests.test_mininet_kv_cache import check_reads, kv_cmd, kv_fields, last_json

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/all-classes-test")


def test_aggregation_key_value_and_consensus_jobs_run_on_one_switch_at_once(tmp_path: Path):
    from hosts.consensus.log_wire import Entry, distinct
    from hosts.vector_job import expected_sum
    from tests.test_mininet_scheduling import hosts_fields
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(star(10), run_dir=RUN_DIR, log=lambda s: None)
    with Experiment(cfg) as ex:
        nr = ex.submit("nr", window=8, **hosts_fields([1, 2], 3))
        kv = ex.api.submit(kv_fields([4, 5], 6, cache_size=4, refresh_ms=100))["job_id"]
        log = ex.api.submit(log_fields([7], [8, 9, 10]))["job_id"]
        srv = [sys.executable, "-m", "hosts.kv.store", "server", "--job-id", str(kv),
               "--controller", ex.controller_url]  # fmt: skip
        ex.start_service("h6", srv, ready="kv server", log_name="kv-server")
        for rid in range(3):
            cmd = [sys.executable, "-m", "hosts.consensus.replicated_log", "replica",
                   "--controller", ex.controller_url, "--job-id", str(log),
                   "--replica-id", str(rid)]  # fmt: skip
            ex.start_service(f"h{8 + rid}", cmd, ready="ready", log_name=f"replica{rid}")
        warm = ex.run_hosts([("h4", kv_cmd(ex, "warm", kv, 0, "--count", "2000"))], timeout=120)
        assert warm[0].code == 0, warm[0].lines
        nr_cmd = [sys.executable, "-m", "hosts.vector_job", "--controller", ex.controller_url,
                  "--job-id", str(nr), "--size", "2048", "--calls", "6", "--seed", "4"]  # fmt: skip
        log_cmd = [sys.executable, "-m", "hosts.consensus.replicated_log", "client", "--controller",
                   ex.controller_url, "--job-id", str(log), "--worker-id", "0", "--count", "40",
                   "--read"]  # fmt: skip
        runs = ex.run_hosts(
            [
                ("h1", [*nr_cmd, "--worker-id", "0", "--out", str(tmp_path / "w0")]),
                ("h2", [*nr_cmd, "--worker-id", "1", "--out", str(tmp_path / "w1")]),
                ("h5", kv_cmd(ex, "check", kv, 1, "--role", "writer", "--count", "40")),
                ("h4", kv_cmd(ex, "check", kv, 0, "--role", "reader", "--count", "150")),
                ("h7", log_cmd),
            ],
            timeout=240,
        )
        for r in runs:
            assert r.code == 0, (r.host, r.lines[-5:])
        drops = ex.drop_counters()
    want = np.stack([expected_sum(4, 2, call, 2048) for call in range(6)])
    for w in (0, 1):
        assert np.array_equal(np.load(tmp_path / f"w{w}.npy"), want)
    writes, reads = last_json(runs[2].lines), last_json(runs[3].lines)
    check_reads(writes, reads)
    assert any(r["cached"] for r in reads)
    out = json.loads(runs[4].lines[-1])
    committed = {(c[2], c[3]) for c in out["committed"]}
    in_log = {(e.client, e.req) for e in distinct([Entry.of([c, q, d.encode().hex()])
                                                   for c, q, d in out["log"]])}  # fmt: skip
    assert len(committed) == 40 and committed <= in_log
    # Nobody's packets were refused. A retransmission whose first copy was already counted
    # (a worker's timeout firing under load) is dropped as DUPLICATE or STALE by design.
    refused = {r: n for r, n in drops.items() if r not in ("DUPLICATE", "STALE")}
    assert sum(refused.values()) == 0, drops
