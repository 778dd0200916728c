"""A link impairment relay: loss, duplication, reordering and delay between two interfaces.

This kernel has no netem, so a link that must lose, duplicate, reorder or delay frames is
built as ``host -- relay -- switch``: the relay is a small process in its own network
namespace that copies every frame from one interface to the other (both directions) and,
with a seeded random generator, drops some, sends some twice, and holds some back so that
they leave after the frames behind them. With a delay, every frame that is sent leaves
``delay`` seconds after it arrived (in order: one constant delay per direction), which
gives a link a propagation delay, so a window of packets in flight can be smaller than
the link's bandwidth-delay product.

Example (inside a namespace with interfaces ``a`` and ``b``)::

    python -m topologies.impair_relay a b --loss 0.05 --dup 0.01 --reorder 0.02 --seed 7
    python -m topologies.impair_relay a b --delay-ms 10

Where the kernel has netem, :func:`netem_args` gives the equivalent ``tc`` arguments.
"""

from __future__ import annotations

import argparse
import math
import random
import select
import signal
import sys
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from p4sim.ports import MAX_FRAME, PACKET_OUTGOING, open_raw_socket


@dataclass(frozen=True)
class Impairment:
    loss: float = 0.0  # probability that a frame is dropped
    dup: float = 0.0  # probability that a frame is sent twice
    reorder: float = 0.0  # probability that a frame is held back behind later frames
    hold_frames: int = 3  # a held frame leaves after this many later frames ...
    hold_s: float = 0.005  # ... or after this long, whichever comes first
    seed: int = 0
    delay_s: float = 0.0  # every frame sent leaves this long after it arrived

    def __post_init__(self) -> None:
        for name in ("loss", "dup", "reorder"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
        if not 0.0 <= self.delay_s <= MAX_DELAY_S:
            raise ValueError(f"delay must be in 0..{MAX_DELAY_S * 1000:g} ms, got "
                             f"{self.delay_s * 1000:g} ms")  # fmt: skip

    @property
    def is_null(self) -> bool:
        return self.loss == self.dup == self.reorder == self.delay_s == 0.0


MAX_DELAY_S = 10.0


def netem_args(imp: Impairment) -> list[str]:
    """``tc qdisc ... netem`` arguments with the same effect (for kernels that have netem)."""
    args = ["netem"]
    if imp.loss:
        args += ["loss", f"{imp.loss * 100:g}%"]
    if imp.dup:
        args += ["duplicate", f"{imp.dup * 100:g}%"]
    if imp.reorder:
        delay = imp.delay_s + imp.hold_s
        args += ["delay", f"{delay * 1000:g}ms", "reorder", f"{(1 - imp.reorder) * 100:g}%"]
    elif imp.delay_s:
        args += ["delay", f"{imp.delay_s * 1000:g}ms"]
    return args


@dataclass
class Direction:
    """Frames from ``src`` to ``dst``, with the frames held back for reordering."""

    src: object
    dst: object
    held: deque[tuple[float, int, bytes]]
    delayed: deque[tuple[float, bytes]] = field(default_factory=deque)  # (when it leaves, frame)
    sent: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0


def relay(a: str, b: str, imp: Impairment, stop_after: float | None = None) -> dict[str, int]:
    """Copy frames between interfaces ``a`` and ``b`` until SIGTERM (or ``stop_after`` s)."""
    rng = random.Random(imp.seed)
    sa, sb = open_raw_socket(a), open_raw_socket(b)  # deep buffers: it loses only what it chooses
    print("impair_relay: ready", flush=True)  # the sockets see every frame from here on
    dirs = {
        sa.fileno(): Direction(sa, sb, deque()),
        sb.fileno(): Direction(sb, sa, deque()),
    }
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
        events = poller.poll(_wait_ms(dirs.values(), imp, time.monotonic()))
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
            _leave(d, now)
    for d in dirs.values():
        while d.held:
            _emit(d, d.held.popleft()[2], imp, 0.0)
        _leave(d, float("inf"))
    sa.close()
    sb.close()
    return {
        "sent": sum(d.sent for d in dirs.values()),
        "dropped": sum(d.dropped for d in dirs.values()),
        "duplicated": sum(d.duplicated for d in dirs.values()),
        "reordered": sum(d.reordered for d in dirs.values()),
    }


def _wait_ms(dirs: Iterable[Direction], imp: Impairment, now: float) -> int:
    """How long poll may sleep: until the next delayed frame is due, at most ``hold_s``
    (held frames, and a SIGTERM is seen that often), at least 1 ms."""
    wait = imp.hold_s
    for d in dirs:
        if d.delayed:
            wait = min(wait, d.delayed[0][0] - now)
    return max(1, math.ceil(wait * 1000))


def _emit(d: Direction, data: bytes, imp: Impairment, now: float) -> None:
    """Send now, or, with a delay, queue it to leave ``delay_s`` from ``now``."""
    if imp.delay_s:
        d.delayed.append((now + imp.delay_s, data))
    else:
        _send(d, data)


def _leave(d: Direction, now: float) -> None:
    while d.delayed and d.delayed[0][0] <= now:
        _send(d, d.delayed.popleft()[1])


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
        _emit(d, data, imp, now)
    _release(d, now, count, imp)


def _release(d: Direction, now: float, count: int, imp: Impairment) -> None:
    while d.held and (d.held[0][0] <= now or d.held[0][1] <= count):
        _emit(d, d.held.popleft()[2], imp, now)


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
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay of every frame")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        imp = Impairment(
            args.loss, args.dup, args.reorder, seed=args.seed, delay_s=args.delay_ms / 1000
        )
        stats = relay(args.a, args.b, imp)
    except (ValueError, OSError) as e:
        print(f"impair_relay: {e}", file=sys.stderr)
        return 1
    print(f"impair_relay: {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
