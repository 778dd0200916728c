"""PySpark's ReduceByKey through the switch: each partition of an RDD is one ASK mapper.

Example (a running ASK job with one mapper per partition and its reducer)::

    counts = reduce_by_key_via_switch(
        sc.textFile(path, 4).flatMap(str.split).map(lambda w: (w, 1)),
        controller="unix:run/ask/controller.sock", job_id=1, reducer_ip="10.0.0.2",
    )                                   # an ordinary RDD of (word, count)

The executors' tasks (``mapPartitionsWithIndex``) send their partition's pairs with
``hosts.ask_run.send_partition`` (partition ``i`` is mapper ``i``), combined over chunks of
``chunk`` pairs, while the driver waits for the reducer's record (``collect``); the result
comes back as an RDD with as many partitions. Keys are strings (they travel in JSON between
the hosts), values int32 per tuple.

``python -m hosts.ask_spark`` runs a word count on a text file three ways in one Spark
session (local mode): ``rdd.flatMap(...).map(lambda w: (w, 1)).reduceByKey(add)``, the
DataFrame ``groupBy("word").count()``, and through the switch; it checks that all three
equal ``collections.Counter`` over the file and writes the times as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator
from operator import add
from pathlib import Path
from typing import Any

from hosts.ask_run import collect, send_partition


def chunk_pairs(pairs: Iterable[tuple[Hashable, int]], size: int) -> Iterator[dict[Hashable, int]]:
    buf: dict[Hashable, int] = {}
    n = 0
    for k, v in pairs:
        buf[k] = buf.get(k, 0) + v
        n += 1
        if n >= size:
            yield buf
            buf, n = {}, 0
    if buf:
        yield buf


def reduce_by_key_via_switch(
    rdd: Any, controller: str, job_id: int, reducer_ip: str, chunk: int = 65536, hot: int = 0
) -> Any:
    """``rdd.reduceByKey(add)`` for int values, aggregated in the switch (see module doc)."""
    record: dict[str, Any] = {}
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            record.update(collect(reducer_ip))
        except (OSError, ValueError) as e:
            errors.append(e)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    time.sleep(0.2)  # the collector is known to the reducer before the mappers finish

    def task(index: int, it: Iterator[tuple[Hashable, int]]) -> Iterator[dict[str, Any]]:
        yield send_partition(controller, job_id, index, chunk_pairs(it, chunk), hot=hot)

    stats = rdd.mapPartitionsWithIndex(task).collect()
    waiter.join()
    if errors:
        raise errors[0]
    result = record["result"]
    out = rdd.context.parallelize(list(result.items()), max(1, rdd.getNumPartitions()))
    out.ask_stats = {"mappers": stats, "reducer": record.get("reducer", {})}
    return out


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hosts.ask_spark", description=__doc__)
    ap.add_argument("--input", required=True, help="text file")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--controller", help="daemon URL; without it, Spark only")
    ap.add_argument("--job-id", type=int)
    ap.add_argument("--reducer-ip")
    ap.add_argument("--out", required=True, help="JSON file for times and checks")
    a = ap.parse_args(argv)
    text = Path(a.input).read_text()
    reference = Counter(text.split())
    spark = spark_session(a.partitions)
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    out: dict[str, Any] = {"words": sum(reference.values()), "keys": len(reference)}
    try:
        lines = sc.textFile(str(Path(a.input).resolve()), a.partitions).cache()
        lines.count()  # read once before timing
        t0 = time.perf_counter()
        rdd = dict(lines.flatMap(str.split).map(lambda w: (w, 1)).reduceByKey(add).collect())
        out["spark_rdd_s"] = time.perf_counter() - t0
        out["spark_rdd_exact"] = Counter(rdd) == reference
        from pyspark.sql.functions import explode, split

        df = spark.createDataFrame(lines.map(lambda x: (x,)), ["line"])
        t0 = time.perf_counter()
        words = df.select(explode(split("line", r"\s+")).alias("word")).where("word != ''")
        grouped = {r["word"]: r["count"] for r in words.groupBy("word").count().collect()}
        out["spark_df_s"] = time.perf_counter() - t0
        out["spark_df_exact"] = Counter(grouped) == reference
        if a.controller:
            t0 = time.perf_counter()
            pairs = lines.flatMap(str.split).map(lambda w: (w, 1))
            via = reduce_by_key_via_switch(pairs, a.controller, a.job_id, a.reducer_ip)
            got = dict(via.collect())
            out["switch_s"] = time.perf_counter() - t0
            out["switch_exact"] = Counter(got) == reference
            out["switch_stats"] = via.ask_stats
    finally:
        spark.stop()
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "switch_stats"}), flush=True)
    ok = all(v for k, v in out.items() if k.endswith("_exact"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
