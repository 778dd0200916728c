"""Serene's control plane end to end, in-process: incctl and the policy watcher -> the
daemon's API -> P4Runtime -> p4sim, with packets fed into the switch's ports."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from controller import incctl
from controller.api_client import ApiError, ControllerApi
from controller.daemon import ControllerDaemon
from controller.systems.sync_policy import Policy, watch_job
from tests.test_controller_daemon import http, start_daemon
from topologies.local_switch import LocalSwitch, PipelineFiles
from wire.framing import encapsulate
from wire.header import SLOTS, Flag, Header, aggregator_address, pack, unpack


@pytest.fixture
def daemon(switch: LocalSwitch, files: PipelineFiles, tmp_path: Path) -> Iterator[ControllerDaemon]:
    d = start_daemon(switch, files, tmp_path / "controller.db")
    yield d
    d.stop()


def send(sw: LocalSwitch, cfg: dict[str, Any], psn: int, epoch: int) -> list[tuple[int, bytes]]:
    """Worker ``cfg``'s packet for ``psn`` of ``epoch`` (values: worker id + 1)."""
    idx, ver = aggregator_address(psn, cfg["region_offset"], cfg["region_size"])
    h = Header(job_id=cfg["job_id"], worker_id=cfg["worker_id"], psn=psn, agg_idx=idx, ver=ver,
               epoch=epoch)  # fmt: skip
    values = np.full(SLOTS, cfg["worker_id"] + 1, dtype=np.int32)
    frame = encapsulate(
        pack(h, values),
        bytes.fromhex(cfg["mac"].replace(":", "")),
        bytes.fromhex(cfg["agg_mac"].replace(":", "")),
        ipaddress.IPv4Address(cfg["ip"]).packed,
        ipaddress.IPv4Address(cfg["agg_ip"]).packed,
    )
    return sw.send(cfg["switch_port"], frame)


def submit(url: str, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = incctl.main(["--controller", url, "job", "submit", "--json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_incctl_admits_a_partial_job_and_swaps_its_mode(
    daemon: ControllerDaemon, switch: LocalSwitch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = submit(daemon.url, capsys, "--kind", "serene", "--mode", "partial 2", "--workers", "3",
                 "--window", "4")  # fmt: skip
    api = ControllerApi(daemon.url)
    cfgs = [api.worker_config(job["job_id"], w) for w in range(3)]
    assert cfgs[0]["mode"] == "partial 2"
    assert send(switch, cfgs[0], 0, 0) == []
    outs = send(switch, cfgs[2], 0, 0)  # the second contribution completes the round
    header, values = unpack(outs[0][1][42:])
    assert len(outs) == 3 and header.flags & Flag.RESULT and header.bitmap == 0b101
    assert values.tolist() == [1 + 3] * SLOTS
    late = send(switch, cfgs[1], 0, 0)  # served, not added
    assert len(late) == 1 and unpack(late[0][1][42:])[1].tolist() == [4] * SLOTS

    code = incctl.main(["--controller", daemon.url, "job", "mode", str(job["job_id"]),
                        "bounded", "1", "--json"])  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    assert code == 0 and got["mode"] == "bounded 1" and got["boundary_epoch"] == 1
    state = api.sync_state(job["job_id"])
    assert state["mode"] == "bounded 1" and state["before"] == "partial 2"
    assert state["clocks"] == [0, 0, 0] and state["late"] == 1 and not state["fence"]
    for cfg in cfgs[:2]:  # epoch 1 is bounded: no round without all three
        assert send(switch, cfg, 1, 1) == []
    assert len(send(switch, cfgs[2], 1, 1)) == 3


def test_mode_requests_that_cannot_apply_get_one_line_errors(
    daemon: ControllerDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    u = daemon.url
    plain = submit(u, capsys, "--workers", "2", "--window", "4")["job_id"]
    serene = submit(u, capsys, "--kind", "serene", "--workers", "2", "--window", "4")["job_id"]
    for body, status, words in [
        ({"mode": "partial 3"}, 400, "K must be in 1..2"),
        ({"mode": "bounded 9"}, 400, "bound must be in 0..6"),
        ({"mode": "fast"}, 400, "a mode is"),
        ({"mode": "sync", "x": 1}, 400, "x"),
    ]:
        code, answer = http("POST", f"{u}/jobs/{serene}/mode", body)
        assert code == status and words in answer["error"] and "\n" not in answer["error"]
    code, answer = http("POST", f"{u}/jobs/{plain}/mode", {"mode": "sync"})
    assert code == 400 and "only serene jobs" in answer["error"]
    assert http("POST", f"{u}/jobs/77/mode", {"mode": "sync"})[0] == 404
    assert http("GET", f"{u}/jobs/{plain}/sync")[0] == 400
    other = submit(u, capsys, "--kind", "serene", "--workers", "2", "--window", "4",
                   "--mode", "async")["job_id"]  # fmt: skip
    code, answer = http("GET", f"{u}/jobs/{other}/sync")
    assert code == 200 and answer["mode"] == "async" and answer["clocks"] == [2**32 - 1] * 2
    code, answer = http("POST", f"{u}/jobs", {"kind": "serene", "workers": 2, "window": 4,
                                              "mode": "partial 0"})  # fmt: skip
    assert code == 400 and "K must be in 1..2" in answer["error"]
    assert incctl.main(["--controller", u, "job", "mode", str(serene), "partial", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("incctl: ") and err.count("\n") == 1
    with pytest.raises(ApiError, match="still in progress"):
        api = ControllerApi(u)
        api.set_mode(serene, "partial 1")  # boundary 0: nobody started; taken
        api.set_mode(serene, "sync")  # the change at epoch 0 is not over yet


def test_policy_watcher_turns_a_lagging_worker_into_a_partial_mode(
    daemon: ControllerDaemon, switch: LocalSwitch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = submit(daemon.url, capsys, "--kind", "serene", "--workers", "3", "--window", "4")
    api = ControllerApi(daemon.url)
    cfgs = [api.worker_config(job["job_id"], w) for w in range(3)]
    for cfg in cfgs:
        send(switch, cfg, 0, 0)
    for cfg in cfgs[:2]:
        send(switch, cfg, 1, 1)  # worker 2 is one epoch behind
    samples = iter(range(3))
    changes = watch_job(api, job["job_id"], Policy.parse("partial 2 when lag >= 1 else sync"),
                        0.0, lambda: next(samples, None) is None)  # fmt: skip
    assert [(m, b) for _, m, b in changes] == [("partial 2", 2)]
    assert api.sync_state(job["job_id"])["mode"] == "partial 2"


def test_policy_goes_back_to_sync_once_a_transient_straggler_recovers(
    daemon: ControllerDaemon, switch: LocalSwitch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Worker 2 lags (the only slowest in two samples running): the watcher swaps to
    partial 2. Then it recovers and catches up (it sends its late epoch and its next one
    at once), worker 1 is now the last one: the decision is sync again; the switch refuses
    that swap until no packet of a partial epoch can be admitted any more (every worker
    more than the bound past them), and the watcher applies it at a later sample. Packets
    go into the switch's ports between samples."""
    job = submit(daemon.url, capsys, "--kind", "serene", "--workers", "3", "--window", "4")
    api = ControllerApi(daemon.url)
    cfgs = [api.worker_config(job["job_id"], w) for w in range(3)]
    steps = [  # (worker, epoch) sent before each sample; one packet (psn = epoch) each
        [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)],  # clocks (1, 1, 0)
        [(2, 1), (0, 2), (1, 2)],  # (2, 2, 1): worker 2 last twice -> partial 2 from 3
        [(2, 2), (0, 3), (1, 3)],  # (3, 3, 2)
        [(2, 3), (2, 4), (0, 4)],  # (4, 3, 4): worker 2 caught up, worker 1 last
        [(1, 4)],  # (4, 4, 4): sync wanted, epoch 2 (partial) could still be admitted
        [(0, 5), (1, 5), (2, 5)],  # (5, 5, 5): every partial epoch is behind every lead
    ]
    script = iter(steps)

    def stop() -> bool:
        step = next(script, None)
        for w, e in step or []:
            send(switch, cfgs[w], e, e)
        return step is None

    policy = Policy.parse("partial 2 when same slowest for 2 else sync")
    changes = watch_job(api, job["job_id"], policy, 0.0, stop)
    assert [(m, b) for _, m, b in changes] == [("partial 2", 3), ("sync", 6)]
    state = api.sync_state(job["job_id"])
    assert state["mode"] == "sync" and state["clocks"] == [5, 5, 5]


def test_a_partial_mode_gets_the_region_rule_p2_asks_for_at_admission_and_at_a_swap(
    daemon: ControllerDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    """P2 (docs/protocol.md): under partial K bound S the live rounds span S + 2 epochs, so
    rounds of P packets need a region of (S + 2) P aggregators, or a straggler's late
    packets meet reused copies (STALE) and it times out. A smaller one is refused in one
    line, naming what it needs; nothing is admitted or swapped."""
    u = daemon.url
    body = {"kind": "serene", "workers": 3, "window": 4, "mode": "partial 2", "round_packets": 2}
    code, answer = http("POST", f"{u}/jobs", body)
    assert code == 400 and "\n" not in answer["error"], answer
    assert "needs a region of 6 aggregators" in answer["error"], answer
    assert http("POST", f"{u}/jobs", {**body, "mode": "partial 2 bound 2"})[1]["error"].count(
        "needs a region of 8 aggregators"
    )
    argv = ["--controller", u, "job", "submit", "serene", "--workers", "3", "--window", "4",
            "--mode", "partial 2", "--round-packets", "2"]  # fmt: skip
    assert incctl.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("incctl: ") and err.count("\n") == 1 and "6 aggregators" in err
    assert ControllerApi(u).jobs() == []
    fits = submit(u, capsys, "--kind", "serene", "--workers", "3", "--window", "4",
                  "--region-size", "6", "--mode", "partial 2", "--round-packets", "2")  # fmt: skip
    assert fits["params"]["round_packets"] == 2
    job = submit(u, capsys, "--kind", "serene", "--workers", "3", "--window", "4",
                 "--round-packets", "2")["job_id"]  # fmt: skip
    code, answer = http("POST", f"{u}/jobs/{job}/mode", {"mode": "partial 2"})
    assert code == 400 and "needs a region of 6 aggregators" in answer["error"], answer
    assert incctl.main(["--controller", u, "job", "mode", str(job), "partial", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("incctl: ") and err.count("\n") == 1 and "6 aggregators" in err
    api = ControllerApi(u)
    assert api.sync_state(job)["mode"] == "sync" and api.job(job)["params"]["mode"] == "sync"
    assert api.set_mode(job, "bounded 2")["mode"] == "bounded 2"  # full quorum: no P2
    # one packet per round unless told: partial 2 (bound 1) then needs 3 aggregators
    code, answer = http("POST", f"{u}/jobs", {**body, "window": 2, "round_packets": 1})
    assert code == 400 and "needs a region of 3 aggregators" in answer["error"], answer
