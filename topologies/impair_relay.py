"""A link impairment relay: loss, duplication and reordering between two interfaces.

This kernel has no netem, so a link that must lose, duplicate or reorder frames is built
as ``host -- relay -- switch``: the relay is a small process in its own network namespace
that copies every frame from one interface to the other (both directions) and, with a
seeded random generator, drops some, sends some twice, and holds some back so that they
leave after the frames behind them.

Example (inside a namespace with interfaces ``a`` and ``b``)::

    python -m topologies.impair_relay a b --loss 0.05 --dup 0.01 --reorder 0.02 --seed 7

Where the kernel has netem, :func:`netem_args` gives the equivalent ``tc`` arguments.
"""

from __future__ import annotations

import argparse
import random
import select
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass

from p4sim.ports import MAX_FRAME, PACKET_OUTGOING, open_raw_socket


@dataclass(frozen=True)
class Impairment:
    loss: float = 0.0  # probability that a frame is dropped
    dup: float = 0.0  # probability that a frame is sent twice
    reorder: float = 0.0  # probability that a frame is held back behind later frames
    hold_frames: int = 3  # a held frame leaves after this many later frames ...
    hold_s: float = 0.005  # ... or after this long, whichever comes first
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("loss", "dup", "reorder"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p}")

    @property
    def is_null(self) -> bool:
        return self.loss == self.dup == self.reorder == 0.0


def netem_args(imp: Impairment) -> list[str]:
    """``tc qdisc ... netem`` arguments with the same effect (for kernels that have netem)."""
    args = ["netem"]
    if imp.loss:
        args += ["loss", f"{imp.loss * 100:g}%"]
    if imp.dup:
        args += ["duplicate", f"{imp.dup * 100:g}%"]
    if imp.reorder:
        args += ["delay", f"{imp.hold_s * 1000:g}ms", "reorder", f"{(1 - imp.reorder) * 100:g}%"]
    return args


@dataclass
class Direction:
    """Frames from ``src`` to ``dst``, with the frames held back for reordering."""

    src: object
    dst: object
    held: deque[tuple[float, int, bytes]]
    sent: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0


def relay(a: str, b: str, imp: Impairment, stop_after: float | None = None) -> dict[str, int]:
    """Copy frames between interfaces ``a`` and ``b`` until SIGTERM (or ``stop_after`` s)."""
    rng = random.Random(imp.seed)
    sa, sb = open_raw_socket(a), open_raw_socket(b)
    print("impair_relay: ready", flush=True)  # the sockets see every frame from here on
    dirs = {sa.fileno(): Direction(sa, sb, deque()), sb.fileno(): Direction(sb, sa, deque())}
    running = True

    def _stop(signum: int, frame: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    poller = select.poll()
    for fd in dirs:
        poller.register(fd, select.POLLIN)
    end = None if stop_after is None else time.monotonic() + stop_after
    count = 0
    while running and (end is None or time.monotonic() < end):
        events = poller.poll(int(imp.hold_s * 1000) or 1)
        now = time.monotonic()
        for fd, _ in events:
            d = dirs[fd]
            while True:
                try:
                    data, addr = d.src.recvfrom(MAX_FRAME)  # type: ignore[attr-defined]
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                count += 1
                _forward(d, data, imp, rng, now, count)
        for d in dirs.values():
            _release(d, now, count, imp)
    for d in dirs.values():
        while d.held:
            _send(d, d.held.popleft()[2])
    sa.close()
    sb.close()
    return {
        "sent": sum(d.sent for d in dirs.values()),
        "dropped": sum(d.dropped for d in dirs.values()),
        "duplicated": sum(d.duplicated for d in dirs.values()),
        "reordered": sum(d.reordered for d in dirs.values()),
    }


def _send(d: Direction, data: bytes) -> None:
    try:
        d.dst.send(data)  # type: ignore[attr-defined]
        d.sent += 1
    except OSError:
        d.dropped += 1


def _forward(
    d: Direction, data: bytes, imp: Impairment, rng: random.Random, now: float, count: int
) -> None:
    if imp.loss and rng.random() < imp.loss:
        d.dropped += 1
        return
    copies = 2 if imp.dup and rng.random() < imp.dup else 1
    if copies == 2:
        d.duplicated += 1
    if imp.reorder and rng.random() < imp.reorder:
        d.reordered += 1
        for _ in range(copies):
            d.held.append((now + imp.hold_s, count + imp.hold_frames, data))
        return
    for _ in range(copies):
        _send(d, data)
    _release(d, now, count, imp)


def _release(d: Direction, now: float, count: int, imp: Impairment) -> None:
    while d.held and (d.held[0][0] <= now or d.held[0][1] <= count):
        _send(d, d.held.popleft()[2])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m topologies.impair_relay",
        description="relay frames between two interfaces with loss, duplication and reordering",
    )
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument("--dup", type=float, default=0.0)
    ap.add_argument("--reorder", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        imp = Impairment(args.loss, args.dup, args.reorder, seed=args.seed)
        stats = relay(args.a, args.b, imp)
    except (ValueError, OSError) as e:
        print(f"impair_relay: {e}", file=sys.stderr)
        return 1
    print(f"impair_relay: {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
