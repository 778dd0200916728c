"""Scheduled jobs end to end in process: incctl/API -> daemon (scheduler, epoch slots) ->
P4Runtime -> p4sim, with worker agents (hosts/scheduled_job.py) all-reducing through the
switch while the scheduler resizes, moves and pauses their regions."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from finsy import P4TableEntry

from controller import incctl
from controller.api_client import ApiError, ControllerApi
from controller.daemon import ControllerDaemon, DaemonConfig
from controller.jobs.job import host_ip, host_mac
from controller.jobs.sizing import AGGREGATOR_BYTES
from controller.p4rt.p4runtime_client import SwitchSpec
from controller.sched.scheduled_jobs import SchedulingOptions
from controller.systems.job_region import EPOCH_SLOTS
from hosts.atp.ps import AtpJobSpec, AtpParameterServer
from hosts.atp.worker import AtpClient
from hosts.netreduce.allreduce import AllReduceClient
from hosts.scheduled_job import train
from hosts.transport.udp import Endpoint
from tests.test_allreduce_hosts import LOCAL, SwitchBridge
from tests.test_controller_daemon import observe
from topologies.local_switch import LocalSwitch, PipelineFiles
from wire.framing import encapsulate
from wire.header import ATP_POOL_SIZE, SLOTS, DropReason, Header, atp_index, pack


def MAC(port: int) -> bytes:  # noqa: N802 - reads as the address it is
    return bytes.fromhex(host_mac(port).replace(":", ""))


def IP(port: int) -> bytes:  # noqa: N802
    return socket.inet_aton(host_ip(port))


RTT_S = 1e-3
WANT = 12  # aggregators a job needs for line rate in these tests (the EDF pool)
LINE_RATE = WANT * AGGREGATOR_BYTES / RTT_S


def start(
    sw: LocalSwitch,
    files: PipelineFiles,
    tmp: Path,
    pool: int,
    policy: str,
    quantum: float = 30.0,
    line_rate: float = LINE_RATE,
) -> ControllerDaemon:
    opts = SchedulingOptions(
        policy=policy, quantum=quantum, rtt_s=RTT_S, line_rate=line_rate, replan_interval=0.5
    )
    d = ControllerDaemon(
        DaemonConfig(
            switches=(SwitchSpec(0, sw.address),),
            p4info=files.p4info,
            device_config=files.device_config,
            db=tmp / "controller.db",
            listen=("127.0.0.1", 0),
            pool_size=pool,
            scheduling=opts,
        )
    )
    d.start()
    return d


def submit(api: ControllerApi, ports: list[int], **fields: Any) -> int:
    body = {
        "workers": len(ports),
        "worker_ports": ports,
        "model_bytes": 24 * AGGREGATOR_BYTES,
        "compute_ms": 20.0,
        **fields,
    }
    return int(api.submit(body)["job_id"])


def run_workers(
    api: ControllerApi,
    bridge: SwitchBridge,
    job_id: int,
    first_port: int,
    out: dict[tuple[int, int], Any],
    client_class: type[AllReduceClient] = AllReduceClient,
) -> list[threading.Thread]:
    """One thread per worker of ``job_id``: the agent's epoch loop through ``bridge``."""
    threads = []
    for w in range(api.job(job_id)["n_workers"]):

        def work(w: int = w) -> None:
            cfg = api.worker_config(job_id, w)
            port = bridge.ports[first_port - 1 + w]  # the link to switch port first_port + w
            client = client_class(
                job_id,
                w,
                cfg["n_workers"],
                0,
                1,
                1,
                dest=port.address,
                endpoint=Endpoint(LOCAL),
                timeout=0.05,
            )
            try:
                with client:
                    out[(job_id, w)] = train(api, client, cfg, seed=3, give_up_s=60)
            except Exception as err:  # the test reports it
                out[(job_id, w)] = err

        t = threading.Thread(target=work, daemon=True)
        t.start()
        threads.append(t)
    return threads


def wait_until(cond: Any, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def epochs_started(api: ControllerApi, job_id: int) -> int:
    for sw in api.schedule()["switches"]:
        for j in sw["jobs"]:
            if j["job_id"] == job_id:
                return min(j["worker_epochs"].values())
    return -1


def test_edf_shrinks_a_running_best_effort_job_for_a_deadline_job_and_both_stay_exact(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon = start(switch, files, tmp_path, pool=12, policy="edf")
    api = ControllerApi(daemon.url)
    bridge = SwitchBridge(4, switch=switch)
    out: dict[tuple[int, int], Any] = {}
    try:
        # The BE job places psns by Hash(psn, job) % size + offset, the MD job by offset +
        # psn % size: a per-job choice, both through every resize.
        be = submit(api, [1, 2], **{"class": "be", "epochs": 40, "addressing": "hashed"})
        assert api.job(be)["region"]["size"] == WANT  # alone: what it can use
        assert api.worker_config(be, 0)["addressing"] == "hashed"
        threads = run_workers(api, bridge, be, 1, out)
        wait_until(lambda: epochs_started(api, be) >= 2, "the BE job's third epoch")
        # By the model the MD job needs 1 aggregator to finish 10 epochs in 4 s.
        code = incctl.main(
            [
                "--controller",
                daemon.url,
                "job",
                "submit",
                "--workers",
                "2",
                "--worker-ports",
                "3,4",
                "--class",
                "md",
                "--deadline",
                "4s",
                "--epochs",
                "10",
                "--model-bytes",
                str(24 * AGGREGATOR_BYTES),
                "--compute-ms",
                "20",
                "--json",
            ]
        )
        assert code == 0
        md = json.loads(capsys.readouterr().out)["job_id"]
        threads += run_workers(api, bridge, md, 3, out)
        wait_until(lambda: epochs_started(api, md) >= 1, "the MD job's second epoch")
        assert incctl.main(["--controller", daemon.url, "sched", "show"]) == 0
        assert "policy edf" in capsys.readouterr().out
        assert incctl.main(["--controller", daemon.url, "sched", "show", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["switches"][0]["jobs"]
        assert rows[0]["job_id"] == md  # EDF's queue: the deadline job first
        assert rows[0]["need"] >= 1 and rows[0]["on_time"] is True
        # The dashboard sees the same: each job's class, and the scheduler's decisions.
        live = {j["job_id"]: j for j in api._call("GET", "/stats")["jobs"]}
        assert live[md]["state"]["schedule"].startswith("class md, deadline ")
        assert live[be]["state"]["schedule"].startswith("class be, ")
        for t in threads:
            t.join(90)
        for key, rec in out.items():
            assert not isinstance(rec, Exception), f"job/worker {key}: {rec!r}"
            assert rec["mismatches"] == 0
        # The BE job gave memory up while it ran: a smaller region, or paused at a boundary.
        later = out[(be, 0)]["epochs"][3:]
        assert any(e["region"][1] < WANT or e["wait_s"] > 0.1 for e in later)
        events = api._call("GET", "/events")["events"]
        decided = [e for e in events if e["what"] == "rescheduled"]
        assert any(e["job_id"] == be and "edf" in e["message"] for e in decided)
        view = api.schedule()
        done = {f["job_id"]: f for f in view["finished"]}
        assert done[md]["met"] is True and done[be]["state"] == "finished"
        assert view["switches"][0]["free"] == 12  # all memory back
        assert observe(switch, P4TableEntry(EPOCH_SLOTS)) == []
    finally:
        bridge.stop()
        daemon.stop()


def test_round_robin_pauses_and_resumes_jobs_at_epoch_boundaries_without_losing_a_sum(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    daemon = start(switch, files, tmp_path, pool=WANT, policy="rr", quantum=0.3)
    api = ControllerApi(daemon.url)
    bridge = SwitchBridge(4, switch=switch)
    out: dict[tuple[int, int], Any] = {}
    try:
        # Each job computes 30 x 40 ms = 1.2 s at least, a lower bound no load shortens: 4
        # quanta or more. Taking turns, each job is therefore paused before the other ends
        # (with 0.6 s, the first job could end in its second turn and the second job then
        # never waited again: this test failed so on an idle machine).
        a = submit(api, [1, 2], **{"class": "be", "epochs": 30, "compute_ms": 40.0})
        b = submit(api, [3, 4], **{"class": "be", "epochs": 30, "compute_ms": 40.0})
        assert api.job(b)["region"]["size"] == 0  # the pool holds one job at a time
        threads = run_workers(api, bridge, a, 1, out) + run_workers(api, bridge, b, 3, out)
        for t in threads:
            t.join(90)
        for key, rec in out.items():
            assert not isinstance(rec, Exception), f"job/worker {key}: {rec!r}"
            assert rec["mismatches"] == 0
        # Each job was paused mid-run at least once (it waited for an epoch's region while
        # the other held the pool) and resumed.
        for job in (a, b):
            assert max(e["wait_s"] for e in out[(job, 0)]["epochs"][1:]) > 0.1
    finally:
        bridge.stop()
        daemon.stop()


def test_epoch_requests_out_of_order_or_for_unscheduled_jobs_are_refused(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    daemon = start(switch, files, tmp_path, pool=16, policy="fifo")
    api = ControllerApi(daemon.url)
    try:
        plain = int(api.submit({"workers": 2, "window": 4})["job_id"])
        with pytest.raises(ApiError, match="not scheduled") as info:
            api.epoch(plain, 0, 0)
        assert info.value.status == 409
        job = submit(api, [3, 4], **{"class": "be", "epochs": 3})
        api.epoch(job, 0, 0)
        with pytest.raises(ApiError, match="unfinished"):
            api.epoch(job, 0, 1)  # worker 1 has not started epoch 0
        with pytest.raises(ApiError, match="epochs 0..2"):
            api.epoch(job, 1, 9)
        with pytest.raises(ApiError) as bad:
            api._call("POST", f"/jobs/{job}/workers/0/epoch", {"epoch": "one"})
        assert bad.value.status == 400
        for body, msg in [
            (
                {"workers": 2, "class": "md", "epochs": 3, "model_bytes": 10, "compute_ms": 1},
                "deadline_s",
            ),
            ({"workers": 2, "window": 4, "epochs": 3}, "give class"),
            ({"workers": 2, "window": 4, "addressing": "hashed"}, "give class"),
            (
                {
                    "workers": 2,
                    "class": "be",
                    "epochs": 3,
                    "model_bytes": 10,
                    "compute_ms": 1,
                    "addressing": "crc32",
                },
                "addressing",
            ),  # fmt: skip
        ]:
            with pytest.raises(ApiError, match=msg):
                api.submit(body)
    finally:
        daemon.stop()


def test_a_restarted_daemon_keeps_scheduled_jobs_and_their_epochs(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    daemon = start(switch, files, tmp_path, pool=16, policy="edf")
    api = ControllerApi(daemon.url)
    job = submit(api, [1, 2], **{"class": "be", "epochs": 5})
    region = api.job(job)["region"]
    for e in (0, 1):
        for w in (0, 1):
            assert not api.epoch(job, w, e)["wait"]
    daemon.stop()
    daemon = start(switch, files, tmp_path, pool=16, policy="edf")
    api = ControllerApi(daemon.url)
    try:
        assert api.job(job)["region"] == region
        slots = observe(switch, P4TableEntry(EPOCH_SLOTS))
        assert sorted(e.match["epoch_slot"] for e in slots) == [0, 1]  # both slots kept
        row = api.schedule()["switches"][0]["jobs"][0]
        assert row["job_id"] == job and row["region"] == region
        for e in (2, 3, 4):  # the workers carry on where they were
            for w in (0, 1):
                got = api.epoch(job, w, e)
                assert not got["wait"] and got["region_size"] == region["size"]
        assert api.epoch(job, 0, 5)["done"] and api.epoch(job, 1, 5)["done"]
        assert [f["state"] for f in api.schedule()["finished"]] == ["finished"]
        assert api.memory()[0]["free"] == 16
    finally:
        daemon.stop()


def test_a_scheduled_atp_job_hashes_into_the_range_the_scheduler_gives_each_epoch(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    # Line rate at the whole ATP pool: the first job alone takes all of it.
    rate = ATP_POOL_SIZE * AGGREGATOR_BYTES / RTT_S
    daemon = start(switch, files, tmp_path, pool=16, policy="edf", line_rate=rate)
    api = ControllerApi(daemon.url)
    sw = switch.server.switch
    ps_port = 5

    def drops() -> int:
        return sw.counter_read("inc_drops", int(DropReason.OUT_OF_REGION))[0]

    def contribute(job: int, psn: int, epoch: int, region: dict[str, int]) -> list[int]:
        """Both workers' packets of ``psn``, hashed into ``region``: the ports out."""
        idx = atp_index(job, psn, region["offset"], region["size"])
        out = []
        for w, port in enumerate((1, 2)):
            h = Header(job_id=job, worker_id=w, psn=psn, agg_idx=idx, epoch=epoch)
            values = np.full(SLOTS, w + 1, dtype=np.int32)
            frame = encapsulate(pack(h, values), MAC(port), MAC(ps_port), IP(port), IP(ps_port))
            out += [p for p, _ in sw.send(port, frame)]
        return out

    try:
        common = {"kind": "atp", "ps_port": ps_port, "agg_ip": host_ip(ps_port)}
        a = submit(api, [1, 2], **common, **{"class": "be", "epochs": 4})
        whole = {"offset": 0, "size": ATP_POOL_SIZE}
        assert api.job(a)["region"] == whole
        cfg = api.worker_config(a, 0)
        assert (cfg["kind"], cfg["addressing"], cfg["scheduled"]) == ("atp", "hash", True)
        for w in (0, 1):
            r = api.epoch(a, w, 0)
            assert (r["region_offset"], r["region_size"], r["wait"]) == (0, ATP_POOL_SIZE, False)
        # complete: the switch multicasts the sum to the job's workers, and a copy to its PS
        assert sorted(contribute(a, 0, 0, whole)) == [1, 2, ps_port]
        # A deadline job arrives: EDF takes its need from the BE job, from the next epoch.
        b = submit(api, [3, 4], **common, **{"class": "md", "epochs": 4, "deadline_s": 30})
        target = api.job(a)["region"]
        assert 0 < target["size"] < ATP_POOL_SIZE
        assert api.epoch(a, 0, 1)["wait"] is True  # a layout change waits for both workers
        assert api.epoch(a, 1, 1)["wait"] is False
        # Epoch 1's packets are checked against the new range: one hashed into the old
        # range is dropped, one hashed into the new range aggregates.
        psn = next(p for p in range(1, 64) if atp_index(a, p, 0, ATP_POOL_SIZE)
                   != atp_index(a, p, target["offset"], target["size"]))  # fmt: skip
        before = drops()
        assert contribute(a, psn, 1, whole) == []
        assert drops() == before + 2
        assert sorted(contribute(a, psn, 1, target)) == [1, 2, ps_port]
        # The memory the BE job left went to the MD job once both workers had switched.
        got = api.job(b)["region"]
        assert got["size"] >= 1
        assert got["offset"] >= target["offset"] + target["size"] or (
            got["offset"] + got["size"] <= target["offset"]
        )
        view = api.schedule()
        assert {(s["device_id"], s["pool"]) for s in view["switches"]} == {(0, "atp")}
        with pytest.raises(ApiError, match="scheduled ATP jobs"):  # the pool is in ranges
            api.submit({"kind": "atp", "workers": 2, "worker_ports": [6, 7], "ps_port": 5})
        with pytest.raises(ApiError, match="scheduler"):
            bad = {"class": "be", "epochs": 2, "model_bytes": 10, "compute_ms": 1, "pool_size": 8}
            api.submit({**common, "workers": 2, "worker_ports": [6, 7], **bad})
    finally:
        daemon.stop()


def test_scheduled_atp_jobs_train_exactly_through_a_resize_with_their_parameter_server(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    rate = ATP_POOL_SIZE * AGGREGATOR_BYTES / RTT_S  # the first job alone takes the pool
    daemon = start(switch, files, tmp_path, pool=16, policy="edf", line_rate=rate)
    api = ControllerApi(daemon.url)
    bridge = SwitchBridge(5, switch=switch)  # workers on ports 1..4, the PS on port 5
    out: dict[tuple[int, int], Any] = {}
    ps: AtpParameterServer | None = None
    try:
        common = {"kind": "atp", "ps_port": 5, "agg_ip": host_ip(5)}
        a = submit(api, [1, 2], **common, **{"class": "be", "epochs": 30})
        to_switch = bridge.ports[4].address  # results enter the switch on the PS's port
        spec = AtpJobSpec(2, to_switch[0], to_switch[1])
        ps = AtpParameterServer({a: spec, a + 1: spec}, bind=LOCAL).start()
        bridge.workers[4] = ps.address  # what leaves port 5 reaches the PS
        threads = run_workers(api, bridge, a, 1, out, AtpClient)
        wait_until(lambda: epochs_started(api, a) >= 3, "the BE job's fourth epoch")
        b = submit(api, [3, 4], **common, **{"class": "md", "epochs": 10, "deadline_s": 30})
        assert b == a + 1
        threads += run_workers(api, bridge, b, 3, out, AtpClient)
        for t in threads:
            t.join(120)
        for key, rec in out.items():
            assert not isinstance(rec, Exception), f"job/worker {key}: {rec!r}"
            assert rec["mismatches"] == 0 and len(rec["epochs"]) == (30 if key[0] == a else 10)
        ranges = {tuple(e["region"]) for e in out[(a, 0)]["epochs"]}
        assert (0, ATP_POOL_SIZE) in ranges and len(ranges) > 1  # it ran in two ranges
        done = {f["job_id"]: f for f in api.schedule()["finished"]}
        assert done[b]["met"] is True and done[a]["state"] == "finished"
        assert ps.stats.results > 0  # every sum came back through the PS and the switch
    finally:
        if ps is not None:
            ps.stop()
        bridge.stop()
        daemon.stop()
