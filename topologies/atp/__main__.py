"""``python -m topologies.atp``: ATP's experiment and benchmarks (options: ``--help``;
what runs: ``topologies/atp/__init__.py``)."""

from __future__ import annotations

import argparse
import sys

import topologies.atp as atp_doc
from topologies.atp import (
    RUN_DIR,
    exact,
    pool_events,
    run_jobs,
    run_racks,
    start_ps,
    submit_atp,
    submit_two_racks,
)
from topologies.experiment import Experiment, ExperimentConfig
from topologies.impair_relay import Impairment


def main(argv: list[str] | None = None) -> int:
    from topologies.experiment import leaf_spine, main_guard, star

    ap = argparse.ArgumentParser(
        prog="python -m topologies.atp", description=(atp_doc.__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pool-size", type=int, default=16)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--size", type=int, default=20000)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--loss", type=float, default=0.0, help="loss, duplication, reordering")
    ap.add_argument("--bench", action="store_true", help="shared pool vs static vs PS only")
    ap.add_argument("--bench-jobs", default="1,2,4", help="bench: concurrent job counts")
    ap.add_argument("--flood-bench", action="store_true", help="a job beside a flooding tenant")
    ap.add_argument("--compute-ms", type=float, default=0.0, help="bench: compute before a call")
    ap.add_argument("--delay-ms", type=float, default=0.0,
                    help="bench: one-way delay of every link, ms")  # fmt: skip
    ap.add_argument("--bw-mbps", type=float, default=None,
                    help="bench: every link shaped to this rate (default unshaped)")  # fmt: skip
    ap.add_argument("--racks", type=int, default=0,
                    help="one job over RACKS leaf switches (--workers each) and a spine with "
                         "the PS: two-level aggregation")  # fmt: skip
    ap.add_argument(
        "--bits",
        type=int,
        default=24,
        help="bits of each value (32: sums overflow int32 and fall back to the PS)",
    )
    a = ap.parse_args(argv)
    if a.racks == 1 or a.racks < 0:
        ap.error("--racks needs at least 2 racks (0: one switch)")
    if not 2 <= a.bits <= 32:
        ap.error("--bits must be in 2..32")
    if not 0 <= a.delay_ms <= 1000:
        ap.error("--delay-ms must be in 0..1000")
    if a.bw_mbps is not None and not 0 < a.bw_mbps <= 1000:
        ap.error("--bw-mbps must be in (0, 1000]")
    bits = ("--bits", str(a.bits))

    def flood_bench() -> int:
        from rich.console import Console

        from topologies.atp.bench import FloodConfig, flood_table, measure_flood

        cfg = FloodConfig(a.workers, size=a.size, calls=a.calls)
        console = Console(width=140)
        console.print(flood_table(measure_flood(cfg, log=console.print), cfg))
        return 0

    if a.flood_bench:
        return main_guard("topologies.atp", flood_bench)

    def bench() -> int:
        from rich.console import Console

        from topologies.atp.bench import BenchConfig, measure, plot, ratio_line, table

        cfg = BenchConfig(
            tuple(int(x) for x in a.bench_jobs.split(",")), a.workers, a.window, a.pool_size,
            a.size, a.calls, a.compute_ms, a.delay_ms, a.bw_mbps,
        )  # fmt: skip
        console = Console(width=140)
        rows = measure(cfg, log=console.print)
        console.print(table(rows, cfg))
        console.print(ratio_line(rows))
        console.print(f"plot: {plot(rows, cfg.plot_path, cfg.links)}")
        return 0

    if a.bench:
        return main_guard("topologies.atp", bench)

    def run_two_levels() -> int:
        n = a.racks * a.workers
        imp = Impairment(loss=a.loss, dup=a.loss, reorder=a.loss, seed=3) if a.loss else None
        cfg = ExperimentConfig(leaf_spine(a.racks, a.workers), impairment=imp, run_dir=RUN_DIR)
        with Experiment(cfg) as ex:
            spine, leaves = submit_two_racks(
                ex, "racks", a.racks, a.workers, a.window, (0, a.pool_size)
            )
            start_ps(ex, n + 1, [spine])
            got = run_racks(ex, leaves, RUN_DIR / "out", a.size, a.calls, 7, *bits)
            events = {f"s{d}": pool_events(ex, f"s{d}") for d in range(1, a.racks + 2)}
        bad = exact(got, 7, a.size, a.calls, bits=a.bits)
        times = [t for g in got for t in g["rec"].get("times", [])]
        mean = sum(times) / len(times) if times else float("nan")
        print(f"job {spine} over {a.racks} racks of {a.workers} workers: "
              f"{'EXACT' if not bad else 'WRONG'}, mean call {mean:.3f} s")  # fmt: skip
        for b in bad:
            print(f"  {b}")
        for sw, ev in events.items():
            role = "spine" if sw == "s1" else "leaf"
            print(f"ATP pool at {sw} ({role}):", ", ".join(f"{k} {v}" for k, v in ev.items()))
        return 1 if bad else 0

    if a.racks:
        return main_guard("topologies.atp", run_two_levels)

    def run() -> int:
        n = a.jobs * a.workers
        imp = Impairment(loss=a.loss, dup=a.loss, reorder=a.loss, seed=3) if a.loss else None
        cfg = ExperimentConfig(star(n + 1), impairment=imp, run_dir=RUN_DIR)
        with Experiment(cfg) as ex:
            ps = n + 1
            jobs = [
                submit_atp(ex, f"atp{j}", list(range(j * a.workers + 1, (j + 1) * a.workers + 1)),
                           ps, a.window, (0, a.pool_size))
                for j in range(a.jobs)
            ]  # fmt: skip
            start_ps(ex, ps, [j.job_id for j in jobs])
            got = run_jobs(ex, jobs, RUN_DIR / "out", a.size, a.calls, 7, *bits)
            events = pool_events(ex)
        failed = 0
        for j in jobs:
            bad = exact(got[j.job_id], 7 + j.job_id, a.size, a.calls, bits=a.bits)
            times = [t for g in got[j.job_id] for t in g["rec"].get("times", [])]
            retx = sum(g["rec"].get("stats", {}).get("retransmissions", 0) for g in got[j.job_id])
            mean = sum(times) / len(times) if times else float("nan")
            print(f"job {j.job_id}: {'EXACT' if not bad else 'WRONG'}, mean call {mean:.3f} s,"
                  f" retransmissions {retx}")  # fmt: skip
            for b in bad:
                print(f"  {b}")
            failed += bool(bad)
        print("ATP pool:", ", ".join(f"{k} {v}" for k, v in events.items()))
        return 1 if failed else 0

    return main_guard("topologies.atp", run)


if __name__ == "__main__":
    sys.exit(main())
