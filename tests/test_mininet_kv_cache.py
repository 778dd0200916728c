"""The key-value cache on Mininet (root): clients and a storage server in Mininet hosts, the
p4sim switch caching the hot key the controller picked, every link losing, duplicating and
reordering frames (impairment relays). One client writes a key over and over while another
reads it; every read is checked against the writes that had completed when it started.

h1, h2: clients of job A; h3: its storage server; h4: a client of job B (another tenant)
that forges job A's packets, which the switch drops and counts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/kv-cache-test")
KEY = 7

FORGE = """
import socket, sys
from wire.header import Flag, Header, Op, pack, INC_UDP_PORT
from hosts.kv.store import _values
job, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", INC_UDP_PORT))
for i in range(n):
    # a server reply of job A with a huge version, and a write in the name of A's client 0
    r = Header(op=Op.KV_READ, flags=Flag.RESULT, job_id=job, agg_idx=i, bitmap=1 << 30)
    s.sendto(pack(r, _values(7, [666] * 8)), ("10.0.0.1", INC_UDP_PORT))
    w = Header(op=Op.KV_WRITE, job_id=job, worker_id=0, psn=i)
    s.sendto(pack(w, _values(7, [666] * 8)), ("10.0.0.3", INC_UDP_PORT))
print("forged", 2 * n)
"""


def kv_fields(clients: list[int], server: int, **extra: Any) -> dict[str, Any]:
    from topologies.experiment import host_ip, host_mac

    return {
        "kind": "kv_cache",
        "workers": len(clients),
        "worker_ports": clients,
        "worker_ips": [host_ip(h) for h in clients],
        "worker_macs": [host_mac(h) for h in clients],
        "agg_ip": host_ip(server),
        "agg_mac": host_mac(server),
        "server": server,
        **extra,
    }


def kv_cmd(ex: Any, sub: str, job: int, worker: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "hosts.kv.store", sub, "--controller", ex.controller_url,
            "--job-id", str(job), "--worker-id", str(worker), "--key", str(KEY), *args]  # fmt: skip


def last_json(lines: list[str]) -> Any:
    return json.loads(next(line for line in reversed(lines) if line.startswith(("[", "{"))))


def check_reads(writes: list[dict[str, Any]], reads: list[dict[str, Any]]) -> None:
    """Every read returns a whole value of a write (or the initial 0), never older than
    the newest write completed before the read started, never newer than one started."""
    by_version = {w["ver"]: w["val"] for w in writes} | {0: 0}
    versions = [w["ver"] for w in writes]
    assert versions == sorted(versions) and len(set(versions)) == len(versions), versions
    for r in reads:
        assert r["whole"], r
        assert by_version.get(r["ver"]) == r["val"], f"value of no write: {r}"
        done = [w["ver"] for w in writes if w["e"] < r["s"]]
        assert r["ver"] >= max(done, default=0), f"stale read {r}: completed {max(done)}"
        started = [w["ver"] for w in writes if w["s"] < r["e"]]
        assert r["ver"] <= max(started, default=0), f"read from the future: {r}"


def test_reads_never_return_a_value_older_than_a_completed_write_under_loss_and_reordering():
    from topologies.experiment import Experiment, ExperimentConfig, star
    from topologies.impair_relay import Impairment

    imp = Impairment(loss=0.03, dup=0.03, reorder=0.05, seed=12)
    cfg = ExperimentConfig(star(5), impairment=imp, run_dir=RUN_DIR, log=lambda s: None)
    with Experiment(cfg) as ex:
        a = ex.api.submit(kv_fields([1, 2], 3, cache_size=4, refresh_ms=100))["job_id"]
        b = ex.api.submit(kv_fields([4], 5, cache_size=4))["job_id"]
        srv = [sys.executable, "-m", "hosts.kv.store", "server", "--job-id", str(a),
               "--controller", ex.controller_url]  # fmt: skip
        ex.start_service("h3", srv, ready="kv server", log_name="kv-server")
        warm = ex.run_hosts([("h1", kv_cmd(ex, "warm", a, 0, "--count", "2000"))], timeout=120)
        assert warm[0].code == 0, warm[0].lines
        drops_before = ex.drop_counters()
        runs = ex.run_hosts(
            [
                ("h2", kv_cmd(ex, "check", a, 1, "--role", "writer", "--count", "60")),
                ("h1", kv_cmd(ex, "check", a, 0, "--role", "reader", "--count", "300")),
                ("h4", [sys.executable, "-c", FORGE, str(a), "20"]),
            ],
            timeout=240,
        )
        for run in runs:
            assert run.code == 0, (run.host, run.lines[-5:])
        drops = ex.drop_counters()
        assert ex.api.job(b)["kind"] == "kv_cache"
    writes, reads = last_json(runs[0].lines), last_json(runs[1].lines)
    check_reads(writes, reads)
    assert len(writes) == 60 and writes[-1]["ver"] >= 60
    assert any(r["cached"] and r["ver"] > 0 for r in reads), "no written value served by switch"
    assert all(r["val"] != 666 for r in reads)
    # Every forged frame that reached the switch was dropped as from an unknown worker.
    forged = drops["UNKNOWN_WORKER"] - drops_before["UNKNOWN_WORKER"]
    assert forged >= 20, (drops_before, drops)
    relays = ex.relay_stats()
    assert sum(s.get("dropped", 0) for s in relays.values()) > 0, relays
    assert sum(s.get("reordered", 0) for s in relays.values()) > 0, relays
