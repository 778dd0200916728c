"""inclib.spark on Mininet (root, Java): a PySpark driver in local mode on h1 reduces an RDD
through the switch with ``inclib.spark.reduce_by_key`` (its two partitions are ASK mappers),
the reducer on h2 runs ``inclib.reducer(plan).collect()``; the result equals Counter."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(600)]

DRIVER = r"""
import json, sys
from collections import Counter
import inclib.spark
from hosts.ask.spark import spark_session
words = [f"w{i % 97}" for i in range(4000)] + [f"rare{i}" for i in range(300)]
spark = spark_session(2)
rdd = spark.sparkContext.parallelize(words, 2).map(lambda w: (w, 1))
got = dict(inclib.spark.reduce_by_key(rdd, sys.argv[1]).collect())
print("RESULT " + json.dumps({"exact": got == dict(Counter(words)), "keys": len(got)}), flush=True)
spark.stop()
"""
REDUCER = r"""
import json, sys
import inclib
print(json.dumps({"keys": len(inclib.reducer(sys.argv[1]).collect())}), flush=True)
"""


def test_spark_reduce_by_key_through_inclib_equals_counter() -> None:
    pytest.importorskip("pyspark", reason="pyspark is in the test extra: make setup-test")
    assert shutil.which("java"), "Java is installed by make setup-test (openjdk-17-jre-headless)"
    import inclib
    from topologies.experiment import Experiment, ExperimentConfig, host_ip, host_mac, star

    cfg = ExperimentConfig(star(2), run_dir=Path("run/inclib-spark"), log=lambda s: None)
    with Experiment(cfg) as ex:
        plan = inclib.admit(
            ex.controller_url, 2, kind="ask", name="spark-lib", peers=[host_ip(1)] * 2,
            worker_ports=[1, 1], worker_macs=[host_mac(1)] * 2, agg_ip=host_ip(2),
            agg_mac=host_mac(2), reducer_port=2, rows=64, window=16,
        )  # fmt: skip
        assert plan.on_switch, plan.reason
        red = ex.start_service(
            "h2", [sys.executable, "-c", REDUCER, plan.to_json()], ready="ask reducer ready"
        )
        runs = ex.run_hosts([("h1", [sys.executable, "-c", DRIVER, plan.to_json()])], timeout=400)
        red.wait(timeout=60)
    assert runs[0].code == 0, runs[0].lines[-5:]
    # Spark's progress bar may share the line: the record follows its marker
    line = next(x for x in reversed(runs[0].lines) if "RESULT {" in x)
    rec = json.loads(line.split("RESULT ", 1)[1])
    assert rec["exact"] and rec["keys"] == 97 + 300
