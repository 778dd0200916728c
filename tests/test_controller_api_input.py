"""The daemon's API and incctl under bad input: every case gets a one-line 4xx and changes
nothing (issue 14's list, probed as a new user would), plus a hypothesis fuzz of the API.

The daemon runs in-process against p4sim's P4Runtime server on localhost; requests go over
real sockets, raw where the point is a malformed request."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller import incctl
from controller.api_client import ApiError, ControllerApi
from controller.daemon import ControllerDaemon, DaemonConfig
from controller.p4rt.p4runtime_client import SwitchSpec
from tests.test_controller_daemon import TABLES, job_entries
from topologies.local_switch import LocalSwitch, PipelineFiles

REQUEST_TIMEOUT = 1.5  # the daemon's deadline for a request's head and body, in these tests


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
        )
    )
    d.start()
    yield d
    d.stop()


@pytest.fixture
def clean(daemon: ControllerDaemon) -> Iterator[ControllerApi]:
    """The API, with no job before and none left after the test."""
    api = ControllerApi(daemon.url)
    assert api.jobs() == []
    yield api
    for job in api.jobs():
        api.cancel(job["job_id"])


def address(daemon: ControllerDaemon) -> tuple[str, int]:
    host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def raw(daemon: ControllerDaemon, request: bytes, timeout: float = 10.0) -> tuple[int, Any, float]:
    """Send bytes as they are, but for ``Host: x``, which stands for this machine's name
    and the operator's token; (status, JSON body, seconds until the daemon answered)."""
    mine = f"Host: localhost\r\nAuthorization: Bearer {daemon.operator_token}\r\n"
    request = request.replace(b"Host: x\r\n", mine.encode(), 1)
    t0 = time.monotonic()
    with socket.create_connection(address(daemon), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            length = [
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ]
            if sep and length and len(body) >= length[0]:
                break
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(body), time.monotonic() - t0


def post(daemon: ControllerDaemon, path: str, body: bytes, extra: bytes = b"") -> tuple[int, Any]:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
    ).encode()
    status, answer, _ = raw(daemon, head + extra + b"\r\n" + body)
    return status, answer


def assert_one_line_error(status: int, body: Any, expect: int | tuple[int, ...]) -> str:
    assert status in ((expect,) if isinstance(expect, int) else expect), (status, body)
    assert set(body) == {"error"} and isinstance(body["error"], str)
    assert "\n" not in body["error"] and len(body["error"]) < 400
    assert "Traceback" not in body["error"]
    return str(body["error"])


def assert_nothing_admitted(daemon: ControllerDaemon, switch: LocalSwitch) -> None:
    api = ControllerApi(daemon.url)
    assert api.jobs() == []
    memory = api.memory()[0]
    assert memory["free"] == memory["pool_size"]
    assert job_entries(switch, 1) == dict.fromkeys(TABLES, 0)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("name", 12345, "name: Input should be a valid string"),
        ("agg_ip", 5, "agg_ip: Input should be a valid string"),
        ("worker_ips", [1, 2], "worker_ips.0: Input should be a valid string"),
        ("worker_ports", [True, 2], "worker_ports.0: Input should be a valid integer"),
        ("name", {"a": [1]}, "name: Input should be a valid string"),
        ("name", "x" * 65, "name: String should have at most 64 characters"),
        ("workers", "2", "workers: Input should be a valid integer"),
        ("kind", "gossip", "unknown job kind"),
        ("kind", 7, "unknown job kind"),
    ],
)
def test_wrongly_typed_fields_are_refused_and_change_nothing(
    daemon: ControllerDaemon,
    switch: LocalSwitch,
    clean: ControllerApi,
    field: str,
    value: Any,
    message: str,
) -> None:
    body = {"workers": 2, "window": 4, field: value}
    status, answer = post(daemon, "/jobs", json.dumps(body).encode())
    assert message in assert_one_line_error(status, answer, 400)
    assert_nothing_admitted(daemon, switch)
    assert incctl.main(["--controller", daemon.url, "job", "list"]) == 0


@pytest.mark.parametrize(
    "body, message",
    [
        ({"kind": "kv_cache", "workers": 2, "cache_size": 5000}, "cache_size: Input should be"),
        ({"kind": "kv_cache", "workers": 2, "server": 1}, "server: port 1 is a client's port"),
        ({"kind": "kv_cache", "workers": 2, "window": 4}, "window: Extra inputs are not"),
        ({"kind": "consensus", "workers": 1, "replicas": 2}, "replicas: Input should be"),
        ({"kind": "consensus", "workers": 1, "replica_ports": [1, 2, 3]}, "ports of their own"),
        ({"kind": "consensus", "workers": 1, "replica_ips": ["10.0.0.9"]}, "lists 1 values"),
    ],
    ids=["cache-too-big", "server-is-client", "kv-window", "two-replicas", "shared-port", "ips"],
)
def test_bad_key_value_and_consensus_requests_are_refused_and_change_nothing(
    daemon: ControllerDaemon,
    switch: LocalSwitch,
    clean: ControllerApi,
    body: dict[str, Any],
    message: str,
) -> None:
    status, answer = post(daemon, "/jobs", json.dumps(body).encode())
    assert message in assert_one_line_error(status, answer, 400)
    assert_nothing_admitted(daemon, switch)


def test_a_job_keeps_its_types_after_a_daemon_restart(files: PipelineFiles, tmp_path: Path) -> None:
    request = {
        "workers": 2,
        "window": 4,
        "name": "typed",
        "worker_ports": [3, 4],
        "worker_ips": ["10.0.0.3", "10.0.0.4"],
        "worker_macs": ["00:00:00:00:00:03", "00:00:00:00:00:04"],
        "agg_ip": "10.0.0.9",
    }
    switch = LocalSwitch(device_id=0).start()
    config = DaemonConfig(
        switches=(SwitchSpec(0, switch.address),),
        p4info=files.p4info,
        device_config=files.device_config,
        db=tmp_path / "c.db",
        listen=("127.0.0.1", 0),
    )
    first = ControllerDaemon(config)
    first.start()
    try:
        admitted = ControllerApi(first.url).submit(request)
    finally:
        first.stop()
    second = ControllerDaemon(config)
    second.start()
    try:
        api = ControllerApi(second.url)
        again = api.job(admitted["job_id"])
        assert again == admitted
        assert again["workers"][1] == {
            "worker_id": 1,
            "port": 4,
            "ip": "10.0.0.4",
            "mac": "00:00:00:00:00:04",
        }
        api.cancel(admitted["job_id"])
    finally:
        second.stop()
        switch.stop()


def test_a_body_over_the_limit_is_refused_before_it_is_read(
    daemon: ControllerDaemon, switch: LocalSwitch, clean: ControllerApi
) -> None:
    # A 300 MB name announced by Content-Length: refused at once, nothing is read.
    head = (
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 300000000\r\n\r\n"
    )
    status, answer, _ = raw(daemon, head + b'{"workers": 2, "window": 4, "name": "')
    assert "larger than" in assert_one_line_error(status, answer, 413)
    # The same as a chunked body: refused as soon as it passes the limit.
    chunk = b"x" * 60000
    body = b'{"workers": 2, "window": 4, "name": "' + chunk + chunk + b'"}'
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:70000], body[70000:]))
    head = (
        b"POST /jobs HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    status, answer, _ = raw(daemon, head + chunked + b"0\r\n\r\n")
    assert_one_line_error(status, answer, 413)
    assert_nothing_admitted(daemon, switch)


@pytest.mark.parametrize(
    "body, message",
    [
        (b'{"workers": 2, "window": 4, "name": "\xff\xfe"}', "not valid JSON"),
        (b"[" * 30000 + b"]" * 30000, "not valid JSON"),
        (b'{"workers": 2, "window": ', "not valid JSON"),
        (b"workers=2&window=4", "not valid JSON"),
        (b"[1, 2]", "valid dictionary"),
        (b"", "needs a JSON body"),
        (b'{"workers": 2, "window": 4, "name": ' + b"[" * 5000 + b"]" * 5000 + b"}", ""),
    ],
    ids=["not-utf8", "deeply-nested", "truncated", "form-encoded", "array", "empty", "nested"],
)
def test_malformed_bodies_get_400(
    daemon: ControllerDaemon, switch: LocalSwitch, clean: ControllerApi, body: bytes, message: str
) -> None:
    status, answer = post(daemon, "/jobs", body)
    assert message in assert_one_line_error(status, answer, 400)
    assert_nothing_admitted(daemon, switch)


@pytest.mark.parametrize("length", [b"abc", b"-1", b"1e3", b"99999999999999999999999"])
def test_a_malformed_content_length_gets_400_at_once(
    daemon: ControllerDaemon, switch: LocalSwitch, clean: ControllerApi, length: bytes
) -> None:
    request = b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n{}"
    status, answer, took = raw(daemon, request)
    assert "malformed HTTP request" in assert_one_line_error(status, answer, 400)
    assert took < REQUEST_TIMEOUT  # refused, not left to time out
    assert_nothing_admitted(daemon, switch)


@pytest.mark.parametrize(
    "path, status",
    [
        ("/jobs/" + "9" * 5000, 400),
        ("/jobs/" + "9" * 5000 + "/workers/0", 400),
        ("/jobs/1/workers/" + "9" * 5000, 400),
        ("/jobs/0", 400),
        ("/jobs/-1", 400),
        ("/jobs/abc", 400),
        ("/jobs/42", 404),
        ("/nothing", 404),
    ],
)
def test_bad_ids_and_paths_get_one_line_errors(
    daemon: ControllerDaemon, path: str, status: int
) -> None:
    got, answer, _ = raw(daemon, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert_one_line_error(got, answer, status)


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_methods_a_resource_does_not_have_get_405_as_json(
    daemon: ControllerDaemon, method: str
) -> None:
    request = (
        f"{method} /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 2\r\n\r\n{}"
    ).encode()
    status, answer, _ = raw(daemon, request)
    assert f"{method} not allowed on /jobs" == assert_one_line_error(status, answer, 405)


def test_a_request_whose_body_never_comes_is_answered_408_and_changes_nothing(
    daemon: ControllerDaemon, switch: LocalSwitch, clean: ControllerApi
) -> None:
    head = (
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 40\r\n\r\n"
    )
    status, answer, took = raw(daemon, head + b'{"workers": 2,')
    assert "did not arrive" in assert_one_line_error(status, answer, 408)
    assert REQUEST_TIMEOUT <= took < REQUEST_TIMEOUT + 5
    assert_nothing_admitted(daemon, switch)


def test_a_connection_that_never_finishes_its_request_head_is_closed(
    daemon: ControllerDaemon,
) -> None:
    status, answer, took = raw(daemon, b"GET /jobs HTTP/1.1\r\nHost: x\r\n")
    assert "no complete request" in assert_one_line_error(status, answer, 408)
    assert REQUEST_TIMEOUT <= took < REQUEST_TIMEOUT + 5
    with socket.create_connection(address(daemon), timeout=10) as idle:  # sends nothing
        assert b"408" in idle.recv(1024)


def test_slow_clients_do_not_hold_up_others(daemon: ControllerDaemon) -> None:
    stalled = [socket.create_connection(address(daemon)) for _ in range(20)]
    try:
        for s in stalled:
            s.sendall(
                b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 10\r\n\r\n{"
            )
        assert ControllerApi(daemon.url, timeout=5).switches()[0]["primary"] is True
    finally:
        for s in stalled:
            s.close()


def test_changes_from_another_origin_are_refused(
    daemon: ControllerDaemon, switch: LocalSwitch, clean: ControllerApi
) -> None:
    body = json.dumps({"workers": 2, "window": 4}).encode()
    status, answer = post(daemon, "/jobs", body, b"Origin: http://evil.example\r\n")
    assert "from a page of 'http://evil.example'" in assert_one_line_error(status, answer, 403)
    status, answer = post(daemon, "/jobs", body, b"Sec-Fetch-Site: cross-site\r\n")
    assert "another site" in assert_one_line_error(status, answer, 403)
    assert_nothing_admitted(daemon, switch)
    # The dashboard's own origin is fine.
    host = daemon.url.removeprefix("http://")
    request = (
        f"POST /jobs HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n"
        f"Authorization: Bearer {daemon.operator_token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    status, answer, _ = raw(daemon, request + body)
    assert status == 201 and answer["job"]["n_workers"] == 2


def test_only_loopback_and_the_unix_socket_count_as_this_machine() -> None:
    from starlette.requests import Request

    from controller.api.tenants import is_local

    def request(client: tuple[str, int] | None) -> Request:
        return Request({"type": "http", "method": "GET", "headers": [], "client": client})

    assert is_local(request(("127.0.0.1", 5000)))
    assert is_local(request(("::1", 5000)))
    assert is_local(request(None))  # the Unix socket
    assert not is_local(request(("10.0.0.7", 5000)))


def test_the_unix_socket_serves_the_same_api(
    daemon: ControllerDaemon, clean: ControllerApi
) -> None:
    assert daemon.config.unix is not None
    api = ControllerApi(f"unix:{daemon.config.unix}")
    job = api.submit({"workers": 2, "window": 4})
    assert api.worker_config(job["job_id"], 1)["worker_id"] == 1
    api.report_progress(job["job_id"], 1, {"results": 10}, {"epoch": 1.0})
    with pytest.raises(ApiError, match="no job 999"):
        api.report_progress(999, 0, {"results": 1})
    with pytest.raises(ApiError, match="counters"):
        api.report_progress(job["job_id"], 0, {"Not A Name": 1})


# --------------------------------------------------------------------------------- incctl


def garbage_server() -> tuple[int, threading.Thread]:
    """A TCP port that answers like an SSH server, not HTTP."""
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with srv:
            for _ in range(2):
                conn, _ = srv.accept()
                with conn:
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv.getsockname()[1], t


@pytest.mark.parametrize(
    "url, message",
    [
        ("garbage", "bad controller URL 'garbage'"),
        ("http://[::1", "bad controller URL 'http://[::1'"),
        ("http://127.0.0.1:notaport", "bad controller URL"),
        ("ftp://127.0.0.1:7070", "bad controller URL"),
        ("unix:/nonexistent/controller.sock", "cannot reach the controller"),
        ("GARBAGE_SERVER", "did not answer in HTTP"),
    ],
)
def test_incctl_with_a_bad_controller_url_prints_one_line(
    url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if url == "GARBAGE_SERVER":
        port, _ = garbage_server()
        url = f"http://127.0.0.1:{port}"
    assert incctl.main(["--controller", url, "job", "list"]) == 1
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err + captured.out


# ----------------------------------------------------------------------------------- fuzz

JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = st.sampled_from(
    ["kind", "workers", "window", "name", "slots", "region_size", "device_id", "worker_ports",
     "worker_ips", "worker_macs", "agg_ip", "agg_mac"]
)  # fmt: skip
PLAUSIBLE = st.fixed_dictionaries(
    {"workers": st.integers(-2, 40), "window": st.integers(-2, 300)},
    optional={f: JSON for f in ["name", "worker_ports", "agg_ip", "kind", "region_size"]},
)
BODIES = (
    PLAUSIBLE.map(lambda d: json.dumps(d).encode())
    | st.dictionaries(FIELDS, JSON, max_size=6).map(lambda d: json.dumps(d).encode())
    | JSON.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=200)
)
PATHS = st.sampled_from(
    ["/jobs", "/jobs/1", "/jobs/1/workers/0", "/jobs/1/workers/0/progress", "/memory",
     "/switches", "/stats", "/events", "/jobs/%00", "/jobs/1/workers/-1", "/../etc/passwd"]
)  # fmt: skip
METHODS = st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"])


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(method=METHODS, path=PATHS, body=BODIES)
def test_fuzzed_requests_get_json_answers_and_never_a_500(
    daemon: ControllerDaemon, method: str, path: str, body: bytes
) -> None:
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(address(daemon), timeout=30) as s:
        s.sendall(head + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    assert status < 500, data[:300]
    payload = data.partition(b"\r\n\r\n")[2]
    if status >= 400 and method != "HEAD":
        assert_one_line_error(status, json.loads(payload), status)
    if status == 201:  # admitted: it must read back with the types it was given
        job = json.loads(payload)["job"]
        api = ControllerApi(daemon.url)
        assert api.job(job["job_id"]) == job
        api.cancel(job["job_id"])
    assert ControllerApi(daemon.url).jobs() == []  # whatever happened, incctl list works


def test_the_openapi_description_lists_each_kinds_request_and_every_route(
    daemon: ControllerDaemon,
) -> None:
    from controller.jobs.job_kinds import kinds

    with urllib.request.urlopen(daemon.url + "/openapi.json", timeout=30) as resp:
        spec = json.loads(resp.read())
    for kind in kinds().values():
        fields = spec["components"]["schemas"][kind.request.__name__]["properties"]
        assert {"kind", "workers", "name", "agg_ip"} <= fields.keys()
    assert fields["name"]["maxLength"] == 64
    assert {
        "/jobs",
        "/jobs/{job_id}",
        "/jobs/{job_id}/workers/{worker_id}",
        "/jobs/{job_id}/workers/{worker_id}/progress",
        "/memory",
        "/switches",
        "/stats",
        "/stats/stream",
        "/metrics",
        "/events",
    } <= spec["paths"].keys()
