"""The replicated log on Mininet (root): three replicas and two clients in Mininet hosts, the
p4sim switch sequencing and multicasting every request, links that lose, duplicate and
reorder frames. A follower is killed and restarted, then the switch itself restarts (its
counter is lost; the controller gives the group a new session) while clients append. No
committed append is lost: every one is in the leader's log, and all replicas end with the
same log.

h1, h2: clients; h3..h5: replicas 0..2 (replica 0 leads); h6: a client of another
consensus job (another tenant) that forges requests in the name of the first job.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/consensus-test")

FORGE = """
import json, socket, sys
import numpy as np
from wire.header import Header, Op, pack, INC_UDP_PORT, SLOTS
job, n, group = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("10.0.0.6"))
for i in range(n):  # client 0 of the job, but from another port
    h = Header(op=Op.CONSENSUS, job_id=job, worker_id=0, psn=1000 + i)
    s.sendto(pack(h, np.full(SLOTS, 0x66, np.int32)), (group, INC_UDP_PORT))
# a START of a later view (led by replica 1) that would replace every replica's log, and a
# read of the log: not sealed with the job's key, so dropped and counted
start = {"t": "START", "s": 0, "base": 0, "e": [[0, 1, "66" * 8]], "r": 1, "v": 4}
for ip in sys.argv[4:] * 5:  # five times each: the links lose some
    s.sendto(json.dumps(start).encode(), (ip, INC_UDP_PORT + 1))
    s.sendto(json.dumps({"t": "READ", "from": 0}).encode(), (ip, INC_UDP_PORT + 1))
print("forged", n)
"""


def log_fields(clients: list[int], replicas: list[int]) -> dict[str, Any]:
    from topologies.experiment import host_ip, host_mac

    return {
        "kind": "consensus",
        "workers": len(clients),
        "worker_ports": clients,
        "worker_ips": [host_ip(h) for h in clients],
        "worker_macs": [host_mac(h) for h in clients],
        "replicas": len(replicas),
        "replica_ports": replicas,
        "replica_ips": [host_ip(h) for h in replicas],
        "replica_macs": [host_mac(h) for h in replicas],
    }


def replica(ex: Any, job: int, rid: int, first: int = 3) -> Any:
    """Replica ``rid`` of ``job`` on host ``h{first + rid}``, once it is ready."""
    cmd = [sys.executable, "-m", "hosts.consensus.replicated_log", "replica",
           "--controller", ex.controller_url, "--job-id", str(job),
           "--replica-id", str(rid)]  # fmt: skip
    return ex.start_service(f"h{first + rid}", cmd, ready="ready", log_name=f"replica{rid}")


def client(ex: Any, job: int, worker: int, count: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hosts.consensus.replicated_log", "client",
            "--controller", ex.controller_url, "--job-id", str(job), "--worker-id", str(worker),
            "--count", str(count), *extra]  # fmt: skip


def summary(ex: Any, rid: int) -> dict[str, Any]:
    lines = (ex.logs / f"replica{rid}.log").read_text().splitlines()
    return json.loads(next(x for x in reversed(lines) if x.startswith("{")))


#: waits until every replica (IPs after the job's control key) answers a READ with the same
#: log length (reads are sealed with the job's key)
CAUGHT_UP = """
import json, socket, sys, time
from hosts.consensus.log_wire import CTL_PORT
from hosts.transport.control_mac import ControlMac
mac, ips = ControlMac(bytes.fromhex(sys.argv[1])), sys.argv[2:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.3)
end, lens = time.monotonic() + 30, {}
while time.monotonic() < end:
    lens = {}
    for ip in ips:
        s.sendto(mac.seal(json.dumps({"t": "READ", "from": 0}).encode()), (ip, CTL_PORT))
        try:
            got = json.loads(mac.open(s.recvfrom(65535)[0]) or b"{}")
        except (OSError, ValueError):
            continue
        lens[got["r"]] = got["len"]
    if len(lens) == len(ips) and len(set(lens.values())) == 1:
        break
    time.sleep(0.2)
print(json.dumps(lens))
"""


def test_no_committed_append_is_lost_across_loss_a_replica_restart_and_a_switch_restart():
    from hosts.consensus.log_wire import Entry, distinct
    from topologies.experiment import Experiment, ExperimentConfig, host_ip, star
    from topologies.impair_relay import Impairment

    imp = Impairment(loss=0.03, dup=0.02, reorder=0.05, seed=5)
    cfg = ExperimentConfig(star(6), impairment=imp, run_dir=RUN_DIR, log=lambda s: None)
    with Experiment(cfg) as ex:
        job = ex.api.submit(log_fields([1, 2], [3, 4, 5]))["job_id"]
        other = ex.api.submit(log_fields([6], [3, 4, 5]))["job_id"]
        reps = [replica(ex, job, r) for r in range(3)]
        first = ex.run_hosts([("h1", client(ex, job, 0, 30)), ("h2", client(ex, job, 1, 30))])
        assert all(r.code == 0 for r in first), [r.lines[-3:] for r in first]
        ex.stop(reps[2])  # a follower crashes ...
        during = ex.run_hosts([("h1", client(ex, job, 0, 20))])
        reps[2] = replica(ex, job, 2)  # ... and comes back empty
        drops_before = ex.drop_counters()
        mixed = ex.run_hosts(
            [("h2", client(ex, job, 1, 30)),
             ("h6", [sys.executable, "-c", FORGE, str(job), "20", ex.api.job(job)["agg_ip"],
                     *(host_ip(3 + r) for r in range(3))])]
        )  # fmt: skip
        drops = ex.drop_counters()
        sw = ex.switch("s1")  # the switch restarts: counter lost, new session from the daemon
        sw.stop_process()
        sw.start([])
        after = ex.run_hosts([("h1", client(ex, job, 0, 20)), ("h2", client(ex, job, 1, 10))])
        final = ex.run_hosts([("h1", client(ex, job, 0, 0, "--read"))])
        for r in (*during, *mixed, *after, *final):
            assert r.code == 0, (r.host, r.lines[-3:])
        # heartbeats let every follower fetch the tail, the restarted one its whole log:
        # wait (up to 30 s) until every replica holds as many entries, then compare them
        replica_ips = [host_ip(3 + r) for r in range(3)]
        key = ex.api.control_key(job).hex()
        caught = ex.run_hosts([("h1", [sys.executable, "-c", CAUGHT_UP, key, *replica_ips])])
        lens = json.loads(caught[0].lines[-1])
        assert len(lens) == 3 and len(set(lens.values())) == 1, lens
        for p in reps:
            ex.stop(p)
        assert ex.api.job(other)["kind"] == "consensus"
    results = [json.loads(r.lines[-1]) for r in (*first, *during, *mixed[:1], *after)]
    committed = {(c[2], c[3]): c[4] for res in results for c in res["committed"]}
    assert len(committed) == 30 + 30 + 20 + 30 + 20 + 10
    leader_view = {(c, q): d for c, q, d in json.loads(final[0].lines[-1])["log"]}
    assert committed.items() <= leader_view.items(), "a committed append is missing"
    logs = [summary(ex, r) for r in range(3)]
    views = [distinct([Entry.of(e) for e in s["log"]]) for s in logs]
    assert views[0] == views[1] == views[2], [len(v) for v in views]
    assert all(c >= 0 for c, _, _ in (e for e in views[0]))
    assert not any(e.data.startswith(b"\x66" * 4) for e in views[0])  # no forged request
    assert drops["UNKNOWN_WORKER"] - drops_before["UNKNOWN_WORKER"] >= 20
    tags = [s["stats"].get("dropped_tag", 0) for s in logs[:2]]  # replica 2 restarted since
    assert min(tags) >= 1 and sum(tags) >= 10, [s["stats"] for s in logs]
    # One session at the end, entered after the switch restart (while the switch was down,
    # the followers heard no leader and may have changed view too).
    assert len({s["session"] for s in logs}) == 1, logs
    assert sum(s["stats"].get("sessions", 0) for s in logs) >= 2, [s["stats"] for s in logs]
    # The restarted replica came back empty and fetched the log (a sync, never a fresh boot);
    # the switch restart's new session reached it by a second sync or by a view change.
    st = logs[2]["stats"]
    assert st.get("syncs", 0) >= 1 and st.get("syncs", 0) + st.get("view_changes", 0) >= 2, st


def test_the_log_survives_the_leaders_crash_and_restart():
    """Replica 0 leads view 0 and is killed: the followers change view (replica 1 leads,
    having merged its log with replica 2's), clients keep committing; replica 0 comes back
    empty and copies the new leader's log. Nothing committed is lost."""
    from hosts.consensus.log_wire import Entry, distinct
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(star(5), run_dir=RUN_DIR, log=lambda s: None)
    with Experiment(cfg) as ex:
        job = ex.api.submit(log_fields([1, 2], [3, 4, 5]))["job_id"]
        reps = [replica(ex, job, r) for r in range(3)]
        runs = ex.run_hosts([("h1", client(ex, job, 0, 20)), ("h2", client(ex, job, 1, 20))])
        ex.stop(reps[0])  # the leader crashes
        runs += ex.run_hosts([("h1", client(ex, job, 0, 20)), ("h2", client(ex, job, 1, 20))])
        reps[0] = replica(ex, job, 0)  # ... and comes back empty
        runs += ex.run_hosts([("h1", client(ex, job, 0, 10)), ("h2", client(ex, job, 1, 10))])
        final = ex.run_hosts([("h1", client(ex, job, 0, 0, "--read"))])
        for r in (*runs, *final):
            assert r.code == 0, (r.host, r.lines[-3:])
        time.sleep(0.5)
        for p in reps:
            ex.stop(p)
    committed = {(c[2], c[3]) for r in runs for c in json.loads(r.lines[-1])["committed"]}
    assert len(committed) == 100
    in_log = {(c, q) for c, q, _ in json.loads(final[0].lines[-1])["log"]}
    assert committed <= in_log, "a committed append is missing"
    logs = [summary(ex, r) for r in range(3)]
    views = [distinct([Entry.of(e) for e in s["log"]]) for s in logs]
    assert views[0] == views[1] == views[2], [len(v) for v in views]
    assert {s["view"] for s in logs} == {1}, [(s["view"], s["stats"]) for s in logs]
