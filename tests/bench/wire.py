"""p4sim on the wire: packets per second forwarded between two veth interfaces.

A sender process writes frames into ``h1`` as fast as it can; its veth peer ``sw1`` is
p4sim's port 1. p4sim (the real ``p4sim`` command, P4Runtime server included) forwards to
port 2 (``sw2``), and a receiver process counts what arrives on ``sw2``'s peer ``h2``
during a fixed window. The figure is the forwarding rate under overload, with sender,
switch and receiver sharing this machine's cores — the way BMv2's reference figure is taken.
Needs root (veth interfaces, raw sockets).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
frames = [bytes.fromhex(h) for h in sys.argv[3].split(",")]
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    for f in frames:
        try:
            s.send(f)
            n += 1
        except OSError:
            pass
print(n)
"""

RECEIVER = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.settimeout(0.2)
print("ready", flush=True)
warmup, window = float(sys.argv[2]), float(sys.argv[3])
start = time.monotonic()
n = 0
while time.monotonic() < start + warmup:
    try: s.recv(4096)
    except socket.timeout: pass
t0 = time.monotonic()
while time.monotonic() < t0 + window:
    try:
        _, addr = s.recvfrom(4096)
        if addr[2] != 4:
            n += 1
    except socket.timeout:
        pass
print(n / (time.monotonic() - t0))
"""


@dataclass(frozen=True)
class WireResult:
    program: str
    forwarded_pps: float
    offered_pps: float


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def _veths(tag: str) -> list[tuple[str, str]]:
    pairs = [(f"{tag}s1", f"{tag}h1"), (f"{tag}s2", f"{tag}h2")]
    for a, b in pairs:
        _sh("ip", "link", "add", "name", a, "type", "veth", "peer", "name", b)
        for n in (a, b):
            subprocess.run(
                ["sysctl", "-qw", f"net.ipv6.conf.{n}.disable_ipv6=1"],
                capture_output=True,
                check=False,
            )
            _sh("ip", "link", "set", "dev", n, "up")
    return pairs


def measure(
    program: Path, frames: list[bytes], runtime_json: Path | None, seconds: float = 4.0
) -> WireResult:
    tag = f"w{os.getpid() % 1000}"
    pairs = _veths(tag)
    (sw1, h1), (sw2, h2) = pairs
    procs: list[subprocess.Popen[str]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "p4sim.log"
            cmd = [
                sys.executable,
                "-m",
                "p4sim.cli",
                "-i",
                f"1@{sw1}",
                "-i",
                f"2@{sw2}",
                "--log-file",
                str(log),
                str(program),
            ]
            if runtime_json is not None:
                cmd[-1:-1] = ["--runtime-json", str(runtime_json)]
            cmd += ["--", "--grpc-server-addr", "127.0.0.1:0"]
            switch = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            procs.append(switch)
            deadline = time.monotonic() + 30
            while "running on" not in (log.read_text() if log.exists() else ""):
                if switch.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"p4sim did not start: {switch.stderr.read() if switch.stderr else ''}"
                    )
                time.sleep(0.1)
            warmup = 1.0
            receiver = subprocess.Popen(
                [sys.executable, "-c", RECEIVER, h2, str(warmup), str(seconds - warmup - 0.5)],
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(receiver)
            assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
            sender = subprocess.run(
                [sys.executable, "-c", SENDER, h1, str(seconds), ",".join(f.hex() for f in frames)],
                capture_output=True,
                text=True,
                check=True,
            )
            out, _ = receiver.communicate(timeout=30)
            return WireResult(
                program.name, float(out.strip()), int(sender.stdout.strip()) / seconds
            )
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        for a, _ in pairs:
            subprocess.run(["ip", "link", "del", a], capture_output=True, check=False)
