"""Spark DataFrames through the switch in Arrow batches: each partition one ASK mapper.

Example (a running ASK job with one mapper per partition, its reducer at ``reducer_ip``)::

    words = spark.read.text(path)                        # one column of lines
    counts, stats = through_switch(words, word_counts, controller, job_id,
                                   mapper_ips, reducer_ip)   # {word: count}, figures

Rows leave Spark only as Arrow record batches (``DataFrame.mapInArrow``): a batch is
combined in Arrow's C++ kernels (``word_counts``: split on whitespace and ``value_counts``;
``sum_counts``: ``group_by(key).aggregate(sum, count)``) and the partial aggregates of
successive batches are merged in Arrow up to ``COMBINE_KEYS`` keys (``combined``, the
bounded map-side combine Spark's own aggregation does), so only a partition's distinct keys
reach Python, with their values as one numpy array, which the task's mapper
(``hosts.ask.mapper_process.send_partition``, ``MapperFlow.add_columns``) packs into packets with
numpy. No row is ever a Python object.

Which mapper a task is: the job binds mapper ``w`` to the switch port of ``mapper_ips[w]``
(its host). When the mappers share one host (local mode), task ``i`` is mapper ``i``. On a
cluster where each host has one mapper (one executor core per host), a task is its host's
mapper; it claims it for its run (an abstract Unix socket named after the job and mapper,
one per network namespace), so that a second task on that host fails in one line instead
of sending as the same flow. Where a host has more, the stage runs in barrier mode (every
task at once, one per executor core), each task learns every task's address
(``BarrierTaskContext.allGather``, in partition order) and takes, among the mappers of its
own host, the one whose rank matches its rank among that host's tasks: admit the job with
one mapper per executor core, listed by host. (A barrier costs a round of the
coordinator's messages with every task, about a second on a loaded machine.)
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np

from hosts.ask.control import RecordWatch
from hosts.ask.mapper_process import send_partition
from wire.header import ASK_TUPLES

Columns = tuple[list[Hashable], Any]  # a chunk: distinct keys and a numpy array of values
Chunker = Callable[[Iterator[Any]], Iterator[Columns]]
Tables = Callable[[Iterator[Any]], Iterator[Any]]  # Arrow batches -> partial sums k, s, c
BATCH_ROWS = 1 << 16  # rows (lines) per Arrow batch handed to a mapper
COMBINE_KEYS = 1 << 18  # distinct keys a mapper combines across batches before sending
GROUP_ROWS = 1 << 20  # rows summed per key in one hash aggregation (partial_sums)


def word_counts(batches: Iterator[Any], limit: int = COMBINE_KEYS) -> Iterator[Columns]:
    """The words of each batch's first column (lines; split on whitespace, as
    ``str.split``), counted in Arrow and combined across batches (``combined``): distinct
    words and their counts, each word once per chunk."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def counted() -> Iterator[Any]:
        for batch in batches:
            words = pc.list_flatten(pc.utf8_split_whitespace(batch.column(0)))
            words = words.filter(pc.not_equal(words, ""))  # an empty line splits into ""
            if len(words):
                vc = pc.value_counts(words)
                yield pa.table({"k": vc.field("values"), "n": vc.field("counts")})

    for t in combined(counted(), limit):
        yield t.column("k").to_pylist(), t.column("n").to_numpy()


def sum_counts(batches: Iterator[Any], limit: int = COMBINE_KEYS) -> Iterator[Columns]:
    """Rows (key, value) of each batch as ASK tuples, summed per key in Arrow and combined
    across batches (``combined``): ``"s" + json(key)`` the sum of its values, ``"c" +
    json(key)`` its number of rows (a sum beyond int32 goes as several tuples:
    ``MapperFlow.add_columns``)."""
    return _sum_count_columns((b for b in batches if b.num_rows), limit)


def csv_sum_counts(
    batches: Iterator[Any], header: str | None = None, sep: str = ",", limit: int = COMBINE_KEYS
) -> Iterator[Columns]:
    """As ``sum_counts``, for the lines of a CSV table of two integer columns, key and value
    (each batch's first column: a line per row, ``spark.read.text``, or whole texts), parsed
    in Arrow's kernels (split on newlines and on the first ``sep``, cast to int64): no row
    is parsed in the JVM, none is a Python object. Empty lines and lines equal to
    ``header`` are skipped; any other line that is not two integers is a ``ValueError``.

    >>> import pyarrow as pa
    >>> [(k, v.tolist()) for k, v in csv_sum_counts(iter([pa.RecordBatch.from_pydict(
    ...     {"value": ["k,v", "1,5", "2,-3", "1,7", ""]})]), header="k,v")]
    [(['s1', 's2', 'c1', 'c2'], [12, -3, 2, 1])]
    """
    return _sum_count_columns(csv_rows(batches, header, sep), limit)


def csv_rows(batches: Iterator[Any], header: str | None = None, sep: str = ",") -> Iterator[Any]:
    """Each batch's lines (``csv_sum_counts``) as an Arrow table of int64 ``k``, ``v``: the
    fields of every line split and cast in one kernel call each (a batch of whole texts is
    split into lines first)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        lines = batch.column(0)
        if pc.any(pc.match_substring(lines, "\n")).as_py():  # whole texts, not lines
            lines = pc.list_flatten(pc.split_pattern(lines, "\n"))
        keep = pc.not_equal(lines, "")
        if header is not None:
            keep = pc.and_(keep, pc.not_equal(lines, header))
        if not pc.all(keep).as_py():
            lines = lines.filter(keep)
        if not len(lines):
            continue
        fields = pc.split_pattern(lines, sep, max_splits=1)
        try:
            if pc.min(pc.list_value_length(fields)).as_py() != 2:
                raise pa.ArrowInvalid(f"a line without {sep!r}")
            kv = pc.cast(pc.list_flatten(fields), pa.int64()).to_numpy()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ValueError(f"a line that is not two integers separated by {sep!r}: {e}") from None
        yield pa.table({"k": kv[0::2], "v": kv[1::2]})


def _sum_count_columns(tables: Iterator[Any], limit: int) -> Iterator[Columns]:
    """Tables or batches of rows (key, value: their first two columns) summed per key in
    Arrow, combined across them, as the ``"s"``/``"c"`` tuples of ``sum_counts``."""
    for t in partial_sums(tables, limit):
        yield sum_count_columns(t)


def partial_sums(tables: Iterator[Any], limit: int = COMBINE_KEYS) -> Iterator[Any]:
    """Tables or batches of rows (key, value: their first two columns) summed per key in
    Arrow and combined across them (``combined``): Arrow tables ``k``, ``s`` (the sum of
    the key's values, int64), ``c`` (its rows), each key once per table. Rows are summed
    ``GROUP_ROWS`` (at most ``limit``) at a time: one hash aggregation per piece of a
    million rows or so, not per batch;
    ``limit`` 0: those sums as they are, not combined (a key may be in several tables)."""
    import pyarrow as pa

    def summed(held: list[Any]) -> Any:
        k, v = held[0].schema.names[:2]
        table = (
            pa.Table.from_batches(held)
            if isinstance(held[0], pa.RecordBatch)
            else (pa.concat_tables([t.select([k, v]).rename_columns([k, v]) for t in held]))
        )
        agg = table.group_by(k).aggregate([(v, "sum"), (v, "count")])
        return pa.table({"k": agg.column(k), "s": agg.column(f"{v}_sum").cast(pa.int64()),
                         "c": agg.column(f"{v}_count")})  # fmt: skip

    piece = min(GROUP_ROWS, limit) if limit else GROUP_ROWS  # a piece within the combine's

    def pieces() -> Iterator[Any]:
        held: list[Any] = []
        rows = 0
        for batch in tables:
            if batch.num_rows:
                held.append(batch)
                rows += batch.num_rows
            if rows >= piece:
                yield summed(held)
                held, rows = [], 0
        if held:
            yield summed(held)

    return combined(pieces(), limit) if limit else pieces()


def sum_count_columns(t: Any) -> Columns:
    """A table of ``partial_sums`` as ASK's tuples: ``"s" + json(key)`` its sum, ``"c" +
    json(key)`` its rows."""
    names = json_names(t.column("k"))
    keys: list[Hashable] = ["s" + n for n in names]
    keys += ["c" + n for n in names]
    return keys, np.concatenate([t.column("s").to_numpy(), t.column("c").to_numpy()])


def json_names(keys: Any) -> list[str]:
    """``json.dumps`` of each key of an Arrow column (integers cast in Arrow: the same)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_integer(keys.type) and keys.null_count == 0:
        return list(pc.cast(keys, pa.string()).to_pylist())
    return [json.dumps(x) for x in keys.to_pylist()]


def combined(parts: Iterator[Any], limit: int = COMBINE_KEYS) -> Iterator[Any]:
    """Partial aggregates (Arrow tables: key ``k``, the other columns summed) combined
    across batches, a bounded map-side combine as Spark's own: held until they count
    ``limit`` rows, then merged (``group_by(k)`` sums); a merge that still holds half as
    many keys leaves, else it is held on. Each key once per table that leaves."""
    held: list[Any] = []
    rows = 0
    for t in parts:
        held.append(t)
        rows += t.num_rows
        if rows >= limit:
            merged = _merge(held)
            if merged.num_rows >= limit // 2:
                yield merged
                held, rows = [], 0
            else:
                held, rows = [merged], merged.num_rows
    if held:
        yield _merge(held)


def _merge(tables: list[Any]) -> Any:
    import pyarrow as pa

    if len(tables) == 1:
        return tables[0]
    t = pa.concat_tables(tables)
    values = [c for c in t.column_names if c != "k"]
    agg = t.group_by("k").aggregate([(c, "sum") for c in values])
    return pa.table({"k": agg.column("k"), **{c: agg.column(f"{c}_sum") for c in values}})


def timed(items: Iterator[Any], waited: list[Any]) -> Iterator[Any]:
    """``items``, adding the seconds spent waiting for each (Spark's side: its scan and its
    rows into Arrow, or its pairs) to ``waited[0]`` and the rows (Arrow batches' rows, else
    items) to ``waited[1]``: the figures' ``busy["spark"]`` and ``rows_in``, the rest of a
    mapper's ``input`` being its own combine."""
    it = iter(items)
    while True:
        t0 = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            waited[0] += time.perf_counter() - t0
            return
        waited[0] += time.perf_counter() - t0
        waited[1] += getattr(item, "num_rows", 1)
        yield item


def own_ip(toward: str) -> str:
    """This host's address on the way to ``toward`` (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((toward, 9))
        return str(s.getsockname()[0])


def needs_barrier(mapper_ips: list[str]) -> bool:
    """Whether tasks must learn each other's hosts: mappers on several hosts, more than one
    on some host."""
    return 1 < len(set(mapper_ips)) < len(mapper_ips)


def task_flow(
    mapper_ips: list[str], partition: int, reducer_ip: str, job_id: int
) -> tuple[int, socket.socket | None]:
    """The mapper (worker id) a task of ``partition`` is, and its claim on this host's only
    mapper, to hold while it runs (see the module doc)."""
    if len(set(mapper_ips)) == 1:
        return partition, None
    me = own_ip(reducer_ip)
    if not needs_barrier(mapper_ips):
        mine = [w for w, ip in enumerate(mapper_ips) if ip == me]
        if not mine:
            raise ValueError(f"task {partition} on {me}: the job has no mapper on this host")
        claim = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            claim.bind(f"\0inc-ask-{job_id}-{mine[0]}")
        except OSError:
            claim.close()
            raise ValueError(f"task {partition} on {me}: another task runs this host's mapper"
                             " (admit one mapper per executor core)") from None  # fmt: skip
        return mine[0], claim
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
    return mine[rank], None


def through_switch(
    df: Any, chunker: Chunker, controller: str, job_id: int, mapper_ips: list[str],
    reducer_ip: str, hot: int = 0,
) -> tuple[dict[Hashable, int], dict[str, Any]]:  # fmt: skip
    """Each partition of ``df`` (``chunker``: its Arrow batches -> count maps) is one
    mapper of job ``job_id``; returns the reducer's result (key -> total) and the figures
    (each mapper's, the reducer's)."""
    import pyarrow as pa

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        w, claim, times = _task_flow(mapper_ips, reducer_ip, job_id)
        waited = [0.0, 0]
        try:
            stats = send_partition(controller, job_id, w, chunker(timed(batches, waited)),
                                   hot=hot)  # fmt: skip
        finally:
            if claim is not None:
                claim.close()
        stats["busy"]["spark"], stats["rows_in"] = waited
        stats.update(worker_id=w, **times)
        yield pa.RecordBatch.from_pydict({"stats": [json.dumps(stats)]})

    rows, record, times = _run_tasks(df, task, "stats string", mapper_ips, reducer_ip)
    mappers = [json.loads(r[0]) for r in rows]
    return record["result"], {"mappers": mappers, "reducer": record.get("reducer", {}),
                              **times}  # fmt: skip


def through_switch_split(
    df: Any, tables: Tables, controller: str, job_id: int, mapper_ips: list[str],
    reducer_ip: str, hot: int,
) -> tuple[dict[Hashable, int], Any, dict[str, Any]]:  # fmt: skip
    """Each partition of ``df`` (``tables``: its Arrow batches -> partial sums ``k``, ``s``,
    ``c``) is one mapper of job ``job_id``: of each table of partial sums, the keys of at
    least ``hot`` rows, the most counted first, as many as the switch has cells for the
    mapper (two tuples a key: ``sum_count_columns``), go through the switch; the rest, the
    cold keys, to the cold reducers on the mappers' hosts, each key to its owner
    (``hosts/ask/cold_reducers.py``), each task then returning the keys its host owns
    through Spark as one compressed Arrow stream. Returns the switch's result (``"s"``/
    ``"c"`` + json(key) -> total), the cold reducers' (an Arrow table ``k``, ``s``, ``c``,
    each key once, None without cold keys; a key may be in both, hot at one mapper and
    cold at another) and the figures."""
    import pyarrow as pa

    from hosts.ask.cold_reducers import ColdReducers, ipc_bytes, ipc_table, split_hot_cold

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        w, claim, times = _task_flow(mapper_ips, reducer_ip, job_id)
        waited, budget, cold_keys = [0.0, 0], [0], [0]
        try:
            with ColdReducers(w, mapper_ips) as cold:

                def configured(cfg: dict[str, Any], key: bytes | None) -> None:
                    budget[0] = int(cfg["part_size"]) * ASK_TUPLES // 2  # two tuples a key
                    cold.keyed(key)

                def hot_columns() -> Iterator[Columns]:
                    for t in tables(timed(batches, waited)):
                        hot_t, cold_t = split_hot_cold(t, budget[0], hot)
                        cold.route(cold_t)
                        cold_keys[0] += cold_t.num_rows
                        if hot_t.num_rows:
                            yield sum_count_columns(hot_t)
                    cold.finish()

                stats = send_partition(controller, job_id, w, hot_columns(),
                                       configured=configured)  # fmt: skip
                mine = cold.gathered()
                stats["cold"] = cold.stats
        finally:
            if claim is not None:
                claim.close()
        stats["busy"]["spark"], stats["rows_in"] = waited
        stats["bypass_tuples"] = 2 * cold_keys[0]  # a cold key's sum and count: two tuples
        stats.update(worker_id=w, **times)
        # the keys this host owns as one compressed Arrow stream: the JVM carries it to the
        # driver as one value, no row of it converted on the way
        part = ipc_bytes(mine) if mine is not None else None
        yield pa.RecordBatch.from_pydict({"part": [part], "stats": [json.dumps(stats)]},
                                         schema=OUT)  # fmt: skip

    OUT = pa.schema([("part", pa.binary()), ("stats", pa.string())])
    rows, record, times = _run_tasks(df, task, "part binary, stats string", mapper_ips,
                                     reducer_ip)  # fmt: skip
    t0 = time.perf_counter()
    parts = [ipc_table(r[0]) for r in rows if r[0] is not None]
    cold_sums = pa.concat_tables(parts) if parts else None
    mappers = [json.loads(r[1]) for r in rows]
    driver = {"decode_s": time.perf_counter() - t0}  # the driver's steps after the tasks
    figures = {"mappers": mappers, "driver": driver, "reducer": record.get("reducer", {})}
    return record["result"], cold_sums, {**figures, **times}


def _task_flow(
    mapper_ips: list[str], reducer_ip: str, job_id: int
) -> tuple[int, socket.socket | None, dict[str, float]]:
    """In a task: its mapper and claim (``task_flow``), and when it started and found it
    (wall clock: one machine's, or synchronised hosts')."""
    from pyspark import TaskContext

    started = time.time()
    ctx = TaskContext.get()
    assert ctx is not None
    w, claim = task_flow(mapper_ips, ctx.partitionId(), reducer_ip, job_id)
    return w, claim, {"task_started": started, "flow_found": time.time()}


def _run_tasks(
    df: Any, task: Callable[[Iterator[Any]], Iterator[Any]], schema: Any,
    mapper_ips: list[str], reducer_ip: str,
) -> tuple[Any, dict[str, Any], dict[str, float]]:  # fmt: skip
    """``df.mapInArrow(task, schema)``, one task per mapper, while the driver waits for the
    reducer's record: the tasks' output rows, the record, and the driver's times (entered,
    tasks submitted, everything in)."""
    entered = time.time()
    n = df.rdd.getNumPartitions()
    if n != len(mapper_ips):  # one task per mapper; a barrier stage refuses coalesce()
        print(f"ask: {n} partitions for {len(mapper_ips)} mappers: repartitioning (a shuffle)",
              file=sys.stderr, flush=True)  # fmt: skip
        df = df.repartition(len(mapper_ips))
    watch = RecordWatch(reducer_ip)
    spark = df.sparkSession
    old = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS))
    try:
        submitted = time.time()
        got = df.mapInArrow(task, schema, barrier=needs_barrier(mapper_ips)).collect()
    except BaseException:
        watch.cancel()
        raise
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", old)
    record = watch.record()
    return got, record, {"entered": entered, "submitted": submitted, "collected": time.time()}
