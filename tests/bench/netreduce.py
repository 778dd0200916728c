"""Aggregation goodput on Mininet: switch (NetReduce), parameter server and ring, measured in
one run at several worker counts and two vector sizes (root).

Example (as root; ``make bench`` runs it after the p4sim section)::

    python -m tests.bench --only netreduce --workers 4,8 --sizes 65536,262144 --calls 3 \
        --bw 25 --slots 32,128

Per worker count one network (topologies/experiment.py: p4sim switch, N workers, a PS host,
every link ``--bw`` Mbit/s) and, per value count ``--slots``, one admitted job; for each
method every worker all-reduces seeded int32 vectors (``python -m hosts.vector_job``) and
reports each call's time. Goodput per worker = vector bytes / median call time, as a
fraction of the link bandwidth. A link carries at most ``4K / (4K + 66)`` of its bandwidth
as values (K int32 per frame, behind Ethernet, IPv4, UDP and the INC header: 0.66 at 32
slots, 194-byte frames; 0.89 at 128, 578-byte frames), the *link limit*: the switch reaches
it when each worker's link is the only bottleneck. Ring all-reduce sends 2(N-1)/N of the
vector per worker, so the ideal switch/ring time ratio is N / (2(N-1)). The PS and the ring
send packets of the job's slots too.

Links of 25 Mbit/s (``make run``'s rate on p4sim with 4 workers) and vectors of 256 KiB and
1 MiB: the bandwidth-bound regime, where a call takes tens of round trips' worth of
packets. The window is 128 packets at 32 slots (about 8 ms of one link's packets) and the
same bytes at wider packets (32 at 128 slots). The switch's results toward the workers
wait in the links' shapers charged to p4sim's one sending socket; with its default 212 KB
send buffer (~90 frames of 578 bytes in all) 8 workers lost 1.5-2.5 % of their results to
refused sends and retransmitted them (goodput 0.59-0.72 of the limit); p4sim's ports now
take 4 MiB (``p4sim.ports.SOCKET_BUFFER``) and none are lost. With that, 8 workers at 128
slots (1 MiB calls, shared machine, no idle CPU): window 32 took 0.46 s per call, 64 took
0.59 s and 128 took 0.65 s, so the window stays at 32.
Every method runs alike, and the title says so: the switch process under SCHED_FIFO
(``topologies.host_cpu.realtime``: it stands for hardware), every host's process in a CPU
budget of ``--host-cpu`` cores (``HostCpu``: a guaranteed weight; one core is a cap nothing
reaches), the workers' vectors made before the first call, a start barrier and one untimed
call of all workers; timed is each worker's call from its start to its result. Profiled
with one capture on every switch port (``tests/bench/netreduce_trace.py``;
docs/architecture.md, "Wide packets"), the 8-worker
256 KiB calls that reached 0.85 of the limit lost their time to waits for a CPU on the
shared 2-core machine: p4sim, at ordinary priority, held complete PSNs for milliseconds
while every downlink idled (0.6-1.5 s of run-queue wait in a 3-second run), then workers
woke late to send what their window allowed, and the barrier's release spread the first
call's starts over up to 31 ms; not the window (32, 64 and 128 frames gave the same
calls). ``--host-cpu 0 --no-switch-realtime`` runs the old policy beside it.
Goal (issue 22): with 4 and 8 workers the switch reaches >= 0.9 of the link limit. The last
columns show the share of each method's packets that were retransmissions and the median
start skew of a switch call (its last worker's start minus its first's).
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

FRAME_OVERHEAD = 14 + 20 + 8 + 24  # Ethernet, IPv4, UDP, INC header


def link_limit(slots: int) -> float:
    """The share of a link's bytes that are values, in frames of ``slots`` int32."""
    return 4 * slots / (4 * slots + FRAME_OVERHEAD)


@dataclass(frozen=True)
class BenchConfig:
    workers: tuple[int, ...] = (4, 8)
    sizes: tuple[int, ...] = (65536, 262144)  # int32 values: 2,048 and 8,192 packets
    calls: int = 3
    bw_mbps: float = 25.0
    window: int = 128  # packets in flight at 32 slots; wider packets: the same bytes
    slots: tuple[int, ...] = (32, 128)  # values per packet: one block, four (578-byte frames)
    host_cpu: float = 1.0  # every host's CPU budget, cores (0: none, hosts in the root group)
    switch_realtime: bool = True  # the switch under SCHED_FIFO (it stands for hardware)

    def window_for(self, slots: int) -> int:
        """Packets in flight for ``slots`` values per packet: ``window`` packets' worth of
        32-slot values (16 KiB at 128), so wider packets keep as many bytes in flight."""
        return max(1, self.window * 32 // slots)

    def command(self) -> str:
        return (
            f"{sys.executable} -m tests.bench --only netreduce"
            f" --workers {','.join(map(str, self.workers))}"
            f" --sizes {','.join(map(str, self.sizes))} --calls {self.calls} --bw {self.bw_mbps:g}"
            f" --slots {','.join(map(str, self.slots))}"
            + (f" --host-cpu {self.host_cpu:g}" if self.host_cpu != 1.0 else "")
            + ("" if self.switch_realtime else " --no-switch-realtime")
        )

    def timed(self) -> str:
        """What the table's times are, for its title."""
        hosts = f"every host a CPU budget of {self.host_cpu:g} core(s)" if self.host_cpu else (
            "hosts without CPU budgets")  # fmt: skip
        switch = "the switch at realtime priority" if self.switch_realtime else (
            "the switch at ordinary priority")  # fmt: skip
        return (f"timed: each worker's call from its start to its result, after a start barrier"
                f" and one untimed call of all workers; {switch}, {hosts}")  # fmt: skip


def _run_method(
    nr: Any, job: int, slots: int, method: str, cfg: BenchConfig, out: Path, cpu: Any = None
) -> tuple[dict[int, float], float, dict[int, float]]:
    """Median call time (s) per vector size, over workers and calls, for one method; the
    share of its packets that were retransmissions (over workers, calls and sizes); and per
    size the median start skew (s) of a call: its last worker's start minus its first's.
    Every host's process runs in its CPU budget ``cpu`` (a ``HostCpu``, or None)."""
    from topologies.host_cpu import in_budget

    n = len(nr.layout.hosts) - 1
    ps = None
    if method == "ps":
        cmd = [sys.executable, "-m", "hosts.netreduce.ps", "--workers", str(n)]
        cmd += ["--slots", str(slots)]
        host = f"h{n + 1}"
        ps = nr.start_service(host, in_budget(cpu, host, cmd), ready="parameter server on",
                              log_name="ps")  # fmt: skip
    # process start-up is not timed: the workers meet at a barrier, then make one untimed
    # call together (its results reach them all at once, so the first timed call starts as
    # close together as later ones: the barrier's release alone left them 10-30 ms apart)
    barrier = out / f"barrier-{method}-{job}"
    commands = []
    for w in range(n):
        cmd = [sys.executable, "-m", "hosts.vector_job", "--method", method,
               "--controller", nr.controller_url, "--job-id", str(job), "--worker-id", str(w),
               "--size", ",".join(map(str, cfg.sizes)), "--calls", str(cfg.calls),
               "--timeout", "1.0", "--total-timeout", "120", "--barrier", str(barrier), str(n),
               "--warmup", "1",
               "--out", str(out / f"{method}{w}")]  # fmt: skip
        commands.append((f"h{w + 1}", in_budget(cpu, f"h{w + 1}", cmd)))
    try:
        codes = [run.code for run in nr.run_hosts(commands, timeout=600)]
    finally:
        if ps is not None:
            nr.stop(ps)
    recs = [json.loads((out / f"{method}{w}.json").read_text()) for w in range(n)]
    if any(codes):
        errors = {r.get("error") for r in recs if r.get("error")}
        raise RuntimeError(f"{method} with {n} workers failed: {errors}")
    times = {
        size: statistics.median(t for r in recs for t in r["times_by_size"][str(size)])
        for size in cfg.sizes
    }
    stats = [r.get("stats", {}) for r in recs]
    sent = sum(s.get("packets_sent", s.get("data_sent", 0)) for s in stats)
    retx = sum(s.get("retransmissions", 0) for s in stats)
    skew = {}
    for i, size in enumerate(cfg.sizes):
        calls = range(i * cfg.calls, (i + 1) * cfg.calls)
        starts = [[r["starts"][c] for r in recs] for c in calls]
        skew[size] = statistics.median(max(s) - min(s) for s in starts)
    return times, retx / sent if sent else 0.0, skew


def measure(cfg: BenchConfig, log: Any = print) -> list[dict[str, Any]]:
    """One row per (workers, slots, size): goodput fractions and the switch/ring time ratio."""
    from topologies.experiment import Experiment, ExperimentConfig, star
    from topologies.host_cpu import budgets, realtime

    rows = []
    for n in cfg.workers:
        log(f"netreduce bench: {n} workers, links {cfg.bw_mbps:g} Mbit/s ...")
        with (
            TemporaryDirectory() as tmp,
            budgets(cfg.host_cpu) as cpu,  # before the network: hosts see its mount
            Experiment(
                ExperimentConfig(
                    star(n + 1), cfg.bw_mbps, run_dir=Path("run/bench"), log=lambda s: None
                )
            ) as nr,
        ):
            if cfg.switch_realtime:
                realtime(nr.switch("s1").proc.pid)
            by_slots = {}
            for k in cfg.slots:
                win = cfg.window_for(k)
                job = nr.submit(f"bench-{n}-{k}", workers=n, window=win, slots=k)
                by_slots[k] = {
                    m: _run_method(nr, job, k, m, cfg, Path(tmp), cpu)
                    for m in ("switch", "ps", "ring")
                }
        for k, runs in by_slots.items():
            rows += _rows(n, k, runs, cfg)
    return rows


def _rows(n: int, slots: int, runs: dict[str, Any], cfg: BenchConfig) -> list[dict[str, Any]]:
    """The rows of one (workers, slots) pair: ``runs`` maps method -> (times by size, retx)."""
    times = {m: t for m, (t, _, _) in runs.items()}
    rows = []
    for size in cfg.sizes:
        bits = size * 4 * 8
        frac = {m: bits / times[m][size] / (cfg.bw_mbps * 1e6) for m in times}
        rows.append(
            {
                "workers": n,
                "slots": slots,
                "size": size,
                **{f"{m}_goodput": frac[m] for m in frac},
                **{f"{m}_time_s": times[m][size] for m in times},
                "switch_vs_limit": frac["switch"] / link_limit(slots),
                "ratio": times["switch"][size] / times["ring"][size],
                "ratio_theory": n / (2 * (n - 1)),
                **{f"{m}_retx": runs[m][1] for m in runs},
                "switch_skew_s": runs["switch"][2][size],
            }
        )
    return rows


def table(rows: list[dict[str, Any]], cfg: BenchConfig) -> Any:
    from rich.table import Table

    t = Table(
        title=f"aggregation goodput per worker, fraction of the {cfg.bw_mbps:g} Mbit/s link "
        f"(link limit: value bytes per frame, {link_limit(32):.2f} at 32 slots (194-byte "
        f"frames), {link_limit(128):.2f} at 128 (578)); {cfg.timed()}"
    )
    cols = ("workers", "slots", "vector", "switch", "ps", "ring", "switch / limit",
            "switch/ring time", "theory N/(2(N-1))", "retransmitted: switch/ps/ring",
            "switch call: start skew, ms")  # fmt: skip
    for c in cols:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(
            str(r["workers"]),
            str(r["slots"]),
            f"{r['size'] * 4 // 1024} KiB",
            f"{r['switch_goodput']:.3f}",
            f"{r['ps_goodput']:.3f}",
            f"{r['ring_goodput']:.3f}",
            f"{r['switch_vs_limit']:.2f}",
            f"{r['ratio']:.2f}",
            f"{r['ratio_theory']:.2f}",
            "/".join(f"{r[m + '_retx']:.1%}" for m in ("switch", "ps", "ring")),
            f"{1000 * r['switch_skew_s']:.1f}",
        )
    return t


GOAL_VS_LIMIT = 0.9


def goal_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The goal per row with 4 or more workers: switch goodput >= 0.9 of the link limit."""
    out = []
    for r in rows:
        if r["workers"] >= 4:
            met = r["switch_vs_limit"] >= GOAL_VS_LIMIT
            out.append(
                f"goal switch >= {GOAL_VS_LIMIT} of the link limit, {r['workers']} workers, "
                f"{r['slots']} slots, {r['size'] * 4 // 1024} KiB: {r['switch_vs_limit']:.2f} "
                f"({'met' if met else 'not met'})"
            )
    return out
