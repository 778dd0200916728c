"""`make bench`: memory scheduling, switch throughput in-process and on the wire, then
aggregation goodput.

Section sched (tests/bench/scheduler.py, no root): the controller's scheduler under
simulated time (``controller.sched.sched_sim``), EDF against FIFO, RR and MLFQ on the same
Poisson traces at four loads: MD deadlines met and average JCT, and the headline ratios.

Section p4sim: packets per second through the in-process pipeline (``Switch.send``), one
core, on the Python and the native (C, p4sim/native) back ends, for the three programs of
tests/bench/programs.py (basic IPv4 forwarding, 32 register read-modify-writes per packet,
the inc.p4 aggregation round).

Section hostrate (tests/bench/host_rate.py, no root): one worker's INC packets per second
through a quorum-of-one parameter server on 127.0.0.1, the native (C) and the Python packet
loop side by side (window, timers, retransmission included): packets/s, the client's CPU
share, packets per CPU-second, and the goal of 150,000 per second on one core.

Section wire (tests/bench/wire.py, root): each program on real veth interfaces at paced
offered loads, on p4sim (Python back end, and native: ``--backend native``, its packet
loop in C) and, where ``simple_switch_grpc`` and ``p4c`` are on PATH, on BMv2
in the same run with the same entries and traffic: the delivered rate and loss at each
offered rate, the best delivered rate of each switch and their ratio. Without BMv2 the
table says so and shows the reference figures measured from outside on this kind of
machine (BMv2 1.15.5), labelled as such. Sender and receiver are tests/bench/traffic.c
(traffic.py where no C compiler is installed), which share the 2 cores with the switch.

Section ddp (tests/bench/ddp.py, root): PyTorch DDP with 4 workers on Mininet, inclib's
switch comm hook against gloo's all-reduce in one run, on unshaped links and on links shaped
by make run's rule, for the small (round-trip-bound) and large (bandwidth-bound) model: time
per iteration, time to accuracy, final accuracy, and the goals with whether each is met.

Section netreduce (tests/bench/netreduce.py, root): goodput per worker as a fraction of the
link bandwidth for switch, parameter server and ring at 4 and 8 workers on 25 Mbit/s links
and two vector sizes (256 KiB, 1 MiB), with the switch/ring time ratio beside N/(2(N-1)) and
the goal (switch >= 0.9 of the link limit) and whether it is met; the switch at realtime
priority and every host a CPU budget, for every method (the title says what is timed).

Section serene (topologies/serene.py, root): 4 workers train the digits MLP with one 2x
straggler under sync, partial 3 of 4, bounded staleness, async and the dynamic policy;
time to the target accuracy and final accuracy side by side, each as a ratio to sync.

Section kvcons (tests/bench/kvcons.py, root): pipelined clients, each host a CPU budget of
its own, at loads that saturate the storage server or the host leader: Zipf-0.99 operations
(0, 5 and 20 % writes) through the switch's key-value cache against the storage server
alone, and a replicated log with the switch as sequencer against a host leader; each pair
in one run on one network: operations or commits per second, p50/p99, the server's or
leader's CPU, the goals met or not, every history checked (linearizability, one log
order), and a PNG of throughput against offered load.

Section atp (topologies/atp/bench.py, root): 1, 2 and 4 concurrent jobs on one switch with a pool
smaller than their combined windows: ATP's shared pool against static equal partitioning
of the same register memory (NetReduce regions: an aggregator of two copies is two of ATP's;
a row with twice the memory beside it) and the parameter server alone, per-job and total
goodput, collision and fallback rates, retransmissions, CPU per psn (switch, parameter
servers, workers) and switch packets per psn, every worker starting at one barrier, side
by side in one run per job count, and issue 22's goals at 4 jobs (>= 1.3x static, ahead of
the PS alone), each marked met or NOT met; a plot under results/. Twice: on
unshaped links (p4sim's packet rate bounds every mode), and with 10 ms of delay on every
link (the windows, so switch memory, bound the rate: ATP's regime). Then one job
alone, beside a tenant flooding the shared pool whose job is metered, and beside one whose
job is not: the job's goodput side by side, with the METERED drops.

Section ask (tests/bench/ask.py; the Spark part as root): ASK's tuples per second with 1
and 16 tuples per packet through inc.p4 on p4sim, hot keys first against every key through
the switch (fraction absorbed, tuples and bytes at the reducer), and word count on the same
corpus: PySpark local's RDD reduceByKey and DataFrame groupBy (warm), the same RDD reduced
through the switch, and ASK's own mappers and reducer; then GROUP BY k SUM(v), COUNT(*)
with Spark's DataFrame against the same DataFrame through the switch; then both jobs on a
Spark standalone cluster on Mininet (4 executors; tests/bench/ask_cluster.py), with the
goals and results/ask_cluster.png.

``--only sched|p4sim|hostrate|wire|ddp|kvcons|netreduce|serene|atp|ask`` runs one section;
``--only kvcons --kvcons-systems kv`` only its key-value half (``log``: only consensus).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from tests.bench.programs import CASES, Case
from tests.bench.wire import TRAFFIC

#: BMv2 simple_switch_grpc 1.15.5, measured from outside on this kind of machine (issue 17):
#: paced loads over veth pairs. Used only when BMv2 is not installed here.
BMV2_REFERENCE = {
    "basic IPv4 forwarding": 18_000,
    "32 register RMW / packet": 5_000,
    "inc.p4 aggregation round": 5_000,
}


def measure(case: Case, seconds: float, backend: str = "python") -> tuple[float, int]:
    """In-process packets per second of ``case`` over at least ``seconds`` (CPU time of
    this process, so that other load on the machine does not count) on ``backend``."""
    sw = case.switch(backend=backend)
    if sw.backend != backend:
        raise RuntimeError(sw.backend_notice)
    frames = case.frames(4096)
    assert sw.send(*frames[0]) or len(case.ports) > 2, f"{case.name} forwarded nothing"
    # inc.p4: zeroing the job tags frees every aggregator, so the same psns can run again
    again = (lambda: sw.register_reset("agg_job")) if "inc.p4" in case.name else (lambda: None)
    again()
    n = 0
    start = time.process_time()
    while True:
        for port, f in frames:
            sw.send(port, f)
        n += len(frames)
        again()
        used = time.process_time() - start
        if used >= seconds:
            return n / used, n


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 2,4,8, got {text!r}") from None


def _model_list(text: str) -> tuple[str, ...]:
    from hosts.mlp import MODELS

    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [n for n in names if n not in MODELS]
    if bad or not names:
        known = ", ".join(MODELS)
        raise argparse.ArgumentTypeError(f"models are {known}, comma-separated; got {text!r}")
    return names


def _systems(text: str) -> tuple[str, ...]:
    from tests.bench.kvcons import SYSTEMS

    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names or any(n not in SYSTEMS for n in names):
        raise argparse.ArgumentTypeError(f"systems are {', '.join(SYSTEMS)}; got {text!r}")
    return names


def bench_netreduce(args: argparse.Namespace, console: Console) -> int:
    from tests.bench.netreduce import BenchConfig, goal_lines, measure, table
    from topologies.host_cpu import HostCpuError

    cfg = BenchConfig(args.workers, args.sizes, args.calls, args.bw, slots=args.slots,
                      host_cpu=args.host_cpu, switch_realtime=args.switch_realtime)  # fmt: skip
    if os.geteuid() != 0:
        print(
            "netreduce bench skipped: Mininet (namespaces, veth links) needs root;"
            f" as root run: {cfg.command()}"
        )
        return 0
    t0 = time.monotonic()
    try:
        rows = measure(cfg, log=console.print)
    except HostCpuError as err:
        console.print(f"netreduce bench: {err} (--no-switch-realtime, --host-cpu 0: without)")
        return 1
    console.print(table(rows, cfg))
    for line in goal_lines(rows):
        console.print(line)
    console.print(f"measured in one run, {time.monotonic() - t0:.0f} s; command: {cfg.command()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench")
    ap.add_argument("--seconds", type=float, default=3.0, help="in-process: CPU s per program")
    ap.add_argument("--step", type=float, default=1.5, help="wire: seconds per offered rate")
    ap.add_argument("--traffic", choices=TRAFFIC, default=None,
                    help="wire: sender and receiver (default: c where a compiler is)")  # fmt: skip
    ap.add_argument(
        "--only",
        choices=[
            "sched",
            "p4sim",
            "hostrate",
            "wire",
            "ddp",
            "kvcons",
            "netreduce",
            "serene",
            "atp",
            "ask",
        ],  # fmt: skip
        help="run one section",
    )
    ap.add_argument("--ddp-epochs", type=int, default=4, help="ddp: training epochs")
    ap.add_argument("--ddp-target", type=float, default=0.9, help="ddp: accuracy to reach")
    ap.add_argument(
        "--ddp-models", type=_model_list, default=("small", "large"), help="ddp: small,large"
    )
    ap.add_argument("--sched-jobs", type=int, default=200, help="sched: jobs per trace")
    ap.add_argument("--sched-seeds", type=int, default=2, help="sched: traces per load")
    ap.add_argument("--workers", type=_int_list, default=(4, 8), help="netreduce: 4,8")
    ap.add_argument("--sizes", type=_int_list, default=(65536, 262144), help="int32 per vector")
    ap.add_argument("--calls", type=int, default=3, help="netreduce: calls per size")
    ap.add_argument("--bw", type=float, default=25.0, help="netreduce: link Mbit/s")
    ap.add_argument("--slots", type=_int_list, default=(32, 128), help="netreduce: 32,128")
    ap.add_argument("--host-cpu", type=float, default=1.0,
                    help="netreduce: every host's CPU budget, cores (0: none)")  # fmt: skip
    ap.add_argument("--no-switch-realtime", dest="switch_realtime", action="store_false",
                    help="netreduce: leave the switch at ordinary priority")  # fmt: skip
    ap.add_argument("--kv-reads", type=int, default=5000, help="kvcons: ops per client, pass")
    ap.add_argument(
        "--log-appends", type=int, default=2500, help="kvcons: appends per client, pass"
    )
    ap.add_argument("--kvcons-systems", type=_systems, default=("kv", "log"),
                    help="kvcons: kv,log (the cache, consensus) or one of them")  # fmt: skip
    ap.add_argument("--ask-words", type=int, default=1_000_000, help="ask: words, scale row")
    ap.add_argument("--ask-cluster-words", type=_int_list, default=(10**6, 3 * 10**6, 10**7),
                    help="ask: corpus sizes (words) on the Spark cluster")  # fmt: skip
    args = ap.parse_args(argv)
    console = Console(width=140)
    if args.only in (None, "sched"):
        bench_sched(args, console)
    if args.only in (None, "p4sim"):
        bench_p4sim(args, console)
    if args.only in (None, "hostrate"):
        from tests.bench.host_rate import bench_host_rate

        bench_host_rate(console)
    if args.only in (None, "wire"):
        bench_wire(args, console)
    if args.only in (None, "ddp"):
        bench_ddp(args, console)
    if args.only in (None, "kvcons"):
        bench_kvcons(args, console)
    code = 0
    if args.only in (None, "netreduce"):
        code = bench_netreduce(args, console)
    if args.only in (None, "serene"):
        code = bench_serene(console) or code
    if args.only in (None, "atp"):
        code = bench_atp(console) or code
    if args.only in (None, "ask"):
        from tests.bench.ask import bench_ask

        code = bench_ask(console, args.seconds, scale_words=args.ask_words,
                         cluster_sizes=args.ask_cluster_words) or code  # fmt: skip
    return code


def bench_atp(console: Console) -> int:
    """ATP's shared pool vs static partitioning vs PS only (topologies/atp/bench.py)."""
    from topologies.atp import bench as atp_bench

    rate_bound = atp_bench.BenchConfig()
    memory_bound = atp_bench.BenchConfig(delay_ms=10)
    console.rule("ATP: shared pool vs static partitioning vs PS only (Mininet)")
    if os.geteuid() != 0:
        console.print(f"atp bench skipped: Mininet needs root; as root run: {rate_bound.command()}")
        return 0
    for cfg, regime in ((rate_bound, "unshaped links"), (memory_bound, "10 ms per link")):
        t0 = time.monotonic()
        rows = atp_bench.measure(cfg, log=console.print)
        console.print(atp_bench.table(rows, cfg))
        console.print(f"{regime}: {atp_bench.ratio_line(rows)}")
        console.print(f"plot: {atp_bench.plot(rows, cfg.plot_path, cfg.links)}")
        took = time.monotonic() - t0
        console.print(f"measured in one run, {took:.0f} s; command: {cfg.command()}")
    flood = atp_bench.FloodConfig()
    t0 = time.monotonic()
    console.print(atp_bench.flood_table(atp_bench.measure_flood(flood, log=console.print), flood))
    console.print(f"measured in one run, {time.monotonic() - t0:.0f} s; command: {flood.command()}")
    return 0


def bench_serene(console: Console) -> int:
    from topologies import serene

    a = serene.parser().parse_args([])
    command = f"{sys.executable} -m tests.bench --only serene (or python -m topologies.serene)"
    if os.geteuid() != 0:
        print(f"serene bench skipped: Mininet needs root; as root run: {command}")
        return 0
    t0 = time.monotonic()
    rows = serene.run_all(a, log=console.print)
    console.print(serene.report(rows, a))
    console.print(f"measured in one run, {time.monotonic() - t0:.0f} s; command: {command}")
    return 0


def bench_kvcons(args: argparse.Namespace, console: Console) -> None:
    """Key-value cache vs server only, switch sequencer vs host leader (tests/bench/kvcons.py),
    each pair side by side in one run, histories checked, curves in one PNG."""
    from tests.bench import kvcons

    kvcons.run(args.kv_reads, args.log_appends, console, args.kvcons_systems)


def bench_ddp(args: argparse.Namespace, console: Console) -> None:
    """PyTorch DDP: inclib's switch comm hook vs gloo (tests/bench/ddp.py)."""
    command = (
        f"{sys.executable} -m tests.bench --only ddp --ddp-epochs {args.ddp_epochs} "
        f"--ddp-models {','.join(args.ddp_models)}"
    )
    console.rule("PyTorch DDP: switch comm hook vs gloo (Mininet)")
    if os.geteuid() != 0:
        console.print(f"ddp bench skipped: Mininet needs root; as root run: {command}")
        return
    from tests.bench.ddp import goal_lines, hook_lines, measure, table

    t0 = time.monotonic()
    for model in args.ddp_models:
        recs = measure(args.ddp_epochs, model, log=console.print)
        console.print(table(recs, args.ddp_target, model))
        for line in hook_lines(recs) + goal_lines(recs, args.ddp_target):
            console.print(f"{model} model, {line}")
    console.print(
        f"measured in one run on a shared machine (load average {os.getloadavg()[0]:.1f} at "
        f"the end), {time.monotonic() - t0:.0f} s; command: {command}"
    )


def bench_sched(args: argparse.Namespace, console: Console) -> None:
    """EDF against FIFO, RR and MLFQ on simulated traces (controller.sched.sched_sim)."""
    from controller.sched.sched_sim import print_tables
    from tests.bench.scheduler import headline_lines, measure

    console.rule("switch memory scheduling (simulated, controller.sched.sched_sim)")
    rows, heads, took = measure(args.sched_jobs, args.sched_seeds)
    print_tables(rows, heads)
    for line in headline_lines(heads):
        console.print(line)
    console.print(
        f"measured in one run, {took:.0f} s; command: {sys.executable} -m tests.bench"
        f" --only sched --sched-jobs {args.sched_jobs} --sched-seeds {args.sched_seeds}"
    )


def bench_wire(args: argparse.Namespace, console: Console) -> None:
    """p4sim (and BMv2 where installed) on veth interfaces at paced loads."""
    if os.geteuid() != 0:
        console.print(
            "wire bench skipped: veth interfaces and raw sockets need root; run "
            f"as root: {sys.executable} -m tests.bench --only wire"
        )
        return
    from tests.bench.wire import bmv2_available, ceiling, sweep, traffic_default

    traffic = args.traffic or traffic_default()
    console.print(
        "sender and receiver: "
        + ("C (tests/bench/traffic.c)" if traffic == "c" else "Python (no C compiler here)")
    )
    missing = bmv2_available()
    targets = ["p4sim", "p4sim-native"] if missing else ["p4sim", "p4sim-native", "bmv2"]
    if missing:
        console.print(
            f"BMv2 absent ({missing}): its column shows reference figures, not a measurement"
        )
    basic = CASES["basic IPv4 forwarding"]
    top = ceiling(basic, seconds=args.step, log=console.print, traffic=traffic)
    limit = f"{top.best:,.0f} pkt/s" if top.error is None else f"not measured ({top.error[:60]})"
    results = {}
    for case in CASES.values():
        for target in targets:
            results[case.name, target] = sweep(
                target, case, seconds=args.step, log=console.print, traffic=traffic
            )
    table = Table(title="on the wire, paced offered load, best delivered input packets/s")
    cols = ("program", "p4sim python", "p4sim native", "native loss at best",
            "native < 1% loss", "BMv2", "native / BMv2", "python / BMv2")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="right" if col != "program" else "left")

    def best(r: Any) -> str:
        return f"{r.best:,.0f}" if r.error is None else f"error: {r.error[:40]}"

    for case in CASES.values():
        p, n = results[case.name, "p4sim"], results[case.name, "p4sim-native"]
        at = max(n.steps, key=lambda s: s.delivered, default=None)
        if missing:
            ref = float(BMV2_REFERENCE[case.name])
            bm = f"{ref:,.0f} (reference, not measured)"
        else:
            b = results[case.name, "bmv2"]
            ref = b.best
            bm = f"{ref:,.0f} (measured)" if b.error is None else f"error: {b.error[:40]}"
        table.add_row(
            case.name,
            best(p),
            best(n),
            f"{at.loss:.1%}" if at else "-",
            f"{n.lossless:,.0f}",
            bm,
            f"{n.best / ref:.2f}" if ref else "-",
            f"{p.best / ref:.2f}" if ref else "-",
        )
    console.print(table)
    console.print(
        f"ceiling of this measurement here: {limit} delivered with a C reflector that costs "
        "nothing in the switch's place (tests/bench/reflector.c); no switch can be measured "
        "faster on this machine, so ratios to BMv2 above it cannot be shown"
    )
    wrong = sum(s.wrong for r in results.values() for s in r.steps)
    console.print(f"frames with wrong content: {wrong} (every output frame is checked)")
    console.print(
        f"command: {sys.executable} -m tests.bench --only wire --step {args.step}"
        f" --traffic {traffic}"
    )


def bench_p4sim(args: argparse.Namespace, console: Console) -> None:
    table = Table(title="p4sim in-process pipeline (Switch.send), one core, CPU time")
    cols = ("program", "python pkt/s", "native pkt/s", "native / python",
            "BMv2 reference pkt/s", "native / BMv2")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="right" if col != "program" else "left")
    for case in CASES.values():
        pps, _ = measure(case, args.seconds)
        npps, _ = measure(case, args.seconds, "native")
        ref = BMV2_REFERENCE[case.name]
        table.add_row(
            case.name, f"{pps:,.0f}", f"{npps:,.0f}", f"{npps / pps:.1f}", f"{ref:,}",
            f"{npps / ref:.1f}",
        )  # fmt: skip
    console.print(table)
    console.print(f"command: {sys.executable} -m tests.bench --only p4sim --seconds {args.seconds}")
    console.print(
        "programs: topologies/basic/basic.p4 (1 LPM table, TTL, checksum), "
        "tests/bench/register_heavy.p4 (32 register read-modify-writes), p4src/inc.p4 "
        "(4 workers' contributions in, the result multicast to 4 ports)"
    )


if __name__ == "__main__":
    sys.exit(main())
