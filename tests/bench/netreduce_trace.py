"""Where a goodput call's time went: one capture on every switch port, per call and worker
(root; the profile behind docs/architecture.md, "Wide packets").

Example (as root, inside ``scripts/netns.sh``)::

    python -m tests.bench.netreduce_trace --workers 8 --size 65536 --calls 3
    python -m tests.bench.netreduce_trace --host-cpu 0 --no-switch-realtime   # the old policy

One network as the netreduce section builds it (``tests.bench.netreduce``: same links, job,
barrier, untimed call and CPU policy), the switch method only, with ``tcpdump -i any`` on the
switch's ports: each frame's port, direction and PSN, the workers' frames as they leave
their hosts' shapers, the results as they leave the switch's. Per call it prints the
workers' starts, the span from the last start to the last end, and the downlinks' idle
time ascribed to whoever held the PSN that came next: the switch (all of that PSN's packets
had arrived, its result had not left) or a worker (its window allowed the packet, it had not
sent it); and p4sim's CPU and run-queue wait over the method's run.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from tests.bench.netreduce import FRAME_OVERHEAD, BenchConfig, _run_method

GAP_S = 0.2e-3  # idle time below this between two results is the frames' own spacing


@dataclass(frozen=True)
class Frame:
    t: float  # capture time, s
    port: int  # switch port
    result: bool  # leaving the switch (a result) or arriving (a worker's packet)
    psn: int


def read_capture(path: Path, ports: dict[int, int]) -> list[Frame]:
    """INC frames of a LINUX_SLL2 capture; ``ports`` maps interface index to switch port."""
    raw = path.read_bytes()
    frames, off = [], 24
    while off + 16 <= len(raw):
        sec, usec, incl, _ = struct.unpack_from("<IIII", raw, off)
        p = raw[off + 16 : off + 16 + incl]
        off += 16 + incl
        if len(p) < 20 + 20 + 8 + 24:  # SLL2, IPv4, UDP, INC header
            continue
        proto, _, ifindex, _, pkttype = struct.unpack_from(">HHIHB", p, 0)
        ihl = (p[20] & 15) * 4
        inc = p[20 + ihl + 8 :]
        if proto != 0x0800 or p[29] != 17 or len(inc) < 24 or ifindex not in ports:
            continue
        psn = struct.unpack_from(">I", inc, 8)[0]
        frames.append(Frame(sec + usec / 1e6, ports[ifindex], pkttype == 4, psn))
    return sorted(frames, key=lambda f: f.t)


def attribute(frames: list[Frame], first: int, count: int, window: int, frame_s: float) -> dict:
    """Downlink idle time (s) of PSNs first..first+count-1: the switch's and the workers';
    ``missed``: PSNs left out because the capture lost one of their frames."""
    up: dict[tuple[int, int], float] = {}
    down: dict[tuple[int, int], float] = {}
    for f in frames:
        (down if f.result else up).setdefault((f.port, f.psn), f.t)
    ports = sorted({p for p, _ in up})
    switch = workers = 0.0
    prev, missed = None, 0
    for psn in range(first, first + count):
        if any((w, psn) not in down or (w, psn) not in up for w in ports):
            missed += 1  # the capture lost a frame of it (tcpdump counts its drops)
            prev = None
            continue
        out = min(down[(w, psn)] for w in ports)
        gap = 0.0 if prev is None else out - prev - frame_s
        prev = out
        if gap <= GAP_S:
            continue
        last = max(ports, key=lambda w: up[(w, psn)])
        complete = up[(last, psn)]
        held = out - max(complete, out - gap)  # the switch had every packet of it
        switch += held
        allowed = down.get((last, psn - window), 0.0) if psn - window >= first else 0.0
        ready = max(allowed, up.get((last, psn - 1), 0.0) + frame_s)
        workers += min(gap - held, max(0.0, up[(last, psn)] - ready))
    return {"switch_s": switch, "workers_s": workers, "missed": missed}


def trace(cfg: BenchConfig, out: Path, log: Any = print) -> None:
    from topologies.experiment import Experiment, ExperimentConfig, star
    from topologies.host_cpu import budgets, realtime, task_times

    n, k = cfg.workers[0], cfg.slots[0]
    window = cfg.window_for(k)
    frame_s = (4 * k + FRAME_OVERHEAD) * 8 / (cfg.bw_mbps * 1e6)
    with (
        budgets(cfg.host_cpu) as cpu,
        Experiment(ExperimentConfig(star(n + 1), cfg.bw_mbps, run_dir=Path("run/bench"),
                                    log=lambda s: None)) as ex,
    ):  # fmt: skip
        pid = ex.switch("s1").proc.pid
        if cfg.switch_realtime:
            realtime(pid)
        job = ex.submit(f"trace-{n}-{k}", workers=n, window=window, slots=k)
        ports = {
            int(Path(f"/sys/class/net/{i}/ifindex").read_text()): int(i.rsplit("eth", 1)[1])
            for i in ex.switch_intfs()
        }
        pcap = out / "switch.pcap"
        dump = ["tcpdump", "-i", "any", "-y", "LINUX_SLL2", "-s", "96", "-B", "32768"]
        cap = subprocess.Popen([*dump, "-w", str(pcap), "udp"], stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        try:
            run0 = task_times(pid)
            _run_method(ex, job, k, "switch", cfg, out, cpu)
            run1 = task_times(pid)
        finally:
            time.sleep(0.5)
            cap.terminate()
            cap.wait()
    log(f"p4sim over the run: {run1[0] - run0[0]:.2f} CPU-s, {run1[1] - run0[1]:.2f} s waiting")
    frames = read_capture(pcap, ports)
    recs = [json.loads((out / f"switch{w}.json").read_text()) for w in range(n)]
    first = min(f.psn for f in frames if not f.result)
    first += -(-cfg.sizes[0] // k)  # the untimed call's PSNs
    for c in range(len(recs[0]["starts"])):
        size = cfg.sizes[c // cfg.calls]
        count = -(-size // k)
        starts = [r["starts"][c] for r in recs]
        ends = [s + r["times"][c] for s, r in zip(starts, recs, strict=True)]
        got = attribute(frames, first, count, window, frame_s)
        first += count
        log(f"call {c} ({size * 4 // 1024} KiB, {count * frame_s * 1e3:.1f} ms at the link):"
            f" starts {max(starts) - min(starts):.4f} s apart, last start to last end"
            f" {max(ends) - max(starts):.4f} s; downlinks idle for the switch"
            f" {got['switch_s'] * 1e3:.1f} ms, for late workers"
            f" {got['workers_s'] * 1e3:.1f} ms"
            + (f" ({got['missed']} PSNs not captured whole)" if got["missed"] else ""))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.netreduce_trace")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--size", type=int, default=65536, help="int32 per vector")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--slots", type=int, default=128)
    ap.add_argument("--host-cpu", type=float, default=1.0, help="every host's CPU budget, cores")
    ap.add_argument("--no-switch-realtime", dest="switch_realtime", action="store_false")
    a = ap.parse_args(argv)
    cfg = BenchConfig((a.workers,), (a.size,), a.calls, slots=(a.slots,), host_cpu=a.host_cpu,
                      switch_realtime=a.switch_realtime)  # fmt: skip
    with TemporaryDirectory() as tmp:
        trace(cfg, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
