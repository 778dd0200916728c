"""The controller daemon end to end, in-process: HTTP API -> P4Runtime -> p4sim switch.

The switch is p4sim's P4Runtime server on 127.0.0.1 (a real gRPC server); packets are fed
into it as if they arrived on its ports. The daemon reaches it only over P4Runtime."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from finsy import P4MulticastGroupEntry, P4TableEntry

from controller import incctl
from controller.api_client import ApiError, ControllerApi
from controller.daemon import ControllerDaemon, DaemonConfig
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import SwitchConnection, SwitchSpec
from controller.systems.aggregator import AGG_JOB, STATE_REGISTERS, copy_range
from topologies.local_switch import LocalSwitch, PipelineFiles
from wire.framing import encapsulate
from wire.header import SLOTS, DropReason, Flag, Header, aggregator_address, pack, unpack

TABLES = (
    "IncIngress.job_region.jobs",
    "IncIngress.job_region.workers",
    "IncEgress.result_rewrite.result_dst",
    "IncIngress.result_guard.flag_ports",  # none: no port may bring the job's results in
)


def start_daemon(
    sw: LocalSwitch, files: PipelineFiles, db: Path, pool_size: int = 1024, **kw: Any
) -> ControllerDaemon:
    daemon = ControllerDaemon(
        DaemonConfig(
            switches=(SwitchSpec(0, sw.address),),
            p4info=files.p4info,
            device_config=files.device_config,
            db=db,
            listen=("127.0.0.1", 0),
            pool_size=pool_size,
            **kw,
        )
    )
    daemon.start()
    return daemon


@pytest.fixture
def daemon(switch: LocalSwitch, files: PipelineFiles, tmp_path: Path) -> Iterator[ControllerDaemon]:
    d = start_daemon(switch, files, tmp_path / "controller.db")
    yield d
    d.stop()


def observe(sw: LocalSwitch, what: Any) -> list[Any]:
    """Read through a second, backup P4Runtime client (it adopts the switch's P4Info)."""

    async def read() -> list[Any]:
        async with SwitchConnection(SwitchSpec(0, sw.address, election_id=1)) as conn:
            if isinstance(what, tuple):  # (register, indices)
                return [await conn.read_register(what[0], i) for i in what[1]]
            return await conn.read(what)

    return asyncio.run(read())


def job_entries(sw: LocalSwitch, job_id: int) -> dict[str, int]:
    return {
        t: sum(1 for e in observe(sw, P4TableEntry(t)) if e.match["job_id"] == job_id)
        for t in TABLES
    }


def contribution(cfg: dict[str, Any], psn: int, values: np.ndarray) -> bytes:
    """Worker ``cfg``'s packet for ``psn``, built from what the controller told it."""
    idx, ver = aggregator_address(psn, cfg["region_offset"], cfg["region_size"])
    h = Header(job_id=cfg["job_id"], worker_id=cfg["worker_id"], psn=psn, agg_idx=idx, ver=ver)
    mac = bytes.fromhex(cfg["mac"].replace(":", ""))
    agg_mac = bytes.fromhex(cfg["agg_mac"].replace(":", ""))
    return encapsulate(
        pack(h, values),
        mac,
        agg_mac,
        ipaddress.IPv4Address(cfg["ip"]).packed,
        ipaddress.IPv4Address(cfg["agg_ip"]).packed,
    )


def result_of(frame: bytes) -> tuple[Header, np.ndarray, str]:
    payload = frame[14 + 20 + 8 :]
    header, values = unpack(payload)
    dst_ip = str(ipaddress.IPv4Address(frame[30:34]))
    return header, values, dst_ip


def test_submitted_job_is_installed_and_aggregates_packets(
    daemon: ControllerDaemon, switch: LocalSwitch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = incctl.main(
        [
            "--controller",
            daemon.url,
            "job",
            "submit",
            "--workers",
            "3",
            "--window",
            "4",
            "--name",
            "mlp",
            "--json",
        ]
    )
    job = json.loads(capsys.readouterr().out)
    assert code == 0 and job["name"] == "mlp" and job["region"] == {"offset": 0, "size": 4}

    assert job_entries(switch, job["job_id"]) == dict.fromkeys(TABLES[:1], 1) | {
        TABLES[1]: 3,
        TABLES[2]: 3,
        TABLES[3]: 0,
    }
    groups = observe(switch, P4MulticastGroupEntry())
    assert [(r.port, r.instance) for r in groups[0].replicas] == [(1, 1), (2, 2), (3, 3)]

    api = ControllerApi(daemon.url)
    cfgs = [api.worker_config(job["job_id"], w) for w in range(3)]
    vectors = [np.arange(SLOTS, dtype=np.int32) * (w + 1) - 7 for w in range(3)]
    outs = [
        switch.send(cfg["switch_port"], contribution(cfg, 5, v))
        for cfg, v in zip(cfgs, vectors, strict=True)
    ]
    assert outs[0] == [] and outs[1] == []  # absorbed until the last worker arrives
    by_port = {port: result_of(frame) for port, frame in outs[2]}
    assert sorted(by_port) == [1, 2, 3]
    for cfg in cfgs:
        header, values, dst_ip = by_port[cfg["switch_port"]]
        assert header.flags & Flag.RESULT and header.worker_id == cfg["worker_id"]
        assert header.bitmap == 0b111 and dst_ip == cfg["ip"]
        np.testing.assert_array_equal(values, sum(vectors))


def test_cancel_removes_entries_and_clears_the_region(
    daemon: ControllerDaemon, switch: LocalSwitch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = ControllerApi(daemon.url)
    keep = api.submit({"workers": 2, "window": 2, "name": "keep"})
    job = api.submit({"workers": 2, "window": 4})
    cfgs = [api.worker_config(job["job_id"], w) for w in range(2)]
    switch.send(1, contribution(cfgs[0], 1, np.ones(SLOTS, dtype=np.int32)))
    region = Region(job["region"]["offset"], job["region"]["size"])
    assert observe(switch, (AGG_JOB, copy_range(region))).count(job["job_id"]) == 1

    assert incctl.main(["--controller", daemon.url, "job", "cancel", str(job["job_id"])]) == 0
    assert "cancelled" in capsys.readouterr().out

    assert job_entries(switch, job["job_id"]) == dict.fromkeys(TABLES, 0)
    assert job_entries(switch, keep["job_id"])[TABLES[0]] == 1  # the other job is untouched
    groups = {g.multicast_group_id for g in observe(switch, P4MulticastGroupEntry())}
    assert groups == {keep["mcast_grp"]}
    for reg in STATE_REGISTERS:
        assert set(observe(switch, (reg, copy_range(region)))) == {0}
    assert [j["job_id"] for j in api.jobs()] == [keep["job_id"]]
    memory = api.memory()[0]
    assert memory["free"] == memory["pool_size"] - keep["region"]["size"]

    before = switch.server.switch.counter_read("IncIngress.inc_drops", DropReason.UNKNOWN_JOB)
    assert switch.send(1, contribution(cfgs[0], 2, np.ones(SLOTS, dtype=np.int32))) == []
    after = switch.server.switch.counter_read("IncIngress.inc_drops", DropReason.UNKNOWN_JOB)
    assert after[0] == before[0] + 1


def test_jobs_survive_a_controller_restart_without_touching_the_switch(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    db = tmp_path / "controller.db"
    first = start_daemon(switch, files, db)
    try:
        job = ControllerApi(first.url).submit({"workers": 2, "window": 8})
        cfgs = [ControllerApi(first.url).worker_config(job["job_id"], w) for w in range(2)]
        ones = np.ones(SLOTS, dtype=np.int32)
        switch.send(1, contribution(cfgs[0], 0, ones))
        switch.send(2, contribution(cfgs[1], 0, ones))  # psn 0 finished
    finally:
        first.stop()

    second = start_daemon(switch, files, db)
    try:
        assert second.switches is not None and not second.switches[0].pipeline_pushed
        api = ControllerApi(second.url)
        assert [j["job_id"] for j in api.jobs()] == [job["job_id"]]
        assert api.memory()[0]["segments"][0]["job_id"] == job["job_id"]
        # The switch kept its aggregator state: a retransmission gets psn 0's result.
        out = switch.send(1, contribution(cfgs[0], 0, ones))
        assert len(out) == 1 and result_of(out[0][1])[1][0] == 2
        again = api.submit({"workers": 1, "window": 8})
        assert again["region"]["offset"] == 8  # the restored region stays allocated
    finally:
        second.stop()


def test_jobs_are_reinstalled_on_a_switch_that_lost_its_state(
    files: PipelineFiles, tmp_path: Path
) -> None:
    db = tmp_path / "controller.db"
    with LocalSwitch(device_id=0) as old:
        d = start_daemon(old, files, db)
        job = ControllerApi(d.url).submit({"workers": 2, "window": 4})
        d.stop()
    with LocalSwitch(device_id=0) as fresh:  # a restarted switch: empty
        d = start_daemon(fresh, files, db)
        try:
            assert d.switches is not None and d.switches[0].pipeline_pushed
            assert job_entries(fresh, job["job_id"]) == {
                TABLES[0]: 1,
                TABLES[1]: 2,
                TABLES[2]: 2,
                TABLES[3]: 0,
            }
        finally:
            d.stop()


def http(
    method: str, url: str, body: Any = None, token: str | None = "operator"
) -> tuple[int, dict[str, Any]]:
    """A JSON request as the operator (the token the daemon tells this machine where to
    find, as incctl does), or with ``token`` (``None``: without one)."""
    if token == "operator":
        parts = urllib.parse.urlsplit(url)
        token = ControllerApi(f"{parts.scheme}://{parts.netloc}").token_for(None)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_api_errors_have_status_codes_and_messages(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    d = start_daemon(switch, files, tmp_path / "c.db", pool_size=16)
    try:
        u = d.url
        assert http("GET", u + "/jobs/42") == (404, {"error": "no job 42"})
        assert http("DELETE", u + "/jobs/42")[0] == 404
        assert http("POST", u + "/jobs", [1, 2])[0] == 400
        status, body = http("POST", u + "/jobs", {"workers": 2, "window": 4, "slots": 8})
        assert status == 400 and "32 slots" in body["error"]
        assert http("POST", u + "/jobs", {"workers": 2, "window": 12})[0] == 201
        status, body = http("POST", u + "/jobs", {"workers": 2, "window": 8})
        assert status == 409 and "largest free: 4" in body["error"]
        assert http("GET", u + "/jobs/1/workers/5")[0] == 404
        assert http("DELETE", u + "/memory")[0] == 405
        assert http("GET", u + "/nothing")[0] == 404
        with pytest.raises(ApiError, match="largest free"):
            ControllerApi(u).submit({"workers": 1, "window": 5})
        assert http("GET", u + "/switches")[1]["switches"][0]["primary"] is True
    finally:
        d.stop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_daemon_process_serves_incctl_and_stops_on_sigterm(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys

    listen = f"127.0.0.1:{free_port()}"
    cmd = [
        sys.executable,
        "-m",
        "controller.daemon",
        "--switch",
        f"0@{switch.address}",
        "--p4info",
        str(files.p4info),
        "--device-config",
        str(files.device_config),
        "--db",
        str(tmp_path / "c.db"),
        "--listen",
        listen,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"controller: serving http://{listen}"
        submit = subprocess.run(
            [
                sys.executable,
                "-m",
                "controller.incctl",
                "--controller",
                f"http://{listen}",
                "job",
                "submit",
                "--workers",
                "2",
                "--window",
                "4",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert submit.returncode == 0, submit.stderr
        assert "job 1 (job1) admitted" in submit.stdout
        memory = subprocess.run(
            [
                sys.executable,
                "-m",
                "controller.incctl",
                "--controller",
                f"http://{listen}",
                "switch",
                "memory",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "job 1 (job1)" in memory.stdout and "free" in memory.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["--switch", "nonsense"], 2, "expected DEVICE_ID@HOST:PORT"),
        (["--switch", "0@127.0.0.1:1", "--listen", "7070"], 2, "expected HOST:PORT"),
        (["--switch", "0@127.0.0.1:1", "--p4info", "/nonexistent.txtpb"], 1, "/nonexistent.txtpb"),
    ],
)
def test_daemon_command_line_mistakes_are_one_line(
    argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller import daemon as daemon_module

    try:
        got = daemon_module.main(argv)
    except SystemExit as stop:
        got = int(stop.code or 0)
    err = capsys.readouterr().err
    assert got == code and message in err and "Traceback" not in err


def test_daemon_reports_an_unreachable_switch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from controller import daemon as daemon_module

    argv = [
        "--switch",
        f"0@127.0.0.1:{free_port()}",
        "--db",
        str(tmp_path / "c.db"),
        "--listen",
        f"127.0.0.1:{free_port()}",
    ]
    assert daemon_module.main(argv) == 1
    err = capsys.readouterr().err
    assert "cannot connect" in err and err.count("\n") == 1


def test_daemon_refuses_to_start_when_another_client_is_primary(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    from controller.p4rt.p4runtime_client import Pipeline, SwitchError

    async def hold_then_start() -> str:
        pipe = Pipeline.from_files(files.p4info, files.device_config)
        async with SwitchConnection(SwitchSpec(0, switch.address, election_id=100), pipe):
            loop = asyncio.get_running_loop()
            with pytest.raises(SwitchError) as info:
                await loop.run_in_executor(None, start_daemon, switch, files, tmp_path / "c.db")
            return str(info.value)

    message = asyncio.run(hold_then_start())
    assert "another client is primary" in message and "election id 100" in message


def test_a_worker_cannot_contribute_to_another_jobs_aggregation(
    daemon: ControllerDaemon, switch: LocalSwitch
) -> None:
    api = ControllerApi(daemon.url)
    a = api.submit({"workers": 2, "window": 4, "worker_ports": [1, 2]})
    b = api.submit({"workers": 2, "window": 4, "worker_ports": [3, 4]})
    intruder = api.worker_config(a["job_id"], 0) | {"job_id": b["job_id"]}
    intruder |= {"region_offset": b["region"]["offset"]}  # even with b's region
    drops = "IncIngress.inc_drops"
    before = switch.server.switch.counter_read(drops, DropReason.UNKNOWN_WORKER)[0]
    assert switch.send(1, contribution(intruder, 0, np.ones(SLOTS, dtype=np.int32))) == []
    assert switch.server.switch.counter_read(drops, DropReason.UNKNOWN_WORKER)[0] == before + 1
    region = Region(b["region"]["offset"], b["region"]["size"])
    assert set(observe(switch, (AGG_JOB, copy_range(region)))) == {0}


def test_a_restarted_switch_gets_its_jobs_back_while_the_daemon_runs(
    files: PipelineFiles, tmp_path: Path
) -> None:
    import time

    port = free_port()
    old = LocalSwitch(device_id=0, port=port).start()
    d = start_daemon(old, files, tmp_path / "c.db", watch_interval=0.1)
    try:
        job = ControllerApi(d.url).submit({"workers": 2, "window": 4})
        old.stop()  # the switch process dies ...
        with LocalSwitch(device_id=0, port=port) as fresh:  # ... and comes back empty
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if fresh.server.pipeline is not None and job_entries(fresh, job["job_id"]) == {
                    TABLES[0]: 1,
                    TABLES[1]: 2,
                    TABLES[2]: 2,
                    TABLES[3]: 0,
                }:
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the daemon did not re-install the job on the restarted switch")
    finally:
        d.stop()


def test_switch_memory_shows_the_atp_pool_held_and_its_statistics(
    daemon: ControllerDaemon, switch: LocalSwitch, capsys: pytest.CaptureFixture[str]
) -> None:
    from wire.header import atp_index

    api = ControllerApi(daemon.url)
    job = api.submit({"kind": "atp", "workers": 2, "window": 8, "pool_size": 4})
    cfg = api.worker_config(job["job_id"], 0)
    for psn in range(3):
        idx = atp_index(cfg["job_id"], psn, cfg["region_offset"], cfg["region_size"])
        h = Header(job_id=cfg["job_id"], worker_id=0, psn=psn, agg_idx=idx)
        frame = contribution(cfg, psn, np.ones(SLOTS, dtype=np.int32))
        frame = frame[:42] + pack(h, np.ones(SLOTS, dtype=np.int32))
        switch.send(1, frame)
    held = len({atp_index(cfg["job_id"], p, 0, 4) for p in range(3)})
    atp = api.memory()[0]["atp_pool"]
    assert atp["held"] == held and atp["claimed"] == held and atp["collision"] == 3 - held
    assert incctl.main(["--controller", daemon.url, "switch", "memory"]) == 0
    out = capsys.readouterr().out
    assert f"{held} of 4096 aggregators held" in out and f"collisions {3 - held}" in out
