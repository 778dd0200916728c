"""Paced traffic for the wire benchmark: a sender and a receiver process on veth host sides.

Both are long-lived and take commands on stdin, one per sweep step, so that a sweep pays
their start-up (and their imports) once, and the inc.p4 sender's psn keeps growing across
steps (a psn that went back would be dropped as stale).

    python -m tests.bench.traffic send CASE IFACE[,IFACE...]
        stdin ``RATE SECONDS`` -> stdout ``sent``: frames paced at RATE/s for SECONDS
    python -m tests.bench.traffic receive CASE IFACE[,IFACE...] EXPECTED_HEX|any
        stdin ``SECONDS`` -> stdout ``received wrong``: frames counted during SECONDS, and
        how many of them differ from what the program must output; then late frames are
        discarded until the ports are quiet for 0.2 s (at most 5 s), so that a backlog is
        not counted in the next step

Frames are sent in bursts of up to 32 per ``sendmmsg`` at the burst's due time, so the
offered rate holds on average over any few milliseconds. The receiver checks every frame:
basic forwarding against the one expected output, inc.p4 results against the sums the
four contributions make (values, RESULT flag, bitmap, worker id of the port), the
register program by its fixed header bytes (its values depend on the register history).
"""

from __future__ import annotations

import select
import socket
import struct
import sys
import time

from p4sim import batch_io
from tests.bench import programs

BURST = 32
ETH_P_ALL = 0x0003
DRAIN_QUIET_S = 0.2  # after a step: late frames are discarded until the ports are this quiet
DRAIN_MAX_S = 5.0


def _socket(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 20)
    s.setblocking(False)
    batch_io.ignore_outgoing(s)
    return s


class _IncFrames:
    """Round after round of the 4 workers' contributions, psn growing forever (the values
    stay those of psn 0: each result is the same sum, which the receiver checks)."""

    def __init__(self) -> None:
        self.templates = [bytearray(programs.inc_frame(w, 0)) for w in range(programs.WORKERS)]
        self.psn = 0
        self.worker = 0

    def next(self) -> tuple[int, bytes]:
        w = self.worker
        t = self.templates[w]
        psn = self.psn
        idx, ver = psn % programs.REGION, (psn // programs.REGION) & 1
        t[47] = ver << 7  # INC header at 42: byte 5 holds ver in its top bit
        struct.pack_into("!II", t, 50, psn, idx)
        self.worker = (w + 1) % programs.WORKERS
        if self.worker == 0:
            self.psn += 1
        return w, bytes(t)


def send(case_name: str, ifaces: list[str]) -> None:
    case = programs.CASES[case_name]
    socks = [_socket(i) for i in ifaces]
    senders = [batch_io.Sender(s.fileno(), batch=BURST, size=2048) for s in socks]
    inc = _IncFrames() if case.program == programs.INC else None
    fixed = case.frames(64)
    k = 0
    for line in sys.stdin:
        rate, seconds = (float(x) for x in line.split())
        gap = BURST / rate
        start = time.perf_counter()
        due = start
        end = start + seconds
        sent = 0
        while due < end:
            now = time.perf_counter()
            if now < due:
                time.sleep(min(due - now, 0.002))
                continue
            bursts: list[list[bytes]] = [[] for _ in socks]
            for _ in range(BURST):
                if inc is not None:
                    w, f = inc.next()
                    bursts[w].append(f)
                else:
                    port, f = fixed[k % len(fixed)]
                    k += 1
                    bursts[case.ports.index(port)].append(f)
            for tx, b in zip(senders, bursts, strict=True):
                if b:
                    sent += tx.send(b)[0]
            due += gap
        print(sent, flush=True)


def _checker(case_name: str, expected: bytes | None, port_of: dict[int, int]):
    case = programs.CASES[case_name]
    if expected is None:  # the ceiling's reflector: counted, not checked
        return lambda fd, f: True
    if case.program == programs.BASIC:
        return lambda fd, f: f == expected
    if case.program == programs.REGISTERS:
        return lambda fd, f: f[:14] == expected[:14] and len(f) == len(expected)
    import numpy as np

    base = np.arange(32, dtype=np.int64) * sum(range(1, programs.WORKERS + 1))
    full = (1 << programs.WORKERS) - 1

    def inc_ok(fd: int, f: bytes) -> bool:
        if len(f) != 42 + 24 + 128:
            return False
        op, flags, job, worker, _, count, _, psn, _, _, bitmap = struct.unpack_from(
            "!BBHBBBBIIII", f, 42
        )
        values = np.frombuffer(f, dtype=">i4", count=32, offset=66)
        return bool(
            flags & 2
            and job == programs.JOB
            and bitmap == full
            and worker == port_of[fd] - 1
            and (values == base).all()
        )

    return inc_ok


def receive(case_name: str, ifaces: list[str], expected_hex: str) -> None:
    case = programs.CASES[case_name]
    socks = [_socket(i) for i in ifaces]
    rx = {s.fileno(): batch_io.Receiver(s.fileno(), batch=64, size=2048) for s in socks}
    port_of = {s.fileno(): case.ports[i] for i, s in enumerate(socks)}
    expected = None if expected_hex == "any" else bytes.fromhex(expected_hex)
    ok = _checker(case_name, expected, port_of)
    poller = select.poll()
    for fd in rx:
        poller.register(fd, select.POLLIN)
    print("ready", flush=True)
    for line in sys.stdin:
        end = time.perf_counter() + float(line)
        got = wrong = 0
        while True:
            left = end - time.perf_counter()
            if left <= 0:
                break
            for fd, _ in poller.poll(min(left, 0.05) * 1000):
                for f in rx[fd].receive():
                    got += 1
                    if not ok(fd, f):
                        wrong += 1
        # Late frames of this step: discarded until the ports are quiet, not counted next.
        end = time.perf_counter() + DRAIN_MAX_S
        while time.perf_counter() < end:
            ready = poller.poll(DRAIN_QUIET_S * 1000)
            if not ready:
                break
            for fd, _ in ready:
                rx[fd].receive()
        print(got, wrong, flush=True)


def main(argv: list[str]) -> int:
    role, case_name, ifaces = argv[0], argv[1], argv[2].split(",")
    if role == "send":
        send(case_name, ifaces)
    else:
        receive(case_name, ifaces, argv[3] if len(argv) > 3 else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
