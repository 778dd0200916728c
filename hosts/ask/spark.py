"""PySpark's ReduceByKey through the switch: each partition of an RDD is one ASK mapper.

Example (a running ASK job with one mapper per partition and its reducer)::

    counts = reduce_by_key_via_switch(
        sc.textFile(path, 4).flatMap(str.split).map(lambda w: (w, 1)),
        controller="unix:run/ask/controller.sock", job_id=1, reducer_ip="10.0.0.2",
    )                                   # an ordinary RDD of (word, count)

The executors' tasks (``mapPartitionsWithIndex``) send their partition's pairs with
``hosts.ask.mapper_process.send_partition`` (partition ``i`` is mapper ``i``), combined per
key (up to ``chunk`` keys at a time, as columns), while the driver waits for the reducer's record
(``collect``); the result comes back as an RDD with as many partitions. Keys are str,
bytes, int or tuples of them (``hosts/ask/keys.py``: they come back as they were sent),
values int (a sum beyond int32 goes as several tuples).

GROUP BY: ``group_by_sum_count_via_switch(df, "k", "v", ...)`` is
``df.groupBy("k").agg(sum("v"), count("*"))`` through the switch, the rows in Arrow batches
(``hosts/ask/spark_arrow.py``): every key adds to two tuples, ``"s" + json(k)`` (its values)
and ``"c" + json(k)`` (its rows), so one pass gives both aggregates. With ``hot``, only a
partition's most counted keys go through the switch; its cold keys go to the reducers on
the mappers' own hosts (``hosts/ask/cold_reducers.py``, one per mapper, each key to the one
that owns it) and come back with the tasks; the driver adds the two up (``frame_of_sums``).

``python -m hosts.ask.spark`` runs, in one Spark session (local mode), a word count on a
text file three ways: ``rdd.flatMap(...).map(lambda w: (w, 1)).reduceByKey(add)``, the
DataFrame ``groupBy("word").count()``, and through the switch, each timed from the file
to the driver's dict (Spark's own queries once untimed first: timed warm) and checked
against ``collections.Counter``; or (``--query groupby``)
``GROUP BY k SUM(v), COUNT(*)`` over a CSV table with Spark's DataFrame ``groupBy().agg()``
and through the switch, checked against the host's sums. It writes the times as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from itertools import islice
from operator import add
from pathlib import Path
from typing import Any

import numpy as np

from hosts.ask.control import RecordWatch
from hosts.ask.mapper_process import send_partition
from hosts.ask.spark_arrow import (
    COMBINE_KEYS,
    csv_rows,
    csv_sum_counts,
    needs_barrier,
    partial_sums,
    sum_counts,
    task_flow,
    through_switch,
    through_switch_split,
)


def chunk_pairs(
    pairs: Iterable[tuple[Hashable, int]], keys: int = COMBINE_KEYS, step: int = 1 << 16
) -> Iterator[tuple[list[Hashable], Any]]:
    """Pairs combined per key (the map-side combine Spark's ``reduceByKey`` does), streamed
    (a chunk's pairs are never held in a list: a million tuples alive make the garbage
    collector walk them), as columns: distinct keys and a numpy array of their sums; a
    chunk ends once it holds ``keys`` keys (checked every ``step`` pairs). Sums beyond int32
    go as several tuples (``MapperFlow.add_columns``)."""
    it = iter(pairs)
    more = True
    while more:
        buf: dict[Hashable, int] = {}
        get = buf.get
        while more and len(buf) < keys:
            n = 0
            for n, (k, v) in enumerate(islice(it, step), 1):  # noqa: B007 - n: pairs taken
                buf[k] = get(k, 0) + v
            more = n == step
        if buf:
            try:
                values = np.fromiter(buf.values(), dtype=np.int64, count=len(buf))
            except OverflowError:
                raise ValueError("a key's sum leaves int64 (ASK carries int values)") from None
            yield list(buf), values


def _through_switch(
    rdd: Any, chunker: Callable[[Iterator[Any]], Iterator[tuple[list[Hashable], Any]]],
    controller: str, job_id: int, reducer_ip: str, hot: int,
    mapper_ips: list[str] | None = None,
) -> tuple[dict[Hashable, int], dict[str, Any]]:  # fmt: skip
    """Each partition of ``rdd`` (``chunker``: its items -> columns) is one mapper;
    returns the reducer's result (key -> total) and the figures. ``mapper_ips``: the
    mappers' hosts; on more than one, tasks find their mapper as in
    ``hosts/ask/spark_arrow.py``."""
    ips = mapper_ips or ["127.0.0.1"] * rdd.getNumPartitions()
    watch = RecordWatch(reducer_ip)

    def task(index: int, it: Iterator[Any]) -> Iterator[dict[str, Any]]:
        started = time.time()  # wall clock: one machine's, or synchronised hosts'
        w, claim = task_flow(ips, index, reducer_ip, job_id)
        found = time.time()
        try:
            stats = send_partition(controller, job_id, w, chunker(it), hot=hot)
        finally:
            if claim is not None:
                claim.close()
        yield {**stats, "worker_id": w, "task_started": started, "flow_found": found}

    submitted = time.time()
    try:
        if needs_barrier(ips):
            stats = rdd.barrier().mapPartitionsWithIndex(task).collect()
        else:
            stats = rdd.mapPartitionsWithIndex(task).collect()
    except BaseException:
        watch.cancel()
        raise
    record = watch.record()
    return record["result"], {"mappers": stats, "reducer": record.get("reducer", {}),
                              "submitted": submitted, "collected": time.time()}  # fmt: skip


def reduce_by_key_via_switch(
    rdd: Any, controller: str, job_id: int, reducer_ip: str, chunk: int = COMBINE_KEYS,
    hot: int = 0, mapper_ips: list[str] | None = None,
) -> Any:  # fmt: skip
    """``rdd.reduceByKey(add)`` for int values, aggregated in the switch (see module doc)."""

    def chunker(it: Iterator[tuple[Hashable, int]]) -> Iterator[tuple[list[Hashable], Any]]:
        return chunk_pairs(it, chunk)

    result, stats = _through_switch(rdd, chunker, controller, job_id, reducer_ip, hot,
                                    mapper_ips)  # fmt: skip
    out = rdd.context.parallelize(list(result.items()), max(1, rdd.getNumPartitions()))
    out.ask_stats = stats
    out.ask_result = result  # the same pairs, already in the driver
    return out


def group_by_sum_count_via_switch(
    df: Any, key: str, value: str, controller: str, job_id: int, reducer_ip: str,
    hot: int = 0, mapper_ips: list[str] | None = None,
) -> Any:  # fmt: skip
    """``df.groupBy(key).agg(sum(value), count("*"))`` aggregated in the switch: each
    partition of ``df`` is one mapper (the job has one per partition), its rows in Arrow
    batches summed per key in Arrow (``hosts/ask/spark_arrow.py``: every key adds to two
    tuples, ``"s" + json(key)``, its sum, and ``"c" + json(key)``, its rows); keys are any
    JSON scalar (int, str), values int32 per row (sums exact at any size). Returns a
    DataFrame with columns ``key``, ``sum(value)``, ``count(1)`` as Spark names them."""
    ips = mapper_ips or ["127.0.0.1"] * df.rdd.getNumPartitions()
    key_type = df.schema[key].dataType
    if hot:  # the cold keys to the reducers on the mappers' hosts
        result, cold, stats = through_switch_split(
            df.select(key, value), lambda b: partial_sums(b, 0), controller, job_id, ips,
            reducer_ip, hot,
        )  # fmt: skip
        out = frame_of_sums(df.sparkSession, key, key_type, value, result, cold)
        stats["driver"] = {**stats["driver"], **out.ask_times}
    else:
        result, stats = through_switch(df.select(key, value), sum_counts, controller, job_id,
                                       ips, reducer_ip, hot)  # fmt: skip
        out = rows_of_sum_count(df.sparkSession, key, key_type, value, result)
    out.ask_stats = stats
    return out


def group_by_sum_count_csv_via_switch(
    lines: Any, controller: str, job_id: int, reducer_ip: str, key: str = "k",
    value: str = "v", header: str | None = None, sep: str = ",", hot: int = 0,
    mapper_ips: list[str] | None = None,
) -> Any:  # fmt: skip
    """``GROUP BY key SUM(value), COUNT(*)`` over the lines of a CSV table of two integer
    columns (``lines``: ``spark.read.text(path)``; ``header``: a line to skip), aggregated in
    the switch: the lines leave Spark in Arrow batches as they are read, unparsed, and are
    parsed in Arrow's kernels (``hosts/ask/spark_arrow.py``, ``csv_sum_counts``), so the JVM
    only reads lines. Returns a DataFrame ``key`` (long), ``sum(value)``, ``count(1)``."""
    from pyspark.sql.types import LongType

    ips = mapper_ips or ["127.0.0.1"] * lines.rdd.getNumPartitions()

    def chunker(batches: Iterator[Any]) -> Iterator[tuple[list[Hashable], Any]]:
        return csv_sum_counts(batches, header, sep)

    def tables(batches: Iterator[Any]) -> Iterator[Any]:  # a million rows' sums at a time
        return partial_sums(csv_rows(batches, header, sep), 0)

    text = lines.select(lines.columns[0])
    if hot:  # the cold keys to the reducers on the mappers' hosts
        result, cold, stats = through_switch_split(text, tables, controller, job_id, ips,
                                                   reducer_ip, hot)  # fmt: skip
        out = frame_of_sums(lines.sparkSession, key, LongType(), value, result, cold)
        stats["driver"] = {**stats["driver"], **out.ask_times}
    else:
        result, stats = through_switch(text, chunker, controller, job_id, ips, reducer_ip, hot)
        out = rows_of_sum_count(lines.sparkSession, key, LongType(), value, result)
    out.ask_stats = stats
    return out


def parsed_lines(lines: Any, key: str = "k", value: str = "v", header: str | None = None,
                 sep: str = ",") -> Any:  # fmt: skip
    """Spark's own parse of the same lines (``split``, ``cast`` in the JVM): a DataFrame
    ``key``, ``value`` (long), for Spark's own aggregation of them."""
    from pyspark.sql import functions as F

    col = F.col(lines.columns[0])
    kept = lines.where(col != "") if header is None else lines.where((col != "") & (col != header))
    fields = F.split(col, sep, 2)
    return kept.select(fields[0].cast("long").alias(key), fields[1].cast("long").alias(value))


def rows_of_sum_count(
    spark: Any, key: str, key_type: Any, value: str, result: dict[Hashable, int]
) -> Any:
    """The reducer's ``"s" + json(key)`` / ``"c" + json(key)`` totals as the DataFrame
    Spark's ``df.groupBy(key).agg(sum(value), count("*"))`` gives (same columns, types:
    ``key_type`` the key column's)."""
    rows = sum_count_rows(result)
    schema = _sum_count_schema(key, key_type, value)
    if rows and all(type(r[0]) is int for r in rows):  # one Arrow table into the JVM
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        keys, sum_col, counts = (list(c) for c in zip(*rows, strict=True))
        table = pa.table({key: pa.array(keys, to_arrow_type(key_type)),
                          f"sum({value})": pa.array(sum_col, pa.int64()),
                          "count(1)": pa.array(counts, pa.int64())})  # fmt: skip
        out = spark.createDataFrame(table, schema)
    else:
        out = spark.createDataFrame(rows, schema)
    out.ask_rows = rows  # the same rows, already in the driver
    return out


def frame_of_sums(
    spark: Any, key: str, key_type: Any, value: str, result: dict[Hashable, int], cold: Any
) -> Any:
    """As ``rows_of_sum_count``, from the switch's ``"s"``/``"c"`` totals (its hot keys)
    and the cold reducers' table ``k``, ``s``, ``c`` (None: no cold key): a key in both
    (hot at one mapper, cold at another) gets the sum of the two, in Arrow. The seconds
    of each step go to the DataFrame's ``ask_times``."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from hosts.ask.cold_reducers import merged

    t0 = time.perf_counter()
    hot = sum_count_rows(result)
    k_type = to_arrow_type(key_type)
    keys, sums, counts = (list(c) for c in zip(*hot, strict=True)) if hot else ([], [], [])
    hot_t = pa.table({"k": pa.array(keys, k_type), "s": pa.array(sums, pa.int64()),
                      "c": pa.array(counts, pa.int64())})  # fmt: skip
    t = merged([hot_t] if cold is None else [hot_t, cold.cast(hot_t.schema)])
    t1 = time.perf_counter()
    rows = list(zip(*(c.to_pylist() for c in t.columns), strict=True))
    t2 = time.perf_counter()
    table = pa.table({key: t.column("k"), f"sum({value})": t.column("s"),
                      "count(1)": t.column("c")})  # fmt: skip
    # into the JVM in a few Arrow batches (Spark makes a partition of each batch)
    conf = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(conf)
    spark.conf.set(conf, str(max(int(old), 1 << 18)))
    try:
        out = spark.createDataFrame(table, _sum_count_schema(key, key_type, value))
    finally:
        spark.conf.set(conf, old)
    out.ask_rows = rows
    out.ask_times = {"merge_s": t1 - t0, "rows_s": t2 - t1, "frame_s": time.perf_counter() - t2}
    return out


def _sum_count_schema(key: str, key_type: Any, value: str) -> Any:
    from pyspark.sql.types import LongType, StructField, StructType

    return StructType([
        StructField(key, key_type), StructField(f"sum({value})", LongType()),
        StructField("count(1)", LongType(), False),
    ])  # fmt: skip


def sum_count_rows(result: dict[Hashable, int]) -> list[tuple[Any, int, int]]:
    """``(key, sum, count)`` per key of the reducer's ``"s" + json(key)`` / ``"c" +
    json(key)`` totals, matched in Arrow (a million keys: no Python step per key but the
    rows' tuples; the keys' JSON parsed in one call).

    >>> sorted(sum_count_rows({"s1": 5, "c1": 2, 's"a"': -1, 'c"a"': 1}), key=str)
    [('a', -1, 1), (1, 5, 2)]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    names = pa.array(list(map(str, result)), pa.string())
    totals = pa.array(list(result.values()), pa.int64())
    tag, key = pc.utf8_slice_codeunits(names, 0, 1), pc.utf8_slice_codeunits(names, 1)
    s, c = pc.equal(tag, "s"), pc.equal(tag, "c")
    counts = pa.table({"k": key.filter(c), "c": totals.filter(c)})
    sums = pa.table({"k": key.filter(s), "s": totals.filter(s)})
    t = counts.join(sums, "k", join_type="left outer")
    keys = t.column("k").to_pylist()
    sums_of = pc.fill_null(t.column("s"), 0).to_pylist()
    return list(zip(json.loads("[" + ",".join(keys) + "]"), sums_of, t.column("c").to_pylist(),
                    strict=True))  # fmt: skip


def spark_session(partitions: int) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(f"local[{partitions}]")
        .appName("inc-switch ASK word count")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .getOrCreate()
    )


def word_count(spark: Any, a: argparse.Namespace) -> dict[str, Any]:
    """Word count on ``a.input``, each way timed from the file to the driver's dict."""
    path = str(Path(a.input).resolve())
    reference = Counter(Path(a.input).read_text().split())
    sc = spark.sparkContext
    out: dict[str, Any] = {"words": sum(reference.values()), "keys": len(reference)}
    from pyspark.sql.functions import explode, split

    def rdd_count() -> dict[str, int]:
        lines = sc.textFile(path, a.partitions)
        return dict(lines.flatMap(str.split).map(lambda w: (w, 1)).reduceByKey(add).collect())

    def df_count() -> dict[str, int]:
        df = spark.read.text(path)
        words = df.select(explode(split("value", r"\s+")).alias("word")).where("word != ''")
        return {r["word"]: r["count"] for r in words.groupBy("word").count().collect()}

    # each Spark query runs once untimed first (Python workers, JIT, code generation, the
    # file in the page cache): Spark is timed warm
    for query, name in ((rdd_count, "spark_rdd"), (df_count, "spark_df")):
        query()
        t0 = time.perf_counter()
        got = query()
        out[f"{name}_s"] = time.perf_counter() - t0
        out[f"{name}_exact"] = Counter(got) == reference
    if a.controller:
        # the switch path's Spark part once untimed too (its Python workers import this
        # module, numpy and the mapper's code), as Spark's queries were
        sc.textFile(path, a.partitions).flatMap(str.split).map(lambda w: (w, 1)).mapPartitions(
            _count_chunks
        ).collect()
        t0 = time.perf_counter()
        pairs = sc.textFile(path, a.partitions).flatMap(str.split).map(lambda w: (w, 1))
        via = reduce_by_key_via_switch(pairs, a.controller, a.job_id, a.reducer_ip)
        got = via.ask_result  # in the driver's dict, as Spark's results are timed
        out["switch_s"] = time.perf_counter() - t0
        out["switch_exact"] = Counter(got) == reference == Counter(dict(via.collect()))
        out["switch_stats"] = via.ask_stats
    return out


def read_table(path: Path) -> dict[int, tuple[int, int]]:
    """``GROUP BY k SUM(v), COUNT(*)`` of a CSV table ``k,v`` (with a header), on the host."""
    sums: dict[int, int] = {}
    counts: dict[int, int] = {}
    with open(path) as f:
        next(f)
        for line in f:
            k, v = line.split(",")
            key = int(k)
            sums[key] = sums.get(key, 0) + int(v)
            counts[key] = counts.get(key, 0) + 1
    return {k: (sums[k], counts[k]) for k in counts}


def group_by(spark: Any, a: argparse.Namespace) -> dict[str, Any]:
    """``SELECT k, SUM(v), COUNT(*) FROM table GROUP BY k`` on the CSV ``a.input``: Spark's
    DataFrame ``groupBy("k").agg(sum("v"), count("*"))`` and the same DataFrame through the
    switch, each timed from the file to the driver's dict, the Spark part of each run once
    untimed first (Spark's query; the table's rows into Python)."""
    from pyspark.sql import functions as F

    path = Path(a.input).resolve()
    reference = read_table(path)
    out: dict[str, Any] = {"rows": sum(c for _, c in reference.values()), "keys": len(reference)}
    # one DataFrame partition per mapper: splits of about size / partitions bytes
    spark.conf.set("spark.sql.files.openCostInBytes", "1")
    spark.conf.set(
        "spark.sql.files.maxPartitionBytes", str(path.stat().st_size // a.partitions + 1)
    )

    def table() -> Any:
        df = spark.read.csv(str(path), schema="k INT, v INT", header=True)
        n = df.rdd.getNumPartitions()
        return df.coalesce(a.partitions) if n > a.partitions else df

    table().groupBy("k").agg(F.sum("v"), F.count("*")).collect()  # warm: the same query once
    t0 = time.perf_counter()
    agg = table().groupBy("k").agg(F.sum("v"), F.count("*"))
    got = {r[0]: (r[1], r[2]) for r in agg.collect()}
    out["spark_df_s"] = time.perf_counter() - t0
    out["spark_df_exact"] = got == reference
    out["spark_columns"] = agg.columns
    if a.controller:
        table().mapInArrow(_count_tuples, "n long").collect()  # warm: its Spark part once
        t0 = time.perf_counter()
        via = group_by_sum_count_via_switch(table(), "k", "v", a.controller, a.job_id, a.reducer_ip)
        got = {r[0]: (r[1], r[2]) for r in via.ask_rows}  # in the driver, as Spark's are timed
        out["switch_s"] = time.perf_counter() - t0
        out["switch_exact"] = got == reference == {r[0]: (r[1], r[2]) for r in via.collect()}
        out["switch_columns"] = via.columns
        out["switch_stats"] = via.ask_stats
    return out


def _count_chunks(pairs: Iterator[tuple[Hashable, int]]) -> Iterator[int]:
    """The RDD switch path's Spark part alone (pairs combined in chunks), for warming up."""
    yield sum(len(keys) for keys, _ in chunk_pairs(pairs))


def _count_tuples(batches: Iterator[Any]) -> Iterator[Any]:
    """The switch path's Spark part alone (Arrow batches summed per key), for warming up."""
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict({"n": [sum(len(c[0]) for c in sum_counts(batches))]})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hosts.ask.spark", description=__doc__)
    ap.add_argument("--query", choices=["wordcount", "groupby"], default="wordcount")
    ap.add_argument("--input", required=True, help="wordcount: a text file; groupby: CSV k,v")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--controller", help="daemon URL; without it, Spark only")
    ap.add_argument("--job-id", type=int)
    ap.add_argument("--reducer-ip")
    ap.add_argument("--out", required=True, help="JSON file for times and checks")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    spark = spark_session(a.partitions)
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - t0
    try:
        out = group_by(spark, a) if a.query == "groupby" else word_count(spark, a)
    finally:
        spark.stop()
    out["session_s"] = session_s  # Spark's one-time start (JVM, session), not in its times
    out["query"] = a.query
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "switch_stats"}), flush=True)
    ok = all(v for k, v in out.items() if k.endswith("_exact"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
