"""PySpark's reduceByKey through the switch (root, Mininet, Java): a Spark job in local
mode on ``h1`` whose partitions are ASK mappers, the reducer on ``h2``; its result, Spark's
own RDD ``reduceByKey`` and DataFrame ``groupBy().count()`` all equal ``Counter``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(600)]


def test_spark_reduce_by_key_through_the_switch_equals_spark_and_counter() -> None:
    pytest.importorskip("pyspark", reason="pyspark is in the test extra: make setup-test")
    assert shutil.which("java"), "Java is installed by make setup-test (openjdk-17-jre-headless)"
    from topologies.ask import run_spark

    rec = run_spark(partitions=2, words=5000, run_dir=Path("run/ask-spark-test"), timeout=400)
    assert rec["switch_exact"], "the switch's reduceByKey differs from Counter"
    assert rec["spark_rdd_exact"] and rec["spark_df_exact"]
    red = rec["switch_stats"]["reducer"]
    assert red["drained_tuples"] > 0, "nothing was aggregated in the switch"
    assert len(rec["switch_stats"]["mappers"]) == 2, "one mapper per partition"
