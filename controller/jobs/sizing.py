"""The seed's sizing models: how much switch memory a job needs, and how long it then runs.

Example:
    >>> path = Network(rtt_s=100e-6, line_rate=1.28e9)      # 100 us round trip, 1.28 GB/s link
    >>> want = memory_for(path.line_rate, path.rtt_s)     # aggregators for line rate
    >>> want, throughput(want, path)
    (1000, 1280000000.0)
    >>> throughput(250, path)                             # a quarter of that memory
    320000000.0
    >>> p = Profile(epochs=100, model_bytes=128_000_000, compute_s=0.2)
    >>> round(job_time(p, throughput(want, path)), 3)     # 100 x (0.2 + 0.1)
    30.0
    >>> memory_to_finish(p, 100, time_left=50.0, path=path)  # 0.5 s per epoch: 0.3 s of sending
    334
    >>> memory_to_finish(p, 100, time_left=20.0, path=path) is None  # even line rate is late
    True

Two models, both from the seed (``inc-acceleration-overview``, task management):

    Memory_switch = Throughput x RTT
    Time_job      = Epochs x (Time_comp + Size_model / Throughput)

Memory is counted in aggregators (the unit of ``controller/jobs/memory_manager.py``). An
aggregator carries one packet's ``SLOTS x VALUE_BYTES`` = 128 bytes of values per round
trip, and a worker keeps one packet in flight per aggregator of its region (window =
region size, docs/protocol.md), so a region of ``m`` aggregators moves ``m x 128`` bytes
per RTT per worker: ``throughput(m) = min(line_rate, m x 128 / RTT)``. Beyond
``memory_for(line_rate, RTT)`` more memory buys nothing. One *epoch* here is what the
seed's formula counts: one compute phase and one all-reduce of the whole model (a
training iteration), and ``Size_model`` is rounded up to whole packets, as they travel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wire.header import SLOTS, VALUE_BYTES

AGGREGATOR_BYTES = SLOTS * VALUE_BYTES  # values one aggregator carries per round trip


@dataclass(frozen=True)
class Network:
    """What the model assumes about a job's path through the switch.

    ``rtt_s`` is the job's round-trip time (worker -> switch -> worker, measured per job
    when it runs); ``line_rate`` the bytes of values per second one worker's link carries.
    """

    rtt_s: float
    line_rate: float

    def __post_init__(self) -> None:
        if not (self.rtt_s > 0 and math.isfinite(self.rtt_s)):
            raise ValueError(f"rtt_s must be a positive number of seconds, got {self.rtt_s}")
        if not (self.line_rate > 0 and math.isfinite(self.line_rate)):
            raise ValueError(f"line_rate must be positive bytes/s, got {self.line_rate}")


@dataclass(frozen=True)
class Profile:
    """What a job declares: epochs, model size, compute time per epoch."""

    epochs: int
    model_bytes: int
    compute_s: float

    @property
    def wire_bytes(self) -> int:
        """Bytes of values sent per epoch: the model in whole packets."""
        return packets(self.model_bytes) * AGGREGATOR_BYTES


def packets(model_bytes: int) -> int:
    return -(-model_bytes // AGGREGATOR_BYTES)


def throughput(memory: int, path: Network) -> float:
    """Bytes/s a job moves with ``memory`` aggregators: Memory = Throughput x RTT, capped
    by the line rate."""
    if memory <= 0:
        return 0.0
    return min(path.line_rate, memory * AGGREGATOR_BYTES / path.rtt_s)


def memory_for(rate: float, rtt_s: float) -> int:
    """Aggregators that sustain ``rate`` bytes/s at ``rtt_s``: ceil(rate x RTT / 128)."""
    if rate <= 0:
        return 0
    # The small tolerance keeps float noise (1000.0000000001) from costing an aggregator.
    return max(1, math.ceil(rate * rtt_s / AGGREGATOR_BYTES - 1e-9))


def epoch_time(p: Profile, rate: float) -> float:
    """Time_comp + Size_model / Throughput (infinite without throughput)."""
    if rate <= 0:
        return math.inf
    return p.compute_s + p.wire_bytes / rate


def job_time(p: Profile, rate: float, epochs: float | None = None) -> float:
    """Epochs x (Time_comp + Size_model / Throughput); ``epochs`` defaults to all of them."""
    n = p.epochs if epochs is None else epochs
    if n <= 0:
        return 0.0
    return n * epoch_time(p, rate)


def rate_to_finish(p: Profile, epochs_left: float, time_left: float) -> float | None:
    """The least throughput that runs ``epochs_left`` epochs within ``time_left`` seconds,
    or None when even infinite throughput cannot (compute alone takes longer)."""
    if epochs_left <= 0:
        return 0.0
    per_epoch = time_left / epochs_left
    sending = per_epoch - p.compute_s
    if sending <= 0:
        return None
    return p.wire_bytes / sending


def memory_to_finish(p: Profile, epochs_left: float, time_left: float, path: Network) -> int | None:
    """The least memory (aggregators) that meets the deadline by the model, or None when no
    amount does (the needed throughput is above the line rate)."""
    rate = rate_to_finish(p, epochs_left, time_left)
    if rate is None or rate > path.line_rate * (1 + 1e-9):
        return None
    if rate == 0:
        return 0
    m = memory_for(rate, path.rtt_s)
    # Rounding must never leave the job short: the ceiling meets the rate by construction,
    # but check against the model itself rather than trust the algebra.
    while job_time(p, throughput(m, path), epochs_left) > time_left * (1 + 1e-12):
        m += 1
    return m
