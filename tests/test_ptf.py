"""The PTF packet tests of tests/ptf/, run by PTF's own runner against a real switch process.

The fixture creates veth pairs (switch side ``pt<pid>s<N>``, PTF side ``pt<pid>h<N>``,
IPv6 off so the kernel sends nothing of its own), compiles ``p4src/inc.p4`` for each target
(p4sim; BMv2's ``simple_switch_grpc`` with p4c), starts the switch with ``--no-p4`` on the
switch sides, and runs ``ptf --test-dir tests/ptf`` once per PTF module with the PTF sides
as ports 1..5; every PTF test pushes the pipeline itself over P4Runtime. Interfaces and the
switch process (stopped by PID) are removed afterwards, also on failure. The same modules
run unchanged on both targets; the BMv2 runs skip, naming the binary, where BMv2 or p4c is
missing. docs/ptf.md says how to add a module for a new system.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from topologies.p4switch import (
    GRPC_BASE_PORT,
    SWITCH_KINDS,
    THRIFT_BASE_PORT,
    CompiledProgram,
    compile_program,
    switch_command,
)

pytestmark = [pytest.mark.root, pytest.mark.own_network]

ROOT = Path(__file__).resolve().parents[1]
PTF_DIR = ROOT / "tests" / "ptf"
PROGRAM = ROOT / "p4src" / "inc.p4"
PORTS = (1, 2, 3, 4, 5)
DEVICE_ID = 1
START_TIMEOUT = 60.0


def ptf_tests() -> dict[str, list[str]]:
    """PTF test classes by module, found as PTF finds them: classes defining ``runTest``."""
    found: dict[str, list[str]] = {}
    for path in sorted(PTF_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = [
            node.name
            for node in tree.body
            if isinstance(node, ast.ClassDef)
            and any(isinstance(f, ast.FunctionDef) and f.name == "runTest" for f in node.body)
        ]
        if names:
            found[path.stem] = names
    return found


PTF_TESTS = ptf_tests()


@dataclass(frozen=True)
class Dut:
    """The device under test: a running switch and the interfaces PTF drives."""

    kind: str
    grpc_address: str
    thrift_port: int | None
    compiled: CompiledProgram
    ptf_ifaces: dict[int, str]
    log: Path


def _free_port() -> int:
    """A free TCP port outside the Mininet switches' ranges (``topologies/p4switch.py``), so
    that a network started beside this test can take its switches' ports."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not any(base <= port < base + 256 for base in (GRPC_BASE_PORT, THRIFT_BASE_PORT)):
            return port


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _switch_executable(kind: str) -> list[str]:
    if kind == "p4sim":
        return [sys.executable, "-m", "p4sim.cli"]
    missing = [b for b in ("simple_switch_grpc", "p4c") if shutil.which(b) is None]
    if missing:
        pytest.skip(f"BMv2: {' and '.join(missing)} not on PATH")
    return [str(shutil.which("simple_switch_grpc"))]


@pytest.fixture(scope="module")
def veths() -> Iterator[dict[int, tuple[str, str]]]:
    """Switch port -> (switch-side, PTF-side) interface, removed on exit."""
    tag = f"pt{os.getpid() % 10000}"
    pairs = {p: (f"{tag}s{p}", f"{tag}h{p}") for p in PORTS}
    try:
        for a, b in pairs.values():
            _ip("link", "add", a, "type", "veth", "peer", "name", b)
            for n in (a, b):
                # Router solicitations and MLD reports would be packets no test expects
                # (a kernel without IPv6 has no such setting, and sends none).
                subprocess.run(
                    ["sysctl", "-qw", f"net.ipv6.conf.{n}.disable_ipv6=1"],
                    capture_output=True,
                    check=False,
                )
                subprocess.run(
                    ["ethtool", "-K", n, "rx", "off", "tx", "off", "sg", "off"],
                    capture_output=True,
                    check=False,
                )
                _ip("link", "set", n, "up")
        yield pairs
    finally:
        for a, _ in pairs.values():
            subprocess.run(["ip", "link", "del", a], capture_output=True, check=False)


@pytest.fixture(scope="module", params=SWITCH_KINDS)
def dut(
    request: pytest.FixtureRequest,
    veths: dict[int, tuple[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Dut]:
    """The switch of each kind in turn on the same veth pairs: p4sim always, BMv2 where
    ``simple_switch_grpc`` and ``p4c`` are installed (skipped, naming them, elsewhere)."""
    kind = request.param
    exe = _switch_executable(kind)
    work = tmp_path_factory.mktemp(f"ptf-{kind}")
    compiled = compile_program(PROGRAM, kind, work / "build")
    grpc_port = _free_port()
    thrift_port = _free_port()
    cmd = switch_command(
        exe,
        {p: sw for p, (sw, _) in veths.items()},
        device_id=DEVICE_ID,
        grpc_port=grpc_port,
        thrift_port=thrift_port,
    )
    log = work / f"{kind}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _listening(grpc_port):
            if proc.poll() is not None:
                pytest.fail(f"{kind} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"{kind} not serving P4Runtime after {START_TIMEOUT:.0f}s")
            time.sleep(0.05)
        yield Dut(
            kind=kind,
            grpc_address=f"127.0.0.1:{grpc_port}",
            # simple_switch_grpc refuses registers over P4Runtime; its CLI reaches them.
            thrift_port=thrift_port
            if kind == "bmv2" and shutil.which("simple_switch_CLI")
            else None,
            compiled=compiled,
            ptf_ifaces={p: h for p, (_, h) in veths.items()},
            log=log,
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def ptf_command(dut: Dut, module: str, log_file: Path) -> list[str]:
    params = {
        "grpcaddr": dut.grpc_address,
        "device_id": DEVICE_ID,
        "p4info": str(dut.compiled.p4info),
        "config": str(dut.compiled.device_config),
    }
    if dut.thrift_port is not None:
        params["thrift_port"] = dut.thrift_port
    cmd = [sys.executable, str(Path(sys.executable).with_name("ptf"))]
    cmd += ["--test-dir", str(PTF_DIR), "--log-file", str(log_file)]
    for port, iface in sorted(dut.ptf_ifaces.items()):
        cmd += ["--interface", f"{port}@{iface}"]
    cmd += ["--test-params", ";".join(f"{k}={v!r}" for k, v in params.items())]
    # Positive checks wait up to 10 s (a loaded 2-core machine); a test case up to 2 min.
    cmd += ["--default-timeout", "10", "--test-case-timeout", "120", module]
    return cmd


@pytest.mark.parametrize("module", sorted(PTF_TESTS))
def test_ptf_module_passes_on_the_switch(dut: Dut, module: str, tmp_path: Path) -> None:
    log_file = tmp_path / "ptf.log"
    done = subprocess.run(
        ptf_command(dut, module, log_file),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    ran = re.search(r"^Ran (\d+) tests?", output, re.M)
    report = f"ptf {module} on {dut.kind} (exit {done.returncode}):\n{output[-6000:]}"
    passed = re.search(r"^OK\b", done.stderr, re.M)
    assert done.returncode == 0 and ran is not None and passed is not None, report
    # Every class that defines runTest ran: none was skipped by an import problem.
    assert int(ran.group(1)) == len(PTF_TESTS[module]), report
    for name in PTF_TESTS[module]:
        assert re.search(rf"^{module}\.{name}\b", output, re.M), report
