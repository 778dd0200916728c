"""ATP on Mininet (root): integer all-reduce through the shared pool equals the host sum bit
for bit, with collisions forced (a pool range smaller than the jobs' windows), jobs sharing
the pool, a NetReduce job beside them, and loss, duplication and reordering on every link.

Every worker runs ``python -m hosts.vector_job`` (its job's kind ``atp`` selects
``hosts.atp.worker.AtpClient``); the PS host runs ``python -m hosts.atp.ps`` for the ATP
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


def test_three_atp_jobs_sharing_a_small_pool_and_a_netreduce_job_are_all_exact(
    tmp_path: Path,
) -> None:
    from topologies.atp import AtpJob, exact, pool_events, run_jobs, start_ps, submit_atp

    ex = start_net(9)
    try:
        # Three ATP jobs share 8 aggregators with windows of 16: collisions are certain.
        atp = [submit_atp(ex, f"a{j}", [2 * j + 1, 2 * j + 2], ps_host=9, window=16,
                          pool=(0, 8)) for j in range(3)]  # fmt: skip
        nr = ex.submit("nr", workers=2, window=16, worker_ports=[7, 8],
                       worker_ips=["10.0.0.7", "10.0.0.8"],
                       worker_macs=["00:00:00:00:00:07", "00:00:00:00:00:08"],
                       agg_ip="10.0.0.9", agg_mac="00:00:00:00:00:09")  # fmt: skip
        start_ps(ex, 9, [j.job_id for j in atp])
        size, calls = 4000, 2
        jobs = [*atp, AtpJob(nr, (7, 8), "netreduce")]
        # all eight workers start together: a job that finished before the next began would
        # leave the pool to it alone (no collision), as one full run saw
        got = run_jobs(ex, jobs, tmp_path, size, calls, 40, "--bits", "24",
                       "--barrier", str(tmp_path / "start"), "8")  # fmt: skip
        events = pool_events(ex)
        drops_seen = ex.drop_counters()
    finally:
        ex.close()
    for j in [*(a.job_id for a in atp), nr]:
        assert exact(got[j], 40 + j, size, calls, bits=24) == [], j
    assert events["collision"] > 0 and events["completed"] > 0, f"{events} {drops_seen}"
    assert events["added"] > 0 and events["released"] > 0, events


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


ATP_FORGER = r"""
import socket, sys, time
import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from wire.header import Flag, Header, atp_index, pack
ps_ip, victim, own, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
junk = np.full(32, 0x01010101, dtype=np.int32)
while True:
    for psn in range(256):
        idx = atp_index(victim, psn, 0, size)
        for h in (
            Header(job_id=victim, worker_id=0, psn=psn, agg_idx=idx),  # not its worker
            Header(job_id=victim, psn=psn, agg_idx=idx, flags=Flag.RESULT),  # forged result
            Header(job_id=victim, psn=psn, agg_idx=idx, flags=Flag.ACK),  # forged release
            # a forged fallback piece holding every worker, and a forged WAIT
            Header(job_id=victim, psn=psn, agg_idx=idx, flags=Flag.FALLBACK, bitmap=3),
            Header(job_id=victim, psn=psn, agg_idx=idx, flags=Flag.WAIT),
            Header(job_id=own, psn=psn, agg_idx=5000),  # its own job, out of the pool
            Header(job_id=own, psn=psn, agg_idx=(atp_index(own, psn, 0, size) + 1) % size),
            Header(job_id=own, psn=psn, agg_idx=atp_index(own, psn, 0, size)),  # a noisy tenant
        ):
            s.sendto(pack(h, junk), (ps_ip, 20050))
        frag = IP(dst=ps_ip, flags="MF") / UDP(sport=20050, dport=20050, chksum=0) / Raw(
            pack(Header(job_id=victim, worker_id=0, psn=psn, agg_idx=idx), junk))
        raw.sendto(bytes(frag), (ps_ip, 0))  # a first fragment: dropped, UNPARSED_IPV4
        time.sleep(0.01)
"""


def test_forged_packets_change_no_atp_or_netreduce_result(tmp_path: Path) -> None:
    """A host that is the only worker of ATP job c (sharing the pool) forges, while ATP job a
    and a NetReduce job run: packets of job a from outside it, results and ACKs of job a,
    its own job's packets out of the pool or at a wrong index, first fragments of job a,
    fallback pieces and WAITs of job a, and a stream of valid packets of its own job that
    occupy the shared aggregators."""
    import subprocess
    import sys
    import time

    from topologies.atp import AtpJob, exact, run_jobs, start_ps, submit_atp

    ex = start_net(6)
    forger = None
    try:
        a = submit_atp(ex, "a", [1, 2], ps_host=6, window=16, pool=(0, 8))
        c = submit_atp(ex, "c", [5], ps_host=6, window=16, pool=(0, 8))
        nr = ex.submit("nr", workers=2, window=16, worker_ports=[3, 4],
                       worker_ips=["10.0.0.3", "10.0.0.4"],
                       worker_macs=["00:00:00:00:00:03", "00:00:00:00:00:04"],
                       agg_ip="10.0.0.6", agg_mac="00:00:00:00:00:06")  # fmt: skip
        start_ps(ex, 6, [a.job_id, c.job_id])
        cmd = [sys.executable, "-c", ATP_FORGER, "10.0.0.6", str(a.job_id), str(c.job_id), "8"]
        forger = ex.popen("h5", cmd, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        want = ("UNKNOWN_WORKER", "FORGED_RESULT", "OUT_OF_REGION", "UNPARSED_IPV4")
        while not all(ex.drop_counters().get(k, 0) >= 50 for k in want):
            assert forger.poll() is None, "the forger died"
            assert time.monotonic() < deadline, ex.drop_counters()
            time.sleep(0.2)
        size, calls = 4000, 2
        got = run_jobs(ex, [a, AtpJob(nr, (3, 4), "netreduce")], tmp_path, size, calls, 60,
                       "--bits", "24")  # fmt: skip
        drops = ex.drop_counters()
    finally:
        if forger is not None:
            ex.stop(forger)
        ex.close()
    assert exact(got[a.job_id], 60 + a.job_id, size, calls, bits=24) == []
    assert exact(got[nr], 60 + nr, size, calls, bits=24) == []
    assert all(drops[k] >= 50 for k in want), drops


NR_FORGER = r"""
import socket, sys, time
import numpy as np
from wire.header import Flag, Header, pack
agg_ip, job, workers = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
junk = np.full(32, 0x01010101, dtype=np.int32)
while True:
    for psn in range(256):
        for flags in (Flag.RESULT, Flag.ACK):
            inc = pack(Header(job_id=job, psn=psn, flags=flags, bitmap=0b11), junk)
            udp = (20050).to_bytes(2, "big") * 2 + (8 + len(inc)).to_bytes(2, "big") + bytes(2)
            for dst in workers:  # in the aggregation address's name: the workers' check passes
                ip = bytes([0x45, 0, *(20 + len(udp) + len(inc)).to_bytes(2, "big"), 0, 0, 0x40,
                            0, 64, 17, 0, 0, *socket.inet_aton(agg_ip), *socket.inet_aton(dst)])
                raw.sendto(ip + udp + inc, (dst, 0))
        time.sleep(0.005)
"""


def test_forged_netreduce_results_from_outside_the_job_are_dropped_at_its_switch(
    tmp_path: Path,
) -> None:
    """While a NetReduce job runs, a host outside it sends RESULT and ACK packets of the job
    to its workers, with the job's aggregation address as source (the workers' own check
    cannot tell them apart): the switch that aggregates the job drops every one at its
    source guard (SPOOFED_SOURCE: not the address of the forger's port; from its own
    address they would be FORGED_RESULT, tests/test_isolation.py) and every result stays
    exact."""
    import subprocess
    import sys
    import time

    from topologies.atp import AtpJob, exact, run_jobs

    ex = start_net(4)
    forger = None
    try:
        nr = ex.submit("nr", workers=2, window=16, worker_ports=[1, 2],
                       worker_ips=["10.0.0.1", "10.0.0.2"],
                       worker_macs=["00:00:00:00:00:01", "00:00:00:00:00:02"],
                       agg_ip="10.0.0.4", agg_mac="00:00:00:00:00:04")  # fmt: skip
        cmd = [sys.executable, "-c", NR_FORGER, "10.0.0.4", str(nr), "10.0.0.1,10.0.0.2"]
        forger = ex.popen("h3", cmd, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while ex.drop_counters().get("SPOOFED_SOURCE", 0) < 100:
            assert forger.poll() is None, "the forger died"
            assert time.monotonic() < deadline, ex.drop_counters()
            time.sleep(0.2)
        size, calls = 4000, 2
        got = run_jobs(ex, [AtpJob(nr, (1, 2), "netreduce")], tmp_path, size, calls, 70,
                       "--bits", "24")  # fmt: skip
        drops = ex.drop_counters()
    finally:
        if forger is not None:
            ex.stop(forger)
        ex.close()
    assert exact(got[nr], 70 + nr, size, calls, bits=24) == []
    assert drops["SPOOFED_SOURCE"] >= 100, drops


def test_a_flooding_tenant_is_metered_and_the_other_job_stays_exact(tmp_path: Path) -> None:
    """ATP job b (one worker, h3) is admitted with a meter of 100 packets/s and floods the
    switch with valid packets of its own at 2000/s into the pool it shares with job a: the
    switch drops the excess at the meter (METERED), and job a's sums stay exact."""
    import time

    from topologies.atp import exact, run_jobs, start_flood, start_ps, submit_atp

    ex = start_net(5)
    flood = None
    try:
        a = submit_atp(ex, "a", [1, 2], ps_host=5, window=16, pool=(0, 16))
        b = submit_atp(ex, "b", [3], ps_host=5, window=16, pool=(0, 16), meter_pps=100)
        start_ps(ex, 5, [a.job_id, b.job_id])
        flood = start_flood(ex, b, 5, (0, 16), pps=2000)
        deadline = time.monotonic() + 60
        while ex.drop_counters().get("METERED", 0) < 500:
            assert flood.poll() is None, "the flooder died"
            assert time.monotonic() < deadline, ex.drop_counters()
            time.sleep(0.2)
        size, calls = 4000, 2
        got = run_jobs(ex, [a], tmp_path, size, calls, 90, "--bits", "24")
        drops = ex.drop_counters()
    finally:
        if flood is not None:
            ex.stop(flood)
        ex.close()
    assert exact(got[a.job_id], 90 + a.job_id, size, calls, bits=24) == []
    assert drops["METERED"] >= 500, drops


def test_two_rack_job_aggregates_at_the_leaves_and_the_spine_exactly(tmp_path: Path) -> None:
    """Two leaves with two workers each, a spine with the PS: one ATP job over three
    switches (a part per switch, one job id on the wire), every result bit-exact. The job
    asks for a window (32) larger than its range (16): its workers keep 16 psns in flight,
    which take 16 different aggregators, so the job never collides with itself."""
    from topologies.atp import pool_events, run_racks, start_ps, submit_two_racks
    from topologies.experiment import Experiment, ExperimentConfig, leaf_spine

    cfg = ExperimentConfig(leaf_spine(2, 2), run_dir=RUN_DIR, log=lambda s: None)
    ex = Experiment(cfg).__enter__()
    try:
        spine, leaves = submit_two_racks(ex, "racks", 2, 2, window=32, pool=(0, 16))
        start_ps(ex, 5, [spine])
        size, calls = 3000, 2
        got = run_racks(ex, leaves, tmp_path, size, calls, 80, "--bits", "24")
        events = {sw: pool_events(ex, sw) for sw in ("s1", "s2", "s3")}
    finally:
        ex.close()
    from topologies.atp import exact

    assert exact(got, 80, size, calls, bits=24) == []
    psns = calls * -(-size // 32)
    for sw, ev in events.items():
        assert ev["collision"] == 0 == ev["followed"] == ev["lent"], (sw, ev)
        assert ev["claimed"] == psns and ev["released"] > 0, (sw, ev)
        # A leaf's use is released by the result before its workers can send the psn a
        # window later; at the spine that psn may come before the PS's ACK of the sum the
        # spine multicast: it takes the aggregator over and the sum to the PS (swap).
        assert sw == "s1" or ev["reclaimed"] == 0, (sw, ev)
