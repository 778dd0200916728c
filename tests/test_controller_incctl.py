"""incctl: usage errors exit 2 with a usage message; an unreachable controller is one line."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from controller import incctl


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = incctl.main(list(argv))
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there once the socket is closed


@pytest.mark.parametrize(
    "argv, complaint",
    [
        ((), "required"),
        (("job",), "required"),
        (("job", "submit", "--window", "4"), "--workers"),
        (("job", "submit", "--workers", "four", "--window", "4"), "positive integer"),
        (("job", "submit", "--workers", "0", "--window", "4"), "positive integer"),
        (
            ("job", "submit", "--workers", "2", "--window", "4", "--worker-ports", "1,x"),
            "comma-separated integers",
        ),
        (("job", "cancel", "abc"), "invalid int value"),
        (("job", "frobnicate"), "invalid choice"),
        (("switch", "memory", "--bogus"), "unrecognized arguments"),
    ],
)
def test_usage_errors_exit_2_with_usage_and_no_traceback(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], complaint: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert "usage: incctl" in err
    assert complaint in err
    assert "Traceback" not in err + out


def test_unreachable_controller_is_one_clear_line_and_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = closed_port_url()
    code, out, err = run(capsys, "--controller", url, "job", "list")
    assert code == 1
    assert err.strip().count("\n") == 0
    assert f"cannot reach the controller at {url}" in err
    assert out == ""


def test_console_entry_point_prints_no_traceback_when_controller_is_down() -> None:
    url = closed_port_url()
    proc = subprocess.run(
        [sys.executable, "-m", "controller.incctl", "--controller", url, "switch", "memory"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("incctl: cannot reach the controller")


def test_submit_sends_only_the_options_given() -> None:
    args = incctl.parser().parse_args(
        ["job", "submit", "--workers", "3", "--window", "8", "--worker-ports", "4,5,6"]
    )
    body = incctl._submit_body(args)
    assert body == {"workers": 3, "window": 8, "slots": 32, "name": "", "worker_ports": [4, 5, 6]}


def test_submit_of_key_value_and_consensus_jobs_sends_their_options_and_no_slots() -> None:
    kv = incctl.parser().parse_args(
        ["job", "submit", "--kind", "kv_cache", "--workers", "2", "--cache-size", "16",
         "--server", "3", "--refresh-ms", "250"]
    )  # fmt: skip
    assert incctl._submit_body(kv) == {
        "workers": 2, "kind": "kv_cache", "name": "", "cache_size": 16, "server": 3,
        "refresh_ms": 250,
    }  # fmt: skip
    log = incctl.parser().parse_args(
        ["job", "submit", "--kind", "consensus", "--workers", "1", "--replica-ports", "2,3,4"]
    )
    assert incctl._submit_body(log) == {
        "workers": 1, "kind": "consensus", "name": "", "replica_ports": [2, 3, 4],
    }  # fmt: skip
    import controller.systems  # noqa: F401  (every kind registered, as in the daemon)
    from controller.jobs.job_kinds import parse_request

    assert parse_request(incctl._submit_body(kv)).kind == "kv_cache"  # the daemon accepts it
    assert parse_request(incctl._submit_body(log)).kind == "consensus"


def test_each_kind_is_a_subcommand_with_the_shared_options_and_only_its_own(capsys) -> None:
    for kind, own, foreign in [("atp", "--pool-size", "--rows"), ("ask", "--rows", "--slots")]:
        with pytest.raises(SystemExit):
            incctl.parser().parse_args(["job", "submit", kind, "--help"])
        shown = capsys.readouterr().out
        assert "--workers" in shown and "--agg-ip" in shown and own in shown
        assert foreign not in shown
    with pytest.raises(SystemExit) as err:
        incctl.parser().parse_args(["job", "submit", "atp", "--workers", "2", "--rows", "8"])
    assert err.value.code == 2


def test_the_flat_submit_form_means_the_same_as_the_kind_subcommand() -> None:
    flat = ["job", "submit", "--workers", "2", "--kind", "serene", "--mode", "partial 1"]
    per_kind = ["job", "submit", "serene", "--workers", "2", "--mode", "partial 1"]
    bodies = [incctl._submit_body(incctl.parser().parse_args(a)) for a in (flat, per_kind)]
    assert bodies[0] == bodies[1] and bodies[0]["kind"] == "serene"
    default = incctl.parser().parse_args(["job", "submit", "--workers", "2"])
    assert default.kind == "netreduce" and "kind" not in incctl._submit_body(default)
