"""Spark DataFrames through the switch in Arrow batches: each partition one ASK mapper.

Example (a running ASK job with one mapper per partition, its reducer at ``reducer_ip``)::

    words = spark.read.text(path)                        # one column of lines
    counts, stats = through_switch(words, word_counts, controller, job_id,
                                   mapper_ips, reducer_ip)   # {word: count}, figures

Rows leave Spark only as Arrow record batches (``DataFrame.mapInArrow``): a batch is
combined in Arrow's C++ kernels (``word_counts``: split on whitespace and ``value_counts``;
``sum_counts``: ``group_by(key).aggregate(sum, count)``), and only its distinct keys reach
Python, with their values as one numpy array per batch, which the task's mapper
(``hosts.ask.run.send_partition``, ``MapperFlow.add_columns``) packs into packets with
numpy. No row is ever a Python object.

Which mapper a task is: the job binds mapper ``w`` to the switch port of ``mapper_ips[w]``
(its host). When the mappers share one host (local mode), task ``i`` is mapper ``i``. On a
cluster the stage runs in barrier mode (every task at once, one per executor core), each
task learns every task's address (``BarrierTaskContext.allGather``, in partition order) and
takes, among the mappers of its own host, the one whose rank matches its rank among that
host's tasks: admit the job with one mapper per executor core, listed by host.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np

from hosts.ask.run import send_partition, subscribe, wait_record
from hosts.ask.wire import INT32_MAX, INT32_MIN

Columns = tuple[list[Hashable], Any]  # a chunk: distinct keys and a numpy array of values
Chunker = Callable[[Iterator[Any]], Iterator[Columns]]
BATCH_ROWS = 1 << 16  # rows (lines) per Arrow batch handed to a mapper


def word_counts(batches: Iterator[Any]) -> Iterator[Columns]:
    """The words of each batch's first column (lines; split on whitespace, as
    ``str.split``), counted in Arrow: per batch its distinct words and their counts."""
    import pyarrow.compute as pc

    for batch in batches:
        words = pc.list_flatten(pc.utf8_split_whitespace(batch.column(0)))
        words = words.filter(pc.not_equal(words, ""))  # an empty line splits into ""
        if len(words) == 0:
            continue
        vc = pc.value_counts(words)
        counts = vc.field("counts").to_numpy()
        if counts.max() > INT32_MAX:
            raise ValueError("a batch counts one word more than 2^31 times (smaller batches)")
        yield vc.field("values").to_pylist(), counts


def sum_counts(batches: Iterator[Any]) -> Iterator[Columns]:
    """Rows (key, value) of each batch as ASK tuples, summed per key in Arrow: ``"s" +
    json(key)`` the sum of its values, ``"c" + json(key)`` its number of rows. A batch whose
    sum leaves int32 (what a tuple carries) is sent in halves."""
    import pyarrow as pa

    for batch in batches:
        yield from _sum_counts(pa.Table.from_batches([batch]))


def _sum_counts(table: Any) -> Iterator[Columns]:
    if table.num_rows == 0:
        return
    k, v = table.column_names[:2]
    agg = table.group_by(k).aggregate([(v, "sum"), (v, "count")])
    sums = agg.column(f"{v}_sum").to_numpy(zero_copy_only=False)
    if len(sums) and (sums.max() > INT32_MAX or sums.min() < INT32_MIN):
        if table.num_rows == 1:
            raise ValueError(f"GROUP BY through the switch sums int32 values, got {sums[0]}")
        half = table.num_rows // 2
        yield from _sum_counts(table.slice(0, half))
        yield from _sum_counts(table.slice(half))
        return
    names = [json.dumps(x) for x in agg.column(k).to_pylist()]
    counts = agg.column(f"{v}_count").to_numpy(zero_copy_only=False)
    keys: list[Hashable] = ["s" + n for n in names]
    keys += ["c" + n for n in names]
    yield keys, np.concatenate([sums.astype(np.int64), counts.astype(np.int64)])


def own_ip(toward: str) -> str:
    """This host's address on the way to ``toward`` (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((toward, 9))
        return str(s.getsockname()[0])


def task_flow(mapper_ips: list[str], partition: int, reducer_ip: str) -> int:
    """The mapper (worker id) a task of ``partition`` is (see the module doc)."""
    if len(set(mapper_ips)) == 1:
        return partition
    from pyspark import BarrierTaskContext

    me = own_ip(reducer_ip)
    ips = BarrierTaskContext.get().allGather(me)  # every task's address, by partition
    rank = sum(1 for ip in ips[:partition] if ip == me)
    mine = [w for w, ip in enumerate(mapper_ips) if ip == me]
    if rank >= len(mine):
        raise ValueError(
            f"task {partition} on {me}: the job has {len(mine)} mappers on this host and"
            f" {rank + 1} tasks landed here (admit one mapper per executor core)"
        )
    return mine[rank]


def through_switch(
    df: Any, chunker: Chunker, controller: str, job_id: int, mapper_ips: list[str],
    reducer_ip: str, hot: int = 0,
) -> tuple[dict[Hashable, int], dict[str, Any]]:  # fmt: skip
    """Each partition of ``df`` (``chunker``: its Arrow batches -> count maps) is one
    mapper of job ``job_id``; returns the reducer's result (key -> total) and the figures
    (each mapper's, the reducer's)."""
    import pyarrow as pa

    n = df.rdd.getNumPartitions()
    if n != len(mapper_ips):  # one task per mapper; a barrier stage refuses coalesce()
        print(f"ask: {n} partitions for {len(mapper_ips)} mappers: repartitioning (a shuffle)",
              file=sys.stderr, flush=True)  # fmt: skip
        df = df.repartition(len(mapper_ips))
    ctl = subscribe(reducer_ip)  # the reducer knows the driver before any mapper starts
    record: dict[str, Any] = {}
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            record.update(wait_record(ctl))
        except (OSError, ValueError) as e:
            errors.append(e)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        w = task_flow(mapper_ips, ctx.partitionId(), reducer_ip)
        stats = send_partition(controller, job_id, w, chunker(batches), hot=hot)
        stats["worker_id"] = w
        yield pa.RecordBatch.from_pydict({"stats": [json.dumps(stats)]})

    barrier = len(set(mapper_ips)) > 1
    spark = df.sparkSession
    old = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS))
    try:
        rows = df.mapInArrow(task, "stats string", barrier=barrier).collect()
    except BaseException:
        ctl.sock.close()  # the waiter gives up too
        raise
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", old)
    waiter.join()
    if errors:
        raise errors[0]
    mappers = [json.loads(r[0]) for r in rows]
    return record["result"], {"mappers": mappers, "reducer": record.get("reducer", {})}
