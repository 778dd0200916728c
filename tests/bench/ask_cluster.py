"""`make bench` section ask, the cluster part: ASK against Spark's own shuffle on a Spark
standalone cluster on Mininet (``topologies/ask_cluster.py``), every path side by side in
one run, and the PNG of time against corpus size for each path.

Goals (issue 24): through the switch at least 1.5x faster than Spark's own shuffle on both
jobs (word count, GROUP BY), exact, at 4 executors on at least 10^7 words; each row says
whether it is met and, if not, why, from the run's own figures. GROUP BY's table: keys
Zipf 1.2 over 10^6 ints (``TABLE_KEYS``: after the map-side combine Spark's shuffle still
carries hundreds of thousands of records), against the fastest of Spark's three shuffles
(``SPARK_GROUPBY``), the MB each moved over the links beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from topologies.ask_cluster import (
    GOAL_CLUSTER,
    GOAL_LOCAL,
    GROUPBY_PATHS,
    SPARK_GROUPBY,
    SWITCH_GROUPBY,
    fastest,
)

__all__ = ["GOAL_CLUSTER", "GOAL_LOCAL", "bench_cluster", "mapper_split", "timeline", "why"]
WC_PATHS = {
    "spark_rdd": "Spark RDD reduceByKey",
    "spark_df": "Spark DataFrame groupBy",
    "switch_rdd": "RDD via switch",
    "switch_arrow": "Arrow via switch",
    "ask": "ASK mappers",
}


def mapper_split(stats: dict[str, Any]) -> tuple[float, float]:
    """(seconds reading the input, seconds after it) of the slowest mapper of a switch run:
    the input phase is Spark's scan and the combine in the executor; after it, the switch,
    the drain and the result."""
    worst = max(stats["mappers"], key=lambda m: m["seconds"])
    inp = float(worst["phases"].get("input", 0.0))
    return inp, float(worst["seconds"]) - inp


def timeline(stats: dict[str, Any], total: float) -> str:
    """Where a switch run's ``total`` seconds went, from its figures: until its first task
    started (Spark's job launch, the Python workers), the slowest mapper's set-up, input
    (Spark's side and the combine) and the rest (the switch, the reducer's drain and
    result), and what is left (the driver before and after the tasks)."""
    worst = max(stats["mappers"], key=lambda m: m["seconds"])
    launch = min(m["task_started"] for m in stats["mappers"]) - stats["submitted"]
    inp, rest = mapper_split(stats)
    setup = float(worst.get("setup_s", 0.0))
    other = total - launch - setup - inp - rest
    return (f"of its {total:.2f} s, {launch:.2f} s until its tasks started, {setup:.2f} s the"
            f" mapper's set-up, {inp:.2f} s taking the pairs from Spark and combining them,"
            f" {rest:.2f} s the switch, the reducer's drain and result, {other:.2f} s the"
            " rest (the driver before and after the tasks: subscribing to the reducer, Spark's"
            " job end, the result's RDD)")  # fmt: skip


def why(spark_s: float, switch_s: float, stats: dict[str, Any], goal: float,
        shuffled: int | None = None) -> str:  # fmt: skip
    """ "met", or why not from the run's own figures: where the switch path's slowest mapper
    spent its time, and (``shuffled``) the most records Spark's shuffle carries after its
    map-side combine (keys x partitions)."""
    ratio = spark_s / switch_s
    if ratio >= goal:
        return "met"
    inp, rest = mapper_split(stats)
    red = stats["reducer"]
    text = (
        f"not met ({ratio:.2f}x < {goal:g}x): of its {switch_s:.1f} s the slowest mapper spent"
        f" {inp:.1f} s taking its rows from Spark and combining them and {rest:.1f} s in the"
        f" switch, the drain and the result ({red.get('drained_tuples', 0):,} tuples drained,"
        f" {sum(m['bypass_tuples'] for m in stats['mappers']):,} bypassed)"
    )
    worst = max(stats["mappers"], key=lambda m: m["seconds"])
    if "busy" in worst:
        b = worst["busy"]
        text += (f"; its busy time: input {b['input']:.1f} s, packing {b['pack']:.1f} s,"
                 f" sending {b['send']:.1f} s, waiting {b['wait']:.1f} s")  # fmt: skip
        if "spark" in b:
            text += (f" (of its input, {b['spark']:.1f} s waiting for Spark's"
                     f" {worst.get('rows_in', 0):,} rows: its scan and Arrow)")  # fmt: skip
    phases = red.get("phases", {})
    colds = [m["cold"] for m in stats["mappers"] if "cold" in m]
    if colds:  # the cold keys went to a reducer per executor (hosts/ask/cold_reducers.py)
        text += (
            f"; the cold keys went to {len(colds)} reducers on the executors' hosts"
            f" ({min(c['keys'] for c in colds):,}-{max(c['keys'] for c in colds):,} keys"
            f" each, {sum(c['bytes_out'] for c in colds) / 1e6:.1f} MB between them)"
        )
        driver = stats.get("driver", {})
        if driver:
            text += (f", the driver's merge, rows and DataFrame after the tasks"
                     f" {sum(driver.values()):.2f} s")  # fmt: skip
    elif "done" in phases and "result" in phases and "collected" in stats:
        # the long tail: every cold key's sum goes to the one reducer, parsed and merged
        # there, and its record to the driver (Spark's reduce is split over the executors)
        ready = stats["collected"] - stats["submitted"]
        text += (f"; the reducer (one process, one link) had every mapper's cold keys at"
                 f" {phases['done']:.1f} s and its result at {phases['result']:.1f} s after"
                 f" it was ready, the driver the record {ready:.1f} s after it submitted the"
                 " tasks")  # fmt: skip
    if shuffled is not None:
        text += f"; Spark's own shuffle carries at most {shuffled:,} records after its combine"
    return text


def switch_cpu(rec: dict[str, Any], spark: str, switch: str) -> str:
    """The emulated switch's CPU seconds during a Spark path and a switch path, when measured:
    p4sim shares the machine's cores with the hosts (a hardware switch would not)."""
    a, b = rec.get(f"{spark}_switch_cpu_s"), rec.get(f"{switch}_switch_cpu_s")
    if a is None or b is None:
        return ""
    return f"; p4sim's CPU: {a:.1f} s during {spark}, {b:.1f} s during {switch}"


def links(rec: dict[str, Any], paths: list[str], seconds: dict[str, float], bw: float) -> str:
    """Bytes each path moved over the switch's links, and the busiest link's share of the
    path's time at the links' rate (1.0: link-bound), where measured."""
    parts = []
    for k in paths:
        if f"{k}_link_bytes" not in rec:
            continue
        busiest = rec[f"{k}_busiest_link_bytes"]
        link_s = busiest * 8 / (bw * 1e6)
        parts.append(f"{k} {rec[f'{k}_link_bytes'] / 1e6:.1f} MB (busiest link"
                     f" {busiest / 1e6:.1f} MB = {link_s:.2f} s at {bw:g} Mbit/s,"
                     f" {link_s / seconds[k]:.1%} of its time)")  # fmt: skip
    return "; ".join(parts)


def tuples(stats: dict[str, Any]) -> str:
    """Tuples (a key's sum or count, or a word's count) sent through the switch (the hot
    keys) and bypassing it (the cold keys: to the reducers on the executors' hosts where
    the run had them, else to the job's one reducer), and the cold share."""
    sw = sum(m["switch_tuples"] for m in stats["mappers"])
    by = sum(m["bypass_tuples"] for m in stats["mappers"])
    where = "per executor" if any("cold" in m for m in stats["mappers"]) else "one reducer"
    return f"{sw:,} / {by:,} ({by / max(1, sw + by):.1%} cold, {where})"


def cluster_tables(console: Console, rec: dict[str, Any]) -> int:
    """Print the cluster's word count and GROUP BY tables; 1 if any result is not exact."""
    code = 0
    t = Table(title=f"word count on a Spark standalone cluster: {rec['executors']} executors,"
              f" links {rec['bw_mbps']:g} Mbit/s, hot threshold {rec['hot']}, window"
              f" {rec.get('window', '?')} (s; switch paths: run + job set-up)")  # fmt: skip
    for c in ("corpus", "words", "keys", *WC_PATHS.values(), "RDD / RDD via switch",
              "DataFrame / Arrow via switch", "faster Spark / faster switch",
              "tuples: hot via switch / cold", "exact", f"goal >= {GOAL_CLUSTER:g}x"):  # fmt: skip
        t.add_column(c, justify="right")
    notes = []
    for wc in rec["wordcount"]:
        exact = all(wc[f"{k}_exact"] for k in WC_PATHS)
        code = code or (0 if exact else 1)
        cells = []
        for k in WC_PATHS:
            setup = wc.get(f"{k}_setup_s")
            cells.append(f"{wc[f'{k}_s']:.2f}" + (f" +{setup:.2f}" if setup is not None else ""))
        spark = min(wc["spark_rdd_s"], wc["spark_df_s"])
        best = min(("switch_rdd", "switch_arrow"), key=lambda k: wc[f"{k}_s"])
        t.add_row(wc["corpus"], f"{wc['words']:,}", f"{wc['keys']:,}", *cells,
                  f"{wc['spark_rdd_s'] / wc['switch_rdd_s']:.2f}x",
                  f"{wc['spark_df_s'] / wc['switch_arrow_s']:.2f}x",
                  f"{spark / wc[f'{best}_s']:.2f}x", tuples(wc["switch_arrow_stats"]), str(exact),
                  why(spark, wc[f"{best}_s"], wc[f"{best}_stats"], GOAL_CLUSTER,
                      wc["keys"] * rec["executors"])
                  + switch_cpu(wc, "spark_df", best))  # fmt: skip
        used = links(wc, list(WC_PATHS), {k: wc[f"{k}_s"] for k in WC_PATHS}, rec["bw_mbps"])
        if used:
            notes.append(f"word count ({wc['corpus']}), bytes over the links: {used}")
    console.print(t)
    t = Table(title="GROUP BY k SUM(v), COUNT(*) on the same cluster: keys Zipf"
              f" {rec.get('table_alpha', '?')} over {rec.get('table_keys', 0):,} ints, values"
              " uniform in [-1000, 1000] (s; switch paths: run + job set-up)")  # fmt: skip
    for c in ("rows", "keys", *GROUPBY_PATHS.values(), "MB over the links: fastest Spark /"
              " faster switch", "fastest Spark shuffle / faster switch",
              "Arrow + Spark's shuffle / Arrow via switch", "tuples: hot via switch / cold",
              "exact", f"goal >= {GOAL_CLUSTER:g}x"):  # fmt: skip
        t.add_column(c, justify="right")
    for gb in rec["groupby"]:
        exact = all(gb[f"{k}_exact"] for k in GROUPBY_PATHS)
        code = code or (0 if exact else 1)
        cells = []
        for k in GROUPBY_PATHS:
            setup = gb.get(f"{k}_setup_s")
            cells.append(f"{gb[f'{k}_s']:.2f}" + (f" +{setup:.2f}" if setup is not None else ""))
        spark, best = fastest(gb, *SPARK_GROUPBY), fastest(gb, *SWITCH_GROUPBY)
        moved = "/".join(f"{gb[f'{k}_link_bytes'] / 1e6:.1f}" if f"{k}_link_bytes" in gb
                         else "?" for k in (spark, best))  # fmt: skip
        t.add_row(f"{gb['rows']:,}", f"{gb['keys']:,}", *cells, moved,
                  f"{spark}: {gb[f'{spark}_s'] / gb[f'{best}_s']:.2f}x",
                  f"{gb['arrow_shuffle_s'] / gb['switch_lines_s']:.2f}x",
                  tuples(gb[f"{best}_stats"]), str(exact),
                  why(gb[f"{spark}_s"], gb[f"{best}_s"], gb[f"{best}_stats"], GOAL_CLUSTER,
                      gb["keys"] * rec["executors"])
                  + switch_cpu(gb, spark, best))  # fmt: skip
        used = links(gb, list(GROUPBY_PATHS), {k: gb[f"{k}_s"] for k in GROUPBY_PATHS},
                     rec["bw_mbps"])  # fmt: skip
        if used:
            notes.append(f"GROUP BY ({gb['rows']:,} rows), bytes over the links: {used}")
    console.print(t)
    for note in notes:
        console.print(note)
    console.print(
        f"cluster up in {rec['cluster_start_s']:.1f} s; ASK mappers: long-lived processes on the"
        " executors' hosts and a long-lived reducer on the driver's, timed from the job given"
        " to the mappers (their configuration and connections inside), then (+) the job's"
        " admission and the reducer taking it, their one-time start apart; switch paths: the"
        " run, then (+) the job's admission and its reducer's start; Spark: warm session."
        " Java processes left"
        f" running after the cluster stopped: {rec['left_running'] or 'none'}"
    )
    return code


def plot(rec: dict[str, Any], path: Path) -> None:
    """Time against corpus size, one line per path and corpus (word count) and per path
    (GROUP BY)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for corpus in sorted({wc["corpus"] for wc in rec["wordcount"]}):
        runs = sorted((wc for wc in rec["wordcount"] if wc["corpus"] == corpus),
                      key=lambda wc: wc["words"])  # fmt: skip
        for k, label in WC_PATHS.items():
            a.plot([wc["words"] for wc in runs], [wc[f"{k}_s"] for wc in runs], marker="o",
                   label=f"{label} ({corpus})")  # fmt: skip
    a.set(xlabel="words", ylabel="seconds", title="word count", xscale="log", yscale="log")
    a.legend(fontsize=7)
    runs = sorted(rec["groupby"], key=lambda gb: gb["rows"])
    for k, label in GROUPBY_PATHS.items():
        b.plot([gb["rows"] for gb in runs], [gb[f"{k}_s"] for gb in runs], marker="o",
               label=label)  # fmt: skip
    b.set(xlabel="rows", ylabel="seconds", title="GROUP BY k SUM(v), COUNT(*)", xscale="log",
          yscale="log")  # fmt: skip
    b.legend(fontsize=7)
    fig.suptitle(f"Spark standalone cluster on Mininet: {rec['executors']} executors,"
                 f" links {rec['bw_mbps']:g} Mbit/s")  # fmt: skip
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bench_cluster(
    console: Console, sizes: tuple[int, ...], executors: int = 4, bw_mbps: float = 100.0,
    hot: int = 2,
) -> int:  # fmt: skip
    from topologies.ask_cluster import run_cluster

    rec = run_cluster(executors, sizes, ("zipf", "licences"), bw_mbps=bw_mbps, hot=hot,
                      run_dir=Path("run/ask-bench-cluster"), log=lambda *_: None)  # fmt: skip
    Path("results").mkdir(exist_ok=True)
    Path("results/ask_cluster.json").write_text(json.dumps(rec, indent=1))
    code = cluster_tables(console, rec)
    png = Path("results/ask_cluster.png")
    plot(rec, png)
    console.print(f"time against corpus size, each path: {png}")
    return code or (1 if rec["left_running"] else 0)
