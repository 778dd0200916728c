"""`make bench`: p4sim's packets per second, then aggregation goodput on Mininet.

Section p4sim: for each program, the packets per second on one core through the in-process
pipeline and the exact command that reproduces the figure, next to the reference figures
for BMv2 simple_switch_grpc 1.15.5 on this kind of machine (from the project's guide; BMv2
itself is not installable here).

Section netreduce (tests/bench/netreduce.py, needs root for Mininet): goodput per worker
as a fraction of the link bandwidth for switch, parameter server and ring at 2, 4 and 8
workers and two vector sizes, with the switch/ring time ratio beside N/(2(N-1)).

``--only p4sim`` or ``--only netreduce`` runs one section.
"""

from __future__ import annotations

import argparse
import os
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


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 2,4,8, got {text!r}") from None


def bench_netreduce(args: argparse.Namespace, console: Console) -> int:
    from tests.bench.netreduce import BenchConfig, measure, table

    cfg = BenchConfig(args.workers, args.sizes, args.calls, args.bw)
    if os.geteuid() != 0:
        print(
            "netreduce bench skipped: Mininet (namespaces, veth links) needs root;"
            f" as root run: {cfg.command()}"
        )
        return 0
    t0 = time.monotonic()
    rows = measure(cfg, log=console.print)
    console.print(table(rows, cfg))
    console.print(f"measured in one run, {time.monotonic() - t0:.0f} s; command: {cfg.command()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench")
    ap.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    ap.add_argument("--only", choices=["p4sim", "wire", "netreduce"], help="run one section")
    ap.add_argument("--workers", type=_int_list, default=(2, 4, 8), help="netreduce: 2,4,8")
    ap.add_argument("--sizes", type=_int_list, default=(2048, 8192), help="int32 per vector")
    ap.add_argument("--calls", type=int, default=3, help="netreduce: calls per size")
    ap.add_argument("--bw", type=float, default=1.0, help="netreduce: link Mbit/s")
    args = ap.parse_args(argv)
    console = Console(width=110)
    if args.only in (None, "p4sim"):
        bench_p4sim(args, console)
    if args.only in (None, "wire"):
        bench_wire(args, console)
    if args.only in (None, "netreduce"):
        return bench_netreduce(args, console)
    return 0


def bench_wire(args: argparse.Namespace, console: Console) -> None:
    """p4sim as a process forwarding between veth interfaces (tests/bench/wire.py)."""
    if os.geteuid() != 0:
        console.print(
            "wire bench skipped: veth interfaces and raw sockets need root; run "
            f"as root: {sys.executable} -m tests.bench --only wire"
        )
        return
    from tests.bench.wire import measure as wire_measure

    table = Table(
        title="p4sim on the wire: veth → p4sim process → veth (sender, switch and "
        "receiver share the machine)"
    )
    for col in (
        "program",
        "forwarded pkt/s",
        "offered pkt/s",
        "BMv2 reference pkt/s",
        "p4sim / BMv2",
    ):
        table.add_column(col, justify="right" if col != "program" else "left")
    cases = (
        ("basic IPv4 forwarding", BASIC, [_ipv4_frame()], BASIC.parent / "s1-runtime.json"),
        ("32 register RMW / packet", REGISTERS, [_words_frame(i) for i in range(16)], None),
    )
    for name, program, frames, runtime in cases:
        r = wire_measure(program, frames, runtime, seconds=max(args.seconds, 3.0))
        ref = BMV2_REFERENCE[name]
        table.add_row(
            name,
            f"{r.forwarded_pps:,.0f}",
            f"{r.offered_pps:,.0f}",
            f"{ref:,}",
            f"{r.forwarded_pps / ref:.2f}",
        )
    console.print(table)
    console.print(f"command: {sys.executable} -m tests.bench --only wire --seconds {args.seconds}")


def bench_p4sim(args: argparse.Namespace, console: Console) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
