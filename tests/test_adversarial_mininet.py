"""Adversarial runs on Mininet: a forger host beside a job sends every flag combination,
with its own and the job's ids, spoofed sources, IP options and fragments; the job's sums
stay exact and the switch counts the drops by reason (docs/protocol.md, *Isolation*).

The smallest network that shows it: a star of four hosts, a NetReduce job on h1 and h2
answered in the name of h4, and a forger on h3 that is the one worker of a NetReduce job of
its own (so its own id is bound to its port and it is a tenant, not a stranger).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wire.header import HOST_DROPS

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]
RUN_DIR = Path("run/adversarial-test")

# Runs on h3: argv agg_ip, victim job, own job, worker IPs (comma-separated). One sweep is
# every flag byte 0..255 for both job ids, each sent: from its own socket to the
# aggregation address and to a worker; raw, in the aggregation address's name to a worker;
# raw, in a worker's name to the aggregation address; raw with a no-op IPv4 option; raw as
# a first fragment. psn moves on every sweep; after each, a RESULT of every psn of the job's
# first calls in the aggregation address's name (taken as the job's sums if it got through).
FORGER = r"""
import socket, sys, time
import numpy as np
from wire.header import Header, pack
agg_ip, victim, own = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
workers = sys.argv[4].split(",")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 20050))
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
junk = np.full(32, 0x01010101, dtype=np.int32)

def ip(src, dst, payload, options=b"", frag=0):
    ihl = 5 + len(options) // 4
    total = 4 * ihl + len(payload)
    return (bytes([0x40 | ihl, 0, *total.to_bytes(2, "big"), 0, 0, *frag.to_bytes(2, "big"),
                   64, 17, 0, 0]) + socket.inet_aton(src) + socket.inet_aton(dst) + options
            + payload)

def udp(inc):
    return (20050).to_bytes(2, "big") * 2 + (8 + len(inc)).to_bytes(2, "big") + bytes(2) + inc

psn = 0
while True:
    for flags in range(256):
        for job in (victim, own):
            inc = pack(Header(job_id=job, psn=psn, agg_idx=psn % 16, flags=flags,
                              bitmap=0b11), junk)
            s.sendto(inc, (agg_ip, 20050))
            s.sendto(inc, (workers[0], 20050))
            raw.sendto(ip(agg_ip, workers[0], udp(inc)), (workers[0], 0))
            raw.sendto(ip(workers[1], agg_ip, udp(inc)), (agg_ip, 0))
            raw.sendto(ip(workers[1], agg_ip, udp(inc), options=b"\x01\x01\x01\x00"), (agg_ip, 0))
            raw.sendto(ip(workers[1], agg_ip, udp(inc), frag=0x2000), (agg_ip, 0))
        time.sleep(0.004)
    for p in range(256):  # and a result of every psn of the job's first calls, ahead of time
        inc = pack(Header(job_id=victim, psn=p, agg_idx=p % 16, flags=2, bitmap=0b11), junk)
        for w in workers:
            raw.sendto(ip(agg_ip, w, udp(inc)), (w, 0))
    psn += 1
"""


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


def test_every_flag_combination_from_a_forger_beside_a_netreduce_job_changes_no_sum(
    tmp_path: Path,
) -> None:
    """Every flag byte, with the job's id and the forger's own, from its port, in the
    aggregation address's and a worker's name, behind IPv4 options and as first fragments:
    the job's sums stay exact; the switch drops them as forged results, unknown workers
    (the job's id from the forger's port) and unparsed IPv4, and counts each."""
    import subprocess
    import sys
    import time

    from topologies.atp import AtpJob, exact, run_jobs

    ex = start_net(4)
    forger = None
    try:
        nr = _netreduce(ex, "nr", [1, 2])
        own = _netreduce(ex, "forger", [3])
        cmd = [sys.executable, "-c", FORGER, "10.0.0.4", str(nr), str(own), "10.0.0.1,10.0.0.2"]
        forger = ex.popen("h3", cmd, stdout=subprocess.DEVNULL)
        # The forger is under way (a sweep reached the switch) before the job starts.
        deadline = time.monotonic() + 90
        while ex.drop_counters().get("UNPARSED_IPV4", 0) < 200:
            assert forger.poll() is None, "the forger died"
            assert time.monotonic() < deadline, ex.drop_counters()
            time.sleep(0.2)
        size, calls = 4000, 2
        got = run_jobs(ex, [AtpJob(nr, (1, 2), "netreduce")], tmp_path, size, calls, 80,
                       "--bits", "24")  # fmt: skip
        drops = ex.drop_counters()
    finally:
        if forger is not None:
            ex.stop(forger)
        ex.close()
    assert exact(got[nr], 80 + nr, size, calls, bits=24) == []
    # Per sweep: 254 flag bytes x 2 ids forged (and 512 results), 2 x 2 x 2 of the job's id
    # unflagged from the forger's port, 2 x 512 behind options or in a fragment.
    want = {"FORGED_RESULT": 200, "UNKNOWN_WORKER": 8, "UNPARSED_IPV4": 200}
    assert all(drops[k] >= n for k, n in want.items()), str(drops)
    # What the switch let through that the workers then refused (by wire.header.HostDrop):
    # nothing of the forger's reaches them, the switch is the trust anchor.
    assert [g["rec"]["stats"]["drops"] for g in got[nr]] == [[0] * HOST_DROPS] * 2
