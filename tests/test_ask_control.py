"""ASK's control plane end to end, in-process: ``incctl job submit --kind ask`` -> the
daemon's API -> P4Runtime -> p4sim; then a mapper's tuples and a reducer's drain fed into
the switch's ports with the configuration the daemon hands out."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller import incctl
from controller.api_client import ControllerApi
from controller.daemon import ControllerDaemon
from controller.jobs.job_kinds import parse_request
from hosts.ask.wire import fingerprint, kv_packet, parse, place
from tests.test_controller_daemon import start_daemon
from topologies.local_switch import LocalSwitch, PipelineFiles
from wire.framing import decapsulate, encapsulate
from wire.header import ASK_TUPLES, Flag, Header, Op


@pytest.fixture
def daemon(switch: LocalSwitch, files: PipelineFiles, tmp_path: Path) -> Iterator[ControllerDaemon]:
    d = start_daemon(switch, files, tmp_path / "controller.db")
    yield d
    d.stop()


def _addr(mac: str, ip: str) -> tuple[bytes, bytes]:
    return bytes.fromhex(mac.replace(":", "")), ipaddress.IPv4Address(ip).packed


def send(sw: LocalSwitch, port: int, src: tuple[str, str], dst: tuple[str, str],
         payload: bytes) -> list[tuple[int, Header, Any, Any]]:  # fmt: skip
    (smac, sip), (dmac, dip) = _addr(*src), _addr(*dst)
    out = []
    for p, data in sw.send(port, encapsulate(payload, smac, dmac, sip, dip)):
        h, keys, vals = parse(bytes(decapsulate(data) or b""))
        out.append((p, h, keys, vals))
    return out


def test_submit_body_of_an_ask_job_has_its_options_and_no_slots() -> None:
    args = incctl.parser().parse_args(
        ["job", "submit", "--kind", "ask", "--workers", "2", "--rows", "64", "--window", "8",
         "--partitions", "1", "--reducer-port", "5"]
    )  # fmt: skip
    body = incctl._submit_body(args)
    assert body == {"workers": 2, "kind": "ask", "name": "", "rows": 64, "window": 8,
                    "partitions": 1, "reducer_port": 5}  # fmt: skip
    assert parse_request(body).kind == "ask"  # the daemon's model accepts it


def test_incctl_admits_an_ask_job_whose_mapper_and_reducer_the_switch_serves(
    daemon: ControllerDaemon, switch: LocalSwitch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = incctl.main(["--controller", daemon.url, "job", "submit", "--kind", "ask",
                        "--workers", "2", "--rows", "32", "--window", "4",
                        "--name", "wc"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "admitted: 2 mappers, rows [" in out, out
    job = ControllerApi(daemon.url).jobs()[0]
    assert job["kind"] == "ask" and job["region"]["size"] == 32
    code = incctl.main(["--controller", daemon.url, "job", "worker", str(job["job_id"]), "1"])
    cfg = json.loads(capsys.readouterr().out)
    assert code == 0 and cfg["reducer_id"] == 2 and cfg["tuples"] == ASK_TUPLES
    assert cfg["part_size"] == 16 and cfg["window"] == 4

    # mapper 1 sends one tuple ("spark", 5) from its port: the switch absorbs it and ACKs
    fp = fingerprint("spark")
    row, col = place(fp, cfg["part_base"], cfg["part_size"])
    keys, vals = [0] * ASK_TUPLES, [0] * ASK_TUPLES
    keys[col], vals[col] = fp, 5
    h = Header(op=Op.AGG_KV, job_id=job["job_id"], worker_id=1, psn=0, agg_idx=row, epoch=1,
               ver=1)  # fmt: skip
    mapper, reducer = (cfg["mac"], cfg["ip"]), (cfg["agg_mac"], cfg["agg_ip"])
    got = send(switch, cfg["switch_port"], mapper, reducer, kv_packet(h, keys, vals))
    assert [(p, bool(g.flags & Flag.ACK)) for p, g, _, _ in got] == [(cfg["switch_port"], True)]

    # the reducer (worker id 2, on port workers + 1) drains the row and finds the tuple
    drain = Header(op=Op.AGG_KV, flags=Flag.DRAIN, job_id=job["job_id"], worker_id=2,
                   agg_idx=row, epoch=1, ver=1)  # fmt: skip
    reducer_port = int(job["params"]["reducer_port"])
    got = send(switch, reducer_port, reducer, mapper,
               kv_packet(drain, [0] * ASK_TUPLES, [0] * ASK_TUPLES))  # fmt: skip
    assert len(got) == 1 and got[0][0] == reducer_port and got[0][1].flags & Flag.RESULT
    assert (int(got[0][2][col]), int(got[0][3][col])) == (fp, 5)

    # the same drain from a mapper's port is refused: only the reducer reads rows
    assert send(switch, cfg["switch_port"], mapper, reducer,
                kv_packet(drain, [0] * ASK_TUPLES, [0] * ASK_TUPLES)) == []  # fmt: skip


def test_an_ask_job_that_does_not_fit_is_one_line_refusal(
    daemon: ControllerDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    code = incctl.main(["--controller", daemon.url, "job", "submit", "--kind", "ask",
                        "--workers", "4", "--rows", "16", "--window", "8"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "need 32 seen entries" in err, err
