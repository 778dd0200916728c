"""The API over TCP for a worker on another machine, with TLS and its job's token.

The daemon listens on a veth link's address (not loopback) with a self-signed
certificate; the "other machine" is a network namespace on the far end of the link, where
a worker uses ``controller.api_client`` with nothing but the URL, the certificate and its
job's token in its environment (``INC_TOKEN``, ``INC_CA_FILE``), as docs/deploy.md says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.api_client import ControllerApi
from controller.daemon import ControllerDaemon, DaemonConfig
from controller.p4rt.p4runtime_client import SwitchSpec
from topologies.local_switch import LocalSwitch, PipelineFiles

pytestmark = pytest.mark.root

TAG = os.getpid() % 100000
NETNS = f"incapi{TAG}"
NEAR, FAR = f"ia{TAG}", f"ib{TAG}"
CONTROLLER_IP, WORKER_IP = "10.254.77.1", "10.254.77.2"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def other_machine() -> Iterator[str]:
    """A namespace one veth link away: the controller's side is CONTROLLER_IP."""
    ip("netns", "add", NETNS)
    try:
        ip("link", "add", NEAR, "type", "veth", "peer", "name", FAR)
        ip("link", "set", FAR, "netns", NETNS)
        ip("addr", "add", f"{CONTROLLER_IP}/30", "dev", NEAR)
        ip("link", "set", NEAR, "up")
        ip("-n", NETNS, "addr", "add", f"{WORKER_IP}/30", "dev", FAR)
        ip("-n", NETNS, "link", "set", FAR, "up")
        ip("-n", NETNS, "link", "set", "lo", "up")
        yield NETNS
    finally:
        subprocess.run(["ip", "link", "del", NEAR], capture_output=True)
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", f"/CN={CONTROLLER_IP}", "-addext", f"subjectAltName=IP:{CONTROLLER_IP}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


WORKER = """
import json, os, sys
from controller.api_client import ApiError, ControllerApi
url, job, other = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
api = ControllerApi(url, timeout=10)            # INC_TOKEN, INC_CA_FILE from the environment
out = {}
def attempt(name, call):
    try:
        call()
        out[name] = 200
    except ApiError as err:
        out[name] = err.status
attempt("config", lambda: api.worker_config(job, 1))
attempt("progress", lambda: api.report_progress(job, 1, {"results": 5}))
attempt("other_config", lambda: api.worker_config(other, 0))
attempt("other_cancel", lambda: api.cancel(other))
attempt("list", lambda: api.jobs())
attempt("plain_http", lambda: ControllerApi(url.replace("https", "http"), timeout=5).jobs())
del os.environ["INC_TOKEN"]
attempt("no_token", lambda: ControllerApi(url, timeout=10).worker_config(job, 1))
print(json.dumps(out))
"""


def test_a_worker_on_another_machine_uses_its_token_over_tls(
    switch: LocalSwitch,
    files: PipelineFiles,
    tmp_path: Path,
    other_machine: str,
    certificate: tuple[Path, Path],
) -> None:
    daemon = ControllerDaemon(
        DaemonConfig(
            switches=(SwitchSpec(0, switch.address),),
            p4info=files.p4info,
            device_config=files.device_config,
            db=tmp_path / "controller.db",
            listen=(CONTROLLER_IP, 0),
            unix=tmp_path / "controller.sock",
            tls=certificate,
            pool_size=64,
        )
    )
    daemon.start()
    try:
        assert daemon.url.startswith(f"https://{CONTROLLER_IP}:")
        operator = ControllerApi(f"unix:{daemon.config.unix}")
        job = operator.submit({"workers": 2, "window": 4})["job_id"]
        other = operator.submit({"workers": 2, "worker_ports": [3, 4], "window": 4})["job_id"]
        env = {**os.environ, "INC_TOKEN": operator.job_tokens[job],
               "INC_CA_FILE": str(certificate[0])}  # fmt: skip
        env.pop("INC_TOKEN_DIR", None)
        done = subprocess.run(
            ["ip", "netns", "exec", other_machine, sys.executable, "-c", WORKER,
             daemon.url, str(job), str(other)],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert seen == {
            "config": 200,  # its own job, with its token
            "progress": 200,
            "other_config": 403,  # another job's: not even to read, from elsewhere
            "other_cancel": 403,
            "list": 403,  # what is not under its job: the operator's
            "no_token": 401,
            "plain_http": 0,  # TLS only: plain HTTP gets no HTTP answer
        }, seen
        assert daemon.reports.of_job(job)[1][1].counters == {"results": 5}
        assert {j["job_id"] for j in operator.jobs()} == {job, other}
    finally:
        daemon.stop()
