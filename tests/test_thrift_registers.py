"""Registers of BMv2 through simple_switch_CLI (controller/p4rt/registers.py), against a
stand-in CLI that answers as simple_switch_CLI 1.15 does (real BMv2: tests/test_ptf.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller.p4rt.registers import ThriftRegisters
from controller.p4rt.switch_error import SwitchError


def fake_cli(tmp_path: Path, reply: str) -> str:
    """A CLI that records its commands and prints ``reply``."""
    cli = tmp_path / "simple_switch_CLI"
    cli.write_text(f"#!/bin/sh\ncat > {tmp_path}/commands\nprintf '%s' '{reply}'\n")
    cli.chmod(0o755)
    return str(cli)


def test_a_whole_array_is_read_with_one_command(tmp_path: Path) -> None:
    reply = (
        "RuntimeCmd: RuntimeCmd: register index omitted, reading entire array\n"
        "sync_min= 0, 0, 7, 0, 12\nRuntimeCmd: "
    )
    regs = ThriftRegisters("127.0.0.1", 9090, cli=fake_cli(tmp_path, reply))
    assert asyncio.run(regs.read_all("sync_min")) == {0: 0, 1: 0, 2: 7, 3: 0, 4: 12}
    assert (tmp_path / "commands").read_text() == "register_read sync_min\n"


def test_an_answer_without_the_array_is_a_clear_error(tmp_path: Path) -> None:
    regs = ThriftRegisters("127.0.0.1", 9090, cli=fake_cli(tmp_path, "RuntimeCmd: "))
    with pytest.raises(SwitchError, match="no values for IncIngress.atp.atp_job"):
        asyncio.run(regs.read_all("IncIngress.atp.atp_job"))
