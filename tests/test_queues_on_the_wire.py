"""A real p4sim process: an egress queue set at run time with ``p4sim cli`` (the
simple_switch_CLI commands on --thrift-port) builds up behind a slow port, and the
tutorials' ECN program marks the packets that find it long (root: veth links)."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from p4sim.ports import open_raw_socket

pytestmark = pytest.mark.root
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def links():
    tag = f"q{os.getpid() % 10000}"
    pairs = [(f"{tag}s1", f"{tag}h1"), (f"{tag}s2", f"{tag}h2")]
    try:
        for a, b in pairs:
            subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
            for n in (a, b):
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{n}.disable_ipv6=1"], check=False)
                subprocess.run(["ip", "link", "set", n, "up"], check=True)
        yield pairs
    finally:
        for a, _ in pairs:
            subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)


def _cli(port: int, commands: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "p4sim.cli", "cli", "--thrift-port", str(port)],
        input=commands,
        capture_output=True,
        text=True,
        timeout=30,
    )


def _packet(ident: int) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(
        Ether(dst="08:00:00:00:02:00", src="08:00:00:00:01:11")
        / IP(src="10.0.1.1", dst="10.0.2.2", tos=1, id=ident)  # ECN-capable (ECT(1))
        / UDP(sport=7, dport=8)
        / b"ecn"
    )


def test_a_queue_set_at_run_time_builds_up_and_ecn_marks_packets(links, tmp_path):
    (s1, h1), (s2, h2) = links
    runtime = tmp_path / "s1-runtime.json"
    runtime.write_text(
        json.dumps(
            {
                "target": "bmv2",
                "table_entries": [
                    {
                        "table": "RouterIngress.ipv4_lpm",
                        "match": {"hdr.ipv4.dstAddr": ["10.0.2.2", 32]},
                        "action_name": "RouterIngress.ipv4_forward",
                        "action_params": {"dstAddr": "08:00:00:00:02:22", "port": 2},
                    }
                ],
            }
        )
    )
    thrift, grpc = _free_port(), _free_port()
    log = tmp_path / "p4sim.log"
    cmd = [sys.executable, "-m", "p4sim.cli", "-i", f"1@{s1}", "-i", f"2@{s2}"]
    cmd += ["--thrift-port", str(thrift), "--log-file", str(log), "--backend", "python"]
    cmd += ["--runtime-json", str(runtime), str(ROOT / "tests/p4/tutorials/ecn/ecn.p4")]
    cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc}"]
    switch = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rx = open_raw_socket(h2)
    tx = open_raw_socket(h1)
    try:
        deadline = time.monotonic() + 30
        while "running on" not in (log.read_text() if log.exists() else ""):
            assert switch.poll() is None, switch.stderr.read() if switch.stderr else ""
            assert time.monotonic() < deadline, "p4sim did not start"
            time.sleep(0.05)
        bad = _cli(thrift, "table_add x y\n")
        assert bad.returncode == 1 and "use P4Runtime" in bad.stdout
        done = _cli(thrift, "set_queue_rate 50 2\nset_queue_depth 100 2\n")
        assert done.returncode == 0 and done.stdout.split() == ["ok", "ok"], done
        n = 40
        frames = [_packet(i) for i in range(n)]
        for f in frames:  # 40 packets at once into a port that sends 50/s
            tx.send(f)
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < n and time.monotonic() < deadline:
            try:
                data, addr = rx.recvfrom(4096)
            except BlockingIOError:
                time.sleep(0.005)
                continue
            if addr[2] != 4 and data[12:14] == b"\x08\x00":
                got.append(data)
    finally:
        switch.terminate()
        switch.wait(10)
        rx.close()
        tx.close()
    assert len(got) == n
    assert [int.from_bytes(d[18:20], "big") for d in got] == list(range(n))  # in order
    ecn = [d[15] & 3 for d in got]
    assert ecn[0] == 1  # the first packet found the queue empty
    assert ecn[-1] == 3  # the last found many ahead (threshold 10): congestion experienced
    assert ecn == sorted(ecn)  # marking starts once, when the queue reaches the threshold
