"""The API's tenants and its guards against the outside: every change to a job takes that
job's token (or the operator's), and requests that a browser page, a slow client or a
greedy one can make change nothing and starve no worker (issue 25, item 5).

The daemon runs in-process against p4sim's P4Runtime server; requests go over real
sockets, raw where the point is what a hostile client sends."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import Caps
from controller.api_client import ApiError, ControllerApi
from controller.daemon import ControllerDaemon, DaemonConfig
from controller.jobs.job_kinds import parse_request
from controller.p4rt.p4runtime_client import SwitchSpec
from tests.test_controller_daemon import TABLES, job_entries
from topologies.local_switch import LocalSwitch, PipelineFiles

REQUEST_TIMEOUT = 1.5  # the daemon's deadline for a request's head and whole body
CAPS = Caps(streams_per_client=2, streams=4, polls_per_worker=1, polls=4)
MAX_CONNECTIONS = 12
PER_CLIENT = 4
SCHEDULED = {"workers": 2, "worker_ports": [3, 4], "class": "be", "epochs": 5,
             "model_bytes": 4096, "compute_ms": 20.0}  # fmt: skip


@pytest.fixture(scope="module")
def switch() -> Iterator[LocalSwitch]:
    with LocalSwitch(device_id=0) as sw:
        yield sw


@pytest.fixture(scope="module")
def daemon(
    switch: LocalSwitch, files: PipelineFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerDaemon]:
    run = tmp_path_factory.mktemp("run")
    d = ControllerDaemon(
        DaemonConfig(
            switches=(SwitchSpec(0, switch.address),),
            p4info=files.p4info,
            device_config=files.device_config,
            db=run / "controller.db",
            listen=("127.0.0.1", 0),
            pool_size=256,
            unix=run / "controller.sock",
            request_timeout=REQUEST_TIMEOUT,
            caps=CAPS,
            max_connections=MAX_CONNECTIONS,
            per_client=PER_CLIENT,
            stats_interval=0.2,
        )
    )
    d.start()
    yield d
    d.stop()


@pytest.fixture
def operator(daemon: ControllerDaemon) -> Iterator[ControllerApi]:
    """The operator's client, as incctl on this machine (no job before, none after)."""
    api = ControllerApi(daemon.url)
    assert api.jobs() == []
    yield api
    for job in api.jobs():
        api.cancel(job["job_id"])


def address(daemon: ControllerDaemon) -> tuple[str, int]:
    host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def request(
    daemon: ControllerDaemon,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One request as a hostile client may write it: (status, JSON answer)."""
    data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    fields = {"Host": "localhost", "Connection": "close", "Content-Length": str(len(data))}
    if body is not None and not isinstance(body, bytes):
        fields["Content-Type"] = "application/json"
    if token is not None:
        fields["Authorization"] = f"Bearer {token}"
    fields.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    with socket.create_connection(address(daemon), timeout=10) as s:
        s.sendall(head.encode() + b"\r\n" + data)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    payload = answer.partition(b"\r\n\r\n")[2]
    return status, json.loads(payload) if payload else None


def one_line(status: int, answer: Any, expect: int) -> str:
    assert status == expect, (status, answer)
    assert set(answer) == {"error"} and "\n" not in answer["error"]
    return str(answer["error"])


# ------------------------------------------------------------------------------- tenants


def two_tenants(operator: ControllerApi) -> tuple[dict[str, Any], str, dict[str, Any], str]:
    """A serene job (a mode) and a scheduled job (epochs), each with its own token."""
    a = operator.submit({"kind": "serene", "workers": 2, "window": 4, "mode": "sync"})
    b = operator.submit(SCHEDULED)
    return a, operator.job_tokens[a["job_id"]], b, operator.job_tokens[b["job_id"]]


def state(daemon: ControllerDaemon, switch: LocalSwitch, job_id: int) -> dict[str, Any]:
    """What a forged change could alter: the job, its entries, mode, epochs, reports."""
    api = ControllerApi(daemon.url)
    view = next((j for j in api.schedule().get("jobs", []) if j.get("job_id") == job_id), {})
    return {
        "job": api.job(job_id),
        "entries": job_entries(switch, job_id),
        "epochs": view.get("worker_epochs"),
        "reports": daemon.reports.of_job(job_id),
    }


WRITES = [
    ("DELETE", "/jobs/{id}", None),
    ("POST", "/jobs/{id}/mode", {"mode": "async"}),
    ("POST", "/jobs/{id}/workers/0/epoch", {"epoch": 0}),
    ("POST", "/jobs/{id}/workers/0/progress", {"counters": {"results": 7}}),
]


@pytest.mark.parametrize("method, path, body", WRITES, ids=["cancel", "mode", "epoch", "progress"])
def test_another_tenants_token_changes_nothing_of_a_job(
    daemon: ControllerDaemon,
    switch: LocalSwitch,
    operator: ControllerApi,
    method: str,
    path: str,
    body: Any,
) -> None:
    a, token_a, b, token_b = two_tenants(operator)
    for victim, forger in ((a, token_b), (b, token_a)):
        target = path.format(id=victim["job_id"])
        before = state(daemon, switch, victim["job_id"])
        status, answer = request(daemon, method, target, body, token=forger)
        assert f"does not allow changing job {victim['job_id']}" in one_line(status, answer, 403)
        status, answer = request(daemon, method, target, body)  # no token at all
        assert "needs a token" in one_line(status, answer, 401)
        status, answer = request(daemon, method, target, body, token=forger[::-1])  # made up
        one_line(status, answer, 403)
        assert state(daemon, switch, victim["job_id"]) == before


def test_a_jobs_own_token_and_the_operators_change_it(
    daemon: ControllerDaemon, switch: LocalSwitch, operator: ControllerApi
) -> None:
    a, token_a, b, token_b = two_tenants(operator)
    status, answer = request(
        daemon, "POST", f"/jobs/{a['job_id']}/mode", {"mode": "async"}, token_a
    )
    assert status == 200 and answer["mode"] == "async", answer
    path = f"/jobs/{b['job_id']}/workers/1/progress"
    assert request(daemon, "POST", path, {"counters": {"results": 3}}, token_b)[0] == 204
    assert daemon.reports.of_job(b["job_id"])[1][1].counters == {"results": 3}
    # Submitting takes the operator's token: a tenant's does not do.
    status, answer = request(daemon, "POST", "/jobs", {"workers": 2, "window": 4}, token_a)
    assert "submitting a job" in one_line(status, answer, 403)
    assert request(daemon, "DELETE", f"/jobs/{b['job_id']}", token=token_b)[0] == 200
    assert job_entries(switch, b["job_id"]) == dict.fromkeys(TABLES, 0)


def test_a_cancelled_jobs_token_does_not_own_the_next_job_of_its_id(
    daemon: ControllerDaemon, operator: ControllerApi
) -> None:
    old = operator.submit({"workers": 2, "window": 4})
    stale = operator.job_tokens[old["job_id"]]
    operator.cancel(old["job_id"])
    new = operator.submit({"workers": 2, "window": 4})
    assert new["job_id"] == old["job_id"]
    status, answer = request(daemon, "DELETE", f"/jobs/{new['job_id']}", token=stale)
    one_line(status, answer, 403)
    # A job that ends inside the controller (a scheduled job's last epoch) leaves its token
    # stored; a job admitted with its id before it gets a token of its own is not the
    # old token's either.
    stale = operator.job_tokens.pop(new["job_id"])
    assert daemon.manager is not None
    daemon.call(daemon.manager.cancel(new["job_id"]))
    again = daemon.call(daemon.manager.submit(parse_request({"workers": 2, "window": 4})))
    assert again.job_id == new["job_id"]
    status, answer = request(daemon, "DELETE", f"/jobs/{again.job_id}", token=stale)
    one_line(status, answer, 403)
    assert operator.job(again.job_id)["created_at"] == again.created_at


def test_a_jobs_control_key_goes_to_its_token_only_and_changes_with_the_job(
    daemon: ControllerDaemon, operator: ControllerApi
) -> None:
    a, token_a, b, token_b = two_tenants(operator)
    path = f"/jobs/{a['job_id']}/key"
    status, answer = request(daemon, "GET", path, token=token_a)
    assert status == 200, answer
    key = bytes.fromhex(answer["key"])
    assert len(key) == 32 and request(daemon, "GET", path, token=token_a)[1] == answer
    assert operator.control_key(a["job_id"]) == key  # the operator's token, found as a file
    # On this machine too, reading the key takes the job's token: reading jobs does not.
    assert "needs a token" in one_line(*request(daemon, "GET", path), 401)
    assert "does not allow" in one_line(*request(daemon, "GET", path, token=token_b), 403)
    assert request(daemon, "GET", f"/jobs/{b['job_id']}/key", token=token_b)[1] != answer
    # The next job with the same id gets another key: the old one opens nothing of it.
    operator.cancel(a["job_id"])
    again = operator.submit({"kind": "serene", "workers": 2, "window": 4, "mode": "sync"})
    assert again["job_id"] == a["job_id"] and operator.control_key(again["job_id"]) != key
    one_line(*request(daemon, "GET", "/jobs/99/key", token=operator.token_for(None)), 404)


def test_tokens_are_kept_hashed_and_handed_over_as_private_files(
    daemon: ControllerDaemon, operator: ControllerApi
) -> None:
    job = operator.submit({"workers": 2, "window": 4})
    token = operator.job_tokens[job["job_id"]]
    folder = daemon.config.tokens_in
    for name, secret in (
        ("operator.token", daemon.operator_token),
        (f"job-{job['job_id']}.token", token),
    ):
        path = folder / name
        assert path.read_text() == secret and path.stat().st_mode & 0o777 == 0o600
    assert daemon.store is not None
    stored = daemon.store.token(job["job_id"])
    assert stored is not None and token not in stored[0] and len(stored[0]) == 64
    # A host of the job on this machine finds its token without being told (unix: URL).
    host = ControllerApi(f"unix:{daemon.config.unix}")
    assert host.token_for(job["job_id"]) == token
    host.report_progress(job["job_id"], 0, {"results": 1})
    operator.cancel(job["job_id"])
    assert not (folder / f"job-{job['job_id']}.token").exists()


# ---------------------------------------------------------------- browsers and bodies


@pytest.mark.parametrize("method, path", [("GET", "/stats"), ("GET", "/jobs"), ("POST", "/jobs")])
def test_a_rebound_dns_name_reaches_nothing_even_with_a_matching_origin(
    daemon: ControllerDaemon, switch: LocalSwitch, operator: ControllerApi, method: str, path: str
) -> None:
    # A page of evil.example whose name now resolves to 127.0.0.1: Origin == Host.
    rebound = {"Host": "evil.example", "Origin": "http://evil.example"}
    body = {"workers": 2, "window": 4} if method == "POST" else None
    status, answer = request(daemon, method, path, body, daemon.operator_token, rebound)
    assert "'evil.example' is not a name of this controller" in one_line(status, answer, 400)
    assert operator.jobs() == [] and job_entries(switch, 1) == dict.fromkeys(TABLES, 0)


@pytest.mark.parametrize(
    "content_type, body",
    [("text/plain", b'{"workers": 2, "window": 4}'), ("application/x-www-form-urlencoded",
     b"workers=2&window=4"), ("multipart/form-data; boundary=x", b"--x--"), (None, b"{}")],
    ids=["text-plain", "form", "multipart", "none"],
)  # fmt: skip
def test_a_change_with_a_body_that_is_not_json_gets_415_and_changes_nothing(
    daemon: ControllerDaemon,
    switch: LocalSwitch,
    operator: ControllerApi,
    content_type: str | None,
    body: bytes,
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    status, answer = request(daemon, "POST", "/jobs", body, daemon.operator_token, headers)
    assert "takes a JSON body" in one_line(status, answer, 415)
    assert operator.jobs() == [] and job_entries(switch, 1) == dict.fromkeys(TABLES, 0)


def test_a_body_trickled_in_small_pieces_gets_408_at_the_whole_bodys_deadline(
    daemon: ControllerDaemon, switch: LocalSwitch, operator: ControllerApi
) -> None:
    body = json.dumps({"workers": 2, "window": 4, "name": "x" * 40}).encode()
    head = (
        f"POST /jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {daemon.operator_token}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    t0 = time.monotonic()
    with socket.create_connection(address(daemon), timeout=10) as s:
        s.sendall(head)
        answer = b""
        for i in range(len(body)):  # one byte every 0.1 s: each piece in time, the body not
            s.sendall(body[i : i + 1])
            time.sleep(0.1)
            s.setblocking(False)
            try:
                answer += s.recv(65536)
            except BlockingIOError:
                pass
            s.setblocking(True)
            if answer:
                break
    took = time.monotonic() - t0
    assert b" 408 " in answer.split(b"\r\n")[0], answer[:200]
    assert REQUEST_TIMEOUT <= took < REQUEST_TIMEOUT + 1.0
    assert operator.jobs() == [] and job_entries(switch, 1) == dict.fromkeys(TABLES, 0)


# ------------------------------------------------------------- streams and long polls


def open_stream(daemon: ControllerDaemon, source: str) -> tuple[socket.socket, int]:
    """An event stream from loopback address ``source``: the socket, the status."""
    s = socket.socket()
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(address(daemon))
    s.sendall(b"GET /stats/stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
    head = b""
    while b"\r\n" not in head:
        head += s.recv(1)
    return s, int(head.split(b" ", 2)[1])


def test_event_streams_are_capped_per_client_and_in_all_and_workers_are_still_served(
    daemon: ControllerDaemon, operator: ControllerApi
) -> None:
    job = operator.submit(SCHEDULED)
    worker = ControllerApi(f"unix:{daemon.config.unix}", timeout=5)
    opened: list[socket.socket] = []
    statuses: dict[str, list[int]] = {}
    try:
        for source in [f"127.0.0.{n}" for n in range(2, 2 + MAX_CONNECTIONS)]:
            for _ in range(2):
                s, status = open_stream(daemon, source)
                statuses.setdefault(source, []).append(status)
                if status == 200:
                    opened.append(s)
                else:
                    s.close()
        # Every stream slot taken: workers' requests (epochs, reports) are still answered.
        for w in (0, 1):
            assert worker.epoch(job["job_id"], w, 0)["epoch"] == 0
            worker.report_progress(job["job_id"], w, {"results": 1})
        held = [status for seen in statuses.values() for status in seen if status == 200]
        assert len(held) == CAPS.streams  # the first clients' two each, then none
        assert statuses["127.0.0.2"] == [200, 200]
        assert statuses[f"127.0.0.{1 + MAX_CONNECTIONS}"] == [503, 503]
        s, status = open_stream(daemon, "127.0.0.2")  # a third from one client
        s.close()
        assert status == 503
    finally:
        for s in opened:
            s.close()


def test_one_address_holds_at_most_its_share_of_connections_and_others_are_served(
    daemon: ControllerDaemon,
) -> None:
    def connect(source: str) -> socket.socket:
        s = socket.socket()
        s.settimeout(5)
        s.bind((source, 0))
        s.connect(address(daemon))
        return s

    idle = [connect("127.0.0.50") for _ in range(PER_CLIENT)]  # each sends nothing
    try:
        with connect("127.0.0.50") as extra:
            answer = extra.recv(4096)
        assert b" 503 " in answer.split(b"\r\n")[0] and b"too many connections" in answer
        with connect("127.0.0.51") as other:
            other.sendall(b"GET /switches HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert other.recv(4096).startswith(b"HTTP/1.1 200 ")
    finally:
        for s in idle:
            s.close()


def test_a_worker_holds_at_most_its_share_of_long_polls(
    daemon: ControllerDaemon, operator: ControllerApi
) -> None:
    # The pool taken by plain jobs: a scheduled job's epoch requests wait for memory.
    port = 10
    while True:
        try:
            operator.submit({"workers": 2, "worker_ports": [port, port + 1], "window": 32})
        except ApiError as err:
            assert err.status == 409
            break
        port += 2
    job = operator.submit(SCHEDULED)
    token = operator.job_tokens[job["job_id"]]
    path = f"/jobs/{job['job_id']}/workers/0/epoch"
    body = json.dumps({"epoch": 0, "wait": 5.0}).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(address(daemon), timeout=10) as waiting:
        waiting.sendall(head.encode() + body)
        deadline = time.monotonic() + 5
        while daemon.call(_held_polls(daemon)) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert daemon.call(_held_polls(daemon)) == 1
        status, answer = request(daemon, "POST", path, {"epoch": 0, "wait": 5.0}, token)
        assert "too many waiting epoch requests of job" in one_line(status, answer, 503)
        # A request that does not wait is never refused for want of a slot.
        status, answer = request(daemon, "POST", path, {"epoch": 0}, token)
        assert status == 200, answer


async def _held_polls(daemon: ControllerDaemon) -> int:
    assert daemon._server is not None
    return int(daemon._server.app.state.polls.held)


def test_the_daemon_tells_only_this_machine_where_its_tokens_are(
    daemon: ControllerDaemon, tmp_path: Path
) -> None:
    status, answer = request(daemon, "GET", "/tokens")
    assert status == 200 and answer["token_dir"] == str(daemon.config.tokens_in.resolve())
    with pytest.raises(ApiError, match="needs a token"):
        ControllerApi(daemon.url, token_dir=tmp_path).submit({"workers": 2, "window": 4})
