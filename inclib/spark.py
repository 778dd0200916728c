"""PySpark through the switch (ASK), or Spark's own shuffle when it cannot serve.

Example (the driver; an ASK job admitted with one mapper per partition, its reducer running)::

    plan = inclib.admit(controller, workers=4, kind="ask", name="words", peers=executor_ips)
    ...                                          # the reducer: inclib.reducer(plan).collect()
    words = sc.textFile(path, 4).flatMap(str.split).map(lambda w: (w, 1))
    counts = inclib.spark.reduce_by_key(words, plan)   # an ordinary RDD of (word, count)

    counts = inclib.spark.count_words(spark.read.text(path), plan)   # DataFrame (word, count)
    table = inclib.spark.group_by_sum_count(df, "k", "v", plan)  # k, sum(v), count(1)
    table = inclib.spark.group_by_sum_count_csv(spark.read.text(csv), plan, header="k,v")

On the switch path each partition is one ASK mapper: an RDD's pairs are combined per chunk
and sent by the executors' tasks (``hosts/ask/spark.py``); a DataFrame's rows reach Python
only as Arrow batches, combined in Arrow (``hosts/ask/spark_arrow.py``); a CSV table's lines
leave it unparsed and are parsed in Arrow (``group_by_sum_count_csv``). The driver waits
for the reducer's record. The plan's peers are the mappers' hosts (one per executor core on
a cluster: tasks then find their mapper by host; a barrier stage where a host has several).
Keys are str, bytes, int or tuples of them (``hosts/ask/keys.py``), values int32 per
tuple. On a host-only plan it is Spark's own shuffle (``reduceByKey``, ``groupBy``),
after the one-line notice.
"""

from __future__ import annotations

import operator
from typing import Any

from inclib.plan import Plan
from inclib.session import SessionError, notice


def _switch_plan(plan: Plan | str, what: str) -> Plan | None:
    """The plan if the switch serves it, None for Spark's own path (after the notice)."""
    p = Plan.from_json(plan) if isinstance(plan, str) else plan
    if not p.on_switch:
        notice(p, f"{what} runs as Spark's own shuffle")
        return None
    if p.kind != "ask":
        raise SessionError(f"a {p.kind} job cannot reduce by key (admit kind 'ask')")
    return p


def _ip(address: str) -> str:
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def reduce_by_key(rdd: Any, plan: Plan | str, hot: int = 0) -> Any:
    """``rdd.reduceByKey(operator.add)`` for int values, in the switch when ``plan`` has it;
    ``hot``: keys counted fewer times in a chunk bypass the switch."""
    p = _switch_plan(plan, "reduceByKey")
    if p is None:
        return rdd.reduceByKey(operator.add)
    if rdd.getNumPartitions() != p.n_workers:
        raise SessionError(
            f"the RDD has {rdd.getNumPartitions()} partitions and the job {p.n_workers} mappers;"
            " repartition it, or admit one mapper per partition"
        )
    from hosts.ask.spark import reduce_by_key_via_switch

    assert p.job_id is not None
    return reduce_by_key_via_switch(rdd, p.controller, p.job_id, _ip(p.reducer), hot=hot,
                                    mapper_ips=[_ip(a) for a in p.peers])  # fmt: skip


def count_words(lines: Any, plan: Plan | str, hot: int = 0) -> Any:
    """The words of a DataFrame of lines (its first column; ``spark.read.text``) counted:
    a DataFrame ``word``, ``count`` (Spark's ``groupBy("word").count()`` on a host-only
    plan), in the switch when ``plan`` has it, the lines moving in Arrow batches."""
    from pyspark.sql import functions as F

    p = _switch_plan(plan, "the word count")
    if p is None:
        words = lines.select(F.explode(F.split(lines.columns[0], r"\s+")).alias("word"))
        return words.where("word != ''").groupBy("word").count()
    from hosts.ask.spark_arrow import through_switch, word_counts

    assert p.job_id is not None
    result, stats = through_switch(lines.select(lines.columns[0]), word_counts, p.controller,
                                   p.job_id, [_ip(a) for a in p.peers], _ip(p.reducer),
                                   hot)  # fmt: skip
    out = _word_frame(lines.sparkSession, result)
    out.ask_stats = stats
    out.ask_result = result
    return out


def group_by_sum_count(df: Any, key: str, value: str, plan: Plan | str, hot: int = 0) -> Any:
    """``df.groupBy(key).agg(sum(value), count("*"))`` (int32 values), in the switch when
    ``plan`` has it, the rows moving in Arrow batches; the same columns as Spark's. With
    ``hot`` (keys of fewer rows are cold), a partition's most counted keys go through the
    switch and its cold keys to a reducer per mapper on the mappers' hosts, each key to
    the one that owns it (``hosts/ask/cold_reducers.py``; the job's mappers' ports free on
    their hosts: ``COLD_PORT + mapper``)."""
    from pyspark.sql import functions as F

    p = _switch_plan(plan, "GROUP BY")
    if p is None:
        return df.groupBy(key).agg(F.sum(value), F.count("*"))
    from hosts.ask.spark import group_by_sum_count_via_switch

    assert p.job_id is not None
    return group_by_sum_count_via_switch(df, key, value, p.controller, p.job_id, _ip(p.reducer),
                                         hot, [_ip(a) for a in p.peers])  # fmt: skip


def group_by_sum_count_csv(
    lines: Any, plan: Plan | str, key: str = "k", value: str = "v", header: str | None = None,
    sep: str = ",", hot: int = 0,
) -> Any:  # fmt: skip
    """``GROUP BY key SUM(value), COUNT(*)`` over the lines of a CSV table of two integer
    columns (``lines``: ``spark.read.text(path)``; ``header``: the header line, skipped), in
    the switch when ``plan`` has it: the lines move in Arrow batches as read and are parsed
    in Arrow; on a host-only plan Spark parses them and aggregates them with its own
    shuffle. A DataFrame ``key`` (long), ``sum(value)``, ``count(1)``."""
    from pyspark.sql import functions as F

    from hosts.ask.spark import group_by_sum_count_csv_via_switch, parsed_lines

    p = _switch_plan(plan, "GROUP BY")
    if p is None:
        table = parsed_lines(lines, key, value, header, sep)
        return table.groupBy(key).agg(F.sum(value), F.count("*"))
    assert p.job_id is not None
    return group_by_sum_count_csv_via_switch(
        lines, p.controller, p.job_id, _ip(p.reducer), key, value, header, sep, hot,
        [_ip(a) for a in p.peers],
    )  # fmt: skip


def _word_frame(spark: Any, result: dict[Any, int]) -> Any:
    """The DataFrame ``word``, ``count`` of a result, built from one Arrow table (no row
    crosses into the JVM as a Python object)."""
    import pyarrow as pa

    table = pa.table({"word": pa.array(list(result), pa.string()),
                      "count": pa.array(list(result.values()), pa.int64())})  # fmt: skip
    return spark.createDataFrame(table)
