"""ASK against Spark's own shuffle on a Spark standalone cluster on Mininet.

Example (root)::

    python -m topologies.ask cluster --executors 4 --words 10000000 --bw 100
    python -m topologies.ask cluster --executors 2 --words 20000 --corpus licences

Network (``topologies/experiment.py``): ``star(E + 2)`` around one switch, every link
shaped to ``--bw`` Mbit/s (htb): a Spark Worker on each of ``h1..hE`` (one executor, one
core each), the Spark Master on ``h{E+1}``, the driver on ``h{E+2}``, where each job's ASK
reducer runs too (``topologies/spark_cluster.py`` starts and stops the cluster). The input
files are in every host (one file system); executors read their splits.

The driver (``python -m topologies.ask_cluster driver``, one Spark application) runs side
by side, each from the file to the driver's dict, each Spark query once untimed first on a
small file (Python workers, JIT):

- word count: Spark's RDD ``flatMap(str.split).map((w, 1)).reduceByKey(add)`` and its
  DataFrame ``explode(split(...)).groupBy("word").count()``, both through Spark's shuffle
  across the links; the same RDD reduced through the switch (``inclib.spark.reduce_by_key``);
  the lines through the switch in Arrow batches (``inclib.spark.count_words``);
- ``GROUP BY k SUM(v), COUNT(*)`` (``GROUPBY_PATHS``; keys Zipf ``TABLE_ALPHA`` over
  ``TABLE_KEYS`` ints, ``--table-keys``): Spark's DataFrame over its CSV reader
  and over the table's lines split in the JVM (``spark.read.text``), both with its
  ``groupBy("k").agg(sum, count)``; the CSV reader's rows through the switch in Arrow
  batches (``inclib.spark.group_by_sum_count``); the lines through the switch, parsed in
  Arrow (``inclib.spark.group_by_sum_count_csv``); and, as a control, the same lines parsed
  and summed in Arrow with Spark's own shuffle after (what the switch itself saves).

Each switch run admits its own ASK job (one mapper per executor, listed by host: a task is
its host's mapper) and starts its reducer on the driver's host. With ``--hot`` the GROUP BY
paths send each partition's most counted keys through the switch (as many as it has cells
for the mapper) and the cold ones to a reducer per executor on the executors' hosts
(``hosts/ask/cold_reducers.py``: each key to the one that owns it by hash), whose results
come back with the tasks. Every result is
checked against ``collections.Counter`` (the host's sums for GROUP BY) and against Spark's
own. Then ASK's own word count (``topologies/ask_mappers.py``): a long-lived mapper process
on each executor host reading its split of the same file and a long-lived reducer on the
driver's host, timed from giving them the job (its admission, and their start, apart).
The record goes to ``results/ask_cluster.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from operator import add
from pathlib import Path
from typing import Any

from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    host_ip,
    host_mac,
    main_guard,
    star,
)

RUN_DIR = Path("run/ask-cluster")
GOAL_CLUSTER = 1.5  # issue 24: through the switch >= 1.5x Spark's own shuffle, both jobs
GOAL_LOCAL = 2.0  # local mode: ASK's word count >= 2x the faster Spark
GROUPBY_PATHS = {  # GROUP BY's paths (driver_group_by): Spark's own, the control, the switch's
    "spark_df": "Spark DataFrame, CSV reader",
    "spark_text": "Spark DataFrame, lines split in the JVM",
    "arrow_shuffle": "lines parsed in Arrow + Spark's shuffle",
    "switch_arrow": "CSV rows in Arrow via switch",
    "switch_lines": "lines parsed in Arrow via switch",
}
EXECUTOR_MEMORY = "512m"
# The GROUP BY table's keys: Zipf over a million ints, so that after Spark's map-side
# combine each executor still shuffles a quarter of a million records or so (the regime
# ASK is about: skewed keys, hot ones through the switch, the long tail bypassing it)
TABLE_KEYS = 1_000_000
TABLE_ALPHA = 1.2


# --- the driver (runs on the driver's host) ------------------------------------------------
def cluster_session(master: str, executors: int) -> Any:
    from pyspark.sql import SparkSession

    ip = os.environ["SPARK_LOCAL_IP"]
    return (
        SparkSession.builder.master(master)
        .appName("inc-switch ASK on a Spark cluster")
        .config("spark.driver.host", ip)
        .config("spark.driver.bindAddress", ip)
        .config("spark.driver.memory", EXECUTOR_MEMORY)
        .config("spark.executor.memory", EXECUTOR_MEMORY)
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", str(executors))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(executors))
        .config("spark.default.parallelism", str(executors))
        .config("spark.task.maxFailures", "1")  # a switch job cannot be sent twice
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )


class SwitchJobs:
    """One ASK job per switch run: admitted for the executors' hosts, its reducer started
    on this (the driver's) host, released after."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a

    def run(self, what: Any) -> tuple[Any, float, float]:
        """``what(plan)`` on a new job; its value, the seconds to admit the job and start
        its reducer, and the seconds of ``what`` itself."""
        import inclib

        t0 = time.perf_counter()
        a = self.a
        ips = [host_ip(h) for h in range(1, a.executors + 1)]
        plan = inclib.admit(
            a.controller, a.executors, kind="ask", name="spark-cluster", peers=ips,
            worker_ports=list(range(1, a.executors + 1)),
            worker_macs=[host_mac(h) for h in range(1, a.executors + 1)],
            agg_ip=a.driver_ip, agg_mac=host_mac(a.driver_host), reducer_port=a.driver_host,
            rows=a.rows, window=a.window,
        )  # fmt: skip
        if not plan.on_switch:
            raise RuntimeError(f"the switch cannot serve the job: {plan.reason}")
        cmd = [sys.executable, "-m", "hosts.ask.run", "reducer", "--controller", a.controller,
               "--job-id", str(plan.job_id)]  # fmt: skip
        log = Path(a.out).with_name(f"reducer-{plan.job_id}.log")
        with open(log, "wb") as f:
            red = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        try:
            while b"ask reducer ready" not in log.read_bytes():
                if red.poll() is not None:
                    raise RuntimeError(f"the ASK reducer did not start: {log.read_text()[-500:]}")
                time.sleep(0.02)
            t1 = time.perf_counter()
            out = what(plan)
            return out, t1 - t0, time.perf_counter() - t1
        finally:
            try:
                red.wait(timeout=60)
            except subprocess.TimeoutExpired:
                red.kill()
                red.wait()
            plan.release()


def progress(line: str) -> None:
    print(f"ask cluster driver: {line}", flush=True)


SWITCH_PID: list[int] = []  # the emulated switch's process (driver_main's --switch-pid)


def switch_cpu() -> float:
    """CPU seconds the emulated switch (p4sim) has used so far; 0 when its PID is unknown.
    It shares the machine's cores with every host, so its work is part of every path."""
    if not SWITCH_PID:
        return 0.0
    try:
        fields = Path(f"/proc/{SWITCH_PID[0]}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Usage:
    """What one path used of the shared parts: p4sim's CPU seconds, and its span in wall
    clock time (``LinkSampler`` in the experiment's process gives the bytes that crossed
    the links then)."""

    def __init__(self) -> None:
        self.cpu, self.t0 = switch_cpu(), time.time()

    def record(self, out: dict[str, Any], name: str) -> None:
        if SWITCH_PID:
            out[f"{name}_switch_cpu_s"] = switch_cpu() - self.cpu
        out[f"{name}_span"] = [self.t0, time.time()]


def _timed(f: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def split_bytes(spark: Any, path: Path, parts: int) -> None:
    """DataFrame scans of ``path`` in ``parts`` splits (one per executor): splits of
    ``ceil(size / parts)`` bytes (Spark takes the smaller of ``maxPartitionBytes`` and the
    larger of ``openCostInBytes`` and ``size / cores``)."""
    split = str(-(-path.stat().st_size // parts))
    spark.conf.set("spark.sql.files.openCostInBytes", split)
    spark.conf.set("spark.sql.files.maxPartitionBytes", split)


def driver_word_count(
    spark: Any, a: argparse.Namespace, jobs: SwitchJobs, text: str, warm: bool
) -> dict[str, Any]:
    """Word count of ``text`` by every path (module doc); ``warm``: each path's Spark part
    once on ``a.warm`` first."""
    from pyspark.sql import functions as F

    import inclib.spark

    sc = spark.sparkContext
    path = str(Path(text).resolve())
    ref = Counter(Path(path).read_text(encoding="utf-8", errors="replace").split())
    out: dict[str, Any] = {"input": path, "words": sum(ref.values()), "keys": len(ref)}

    def rdd_pairs(p: str) -> Any:
        lines = sc.textFile(p, a.executors)
        if lines.getNumPartitions() != a.executors:  # a barrier stage refuses coalesce()
            lines = lines.repartition(a.executors)
        return lines.flatMap(str.split).map(lambda w: (w, 1))

    def lines_df(p: str) -> Any:
        split_bytes(spark, Path(p), a.executors)
        return spark.read.text(p)

    def spark_rdd(p: str) -> dict[str, int]:
        return dict(rdd_pairs(p).reduceByKey(add).collect())

    def spark_df(p: str) -> dict[str, int]:
        d = lines_df(p)
        words = d.select(F.explode(F.split("value", r"\s+")).alias("word")).where("word != ''")
        return {r[0]: r[1] for r in words.groupBy("word").count().collect()}

    for name, query in (("spark_rdd", spark_rdd), ("spark_df", spark_df)):
        if warm:
            query(a.warm)  # warm: Python workers, JIT, code generation
        use = Usage()
        got, out[f"{name}_s"] = _timed(lambda q=query: q(path))  # type: ignore[misc]
        use.record(out, name)
        out[f"{name}_exact"] = Counter(got) == ref
        progress(f"{Path(path).name}: {name} {out[f'{name}_s']:.2f} s")

    # each switch path is timed to its result in the driver's dict, as Spark's are; the RDD
    # or DataFrame inclib returns is then collected (untimed) and checked too
    def switch_rdd(plan: Any) -> dict[str, Any]:
        via = inclib.spark.reduce_by_key(rdd_pairs(path), plan, hot=a.hot)
        return {"result": via.ask_result, "stats": via.ask_stats, "via": via}

    def switch_arrow(plan: Any) -> dict[str, Any]:
        via = inclib.spark.count_words(lines_df(path), plan, hot=a.hot)
        return {"result": via.ask_result, "stats": via.ask_stats, "via": via}

    from hosts.ask.spark_arrow import word_counts

    def arrow_counts(batches: Any) -> Any:
        import pyarrow as pa

        n = sum(int(c[1].sum()) for c in word_counts(batches))
        yield pa.RecordBatch.from_pydict({"n": [n]})

    if warm:  # the switch paths' Spark parts once (rows into Python; Arrow in the workers)
        from hosts.ask.spark import chunk_pairs

        rdd_pairs(a.warm).mapPartitions(
            lambda it: [sum(len(keys) for keys, _ in chunk_pairs(it))]
        ).collect()
        lines_df(a.warm).mapInArrow(arrow_counts, "n long").collect()
    for name, f in (("switch_rdd", switch_rdd), ("switch_arrow", switch_arrow)):
        use = Usage()
        rec, out[f"{name}_setup_s"], out[f"{name}_s"] = jobs.run(f)
        use.record(out, name)
        got = dict(rec["via"].collect())
        out[f"{name}_exact"] = Counter(rec["result"]) == ref == Counter(got)
        progress(f"{Path(path).name}: {name} {out[f'{name}_s']:.2f} s")
        out[f"{name}_stats"] = rec["stats"]
    return out


def driver_group_by(
    spark: Any, a: argparse.Namespace, jobs: SwitchJobs, csv: str, warm: bool
) -> dict[str, Any]:
    """GROUP BY over the table ``csv`` by every path (``GROUPBY_PATHS``); ``warm`` as for
    the word count."""
    from pyspark.sql import functions as F

    import inclib.spark
    from hosts.ask.spark import parsed_lines, read_table
    from hosts.ask.spark_arrow import csv_rows, csv_sum_counts, sum_counts

    path = Path(csv).resolve()
    ref = read_table(path)
    out: dict[str, Any] = {"rows": sum(c for _, c in ref.values()), "keys": len(ref)}
    header = Path(path).open().readline().rstrip("\n")

    def table(p: Path) -> Any:
        split_bytes(spark, p, a.executors)
        return spark.read.csv(str(p), schema="k INT, v INT", header=True)

    def lines(p: Path) -> Any:
        split_bytes(spark, p, a.executors)
        return spark.read.text(str(p))

    def partial_sums(batches: Any) -> Any:  # the lines parsed and summed in Arrow
        for t in csv_rows(batches, header):
            agg = t.group_by("k").aggregate([("v", "sum"), ("v", "count")])
            yield from agg.rename_columns(["k", "s", "c"]).to_batches()

    spark_paths = {
        # Spark's DataFrame over its CSV reader, and over the lines parsed in the JVM
        "spark_df": lambda p: table(p).groupBy("k").agg(F.sum("v"), F.count("*")),
        "spark_text": lambda p: (
            parsed_lines(lines(p), header=header).groupBy("k").agg(F.sum("v"), F.count("*"))
        ),
        # the switch paths' map side (the lines parsed and summed in Arrow) with Spark's own
        # shuffle: what the switch itself saves
        "arrow_shuffle": lambda p: (
            lines(p)
            .mapInArrow(partial_sums, "k long, s long, c long")
            .groupBy("k")
            .agg(F.sum("s"), F.sum("c"))
        ),
    }
    for name, query in spark_paths.items():
        if warm:
            query(Path(a.warm_table)).collect()  # warm: Python workers, JIT, code generation
        use = Usage()
        rows, out[f"{name}_s"] = _timed(lambda q=query: q(path).collect())  # type: ignore[misc]
        use.record(out, name)
        progress(f"{path.name}: {name} {out[f'{name}_s']:.2f} s")
        out[f"{name}_exact"] = {r[0]: (r[1], r[2]) for r in rows} == ref
    out["spark_columns"] = spark_paths["spark_df"](path).columns

    # timed to the rows in the driver, as Spark's
    def switch_arrow(plan: Any) -> dict[str, Any]:
        via = inclib.spark.group_by_sum_count(table(path), "k", "v", plan, hot=a.hot)
        return {"rows": via.ask_rows, "via": via, "stats": via.ask_stats}

    def switch_lines(plan: Any) -> dict[str, Any]:
        via = inclib.spark.group_by_sum_count_csv(lines(path), plan, header=header, hot=a.hot)
        return {"rows": via.ask_rows, "via": via, "stats": via.ask_stats}

    def rows_of(chunker: Any) -> Any:
        def count(batches: Any) -> Any:
            import pyarrow as pa

            n = sum(len(c[0]) for c in chunker(batches))
            yield pa.RecordBatch.from_pydict({"n": [n]})

        return count

    if warm:  # the switch paths' Spark parts once (Arrow in the Python workers; the
        # result's Arrow table into the JVM, whose first createDataFrame loads its classes)
        table(Path(a.warm_table)).mapInArrow(rows_of(sum_counts), "n long").collect()
        lines(Path(a.warm_table)).mapInArrow(
            rows_of(lambda b: csv_sum_counts(b, header)), "n long"
        ).collect()
        warm_sums(spark)
    for name, f in (("switch_arrow", switch_arrow), ("switch_lines", switch_lines)):
        use = Usage()
        rec, out[f"{name}_setup_s"], out[f"{name}_s"] = jobs.run(f)
        use.record(out, name)
        progress(f"{path.name}: {name} {out[f'{name}_s']:.2f} s")
        collected = {r[0]: (r[1], r[2]) for r in rec["via"].collect()}
        out[f"{name}_exact"] = {r[0]: (r[1], r[2]) for r in rec["rows"]} == ref == collected
        out[f"{name}_columns"] = rec["via"].columns
        out[f"{name}_stats"] = rec["stats"]
    out["switch_columns"] = out["switch_arrow_columns"]
    return out


def warm_sums(spark: Any) -> None:
    """The switch paths' result frames (``frame_of_sums``: hot keys' totals and cold
    reducers' table into one DataFrame) once, for either key type."""
    import pyarrow as pa
    from pyspark.sql.types import IntegerType, LongType

    from hosts.ask.spark import frame_of_sums

    cold = pa.table({"k": pa.array([1, 2]), "s": pa.array([3, 4]), "c": pa.array([1, 1])})
    for key_type in (IntegerType(), LongType()):
        frame_of_sums(spark, "k", key_type, "v", {"s1": 5, "c1": 2}, cold).collect()


def driver_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m topologies.ask_cluster driver")
    ap.add_argument("--master", required=True)
    ap.add_argument("--controller", required=True)
    ap.add_argument("--executors", type=int, required=True)
    ap.add_argument("--driver-host", type=int, required=True)
    ap.add_argument("--inputs", required=True, help="text files, comma-separated")
    ap.add_argument("--warm", required=True)
    ap.add_argument("--tables", required=True, help="CSV files k,v, comma-separated")
    ap.add_argument("--warm-table", required=True)
    ap.add_argument("--no-warm", action="store_true", help="no warm-up runs (results only)")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--hot", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--switch-pid", type=int, help="p4sim's PID: its CPU time per path")
    ap.add_argument("--jobs", default="wordcount,groupby", help="which jobs, comma-separated")
    a = ap.parse_args(argv)
    if a.switch_pid:
        SWITCH_PID.append(a.switch_pid)
    a.driver_ip = host_ip(a.driver_host)
    t0 = time.perf_counter()
    spark = cluster_session(a.master, a.executors)
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {"session_s": time.perf_counter() - t0}
    try:
        jobs = SwitchJobs(a)
        texts, tables = a.inputs.split(","), a.tables.split(",")
        run = a.jobs.split(",")
        out["wordcount"] = [
            driver_word_count(spark, a, jobs, t, i == 0 and not a.no_warm)
            for i, t in enumerate(texts if "wordcount" in run else [])
        ]
        out["groupby"] = [
            driver_group_by(spark, a, jobs, t, i == 0 and not a.no_warm)
            for i, t in enumerate(tables if "groupby" in run else [])
        ]
    finally:
        spark.stop()
    Path(a.out).write_text(json.dumps(out, indent=1))
    return 0


# --- the experiment (runs in the root namespace) ------------------------------------------
class LinkSampler:
    """Bytes each switch port (``s1-ethN``, the link to host ``hN``) has received and sent,
    sampled every ``period`` seconds in a thread (wall clock), so that a path's bytes over
    the links are the difference across its span."""

    def __init__(self, ex: Experiment, period: float = 0.25) -> None:
        self.ex, self.period = ex, period
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LinkSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            counts = {}
            for port in Path("/sys/class/net").glob("s1-eth*"):
                for way in ("rx", "tx"):
                    stat = port / "statistics" / f"{way}_bytes"
                    try:
                        counts[f"{port.name} {way}"] = int(stat.read_text())
                    except (OSError, ValueError):
                        continue
            self.samples.append((time.time(), counts))
            if self._stop.wait(self.period):
                return

    def at(self, t: float) -> dict[str, int]:
        """The last sample taken at or before ``t`` (the first one before any)."""
        best = self.samples[0][1] if self.samples else {}
        for when, counts in self.samples:
            if when > t:
                break
            best = counts
        return best

    def annotate(self, rec: dict[str, Any]) -> None:
        """``{path}_link_bytes`` (bytes into the switch, all ports) and
        ``{path}_busiest_link_bytes`` (one link, one direction) for every ``{path}_span``
        in ``rec``; spans end within ``period`` of a sample."""
        for key in [k for k in rec if k.endswith("_span")]:
            t0, t1 = rec[key]
            a, b = self.at(t0), self.at(t1 + self.period)
            moved = {k: v - a.get(k, 0) for k, v in b.items()}
            if moved:
                name = key[: -len("_span")]
                rec[f"{name}_link_bytes"] = sum(v for k, v in moved.items() if k.endswith("rx"))
                rec[f"{name}_busiest_link_bytes"] = max(moved.values())


def run_cluster(
    executors: int = 2, sizes: tuple[int, ...] = (20000,), corpora: tuple[str, ...] = ("zipf",),
    bw_mbps: float = 100.0, hot: int = 0, run_dir: Path = RUN_DIR, ask_rows: int = 1024,
    window: int | None = None, timeout: float = 3600.0, log: Any = print, warm: bool = True,
    table_keys: int = TABLE_KEYS, table_alpha: float = TABLE_ALPHA,
    jobs: tuple[str, ...] = ("wordcount", "groupby"),
) -> dict[str, Any]:  # fmt: skip
    """The cluster, the driver's jobs and ASK's own mappers (module doc) on a corpus of each
    kind and size (words; the GROUP BY tables have as many rows, keys Zipf(``table_alpha``)
    over ``table_keys`` ints); the record. ``jobs``: which of them run. ``window``:
    packets in flight per mapper, by default 64 (or the most the rows allow): more only
    queues packets at the reducer, a Python process, past the mappers' timeouts. ``warm``:
    each path's Spark part runs once before it is timed (False: results only, no timing
    worth comparing, as in a test)."""
    if window is None:  # a power of two; the mappers' seen entries take window x executors rows
        window = min(64, 1 << ((ask_rows // executors).bit_length() - 1))
    from topologies.ask_mappers import ServingMappers, zipf_table
    from topologies.spark_cluster import SparkCluster, Tracked, run_tracked, spark_env

    run_dir.mkdir(parents=True, exist_ok=True)
    texts = []
    for kind in corpora:
        for n in sizes:
            texts.append(run_dir / f"{kind}-{n}.txt")
            write_corpus(texts[-1], kind, n)
    tables = []
    for n in sizes:
        tables.append(run_dir / f"table-{n}.csv")
        zipf_table(tables[-1], n, seed=12, keys=table_keys, alpha=table_alpha)
    warm_text, warm_table = run_dir / "warm.txt", run_dir / "warm.csv"
    write_corpus(warm_text, "zipf", 20000)
    zipf_table(warm_table, 5000, seed=13)
    master, driver = executors + 1, executors + 2
    cfg = ExperimentConfig(star(driver), bw_mbps=bw_mbps, run_dir=run_dir, log=log)
    record: dict[str, Any] = {"executors": executors, "bw_mbps": bw_mbps, "hot": hot,
                              "window": window, "table_keys": table_keys,
                              "table_alpha": table_alpha}  # fmt: skip
    driver_procs = Tracked()
    with Experiment(cfg) as ex, LinkSampler(ex) as links:
        t0 = time.perf_counter()
        workers = [f"h{i}" for i in range(1, executors + 1)]
        with SparkCluster(ex, f"h{master}", workers, memory="1g") as cluster:
            record["cluster_start_s"] = time.perf_counter() - t0
            out = (run_dir / "driver.json").resolve()
            out.unlink(missing_ok=True)
            cmd = [sys.executable, "-m", "topologies.ask_cluster", "driver",
                   "--master", cluster.url, "--controller", ex.controller_url,
                   "--executors", str(executors), "--driver-host", str(driver),
                   "--inputs", ",".join(str(t.resolve()) for t in texts),
                   "--warm", str(warm_text.resolve()), *([] if warm else ["--no-warm"]),
                   "--tables", ",".join(str(t.resolve()) for t in tables),
                   "--warm-table", str(warm_table.resolve()),
                   "--rows", str(ask_rows), "--window", str(window), "--hot", str(hot),
                   "--out", str(out), "--switch-pid", str(ex.switch("s1").proc.pid),
                   "--jobs", ",".join(jobs)]  # fmt: skip
            env = spark_env(host_ip(driver), run_dir, f"h{driver}")
            code = run_tracked(ex, f"h{driver}", cmd, ex.logs / "driver.log", timeout,
                               driver_procs, env)  # fmt: skip
            cluster.watch()
            if code != 0 or not out.exists():
                tail = (ex.logs / "driver.log").read_text(errors="replace").splitlines()[-8:]
                raise ExperimentError(f"the Spark driver failed ({code}): {' | '.join(tail)}")
            record.update(json.loads(out.read_text()))
        record["left_running"] = cluster.alive() + driver_procs.alive()
        with ServingMappers(ex, workers, driver) as serving:  # ASK's own, executors' hosts
            for text, rec in zip(texts[: len(record["wordcount"])], record["wordcount"],
                                 strict=True):  # fmt: skip
                t_ask = time.time()
                rec.update(serving.word_count(text, ask_rows, window, 1 << 20, run_dir))
                rec["ask_span"] = [t_ask, time.time()]
    for text, rec in zip(texts[: len(record["wordcount"])], record["wordcount"], strict=True):
        rec["corpus"] = text.name.split("-")[0]
    for rec in record["wordcount"] + record["groupby"]:
        links.annotate(rec)
    record["processes"] = cluster.tracked.record() + driver_procs.record()
    return record


def write_corpus(path: Path, kind: str, words: int) -> None:
    """Generated Zipf text (50,000-word vocabulary) or Debian's licences, repeated."""
    from topologies.ask_mappers import licence_text, zipf_text

    if kind == "zipf":
        zipf_text(path, words, seed=21, vocab=50000)
    elif kind == "licences":
        path.write_text(licence_text(words))
    else:
        raise ExperimentError(f"unknown corpus {kind!r} (zipf, licences)")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["driver"]:
        return driver_main(args[1:])
    raise SystemExit("usage: python -m topologies.ask cluster ... (this module's driver runs"
                     " on the driver's host)")  # fmt: skip


def cluster_main(a: argparse.Namespace) -> int:
    """``python -m topologies.ask cluster``: one run, its table on stdout, the record in
    ``results/ask_cluster.json``."""

    def go() -> int:
        rec = run_cluster(a.executors, (a.words,), (a.corpus,), bw_mbps=a.bw, hot=a.hot,
                          table_keys=a.table_keys, jobs=tuple(a.jobs.split(",")))  # fmt: skip
        Path("results").mkdir(exist_ok=True)
        Path("results/ask_cluster.json").write_text(json.dumps(rec, indent=1))
        print(summary(rec))
        exact = [v for job in ("wordcount", "groupby") for r in rec[job] for k, v in r.items()
                 if k.endswith("_exact")]  # fmt: skip
        return 0 if all(exact) and not rec["left_running"] else 1

    return main_guard("topologies.ask cluster", go)


def summary(rec: dict[str, Any]) -> str:
    lines = [f"Spark standalone cluster: {rec['executors']} executors, links {rec['bw_mbps']:g}"
             f" Mbit/s, cluster up in {rec['cluster_start_s']:.1f} s"]  # fmt: skip
    for wc in rec["wordcount"]:
        lines.append(f"word count ({wc['corpus']}, {wc['words']} words, {wc['keys']} keys):")
        for k in ("spark_rdd", "spark_df", "switch_rdd", "switch_arrow", "ask"):
            setup = f"  (+{wc[f'{k}_setup_s']:.2f} s set-up)" if f"{k}_setup_s" in wc else ""
            lines.append(f"  {k:13s} {wc[f'{k}_s']:8.2f} s  exact={wc[f'{k}_exact']}{setup}")
        spark = min(wc["spark_rdd_s"], wc["spark_df_s"])
        switch = min(wc["switch_rdd_s"], wc["switch_arrow_s"])
        rdd, df = wc["spark_rdd_s"] / wc["switch_rdd_s"], wc["spark_df_s"] / wc["switch_arrow_s"]
        lines.append(f"  RDD / RDD via switch {rdd:.2f}x, DataFrame / Arrow via switch {df:.2f}x,"
                     f" faster Spark / faster switch"
                     f" {goal(spark / switch, GOAL_CLUSTER)}")  # fmt: skip
    for gb in rec["groupby"]:
        workload = f"Zipf {rec.get('table_alpha', '?')} over {rec.get('table_keys', '?')}"
        lines.append(f"GROUP BY k SUM(v), COUNT(*) ({gb['rows']} rows, {gb['keys']} keys,"
                     f" {workload}):")  # fmt: skip
        for k in GROUPBY_PATHS:
            setup = f"  (+{gb[f'{k}_setup_s']:.2f} s set-up)" if f"{k}_setup_s" in gb else ""
            lines.append(f"  {k:13s} {gb[f'{k}_s']:8.2f} s  exact={gb[f'{k}_exact']}{setup}")
        spark, switch = fastest(gb, *SPARK_GROUPBY), fastest(gb, *SWITCH_GROUPBY)
        lines.append(f"  fastest Spark shuffle ({spark}) / faster switch ({switch})"
                     f" {goal(gb[f'{spark}_s'] / gb[f'{switch}_s'], GOAL_CLUSTER)};"
                     f" the same Arrow map side with Spark's shuffle / via switch"
                     f" {gb['arrow_shuffle_s'] / gb['switch_lines_s']:.2f}x")  # fmt: skip
    lines.append(f"left running: {rec['left_running'] or 'nothing'}")
    return "\n".join(lines)


SWITCH_GROUPBY = ("switch_arrow", "switch_lines")
# Spark's shuffle, the baseline: its DataFrame over its CSV reader, over the lines split in
# the JVM, and over the switch paths' own Arrow map side (the fastest of them counts)
SPARK_GROUPBY = ("spark_df", "spark_text", "arrow_shuffle")


def fastest(rec: dict[str, Any], *paths: str) -> str:
    """The path of ``paths`` with the least time in ``rec`` (``{path}_s``)."""
    return min(paths, key=lambda k: float(rec[f"{k}_s"]))


def goal(ratio: float, target: float) -> str:
    """``1.62x (goal >= 1.5x met)``."""
    return f"{ratio:.2f}x (goal >= {target:g}x {'met' if ratio >= target else 'NOT met'})"


if __name__ == "__main__":
    sys.exit(main())
