"""ASK word count on Mininet: M mapper hosts, one reducer host, one switch.

Example (root)::

    python -m topologies.ask run                        # 2 mappers, generated Zipf text
    python -m topologies.ask run --mappers 3 --words 200000 --swap-s 1 --loss 0.01
    python -m topologies.ask spark      # PySpark's word count, its reduceByKey via the switch,
                                        # and ASK's own word count of the same file
    python -m topologies.ask groupby    # GROUP BY k SUM(v), COUNT(*): Spark vs the switch
    python -m topologies.ask cluster --executors 4 --words 10000000 --bw 100
                                        # both on a Spark standalone cluster on Mininet
                                        # (topologies/ask_cluster.py)

Network (``topologies/experiment.py``): ``star(M + 1)``, mappers ``h1..hM``, the reducer
``h{M+1}``; the daemon admits one job of kind ``ask`` (``controller/systems/ask.py``). Each mapper
(``python -m hosts.ask.run mapper``) reads its own text file and sends its words through the
switch; the reducer (``python -m hosts.ask.run reducer``) drains the array and writes the
counts. The result is compared with ``collections.Counter`` over the same files, and the
record goes to ``results/ask.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hosts.ask.control import read_record
from topologies.ask_cluster import TABLE_KEYS
from topologies.ask_mappers import ServingMappers, licence_text, zipf_table, zipf_text
from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    host_ip,
    host_mac,
    main_guard,
    star,
)
from topologies.impair_relay import Impairment

__all__ = ["ServingMappers", "licence_text", "main", "run", "run_spark", "zipf_table", "zipf_text"]

RUN_DIR = Path("run/ask")


def run(
    mappers: int = 2, words: int = 20000, rows: int = 256, window: int = 16, swap_s: float = 0.0,
    hot: int = 0, tuples: int = 16, loss: float = 0.0, run_dir: Path = RUN_DIR,
    inputs: list[Path] | None = None, log: Any = print, timeout: float = 600.0,
) -> dict[str, Any]:  # fmt: skip
    run_dir.mkdir(parents=True, exist_ok=True)
    if inputs is None:
        inputs = []
        for w in range(mappers):
            path = run_dir / f"words{w}.txt"
            zipf_text(path, words, seed=w + 1)
            inputs.append(path)
    reference: Counter[str] = Counter()
    for path in inputs:
        reference.update(path.read_text().split())
    imp = Impairment(loss=loss, dup=loss, reorder=loss, seed=7) if loss else None
    cfg = ExperimentConfig(star(mappers + 1), run_dir=run_dir, impairment=imp, log=log)
    reducer = mappers + 1
    with Experiment(cfg) as ex:
        hosts = list(range(1, mappers + 1))
        job = ex.api.submit({
            "kind": "ask", "name": "wordcount", "workers": mappers, "rows": rows,
            "window": window, "worker_ports": hosts,
            "worker_ips": [host_ip(h) for h in hosts], "worker_macs": [host_mac(h) for h in hosts],
            "agg_ip": host_ip(reducer), "agg_mac": host_mac(reducer), "reducer_port": reducer,
        })  # fmt: skip
        jid = int(job["job_id"])
        out = run_dir / "result.json"
        base = [sys.executable, "-m", "hosts.ask.run"]
        ctl = ["--controller", ex.controller_url, "--job-id", str(jid)]
        ex.start_service(
            f"h{reducer}",
            [*base, "reducer", *ctl, "--out", str(out.resolve()), "--swap-s", str(swap_s)],
            ready="ask reducer ready",
        )
        t0 = time.perf_counter()
        procs = []
        for h in hosts:
            words_file = str(inputs[h - 1].resolve())
            cmd = [*base, "mapper", *ctl, "--worker-id", str(h - 1), "--input", words_file,
                   "--hot", str(hot), "--tuples", str(tuples)]  # fmt: skip
            with open(ex.logs / f"h{h}.log", "wb") as f:
                procs.append((h, ex.popen(f"h{h}", cmd, stdout=f, stderr=subprocess.STDOUT)))
        end = time.monotonic() + timeout
        for h, p in procs:
            try:
                code = p.wait(timeout=max(end - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log(json.dumps(ex.drop_counters("s1")))
                raise ExperimentError(f"mapper h{h} still running after {timeout:g} s") from None
            if code != 0:
                tail = (ex.logs / f"h{h}.log").read_text().strip().splitlines()[-3:]
                raise ExperimentError(f"mapper h{h} failed: {' | '.join(tail)}")
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not out.exists():
            raise ExperimentError("the reducer wrote no result")
        elapsed = time.perf_counter() - t0
        drops = ex.drop_counters("s1")
    rec = read_record(out)
    result = Counter(rec["result"])
    record = {
        "mappers": mappers, "words": sum(reference.values()), "keys": len(reference),
        "exact": result == reference, "seconds": elapsed, "epochs": rec["epochs"],
        "reducer": rec["reducer"], "mappers_stats": rec["mappers"], "drops": drops,
    }  # fmt: skip
    return record


def run_spark(
    partitions: int = 2, words: int = 20000, rows: int = 1024, window: int = 64,
    run_dir: Path = RUN_DIR / "spark", log: Any = print, timeout: float = 600.0,
    corpus: Path | None = None, query: str = "wordcount", standalone: bool = False,
    ask_rows: int = 256, ask_chunk: int = 1 << 20,
) -> dict[str, Any]:  # fmt: skip
    """PySpark (local mode) on ``h1``, its ``reduceByKey`` through the switch to the reducer
    on ``h2``, beside Spark's own RDD and DataFrame word counts on the same file; with
    ``query="groupby"``, ``GROUP BY k SUM(v), COUNT(*)`` over a generated table of ``words``
    rows per partition, Spark's DataFrame ``groupBy().agg()`` beside the same DataFrame
    through the switch.

    ``standalone`` (word count): then, in the same network, the ASK word count on its own
    (``topologies/ask_mappers.py``, ``ServingMappers``): ``partitions`` long-lived mapper
    processes on ``h1`` and a long-lived reducer on ``h2`` (``hosts.ask.run mapper|reducer
    --serve``), mapper ``i`` reading split ``i`` of the same file (Spark's byte ranges) and
    combining about ``ask_chunk`` words at a time, the job with ``ask_rows`` rows; its
    admission and the reducer taking it (``ask_setup_s``), then timed, as Spark's jobs in
    its running session, from giving the job to the running mappers (each then fetches its
    configuration and connects) until each says it is done, once the reducer holds the
    result (``ask_s``, ``ask_exact``); the processes' own start (interpreters, imports),
    paid once as a Spark session's is (``session_s``), is ``ask_startup_s``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    text = corpus or run_dir / ("table.csv" if query == "groupby" else "words.txt")
    if corpus is None and query == "groupby":
        zipf_table(text, words * partitions, seed=12)
    elif corpus is None:
        zipf_text(text, words * partitions, seed=11)
    cfg = ExperimentConfig(star(2), run_dir=run_dir, log=log)
    with Experiment(cfg) as ex:
        job = ex.api.submit({
            "kind": "ask", "name": "spark-wordcount", "workers": partitions, "rows": rows,
            "window": window, "worker_ports": [1] * partitions,
            "worker_ips": [host_ip(1)] * partitions, "worker_macs": [host_mac(1)] * partitions,
            "agg_ip": host_ip(2), "agg_mac": host_mac(2), "reducer_port": 2,
        })  # fmt: skip
        jid = int(job["job_id"])
        ctl = ["--controller", ex.controller_url, "--job-id", str(jid)]
        ex.start_service(
            "h2", [sys.executable, "-m", "hosts.ask.run", "reducer", *ctl],
            ready="ask reducer ready",
        )  # fmt: skip
        out = (run_dir / "spark.json").resolve()
        cmd = [sys.executable, "-m", "hosts.ask.spark", "--query", query,
               "--input", str(text.resolve()),
               "--partitions", str(partitions), *ctl, "--reducer-ip", host_ip(2),
               "--out", str(out)]  # fmt: skip
        with open(ex.logs / "h1.log", "wb") as f:
            p = ex.popen("h1", cmd, stdout=f, stderr=subprocess.STDOUT)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ExperimentError(f"the Spark job still runs after {timeout:g} s") from None
        if code != 0 and not out.exists():
            tail = (ex.logs / "h1.log").read_text().strip().splitlines()[-5:]
            raise ExperimentError(f"the Spark job failed: {' | '.join(tail)}")
        standalone_rec = (
            _standalone(ex, text, partitions, ask_rows, window, ask_chunk, run_dir, timeout)
            if standalone
            else {}
        )
    rec: dict[str, Any] = json.loads(out.read_text())
    rec.update(standalone_rec)
    return rec


def _standalone(
    ex: Experiment, text: Path, mappers: int, rows: int, window: int, chunk: int,
    run_dir: Path, timeout: float,
) -> dict[str, Any]:  # fmt: skip
    """``run_spark``'s standalone ASK word count (see there), in experiment ``ex``."""
    with ServingMappers(ex, ["h1"] * mappers, reducer_host=2) as serving:
        return serving.word_count(text, rows, window, chunk, run_dir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m topologies.ask", description=__doc__)
    ap.add_argument("cmd", choices=["run", "spark", "groupby", "cluster"])
    ap.add_argument("--partitions", type=int, default=2, help="spark: RDD partitions")
    ap.add_argument("--mappers", type=int, default=2)
    ap.add_argument("--words", type=int, default=20000, help="words per mapper (Zipf)")
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--swap-s", type=float, default=0.0)
    ap.add_argument("--hot", type=int, default=0)
    ap.add_argument("--loss", type=float, default=0.0, help="loss = dup = reorder rate")
    ap.add_argument("--executors", type=int, default=2, help="cluster: Spark workers")
    ap.add_argument("--bw", type=float, default=100.0, help="cluster: link rate, Mbit/s")
    ap.add_argument(
        "--corpus",
        choices=["zipf", "licences"],
        default="zipf",
        help="cluster: generated Zipf text or Debian's licences, repeated",
    )
    ap.add_argument(
        "--table-keys",
        type=int,
        default=TABLE_KEYS,
        help="cluster: the GROUP BY table's keys (Zipf over so many ints)",
    )
    ap.add_argument(
        "--jobs",
        default="wordcount,groupby",
        help="cluster: which jobs (wordcount, groupby), comma-separated",
    )
    a = ap.parse_args(argv)
    if a.cmd == "cluster":  # --words: words in all (Zipf), rows of the GROUP BY table
        from topologies.ask_cluster import cluster_main

        return cluster_main(a)

    def go() -> int:
        if a.cmd in ("spark", "groupby"):
            query = "groupby" if a.cmd == "groupby" else "wordcount"
            srec = run_spark(a.partitions, a.words, max(a.rows, 1024), query=query,
                             standalone=query == "wordcount")  # fmt: skip
            Path("results").mkdir(exist_ok=True)
            Path(f"results/ask_{a.cmd}.json").write_text(json.dumps(srec, indent=1))
            print(json.dumps({k: v for k, v in srec.items() if not k.endswith("_stats")}))
            return 0 if all(v for k, v in srec.items() if k.endswith("_exact")) else 1
        rec = run(a.mappers, a.words, a.rows, swap_s=a.swap_s, hot=a.hot, loss=a.loss)
        Path("results").mkdir(exist_ok=True)
        Path("results/ask.json").write_text(json.dumps(rec, indent=1))
        print(f"ASK word count: {rec['words']} words, {rec['keys']} keys, exact={rec['exact']},"
              f" {rec['seconds']:.2f} s, {rec['epochs']} epochs")  # fmt: skip
        return 0 if rec["exact"] else 1

    return main_guard("topologies.ask", go)


if __name__ == "__main__":
    random.seed(0)
    sys.exit(main())
