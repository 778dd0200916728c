"""The link rate of an aggregation experiment, chosen for the switch that runs it.

Example::

    r = link_rate("bmv2", workers=4)
    r.mbps            # 1.0: BMv2 takes ~5,000 aggregation packets/s, offered half of that
    r.describe()      # 'chosen for bmv2: 5,000 aggregation packets/s (configured); ...'

A software switch has a packet rate of its own, far below what veth links carry. When the
links are faster than the switch can aggregate, the switch is the bottleneck and its path
loses to host baselines for a reason that says nothing about in-network aggregation; when
they are much slower, every method waits for the links. So the links are shaped to let the
workers together offer the switch ``headroom`` (half) of the aggregation packets per second
it sustains: the links, not the switch, set the pace, and the switch path's advantage (fewer
bytes on the busiest link) is what the comparison measures, on p4sim and on BMv2 alike.

The hosts have a packet rate too: each worker's packet loop sends and receives every frame
of its link, and the workers share the machine's cores with the switch. So the links are
also kept within ``HEADROOM`` of what the workers' loops sustain (``HOST_LOOP_RATE``, per
CPU-second, for the native and the Python loop, times the cores shared by the workers and
the switch); the lower of the two bounds sets the rate and ``describe()`` states both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Aggregation packets/s into the switch (all workers together) each target sustains on
#: the 2-core machines this project runs on, measured over AF_PACKET with paced loads:
#: p4sim by ``make bench`` (wire section, inc.p4 aggregation round, highest offered rate
#: delivered with < 1 % loss): its default native back end ("p4sim": 130,000 and 300,000
#: in two runs on an idle machine, the lower kept) and, with P4SIM_BACKEND=python, the
#: Python one ("p4sim-python", also hosts/vector_job.py: 20,000 and 30,000, the lower kept);
#: BMv2 simple_switch_grpc 1.15.5 measured from outside (issue 16).
SWITCH_AGG_RATE = {"p4sim": 130_000, "p4sim-python": 20_000, "bmv2": 5_000}
#: INC packets sent and received per CPU-second by one worker's packet loop (window, timers,
#: retransmission included), ``make bench`` section hostrate on a shared 2-core machine:
#: the native loop (hosts/transport/native_window.c) 288,000, the Python one 62,700.
HOST_LOOP_RATE = {"native": 288_000, "python": 62_700}
#: Bytes of one aggregation frame: Ethernet 14, IPv4 20, UDP 8, INC header 24, 32 x int32.
FRAME_BYTES = 14 + 20 + 8 + 24 + 32 * 4
HEADROOM = 0.5


@dataclass(frozen=True)
class LinkRate:
    mbps: float
    switch: str
    agg_rate: float  # aggregation packets/s the switch sustains
    source: str  # "configured", "given" (--switch-rate) or "fixed" (--bw)
    workers: int
    host_backend: str = "native"
    host_fps: float = 0.0  # frames/s per worker link the hosts' loops allow (with headroom)
    bound: str = "switch"  # which of the two set the rate

    def describe(self) -> str:
        if self.source == "fixed":
            return f"fixed with --bw (the switch, {self.switch}, is not consulted)"
        per_link = self.mbps * 1e6 / 8 / FRAME_BYTES
        hosts = (
            f"the hosts' {self.host_backend} packet loops allow {self.host_fps:,.0f} "
            f"({HOST_LOOP_RATE[self.host_backend]:,} per CPU-second, cores shared with the "
            f"switch, {HEADROOM:.0%} headroom)"
        )
        return (
            f"chosen for {self.switch}: {self.agg_rate:,.0f} aggregation packets/s "
            f"({self.source}); {self.workers} workers offer {HEADROOM:.0%} of it "
            f"({per_link:,.0f} frames/s per worker link); {hosts}; the {self.bound} set the rate"
        )


def link_rate(
    switch: str,
    workers: int,
    switch_rate: float | None = None,
    fixed_mbps: float | None = None,
    host_backend: str | None = None,
    cores: int | None = None,
) -> LinkRate:
    """Link Mbit/s for ``workers`` aggregating through ``switch`` (p4sim or bmv2);
    ``switch_rate`` replaces the configured aggregation rate (a measured one),
    ``fixed_mbps`` skips the choice. ``host_backend`` (default ``$INC_HOST_BACKEND``, else
    native) and ``cores`` (default this machine's) give the hosts' bound."""
    if switch == "p4sim" and os.environ.get("P4SIM_BACKEND") == "python":
        switch = "p4sim-python"  # the p4sim command runs the Python back end (p4sim/cli.py)
    if fixed_mbps is not None:
        return LinkRate(fixed_mbps, switch, 0.0, "fixed", workers)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if switch_rate is not None:
        if switch_rate <= 0:
            raise ValueError(f"the switch rate must be > 0 packets/s, got {switch_rate}")
        rate, source = float(switch_rate), "given"
    else:
        try:
            rate, source = float(SWITCH_AGG_RATE[switch]), "configured"
        except KeyError:
            known = ", ".join(SWITCH_AGG_RATE)
            raise ValueError(f"no aggregation rate known for switch {switch!r} ({known})") from None
    backend = host_backend or os.environ.get("INC_HOST_BACKEND") or "native"
    if backend not in HOST_LOOP_RATE:
        raise ValueError(f"host back end must be one of {', '.join(HOST_LOOP_RATE)}: {backend!r}")
    shared = (cores or os.cpu_count() or 1) / (workers + 1)  # the workers and the switch
    host_fps = HOST_LOOP_RATE[backend] * min(shared, 1.0) * HEADROOM
    switch_fps = rate * HEADROOM / workers
    per_link_fps = min(switch_fps, host_fps)
    mbps = round(per_link_fps * FRAME_BYTES * 8 / 1e6, 1)
    bound = "switch" if switch_fps <= host_fps else "hosts"
    return LinkRate(max(mbps, 0.1), switch, rate, source, workers, backend, host_fps, bound)
