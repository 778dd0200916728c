"""PySpark through the switch (root, Mininet, Java): a Spark job in local mode on ``h1``
whose partitions are ASK mappers, the reducer on ``h2``. Word count: the switch's
``reduceByKey``, Spark's own RDD ``reduceByKey`` and DataFrame ``groupBy().count()`` all
equal ``Counter``. GROUP BY: ``GROUP BY k SUM(v), COUNT(*)`` over a generated table through
the switch and Spark's DataFrame ``groupBy("k").agg(sum("v"), count("*"))`` both equal the
host's sums, with Spark's column names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(600)]


def needs_spark() -> None:
    pytest.importorskip("pyspark", reason="pyspark is in the test extra: make setup-test")
    assert shutil.which("java"), "Java is installed by make setup-test (openjdk-17-jre-headless)"


def test_spark_reduce_by_key_through_the_switch_equals_spark_and_counter() -> None:
    needs_spark()
    from topologies.ask import run_spark

    rec = run_spark(partitions=2, words=5000, run_dir=Path("run/ask-spark-test"), timeout=400)
    assert rec["switch_exact"], "the switch's reduceByKey differs from Counter"
    assert rec["spark_rdd_exact"] and rec["spark_df_exact"]
    red = rec["switch_stats"]["reducer"]
    assert red["drained_tuples"] > 0, "nothing was aggregated in the switch"
    assert len(rec["switch_stats"]["mappers"]) == 2, "one mapper per partition"


def test_spark_group_by_sum_count_through_the_switch_equals_spark_and_the_host() -> None:
    needs_spark()
    from topologies.ask import run_spark

    rec = run_spark(partitions=2, words=3000, run_dir=Path("run/ask-groupby-test"), timeout=400,
                    query="groupby")  # fmt: skip
    assert rec["spark_df_exact"], "Spark's groupBy().agg() differs from the host's sums"
    assert rec["switch_exact"], "the switch's GROUP BY differs from the host's sums"
    assert rec["switch_columns"] == rec["spark_columns"] == ["k", "sum(v)", "count(1)"]
    red = rec["switch_stats"]["reducer"]
    assert red["drained_tuples"] > 0, "nothing was aggregated in the switch"
    assert len(rec["switch_stats"]["mappers"]) == 2, "one mapper per partition"
