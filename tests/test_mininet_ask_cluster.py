"""ASK on a Spark standalone cluster on Mininet (root, Java): Spark's own Master on one host,
a Worker (one executor) on each of two mapper hosts, the driver on its own host; word count
through Spark's shuffle (RDD ``reduceByKey``, DataFrame ``groupBy().count()``), through the
switch (``inclib.spark.reduce_by_key``, and ``inclib.spark.count_words`` in Arrow batches)
and by ASK's own mappers on the executors' hosts; ``GROUP BY k SUM(v), COUNT(*)`` by the
DataFrame (CSV reader, and the lines split in the JVM), by the lines parsed in Arrow with
Spark's shuffle, and through the switch (the CSV reader's rows in Arrow; the lines parsed
in Arrow: ``inclib.spark.group_by_sum_count_csv``; their cold keys reduced on the two
executors' hosts, each key by one of them). Every result equals
``collections.Counter`` (the host's sums), Spark's own result, and nothing the cluster
started is left running."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(900)]


def test_cluster_word_count_and_group_by_through_the_switch_equal_spark_and_counter() -> None:
    pytest.importorskip("pyspark", reason="pyspark is in the test extra: make setup-test")
    assert shutil.which("java"), "Java is installed by make setup-test (openjdk-17-jre-headless)"
    from topologies.ask_cluster import GROUPBY_PATHS, run_cluster
    from topologies.spark_cluster import still_running

    rec = run_cluster(executors=2, sizes=(6000,), hot=2, run_dir=Path("run/ask-cluster-test"),
                      timeout=600, log=lambda s: None, warm=False)  # fmt: skip
    (wc,), (gb,) = rec["wordcount"], rec["groupby"]
    for path in ("spark_rdd", "spark_df", "switch_rdd", "switch_arrow", "ask"):
        assert wc[f"{path}_exact"], f"word count {path} differs from Counter"
    for path in GROUPBY_PATHS:
        assert gb[f"{path}_exact"], f"GROUP BY {path} differs from the host's sums"
    assert gb["switch_columns"] == gb["spark_columns"] == ["k", "sum(v)", "count(1)"]
    assert gb["switch_lines_columns"] == gb["spark_columns"]
    for job, path in ((wc, "switch_rdd"), (wc, "switch_arrow"), (gb, "switch_arrow"),
                      (gb, "switch_lines")):  # fmt: skip
        stats = job[f"{path}_stats"]
        assert stats["reducer"]["drained_tuples"] > 0, f"{path}: nothing in the switch"
        mappers = stats["mappers"]
        assert sorted(m["worker_id"] for m in mappers) == [0, 1], "one mapper per executor"
        assert sum(m["bypass_tuples"] for m in mappers) > 0, "cold keys bypass the switch"
    for path in ("switch_arrow", "switch_lines"):  # GROUP BY's cold keys: one reducer per
        # executor on its host, each key owned by one of them, every key routed arriving
        colds = [m["cold"] for m in gb[f"{path}_stats"]["mappers"]]
        assert len(colds) == 2 and all(c["refused"] == 0 for c in colds), colds
        assert sum(c["keys_out"] for c in colds) == sum(c["keys_in"] for c in colds) > 0
        assert all(c["keys"] > 0 for c in colds), "each executor's reducer owns cold keys"
    # the cluster's and the driver's JVMs (and their Python workers) were started and are gone
    started = {(pid, t) for pid, t, _ in rec["processes"]}
    assert sum(name == "java" for _, _, name in rec["processes"]) >= 4, rec["processes"]
    assert rec["left_running"] == [] and still_running(started) == []
