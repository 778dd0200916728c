"""PySpark's ReduceByKey through the switch (ASK), or Spark's own when it cannot serve.

Example (the driver; an ASK job admitted for the RDD's partitions, its reducer running)::

    plan = inclib.admit(controller, workers=4, kind="ask", name="words")
    ...                                          # the reducer: inclib.reducer(plan).collect()
    words = sc.textFile(path, 4).flatMap(str.split).map(lambda w: (w, 1))
    counts = inclib.spark.reduce_by_key(words, plan)   # an ordinary RDD of (word, count)

On the switch path each partition of the RDD is one ASK mapper (partition i is mapper i,
``hosts/ask/spark.py``: the executors' tasks send their pairs, the driver waits for the
reducer's record); keys are str, bytes, int or tuples of them (``hosts/ask/keys.py``),
values int32 per tuple. On a host-only plan it is
``rdd.reduceByKey(operator.add)``, Spark's own shuffle, after the one-line notice.
"""

from __future__ import annotations

import operator
from typing import Any

from inclib.plan import Plan
from inclib.session import SessionError, notice


def reduce_by_key(rdd: Any, plan: Plan | str) -> Any:
    """``rdd.reduceByKey(operator.add)`` for int values, in the switch when ``plan`` has it."""
    p = Plan.from_json(plan) if isinstance(plan, str) else plan
    if not p.on_switch:
        notice(p, "reduceByKey runs as Spark's own shuffle")
        return rdd.reduceByKey(operator.add)
    if p.kind != "ask":
        raise SessionError(f"a {p.kind} job cannot reduce by key (admit kind 'ask')")
    if rdd.getNumPartitions() != p.n_workers:
        raise SessionError(
            f"the RDD has {rdd.getNumPartitions()} partitions and the job {p.n_workers} mappers;"
            " repartition it, or admit one mapper per partition"
        )
    from hosts.ask.spark import reduce_by_key_via_switch

    assert p.job_id is not None
    reducer_ip = p.reducer.rsplit(":", 1)[0] if p.reducer.count(":") == 1 else p.reducer
    return reduce_by_key_via_switch(rdd, p.controller, p.job_id, reducer_ip)
