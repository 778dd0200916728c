"""`make bench`: p4sim's packets per second on one core, through the in-process pipeline.

Prints, for each program, the packets per second and the exact command that reproduces
the figure, next to the reference figures for BMv2 simple_switch_grpc 1.15.5 on this kind
of machine (from the project's guide; BMv2 itself is not installable here).
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
BASIC = ROOT / "topologies/basic/basic.p4"
REGISTERS = ROOT / "tests/bench/register_heavy.p4"
BMV2_REFERENCE = {"basic IPv4 forwarding": 17_000, "32 register RMW / packet": 4_400}


def _ipv4_frame(dst: str = "10.0.2.2") -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(
        Ether(dst="08:00:00:00:02:00", src="08:00:00:00:01:11")
        / IP(src="10.0.1.1", dst=dst, ttl=64)
        / UDP(sport=1234, dport=4321)
        / (b"x" * 64)
    )


def _words_frame(index: int) -> bytes:
    words = struct.pack("!33I", index, *range(1, 33))
    return b"\x02" * 6 + b"\x04" * 6 + b"\x88\xb5" + words


def measure(send, frames: list[bytes], seconds: float) -> tuple[float, int]:
    """Packets per second of ``send(port, frame)`` over at least ``seconds``."""
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for f in frames:
            send(0, f)
        n += len(frames)
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start), n


def bench_basic(seconds: float) -> tuple[float, int]:
    from p4sim.runtime_json import apply_to_switch, load_runtime_json
    from p4sim.switch import Switch

    sw = Switch.from_file(str(BASIC))
    apply_to_switch(sw, load_runtime_json(BASIC.parent / "s1-runtime.json"))
    frame = _ipv4_frame()
    assert sw.send(0, frame), "basic program forwarded nothing: benchmark is meaningless"
    return measure(sw.send, [frame], seconds)


def bench_registers(seconds: float) -> tuple[float, int]:
    from p4sim.switch import Switch

    sw = Switch.from_file(str(REGISTERS))
    frames = [_words_frame(i) for i in range(64)]
    assert sw.send(0, frames[0]), "register program forwarded nothing"
    return measure(sw.send, frames, seconds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench")
    ap.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    args = ap.parse_args(argv)
    console = Console(width=110)
    table = Table(title="p4sim throughput, one core, in-process pipeline (Switch.send)")
    for col in ("program", "p4sim pkt/s", "BMv2 reference pkt/s", "p4sim / BMv2", "packets"):
        table.add_column(col, justify="right" if col != "program" else "left")
    for name, fn in (
        ("basic IPv4 forwarding", bench_basic),
        ("32 register RMW / packet", bench_registers),
    ):
        pps, n = fn(args.seconds)
        ref = BMV2_REFERENCE[name]
        table.add_row(name, f"{pps:,.0f}", f"{ref:,}", f"{pps / ref:.2f}", f"{n:,}")
    console.print(table)
    console.print(f"command: {sys.executable} -m tests.bench --seconds {args.seconds}")
    console.print(
        "programs: topologies/basic/basic.p4 (1 LPM table, TTL, checksum), "
        "tests/bench/register_heavy.p4 (32 register read-modify-writes)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
