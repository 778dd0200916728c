"""Adversarial runs on Mininet: a forger host beside one job of every kind sends every flag
combination, with its own and the jobs' ids, spoofed sources, IP options and fragments,
ahead-of-time psns, sequence numbers and sessions; every job's results stay exact and the
switch counts the drops by reason, per job (docs/protocol.md, *Isolation*).

The smallest network that shows it: one star running a job of each of the six kinds at
once, with a forger on h3 that is the one worker of a NetReduce job of its own (so its own
id is bound to its port and it is a tenant, not a stranger).

h1, h2: NetReduce workers answered in the name of h4; h5: a client of a replicated log
whose replicas are h6..h8; h9, h10: a writer and a reader of a key-value cache job served
by h11; h12, h13: ASK word-count mappers whose reducer is h14; h15, h16: ATP workers whose
PS is h17 (sharing the pool); h18, h19: Serene workers under bounded staleness, running
epochs ahead, answered in h4's name too.

Every wait is bounded: a job kind whose hosts do not finish (a forgery that keeps a packet
in flight for good) fails the test by name, with what its hosts said last.

A second, smaller star checks the paths the switch does not parse (plain UDP: the PS and
ring baselines, the host-only key-value path, the ATP PS, a control port) against a forger
that copies members' IPs and UDP ports exactly: the source guard (p4src/source_guard.p4)
stops it at the switch.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from wire.header import DROP_REASONS, DROP_STRIDE, HOST_DROPS, DropReason, Op

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/adversarial-test")

# Runs on h3: argv its own IP, then a JSON list of targets, one per (job, op) under attack:
#   op, victim, own: the op and the two job ids every packet carries in turn;
#   base, step, wrap: header fields; field = (base + n * step) % wrap, n = 256 * sweep + the
#     flag byte ("now" as a base: this host's clock in ms << 8, how clients stamp their
#     psns, so guesses land near them);
#   values: the slots; to: addresses sent to from its own port (INC_UDP_PORT);
#   raw: (source, destination) pairs sent spoofed; parse: one pair whose destination gets,
#     from this host's own address (a spoofed one is SPOOFED_SOURCE before the parser's
#     refusal is reached), packets behind a no-op IPv4 option and as first fragments;
#   ahead: (source, destination) pairs that get, after each sweep, a RESULT of the victim
#     with each n of the sweep (answers ahead of time);
#   atp: (pool offset, size): agg_idx is the pool index ATP hashes the job and psn to.
# One sweep is every flag byte 0..255 for every target (the targets in turn for each byte).
FORGER = r"""
import json, socket, sys, time
import numpy as np
from wire.header import INC_UDP_PORT, Header, atp_index, pack
me, targets = sys.argv[1], json.loads(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", INC_UDP_PORT))
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for sock in (s, raw):  # group addresses leave by the host's one interface
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(me))

def ip(src, dst, payload, options=b"", frag=0):
    ihl = 5 + len(options) // 4
    total = 4 * ihl + len(payload)
    return (bytes([0x40 | ihl, 0, *total.to_bytes(2, "big"), 0, 0, *frag.to_bytes(2, "big"),
                   64, 17, 0, 0]) + socket.inet_aton(src) + socket.inet_aton(dst) + options
            + payload)

def udp(inc):
    return INC_UDP_PORT.to_bytes(2, "big") * 2 + (8 + len(inc)).to_bytes(2, "big") + bytes(2) + inc

def header(t, n, **kw):
    now = (int(time.time() * 1000) << 8) & 0xFFFFFFFF
    fields = {k: ((now if v == "now" else v) + n * t["step"].get(k, 0))
              % t["wrap"].get(k, 1 << 32) for k, v in t["base"].items()}
    if "atp" in t:
        fields["agg_idx"] = atp_index(kw["job_id"], fields["psn"], *t["atp"])
    return Header(op=t["op"], **{**fields, **kw})

sweep = 0
while True:
    for flags in range(256):  # the targets in turn, so that each is under fire all along
        for t in targets:
            values = np.array(t["values"], dtype=np.int32)
            src, dst = t["parse"]
            for job in (t["victim"], t["own"]):
                inc = pack(header(t, 256 * sweep + flags, flags=flags, job_id=job), values)
                for d in t["to"]:
                    s.sendto(inc, (d, INC_UDP_PORT))
                for a, b in t["raw"]:
                    raw.sendto(ip(a, b, udp(inc)), (b, 0))
                raw.sendto(ip(me, dst, udp(inc), options=b"\x01\x01\x01\x00"), (dst, 0))
                raw.sendto(ip(me, dst, udp(inc), frag=0x2000), (dst, 0))
            time.sleep(0.004)
    for t in targets:
        values = np.array(t["values"], dtype=np.int32)
        for p in range(256):
            inc = pack(header(t, 256 * sweep + p, flags=2, job_id=t["victim"]), values)
            for a, b in t["ahead"]:
                raw.sendto(ip(a, b, udp(inc)), (b, 0))
    sweep += 1
"""


def target(op: int, victim: int, own: int, **fields: Any) -> dict[str, Any]:
    """One FORGER target; ``fields``: base, step, wrap, values, to, raw, parse, ahead."""
    return {"op": op, "victim": victim, "own": own, "step": {}, "wrap": {}, "to": [],
            "raw": [], "ahead": [], **fields}  # fmt: skip


def start_net(hosts: int) -> Any:
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(star(hosts), run_dir=RUN_DIR, log=lambda s: None)
    return Experiment(cfg).__enter__()


def _netreduce(ex: Any, name: str, hosts: list[int]) -> int:
    return ex.submit(  # type: ignore[no-any-return]
        name, workers=len(hosts), window=16, worker_ports=hosts,
        worker_ips=[f"10.0.0.{h}" for h in hosts],
        worker_macs=[f"00:00:00:00:00:{h:02x}" for h in hosts],
        agg_ip="10.0.0.4", agg_mac="00:00:00:00:00:04",
    )  # fmt: skip


def ask_job(ex: Any, mappers: list[int], reducer: int) -> int:
    """Submits an ASK job and starts its reducer (as ``topologies.ask.run`` does)."""
    from topologies.experiment import host_ip, host_mac

    job = ex.api.submit({
        "kind": "ask", "name": "wordcount", "workers": len(mappers), "rows": 256,
        "window": 16, "worker_ports": mappers, "worker_ips": [host_ip(h) for h in mappers],
        "worker_macs": [host_mac(h) for h in mappers], "agg_ip": host_ip(reducer),
        "agg_mac": host_mac(reducer), "reducer_port": reducer,
    })["job_id"]  # fmt: skip
    cmd = [sys.executable, "-m", "hosts.ask.run", "reducer", "--controller", ex.controller_url,
           "--job-id", str(job), "--out", str((ex.logs / "ask.json").resolve()),
           "--swap-s", "0.1"]  # fmt: skip
    ex.start_service(f"h{reducer}", cmd, ready="ask reducer ready", log_name="ask-reducer")
    return job  # type: ignore[no-any-return]


def mapper(ex: Any, job: int, worker: int, words: Path) -> list[str]:
    return [sys.executable, "-m", "hosts.ask.run", "mapper", "--controller", ex.controller_url,
            "--job-id", str(job), "--worker-id", str(worker),
            "--input", str(words.resolve()), "--verbose"]  # fmt: skip


def job_drops(ex: Any, job: int) -> dict[str, int]:
    """The switch's drops of packets that named ``job``, by reason (``job_drops``)."""
    cells = ex.read_counter("IncIngress.job_drops")
    return {
        DropReason(r).name: cells.get(job * DROP_STRIDE + r, (0, 0))[0] for r in range(DROP_REASONS)
    }


def serene_job(ex: Any, hosts: list[int]) -> int:
    """A Serene job under bounded staleness (``bounded 1``), answered in h4's name."""
    from topologies.experiment import host_ip, host_mac

    return ex.submit(  # type: ignore[no-any-return]
        "serene", kind="serene", workers=len(hosts), window=16, region_size=16,
        mode="bounded 1", worker_ports=hosts, worker_ips=[host_ip(h) for h in hosts],
        worker_macs=[host_mac(h) for h in hosts], agg_ip=host_ip(4), agg_mac=host_mac(4),
    )  # fmt: skip


SERENE = {"epochs": 8, "size": 128, "seed": 9, "ahead": 2}  # 4 packets an epoch, 3 epochs out


def serene_worker(ex: Any, job: int, worker: int, out: Path) -> list[str]:
    return [sys.executable, "-m", "hosts.serene.worker", "--controller", ex.controller_url,
            "--job-id", str(job), "--worker-id", str(worker), "--out", str(out / f"serene{worker}"),
            *(f"--{k}={v}" for k, v in SERENE.items())]  # fmt: skip


def serene_problems(out: Path, workers: int) -> list[str]:
    """What differs from every epoch's whole, exact sum on every worker (empty: none)."""
    import numpy as np

    from hosts.vector_job import make_vector

    seed, size, epochs = SERENE["seed"], SERENE["size"], SERENE["epochs"]
    want = [sum(make_vector(seed, w, e, size) for w in range(workers)) for e in range(epochs)]
    bad = []
    for w in range(workers):
        rec = json.loads((out / f"serene{w}.json").read_text())
        if "error" in rec or rec.get("dropped"):
            bad.append(f"worker {w}: {rec.get('error')} dropped {rec.get('dropped')}")
            continue
        got = np.load(out / f"serene{w}.npz")
        if not (got["bitmaps"] == (1 << workers) - 1).all():
            bad.append(f"worker {w}: rounds without every worker: {got['bitmaps'].tolist()}")
        bad += [f"worker {w}, epoch {e}: not the sum" for e in range(epochs)
                if not np.array_equal(got["results"][e], want[e])]  # fmt: skip
    return bad


def start_bounded(ex: Any, commands: list[tuple[str, list[str]]], out: Path) -> list[Any]:
    """Starts each (host, argv), its output to ``out/<host>.out`` (``wait_bounded``)."""
    procs = []
    for host, cmd in commands:
        with open(out / f"{host}.out", "wb") as f:
            procs.append((host, ex.popen(host, cmd, stdout=f)))
    return procs


def wait_bounded(ex: Any, procs: list[Any], out: Path, seconds: float) -> dict[str, Any]:
    """Waits ``seconds`` at most for every process; stops those still running. Returns by
    host its exit code (None: stopped) and its last lines."""
    import subprocess
    import time

    deadline = time.monotonic() + seconds
    codes = {}
    for host, p in procs:
        try:
            codes[host] = p.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            codes[host] = None
            ex.stop(p)
    return {h: (codes[h], (out / f"{h}.out").read_text().splitlines()[-2:]) for h, _ in procs}


def test_every_flag_combination_from_a_forger_beside_a_job_of_every_kind_changes_no_result(
    tmp_path: Path,
) -> None:
    """Every flag byte of every op, with each job's id and the forger's own, from its port,
    spoofed in the name of each job's members, behind IPv4 options and as first fragments,
    and answers ahead of time: NetReduce's and ATP's sums stay exact, every Serene round is
    whole and exact, every committed append is in the replicated log and no forged entry is
    in any replica's, key-value reads return exactly what was written, the word counts are
    the mappers'; the switch drops it all as forged results, unknown workers and unparsed
    IPv4, and counts each against the job it named."""
    import subprocess
    import time
    from collections import Counter
    from concurrent.futures import ThreadPoolExecutor

    from hosts.ask.run import read_record
    from hosts.consensus.log_wire import Entry, distinct
    from hosts.kv.store import _values
    from tests.test_mininet_consensus import CAUGHT_UP, client, log_fields, replica, summary
    from tests.test_mininet_kv_cache import check_reads, kv_cmd, kv_fields, last_json
    from topologies.ask_mappers import zipf_text
    from topologies.atp import AtpJob, exact, run_jobs, start_ps, submit_atp
    from topologies.experiment import host_ip

    ip = host_ip
    words = [tmp_path / f"words{w}.txt" for w in range(2)]
    for w, path in enumerate(words):
        zipf_text(path, 15000, seed=w + 1)
    ex = start_net(19)
    forger = None
    try:
        nr = _netreduce(ex, "nr", [1, 2])
        own = _netreduce(ex, "forger", [3])
        log = ex.api.submit(log_fields([5], [6, 7, 8]))["job_id"]
        kv = ex.api.submit(kv_fields([9, 10], 11, cache_size=4, refresh_ms=100))["job_id"]
        ask = ask_job(ex, [12, 13], 14)
        atp = submit_atp(ex, "atp", [15, 16], ps_host=17, window=16, pool=(0, 16))
        ps = start_ps(ex, 17, [atp.job_id])
        ser = serene_job(ex, [18, 19])
        ser_region = ex.api.worker_config(ser, 0)["region_offset"]
        group = ex.api.job(log)["agg_ip"]
        reps = [replica(ex, log, r, first=6) for r in range(3)]
        srv = [sys.executable, "-m", "hosts.kv.store", "server", "--job-id", str(kv),
               "--controller", ex.controller_url]  # fmt: skip
        ex.start_service("h11", srv, ready="kv server", log_name="kv-server")
        junk = [0x01010101] * 32
        forged_log = [0x66666666] * 32  # any entry starting 66 66 66 66 is forged
        forged_kv = [int(x) for x in _values(7, [666] * 8)]
        targets = [
            target(Op.AGG_SYNC, nr, own, base={"psn": 0, "agg_idx": 0, "bitmap": 0b11},
                   step={"psn": 1, "agg_idx": 1}, wrap={"agg_idx": 16}, values=junk,
                   to=[ip(4), ip(1)], raw=[(ip(4), ip(1)), (ip(2), ip(4))],
                   parse=(ip(2), ip(4)), ahead=[(ip(4), ip(1)), (ip(4), ip(2))]),
            # a request of client 0 and a replica's numbered one, sequence numbers and
            # sessions ahead; votes in the replicas' names
            target(Op.CONSENSUS, log, own, base={"psn": "now", "agg_idx": 1, "epoch": 1},
                   step={"psn": 1, "agg_idx": 1, "epoch": 0x01000193}, values=forged_log,
                   to=[group, ip(6), ip(7)],
                   raw=[(ip(5), group), (ip(5), ip(6)), (ip(6), ip(7)), (ip(6), ip(5))],
                   parse=(ip(5), group), ahead=[(ip(6), ip(5)), (ip(7), ip(5))]),
            *(target(op, kv, own, base={"psn": "now", "bitmap": 1 << 30}, step={"psn": 1},
                     values=forged_kv, to=[ip(11), ip(9)],
                     raw=[(ip(9), ip(11)), (ip(11), ip(9)), (ip(11), ip(10))],
                     parse=(ip(9), ip(11)), ahead=[(ip(11), ip(9)), (ip(11), ip(10))])
              for op in (Op.KV_READ, Op.KV_WRITE)),
            # a mapper's tuples and fallbacks, the reducer's ACKs and drained rows
            target(Op.AGG_KV, ask, own, base={"psn": 0, "agg_idx": 0, "epoch": 0,
                   "bitmap": 0x5A5A}, step={"psn": 1, "agg_idx": 1, "epoch": 1},
                   wrap={"agg_idx": 256, "epoch": 8},
                   values=junk, to=[ip(14), ip(12)],
                   raw=[(ip(12), ip(14)), (ip(14), ip(12)), (ip(14), ip(13))],
                   parse=(ip(12), ip(14)), ahead=[(ip(14), ip(12)), (ip(14), ip(13))]),
            # a worker's pieces at the pool index of their psn, the PS's results and ACKs,
            # fallback pieces naming both workers, WAITs and collisions
            target(Op.AGG_SYNC, atp.job_id, own, base={"psn": 0, "bitmap": 0b11},
                   step={"psn": 1}, atp=(0, 16), values=junk, to=[ip(17), ip(15)],
                   raw=[(ip(15), ip(17)), (ip(17), ip(15)), (ip(16), ip(17))],
                   parse=(ip(15), ip(17)), ahead=[(ip(17), ip(15)), (ip(17), ip(16))]),
            # contributions over the job's region and epochs ahead, WAITs, running sums
            target(Op.AGG_SYNC, ser, own, base={"psn": 0, "agg_idx": ser_region, "epoch": 0,
                   "bitmap": 0b11}, step={"psn": 1, "agg_idx": 1, "epoch": 1},
                   wrap={"agg_idx": ser_region + 16, "epoch": 16}, values=junk,
                   to=[ip(4), ip(18)], raw=[(ip(18), ip(4)), (ip(4), ip(18)), (ip(19), ip(4))],
                   parse=(ip(18), ip(4)), ahead=[(ip(4), ip(18)), (ip(4), ip(19))]),
        ]  # fmt: skip
        cmd = [sys.executable, "-c", FORGER, ip(3), json.dumps(targets)]
        forger = ex.popen("h3", cmd, stdout=subprocess.DEVNULL)
        # The forger is under way (a sweep reached the switch) before the jobs start.
        deadline = time.monotonic() + 90
        while ex.drop_counters().get("UNPARSED_IPV4", 0) < 200:
            assert forger.poll() is None, "the forger died"
            assert time.monotonic() < deadline, ex.drop_counters()
            time.sleep(0.2)
        jobs = (nr, log, kv, ask, atp.job_id, ser)
        before = {j: job_drops(ex, j) for j in jobs}
        size, calls = 4000, 2
        with ThreadPoolExecutor(1) as pool:
            sums = pool.submit(run_jobs, ex, [AtpJob(nr, (1, 2), "netreduce"), atp], tmp_path,
                               size, calls, 80, "--bits", "24", timeout=120)  # fmt: skip
            warm = ex.run_hosts([("h5", client(ex, log, 0, 20)),
                                 ("h9", kv_cmd(ex, "warm", kv, 0, "--count", "500"))],
                                timeout=120)  # fmt: skip
            mappers = start_bounded(ex, [(f"h{12 + w}", mapper(ex, ask, w, words[w]))
                                         for w in range(2)], tmp_path)  # fmt: skip
            runs = ex.run_hosts(
                [("h5", client(ex, log, 0, 20)),
                 ("h9", kv_cmd(ex, "check", kv, 0, "--role", "writer", "--count", "40")),
                 ("h10", kv_cmd(ex, "check", kv, 1, "--role", "reader", "--count", "150")),
                 *((f"h{18 + w}", serene_worker(ex, ser, w, tmp_path)) for w in range(2))],
                timeout=120,
            )  # fmt: skip
            got = sums.result()
        # ASK: the mappers are done (the reducer has every count) within a bound
        done = wait_bounded(ex, mappers, tmp_path, 30)
        assert all(c == 0 for c, _ in done.values()), (
            f"ASK mappers not done in 30 s (exit code, last lines): {done}; the switch's"
            f" drops of the job: {job_drops(ex, ask)}")  # fmt: skip
        final = ex.run_hosts([("h5", client(ex, log, 0, 0, "--read"))])
        for r in (*warm, *runs, *final):
            assert r.code == 0, (r.host, r.lines[-3:])
        drops = ex.drop_counters()
        after = {j: job_drops(ex, j) for j in jobs}
        key = ex.api.control_key(log).hex()
        caught = ex.run_hosts([("h5", [sys.executable, "-c", CAUGHT_UP, key,
                                       *(ip(r) for r in (6, 7, 8))])])  # fmt: skip
        lens = json.loads(caught[0].lines[-1])
        deadline = time.monotonic() + 10
        while not (ex.logs / "ask.json").exists():
            assert time.monotonic() < deadline, "the ASK reducer wrote no record within 10 s"
            time.sleep(0.1)
        counts = read_record(ex.logs / "ask.json")
        for p in (*reps, ps):
            ex.stop(p)
    finally:
        if forger is not None:
            ex.stop(forger)
        ex.close()
    assert len(lens) == 3 and len(set(lens.values())) == 1, lens
    # NetReduce and ATP: the sums are exact and nothing of the forger's reaches the workers
    # (their own filters, by wire.header.HostDrop, refuse nothing: the switch is the trust
    # anchor), nor ATP's PS (it drops pieces naming workers the job has not: none came).
    for j in (nr, atp.job_id):
        assert exact(got[j], 80 + j, size, calls, bits=24) == [], j
        assert [g["rec"]["stats"]["drops"] for g in got[j]] == [[0] * HOST_DROPS] * 2, j
    ps_stats = (ex.logs / "h17.log").read_text().splitlines()[-1]
    assert re.search(r"\bforged=0\b", ps_stats) and re.search(r"\bignored=0\b", ps_stats), ps_stats
    # Serene: every round of every epoch whole (both workers) and exact, on both workers,
    # and their filters refused nothing.
    assert serene_problems(tmp_path, 2) == []
    # The replicated log: every committed append in the leader's log, the replicas' logs
    # the same, no forged entry in any.
    results = [json.loads(r.lines[-1]) for r in (warm[0], runs[0])]
    committed = {(c[2], c[3]): c[4] for res in results for c in res["committed"]}
    assert len(committed) == 40
    leader_view = {(c, q): d for c, q, d in json.loads(final[0].lines[-1])["log"]}
    assert committed.items() <= leader_view.items(), "a committed append is missing"
    logs = [summary(ex, r) for r in range(3)]
    views = [distinct([Entry.of(e) for e in s["log"]]) for s in logs]
    assert views[0] == views[1] == views[2], [len(v) for v in views]
    forged = [(r, e) for r, v in enumerate(views) for e in v if e.data.startswith(b"\x66" * 4)]
    assert forged == [], f"forged entries in replicas' logs: {forged[:3]}"
    assert len({s["session"] for s in logs}) == 1, logs
    # The key-value cache: every read is a write's value, never stale, never forged.
    writes, reads = last_json(runs[1].lines), last_json(runs[2].lines)
    check_reads(writes, reads)
    assert all(r["val"] != 666 for r in reads)
    # ... and no other write took a version: the writer's are 1..40, the server applied no
    # more, and refused nothing (nothing of the forger's reached it: the switch is the anchor).
    assert [w["ver"] for w in writes] == list(range(1, 41)), [w["ver"] for w in writes]
    server = last_json((ex.logs / "kv-server.log").read_text().splitlines())
    assert server["writes"] == 40 and server["drops"] == [0] * HOST_DROPS, server
    # ASK: the counts are those of the mappers' files, nothing more.
    want_counts = Counter(w for path in words for w in path.read_text().split())
    assert Counter(counts["result"]) == want_counts, "reducer counts differ from Counter"
    assert counts["reducer"]["drained_tuples"] > 0, "nothing was aggregated in the switch"
    # The switch: per sweep and job, hundreds of forged flagged packets, of the job's id
    # unflagged from the forger's port, behind options or in a fragment.
    want = {"FORGED_RESULT": 200, "UNKNOWN_WORKER": 8, "UNPARSED_IPV4": 200,
            "SPOOFED_SOURCE": 200}  # fmt: skip
    assert all(drops[k] >= n for k, n in want.items()), str(drops)
    grew = {j: {k: after[j][k] - before[j][k] for k in after[j]} for j in after}
    # Against each job: its flagged packets are forged results (no binding of the job allows
    # them from the forger's port), its unflagged ones unknown workers. Key-value ops have no
    # result binding to check: the switch refuses every one from a port no client or server
    # of the job is on. (Options and fragments are dropped before the job id is read.)
    # What it sent in members' names (IP and UDP port) never got that far: the source guard
    # dropped it, counted against the job it named.
    flagged = {"FORGED_RESULT": 200, "UNKNOWN_WORKER": 8, "SPOOFED_SOURCE": 200}
    by_job = ((kv, {"UNKNOWN_WORKER": 200, "SPOOFED_SOURCE": 200}),
              *((j, flagged) for j in jobs if j != kv))  # fmt: skip
    for j, reasons in by_job:
        assert all(grew[j][k] >= n for k, n in reasons.items()), (j, grew[j])


# --- the paths the switch does not parse: the source guard ----------------------------------

# Runs on the forger: argv its progress file and a JSON file of targets [src IP, dst IP, UDP
# port, [payload hex, ...]]; sends every payload from src:port to dst:port (a member's
# address and port, exactly), sweep after sweep, and writes the sweeps done to the file.
SPOOFER = r"""
import json, socket, sys, time
done, targets = sys.argv[1], json.loads(open(sys.argv[2]).read())
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)

def datagram(src, dst, port, payload):
    udp = port.to_bytes(2, "big") * 2 + (8 + len(payload)).to_bytes(2, "big") + bytes(2)
    total = 28 + len(payload)
    ip = (bytes([0x45, 0, *total.to_bytes(2, "big"), 0, 0, 0x40, 0, 64, 17, 0, 0])
          + socket.inet_aton(src) + socket.inet_aton(dst))
    return ip + udp + payload

frames = [(datagram(s, d, p, bytes.fromhex(x)), d) for s, d, p, xs in targets for x in xs]
sweep = 0
while True:
    for i, (f, d) in enumerate(frames):
        raw.sendto(f, (d, 0))
        if i % 16 == 15:
            time.sleep(0.002)
    sweep += 1
    with open(done, "w") as out:
        out.write(str(sweep))
"""

# Runs on the key-value storage host: inclib.KvStorage of a host-only plan (one client, on
# h10), until SIGTERM; then its counters as JSON.
KV_STORAGE = r"""
import json, signal, sys, threading
from inclib.kv import KvStorage
from inclib.plan import Plan
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # taken by sigwait below
storage = KvStorage(Plan("", 1, (sys.argv[1],), kind="kv_cache", reducer=sys.argv[2]))
threading.Thread(target=storage.serve, daemon=True).start()
print("kv storage ready", flush=True)
signal.sigwait([signal.SIGTERM])
s = storage.server.stats
print(json.dumps({"writes": s.writes, "reads": s.reads, "drops": s.drops}), flush=True)
"""

# Runs on the key-value client: writes KEY n times, then reads it; the versions and value.
KV_WRITER = r"""
import json, sys
from hosts.kv.store import KvClient, KvConfig
from hosts.transport.udp import Endpoint
from inclib.kv import HOST_JOB_ID, HOST_KV_PORT
key, n = int(sys.argv[2]), int(sys.argv[3])
c = KvClient(KvConfig(HOST_JOB_ID, 0, sys.argv[1], port=HOST_KV_PORT),
             Endpoint(("0.0.0.0", HOST_KV_PORT)))
versions = [c.put(key, [i] * 8) for i in range(1, n + 1)]
print(json.dumps({"versions": versions, "value": c.get(key)}), flush=True)
"""


def spoofed_targets(ex: Any, ps_job: int, ring_job: int, atp_job: int) -> list[Any]:
    """What the forger sends, each in a member's name (IP and UDP port exactly): (a) the PS
    baseline worker 0's contributions, every psn of the run, ahead of it; (b) ring data of
    each rank to the other, every packet of both calls; (c) host-only key-value writes in
    the client's name; (d) all-worker RESULTs of the ATP job to its PS in a worker's name;
    (e) datagrams to the replicas' control port in replica 0's name."""
    import numpy as np

    from hosts.consensus.log_wire import CTL_PORT
    from hosts.kv.store import _values
    from hosts.netreduce.ps import PS_UDP_PORT
    from hosts.netreduce.ring import RING_UDP_PORT
    from inclib.kv import HOST_JOB_ID, HOST_KV_PORT
    from topologies.experiment import host_ip as ip
    from wire.header import Flag, Header, aggregator_address, pack

    junk = np.full(32, 0x01010101, dtype=np.int32)
    cfg = ex.api.worker_config(ps_job, 0)

    def ps(psn: int) -> bytes:
        idx, ver = aggregator_address(psn, cfg["region_offset"], cfg["region_size"])
        return pack(Header(job_id=ps_job, worker_id=0, psn=psn, agg_idx=idx, ver=ver), junk)

    def ring(rank: int, call: int, step: int, j: int) -> bytes:  # calls count from 1
        h = Header(job_id=ring_job, worker_id=rank, psn=j, agg_idx=step, epoch=call)
        return pack(h, junk)

    kv = [pack(Header(op=Op.KV_WRITE, job_id=HOST_JOB_ID, worker_id=0, psn=p),
               _values(KV_KEY, [666] * 8)) for p in range(256)]  # fmt: skip
    atp = [pack(Header(job_id=atp_job, psn=p, flags=Flag.RESULT, bitmap=0b11), junk)
           for p in range(256)]  # fmt: skip
    ring_packets = [(r, c, t, j) for r in (0, 1) for c in (1, 2) for t in (0, 1)
                    for j in range(64)]  # fmt: skip
    hexes = lambda ps: [p.hex() for p in ps]  # noqa: E731
    return [
        [ip(1), ip(4), PS_UDP_PORT, hexes(ps(p) for p in range(256))],
        [ip(5), ip(6), RING_UDP_PORT, hexes(ring(*x) for x in ring_packets if x[0] == 0)],
        [ip(6), ip(5), RING_UDP_PORT, hexes(ring(*x) for x in ring_packets if x[0] == 1)],
        [ip(10), ip(9), HOST_KV_PORT, hexes(kv)],
        [ip(7), ip(4), 20050, hexes(atp)],
        *([ip(11), ip(r), CTL_PORT, [(b"\x00" * 40 + bytes([i])).hex() for i in range(32)]]
          for r in (12, 13)),
    ]  # fmt: skip


KV_KEY = 7


def test_a_forger_in_members_names_on_paths_the_switch_does_not_parse_reaches_no_host(
    tmp_path: Path,
) -> None:
    """A host on its own switch port copies members' IPs and UDP ports exactly, on the
    paths past the switch's INC guards: (a) the PS baseline, (b) the ring baseline, (c) the
    host-only key-value path (inclib.KvStorage), (d) the ATP PS (an all-worker RESULT) and
    (e) the replicas' control port. The source guard drops all of it at the switch: every
    sum is exact, the key-value versions are the writer's 1..n, the PS, storage, ATP PS and
    replicas refuse nothing (nothing reached them), and the switch counts SPOOFED_SOURCE,
    in all, against no job for plain UDP and against the ATP job for its RESULTs."""
    import subprocess
    import time

    import numpy as np

    from tests.test_mininet_consensus import log_fields, replica, summary
    from topologies.atp import AtpJob, exact, start_ps, submit_atp, vector_cmd
    from topologies.experiment import host_ip as ip

    ex = start_net(13)
    forger = None
    try:
        ps_job = _netreduce(ex, "ps-baseline", [1, 2])
        ring_job = ex.submit("ring", workers=2, window=16, worker_ports=[5, 6],
                             worker_ips=[ip(5), ip(6)],
                             worker_macs=["00:00:00:00:00:05", "00:00:00:00:00:06"],
                             agg_ip=ip(4), agg_mac="00:00:00:00:00:04")  # fmt: skip
        atp = submit_atp(ex, "atp", [7, 8], ps_host=4, window=16, pool=(0, 16))
        log = ex.api.submit(log_fields([10], [11, 12, 13]))["job_id"]
        atp_ps = start_ps(ex, 4, [atp.job_id])
        ps_cmd = [sys.executable, "-m", "hosts.netreduce.ps", "--workers", "2",
                  "--worker-ip", ip(1), "--worker-ip", ip(2)]  # fmt: skip
        ps = ex.start_service("h4", ps_cmd, ready="parameter server on", log_name="ps")
        kv = ex.start_service("h9", [sys.executable, "-c", KV_STORAGE, ip(10), ip(9)],
                              ready="kv storage ready", log_name="kv-storage")  # fmt: skip
        reps = [replica(ex, log, r, first=11) for r in range(3)]
        targets = tmp_path / "targets.json"
        targets.write_text(json.dumps(spoofed_targets(ex, ps_job, ring_job, atp.job_id)))
        sweeps = tmp_path / "sweeps"
        cmd = [sys.executable, "-c", SPOOFER, str(sweeps), str(targets)]
        forger = ex.popen("h3", cmd, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not sweeps.exists() or int(sweeps.read_text() or 0) < 2:
            assert forger.poll() is None, "the forger died"
            assert time.monotonic() < deadline, "the forger did not sweep twice in 60 s"
            time.sleep(0.2)
        size, calls, seed = 4000, 2, 40
        jobs = [(AtpJob(ps_job, (1, 2)), "ps"), (AtpJob(ring_job, (5, 6)), "ring"),
                (atp, "switch")]  # fmt: skip
        cmds = [
            (f"h{h}", vector_cmd(ex, j, w, tmp_path, size, calls, seed + j.job_id,
                                 "--bits", "24", "--method", method,
                                 *(("--peers", f"{ip(5)},{ip(6)}") if method == "ring" else ())))
            for j, method in jobs for w, h in enumerate(j.hosts)
        ]  # fmt: skip
        cmds.append(("h10", [sys.executable, "-c", KV_WRITER, ip(9), str(KV_KEY), "30"]))
        runs = ex.run_hosts(cmds, timeout=120)
        drops = ex.drop_counters()
        by_job = {j: job_drops(ex, j) for j in (0, atp.job_id)}
        for p in (*reps, ps, atp_ps, kv):
            ex.stop(p)
    finally:
        if forger is not None:
            ex.stop(forger)
        ex.close()
    for r in runs:
        assert r.code == 0, (r.host, r.lines[-3:])
    # (a), (b), (d): every sum exact
    for j, _ in jobs:
        got = [{"code": 0, "rec": json.loads((tmp_path / f"j{j.job_id}w{w}.json").read_text()),
                "res": np.load(tmp_path / f"j{j.job_id}w{w}.npy")}
               for w in range(2)]  # fmt: skip
        assert exact(got, seed + j.job_id, size, calls, bits=24) == [], j
    # (a) the PS took nothing from another host's claims: none reached it
    ps_stats = (ex.logs / "ps.log").read_text().splitlines()[-1]
    assert re.search(r"\bspoofed 0\b", ps_stats), ps_stats
    # (c) the writer's versions are 1..30, its value the last; the storage wrote nothing else
    kv_run = json.loads(runs[-1].lines[-1])
    assert kv_run["versions"] == list(range(1, 31)) and kv_run["value"] == [30] * 8, kv_run
    storage = json.loads((ex.logs / "kv-storage.log").read_text().splitlines()[-1])
    assert storage["writes"] == 30 and storage["drops"] == [0] * HOST_DROPS, storage
    # (d) the ATP PS saw no forged piece and ignored nothing
    atp_stats = (ex.logs / "h4.log").read_text().splitlines()[-1]
    assert re.search(r"\bforged=0\b", atp_stats) and re.search(r"\bignored=0\b", atp_stats)
    # (e) no replica got a datagram it could not open
    for r in range(3):
        stats = summary(ex, r)["stats"]
        assert stats.get("dropped_tag", 0) == 0 == stats.get("dropped_sender", 0), (r, stats)
    # The switch counted it: in all, against no job (plain UDP), against the ATP job.
    assert drops["SPOOFED_SOURCE"] >= 1000, drops
    assert by_job[0]["SPOOFED_SOURCE"] >= 500, by_job[0]
    assert by_job[atp.job_id]["SPOOFED_SOURCE"] >= 200, by_job[atp.job_id]
