"""A Mininet switch node that runs a P4 target: p4sim (default) or BMv2 simple_switch_grpc.

Example::

    net = Mininet(topo=..., switch=P4Switch, controller=None)
    # per switch: net.addSwitch("s1", cls=P4Switch, program="basic.p4", device_id=0)

Both targets get the same command line (``-i PORT@IFACE``, ``--device-id``, ``--log-console``,
``--pcap``, ``-- --grpc-server-addr``), so ``SWITCH=bmv2`` swaps the real switch in.
The process is started by PID and stopped by that PID only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mininet.node import Switch

SWITCH_KINDS = ("p4sim", "bmv2")


def switch_kind() -> str:
    kind = os.environ.get("SWITCH", "p4sim")
    if kind not in SWITCH_KINDS:
        raise ValueError(f"SWITCH must be one of {', '.join(SWITCH_KINDS)}, got {kind!r}")
    return kind


class SwitchStartError(RuntimeError):
    pass


class P4Switch(Switch):
    """``program`` is a .p4 file for p4sim, or a BMv2 JSON file for bmv2."""

    next_grpc_port = 50051

    def __init__(
        self,
        name: str,
        program: str | None = None,
        *,
        kind: str | None = None,
        device_id: int | None = None,
        grpc_port: int | None = None,
        runtime_json: str | None = None,
        log_dir: str = "run/logs",
        pcap_dir: str | None = None,
        log_console: bool = False,
        cpu_port: int | None = None,
        include_dirs: tuple[str, ...] = (),
        **params: Any,
    ) -> None:
        super().__init__(name, **params)
        self.kind = kind or switch_kind()
        self.program = program
        self.device_id = device_id if device_id is not None else int(name.lstrip("s") or 0)
        if grpc_port is None:
            grpc_port = P4Switch.next_grpc_port
            P4Switch.next_grpc_port += 1
        self.grpc_port = grpc_port
        self.runtime_json = runtime_json
        self.log_path = Path(log_dir) / f"{name}.log"
        self.pid_path = Path(log_dir) / f"{name}.pid"
        self.pcap_dir = pcap_dir
        self.log_console = log_console
        self.cpu_port = cpu_port
        self.include_dirs = include_dirs
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        if self.kind == "p4sim":
            exe = [sys.executable, "-m", "p4sim.cli"]
        else:
            found = shutil.which("simple_switch_grpc")
            if found is None:
                raise SwitchStartError(
                    "SWITCH=bmv2 but simple_switch_grpc is not on PATH (see docker/README.md)"
                )
            exe = [found]
        cmd = list(exe)
        for intf in self.intfList():
            port = self.ports.get(intf)
            if port is not None and intf.name != "lo":
                cmd += ["-i", f"{port}@{intf.name}"]
        cmd += ["--device-id", str(self.device_id)]
        if self.log_console:
            cmd += ["--log-console", "-L", "debug"]
        if self.pcap_dir:
            cmd += ["--pcap", self.pcap_dir]
        if self.kind == "p4sim":
            cmd += ["--pid-file", str(self.pid_path)]
            if self.runtime_json:
                cmd += ["--runtime-json", self.runtime_json]
            for d in self.include_dirs:
                cmd += ["-I", d]
        cmd.append(self.program if self.program else "--no-p4")
        cmd += ["--", "--grpc-server-addr", f"0.0.0.0:{self.grpc_port}"]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        return cmd

    def start(self, controllers: list[Any]) -> None:
        # Checksum offload would leave partial checksums in the frames the switch sees.
        for intf in self.intfList():
            if intf.name != "lo":
                subprocess.run(
                    ["ethtool", "-K", intf.name, "rx", "off", "tx", "off", "sg", "off"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    check=False,
                )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        with open(self.log_path, "wb") as logf:
            logf.write(("$ " + " ".join(cmd) + "\n").encode())
            logf.flush()
            self.proc = subprocess.Popen(
                cmd,
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid_path.write_text(f"{self.proc.pid}\n")
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        marker = b"running on" if self.kind == "p4sim" else b"Server listening"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SwitchStartError(
                    f"{self.name}: {self.kind} exited with status "
                    f"{self.proc.returncode}:\n{self.log_tail()}"
                )
            if marker in self.log_path.read_bytes():
                return
            time.sleep(0.1)
        raise SwitchStartError(
            f"{self.name}: {self.kind} not ready after {timeout:.0f}s:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.pid_path.unlink(missing_ok=True)
        super().stop(deleteIntfs)
