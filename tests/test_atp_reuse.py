"""Scheduled ATP jobs whose ranges move, end, and whose ids are given again: nothing a job
left in the pool reaches the next job with the same id, and the reclaim gap follows the
job's range (docs/protocol.md, ATP, A1 and A3). In-process: daemon -> P4Runtime -> p4sim."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from finsy import P4TableEntry

from controller.api_client import ControllerApi
from controller.jobs.job import host_ip
from controller.jobs.sizing import AGGREGATOR_BYTES
from controller.systems.atp import ATP_JOBS
from tests.test_controller_daemon import observe
from tests.test_scheduled_jobs import IP, MAC, RTT_S, start, submit
from topologies.local_switch import LocalSwitch, PipelineFiles
from wire.framing import encapsulate
from wire.header import ATP_POOL_SIZE, SLOTS, Header, atp_index, pack, unpack

PS_PORT = 5
COMMON = {"kind": "atp", "ps_port": PS_PORT, "agg_ip": host_ip(PS_PORT)}
WHOLE = {"offset": 0, "size": ATP_POOL_SIZE}


def contribute(
    switch: LocalSwitch, job: int, w: int, psn: int, epoch: int, region: dict[str, int], v: int
) -> list[tuple[int, bytes]]:
    """Worker ``w`` (on port ``w + 1``) sends ``v`` in every slot for ``psn``."""
    idx = atp_index(job, psn, region["offset"], region["size"])
    h = Header(job_id=job, worker_id=w, psn=psn, agg_idx=idx, epoch=epoch)
    values = np.full(SLOTS, v, dtype=np.int32)
    frame = encapsulate(pack(h, values), MAC(w + 1), MAC(PS_PORT), IP(w + 1), IP(PS_PORT))
    return switch.server.switch.send(w + 1, frame)


def reclaim_gap(switch: LocalSwitch, job: int) -> int:
    entries = observe(switch, P4TableEntry(ATP_JOBS))
    for e in entries:
        if int(e.match["job_id"]) == job:  # type: ignore[index]
            return int(e.action.args["reclaim_gap"])  # type: ignore[union-attr,index]
    raise AssertionError(f"no atp_jobs entry of job {job}")


def test_a_partial_use_left_in_an_old_range_never_reaches_the_next_job_with_that_id(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    """Job 1 holds the whole pool in epoch 0, where its worker 0 leaves partial uses of
    8 psns at the top
    of the pool (100 each). A deadline job shrinks it from epoch 1; then both are cancelled
    and a new job 1 gets the whole pool again: a psn whose aggregator lies outside the
    range job 1 held last sums only the new job's contributions."""
    rate = ATP_POOL_SIZE * AGGREGATOR_BYTES / RTT_S
    daemon = start(switch, files, tmp_path, pool=16, policy="edf", line_rate=rate)
    api = ControllerApi(daemon.url)
    try:
        a = submit(api, [1, 2], **COMMON, **{"class": "be", "epochs": 4})
        for w in (0, 1):
            assert api.epoch(a, w, 0)["region_size"] == ATP_POOL_SIZE
        top = [p for p in range(1 << 16) if atp_index(a, p, 0, ATP_POOL_SIZE) >= 3900][:8]
        for psn in top:  # aggregators at the top of the pool, where job 2 will go
            assert contribute(switch, a, 0, psn, 0, WHOLE, 100) == []  # held, count 1
        need = {"class": "md", "epochs": 4, "deadline_s": 10, "model_bytes": 10**6 * 128}
        b = submit(api, [3, 4], **COMMON, **need)  # about 400 aggregators
        api.epoch(a, 0, 1)
        r = api.epoch(a, 1, 1)
        assert 0 < r["region_size"] < ATP_POOL_SIZE
        last = range(r["region_offset"], r["region_offset"] + r["region_size"])
        outside = [p for p in top if atp_index(a, p, 0, ATP_POOL_SIZE) not in last]
        assert outside
        api.cancel(a)
        api.cancel(b)
        again = submit(api, [1, 2], **COMMON, **{"class": "be", "epochs": 4})
        assert again == a
        for w in (0, 1):
            assert api.epoch(again, w, 0)["region_size"] == ATP_POOL_SIZE
        for psn in outside:
            assert contribute(switch, again, 1, psn, 0, WHOLE, 2) == []  # the first one
            out = contribute(switch, again, 0, psn, 0, WHOLE, 1)
            assert sorted(p for p, _ in out) == [1, 2, PS_PORT]  # the workers and the PS
            assert all(unpack(frame[42:])[1].tolist() == [3] * SLOTS for _, frame in out)
    finally:
        daemon.stop()


def test_the_reclaim_gap_follows_a_scheduled_atp_jobs_range(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    """Job 2 is admitted while job 1 holds the whole pool (no memory: window 0); when job 1
    ends, job 2's range grows to the pool, and so must the gap after which a packet of its
    own may take over an aggregator another of its psns holds (its window)."""
    rate = ATP_POOL_SIZE * AGGREGATOR_BYTES / RTT_S
    daemon = start(switch, files, tmp_path, pool=16, policy="edf", line_rate=rate)
    api = ControllerApi(daemon.url)
    try:
        a = submit(api, [1, 2], **COMMON, **{"class": "be", "epochs": 4})
        b = submit(api, [3, 4], **COMMON, **{"class": "be", "epochs": 4})
        assert api.job(b)["region"]["size"] == 0
        api.cancel(a)
        for w in (0, 1):
            r = api.epoch(b, w, 0)
        assert r["region_size"] == ATP_POOL_SIZE and not r["wait"]
        assert reclaim_gap(switch, b) >= r["window"]
    finally:
        daemon.stop()
