"""A Mininet switch node that runs a P4 target: p4sim (default) or BMv2 simple_switch_grpc,
programmed over P4Runtime as in the p4lang tutorials.

Example::

    prog = compile_program("topologies/basic/basic.p4", "p4sim", "build/p4sim")
    net.addSwitch("s1", cls=P4Switch, compiled=prog, runtime_json="s1-runtime.json")
    net.start()   # s1 starts with --no-p4, then gets the pipeline and its entries

Both targets get the same command line (``-i PORT@IFACE``, ``--device-id``,
``--thrift-port``, ``--log-console``, ``--pcap``, ``--no-p4`` or a program,
``-- --grpc-server-addr``, ``--cpu-port``), so ``SWITCH=bmv2`` swaps the real switch in.
After the process listens, :meth:`P4Switch.start` connects with the project's P4Runtime
client (``controller.p4rt.p4runtime_client``), becomes primary, pushes the pipeline (P4Info plus
p4sim's device config or BMv2's JSON) and applies the switch's ``sN-runtime.json``.
The process is started by PID and stopped by that PID only.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet.node import Switch

SWITCH_KINDS = ("p4sim", "bmv2")
GRPC_BASE_PORT = 50051  # as the tutorials: s1 on 50051, s2 on 50052, ...
BIND_ATTEMPTS = 3  # starts of a switch whose chosen gRPC port was taken before it bound it
THRIFT_BASE_PORT = 9090  # simple_switch_grpc's default; one per switch on one machine


def switch_kind(kind: str | None = None) -> str:
    """``kind``, else ``$SWITCH``, else p4sim; anything else is a user error."""
    kind = kind or os.environ.get("SWITCH") or "p4sim"
    if kind not in SWITCH_KINDS:
        raise ValueError(f"SWITCH must be one of {', '.join(SWITCH_KINDS)}, got {kind!r}")
    return kind


class SwitchStartError(RuntimeError):
    pass


@dataclass(frozen=True)
class CompiledProgram:
    """What the runner pushes: P4Info and device config (p4sim bundle or BMv2 JSON)."""

    source: Path
    p4info: Path
    device_config: Path
    kind: str

    def pipeline(self) -> Any:
        from controller.p4rt.p4runtime_client import Pipeline

        return Pipeline.from_files(self.p4info, self.device_config)


def compile_program(
    program: str | Path, kind: str, build_dir: str | Path, include_dirs: Sequence[str] = ()
) -> CompiledProgram:
    """Compile ``program`` once for ``kind`` into ``build_dir``.

    p4sim: ``p4sim.p4info.compile_outputs`` writes ``NAME.p4info.txtpb`` and ``NAME.p4sim``.
    bmv2: ``p4c --target bmv2 --arch v1model`` writes ``NAME.json`` and its P4Info. A BMv2
    ``.json`` given directly is used as is, with ``NAME.p4info.txtpb`` next to it.

    A ``.json`` named the tutorials' way (``build/NAME.json``) stands for ``NAME.p4`` beside
    it or one folder up (the exercise folder): p4sim compiles that source, and so does p4c
    for BMv2 when the JSON has not been built.
    """
    src = Path(program)
    out = Path(build_dir)
    if src.suffix == ".json" and (kind == "p4sim" or not src.exists()):
        src = _source_of_json(src)
    if src.suffix == ".json":
        info = src.with_name(f"{src.stem}.p4info.txtpb")
        if not info.exists():
            raise SwitchStartError(f"{src}: BMv2 JSON given but its P4Info {info} is missing")
        return CompiledProgram(src, info, src, kind)
    if not src.exists():
        raise SwitchStartError(f"{src}: no such P4 program")
    out.mkdir(parents=True, exist_ok=True)
    info = out / f"{src.stem}.p4info.txtpb"
    if kind == "p4sim":
        from p4sim.frontend.diagnostics import P4Error
        from p4sim.p4info import compile_outputs

        config = out / f"{src.stem}.p4sim"
        try:
            compile_outputs(str(src), include_dirs, None, str(info), "text", str(config))
        except P4Error as err:
            raise SwitchStartError(f"p4sim cannot compile {src}:\n{err}") from None
        return CompiledProgram(src, info, config, kind)
    return _compile_bmv2(src, out, info, include_dirs)


def _source_of_json(path: Path) -> Path:
    """``NAME.p4`` for ``.../build/NAME.json``: beside it, one folder up, or the file the
    JSON itself names as its program."""
    for d in (path.parent, path.parent.parent):
        if (d / f"{path.stem}.p4").is_file():
            return d / f"{path.stem}.p4"
    if path.is_file():
        from p4sim.bmv2_json import Bmv2JsonError, find_source, source_dirs

        try:
            return find_source(json.loads(path.read_bytes()), source_dirs(path))
        except (ValueError, Bmv2JsonError) as err:
            raise SwitchStartError(f"{path}: {err}") from None
    raise SwitchStartError(
        f"{path}: no such BMv2 JSON, and no {path.stem}.p4 in {path.parent} or "
        f"{path.parent.parent} to compile in its place"
    )


def _compile_bmv2(src: Path, out: Path, info: Path, include_dirs: Sequence[str]) -> CompiledProgram:
    p4c = shutil.which("p4c")
    if p4c is None:
        raise SwitchStartError("SWITCH=bmv2 needs p4c on PATH to compile (see docker/README.md)")
    cmd = [p4c, "--target", "bmv2", "--arch", "v1model", "--p4runtime-files", str(info)]
    cmd += [f"-I{d}" for d in include_dirs] + ["-o", str(out), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SwitchStartError(f"p4c failed on {src}:\n{done.stderr.strip()}")
    return CompiledProgram(src, info, out / f"{src.stem}.json", "bmv2")


def switch_command(
    exe: Sequence[str],
    ports: Mapping[int, str],
    *,
    device_id: int,
    grpc_port: int,
    thrift_port: int,
    program: str | None = None,
    log_console: bool = False,
    pcap_dir: str | None = None,
    cpu_port: int | None = None,
) -> list[str]:
    """The simple_switch_grpc command line; p4sim takes exactly the same one.

    >>> switch_command(["simple_switch_grpc"], {1: "s1-eth1"}, device_id=1, grpc_port=50051,
    ...                thrift_port=9091)[1:3]
    ['-i', '1@s1-eth1']
    """
    cmd = list(exe)
    for port, iface in sorted(ports.items()):
        cmd += ["-i", f"{port}@{iface}"]
    cmd += ["--device-id", str(device_id), "--thrift-port", str(thrift_port)]
    if log_console:
        cmd += ["--log-console", "-L", "debug"]
    if pcap_dir:
        cmd += ["--pcap", pcap_dir]
    cmd.append(program if program else "--no-p4")
    cmd += ["--", "--grpc-server-addr", f"0.0.0.0:{grpc_port}"]
    if cpu_port is not None:
        cmd += ["--cpu-port", str(cpu_port)]
    return cmd


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


_LOOP: asyncio.AbstractEventLoop | None = None


def _program_loop() -> asyncio.AbstractEventLoop:
    """One event loop, kept open, for programming every switch of the process.

    ``asyncio.run`` per switch closed its loop while gRPC's aio poller thread still had
    events to hand it, which printed "RuntimeError: Event loop is closed" tracebacks.
    """
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP


class P4Switch(Switch):
    """A P4 switch process. ``compiled`` is pushed over P4Runtime after start (the
    runner's way); ``program`` (a .p4 for p4sim, a BMv2 JSON for bmv2) is instead given on
    the command line. ``runtime_json`` is applied over P4Runtime in both cases."""

    next_grpc_port = GRPC_BASE_PORT

    def __init__(
        self,
        name: str,
        program: str | None = None,
        *,
        compiled: CompiledProgram | None = None,
        kind: str | None = None,
        device_id: int | None = None,
        grpc_port: int | None = None,
        thrift_port: int | None = None,
        runtime_json: str | None = None,
        log_dir: str = "run/logs",
        pcap_dir: str | None = None,
        log_console: bool = False,
        cpu_port: int | None = None,
        include_dirs: tuple[str, ...] = (),
        **params: Any,
    ) -> None:
        super().__init__(name, **params)
        self.kind = switch_kind(kind)
        self.program = program
        self.compiled = compiled
        self.device_id = device_id if device_id is not None else int(name.lstrip("s") or 0)
        self._auto_port = grpc_port is None
        self.grpc_port = grpc_port if grpc_port is not None else P4Switch._next_free_port()
        self.thrift_port = thrift_port or THRIFT_BASE_PORT + self.device_id
        self.runtime_json = runtime_json
        self.log_path = Path(log_dir) / f"{name}.log"
        self.pid_path = Path(log_dir) / f"{name}.pid"
        self.pcap_dir = pcap_dir
        self.log_console = log_console
        self.cpu_port = cpu_port
        self.include_dirs = include_dirs
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def _next_free_port() -> int:
        # Skip ports someone else (another engineer's switch, a daemon) already listens on.
        while _port_in_use(P4Switch.next_grpc_port):
            P4Switch.next_grpc_port += 1
        port = P4Switch.next_grpc_port
        P4Switch.next_grpc_port += 1
        return port

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def executable(self) -> list[str]:
        if self.kind == "p4sim":
            return [sys.executable, "-m", "p4sim.cli"]
        found = shutil.which("simple_switch_grpc")
        if found is None:
            raise SwitchStartError(
                "SWITCH=bmv2 but simple_switch_grpc is not on PATH (see docker/README.md)"
            )
        return [found]

    def command(self) -> list[str]:
        ports = {
            port: intf.name
            for intf, port in self.ports.items()
            if port is not None and intf.name != "lo"
        }
        cmd = switch_command(
            self.executable(),
            ports,
            device_id=self.device_id,
            grpc_port=self.grpc_port,
            thrift_port=self.thrift_port,
            program=None if self.compiled else self.program,
            log_console=self.log_console,
            pcap_dir=self.pcap_dir,
            cpu_port=self.cpu_port,
        )
        if self.kind == "p4sim" and self.program and not self.compiled and self.include_dirs:
            at = cmd.index(self.program)
            cmd[at:at] = [f"-I{d}" for d in self.include_dirs]
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
        for attempt in range(BIND_ATTEMPTS):
            try:
                self._launch()
                break
            except SwitchStartError:
                # The gRPC port was free when chosen, but the switch could not bind it: an
                # outgoing connection of this machine took it as its ephemeral port meanwhile
                # (the tutorials' 50051.. lie in Linux's ephemeral range). A port chosen here
                # is not part of anyone's configuration yet: take the next free one.
                if not self._auto_port or not self._bind_failed() or attempt + 1 == BIND_ATTEMPTS:
                    raise
                self.grpc_port = P4Switch._next_free_port()
        if self.compiled is not None or self.runtime_json:
            self.program_switch()

    def _launch(self) -> None:
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

    def _bind_failed(self) -> bool:
        """The switch exited because its gRPC port was taken (p4sim's and BMv2's words)."""
        tail = self.log_tail().lower()
        return (
            self.proc is not None
            and self.proc.poll() is not None
            and ("failed to bind" in tail or "address already in use" in tail)
        )

    def _wait_ready(self, timeout: float = 60.0) -> None:
        """Ready when the gRPC port accepts connections (works for both targets; BMv2's
        stdout is block-buffered in a file, so its log line may come late)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SwitchStartError(
                    f"{self.name}: {self.kind} exited with status "
                    f"{self.proc.returncode}:\n{self.log_tail()}"
                )
            if _port_in_use(self.grpc_port):
                return
            time.sleep(0.1)
        raise SwitchStartError(
            f"{self.name}: {self.kind} not listening on {self.grpc_address} after "
            f"{timeout:.0f}s:\n{self.log_tail()}"
        )

    def program_switch(self) -> None:
        """Push the pipeline (if compiled) and apply ``runtime_json`` over P4Runtime."""
        from controller.p4rt.p4runtime_client import SwitchError

        try:
            _program_loop().run_until_complete(self._program())
        except SwitchError as err:
            raise SwitchStartError(
                f"{self.name}: programming over P4Runtime failed: {err}"
            ) from None

    async def _program(self) -> None:
        from controller.p4rt.p4runtime_client import SwitchConnection, SwitchError, SwitchSpec
        from controller.p4rt.runtime_config import apply_runtime_config
        from p4rt_config.runtime_json import RuntimeJsonError, load_runtime_json

        cfg = None
        if self.runtime_json:
            try:
                cfg = load_runtime_json(self.runtime_json)
            except RuntimeJsonError as err:
                raise SwitchError(str(err)) from None
        pipeline = self.compiled.pipeline() if self.compiled else None
        spec = SwitchSpec(self.device_id, self.grpc_address, name=self.name)
        async with SwitchConnection(spec, pipeline) as sw:
            if not sw.is_primary:
                raise SwitchError(f"another client (election id {sw.primary_id}) is primary")
            if cfg is not None:
                await apply_runtime_config(sw, cfg)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop_process(self) -> None:
        """Stop the switch process (by its PID) but keep the interfaces."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.pid_path.unlink(missing_ok=True)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
        self.stop_process()
        super().stop(deleteIntfs)
