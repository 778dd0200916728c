"""inclib.spark: a host-only plan reduces with Spark's own shuffle (real PySpark, local mode)
after the one-line notice; a switch plan needs one ASK mapper per partition."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is in the test extra (make setup-test)")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def sc() -> Iterator[Any]:
    from hosts.ask.spark import spark_session

    spark = spark_session(2)
    yield spark.sparkContext
    spark.stop()


def test_host_plan_reduces_with_spark_and_says_so_once(sc: Any, capsys: Any) -> None:
    import inclib
    import inclib.spark

    words = ("the cat and the hat and the bat " * 50).split()
    plan = inclib.admit("unix:/nonexistent/inc.sock", workers=2, kind="ask", name="spark-wc")
    rdd = sc.parallelize(words, 2).map(lambda w: (w, 1))
    got = dict(inclib.spark.reduce_by_key(rdd, plan).collect())
    again = dict(inclib.spark.reduce_by_key(rdd, plan.to_json()).collect())
    assert got == again == Counter(words)
    err = capsys.readouterr().err
    assert err.count("inclib: the switch cannot serve job 'spark-wc'") == 1
    assert "reduceByKey runs as Spark's own shuffle" in err


def test_switch_plan_needs_one_mapper_per_partition(sc: Any) -> None:
    import inclib.spark
    from inclib.plan import Plan
    from inclib.session import SessionError

    plan = Plan("unix:/x.sock", 4, ("10.0.0.1",) * 4, kind="ask", job_id=3, reducer="10.0.0.5")
    rdd = sc.parallelize([("a", 1)], 2)
    with pytest.raises(SessionError, match="2 partitions and the job 4 mappers"):
        inclib.spark.reduce_by_key(rdd, plan)
