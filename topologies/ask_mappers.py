"""ASK's side of its experiments: its corpora and its long-lived mapper processes.

Example (root; inside an ``Experiment`` whose hosts h1, h2 map and h3 reduces)::

    zipf_text(Path("words.txt"), 100_000, seed=1)
    with ServingMappers(ex, ["h1", "h2"], reducer_host=3) as ask:   # started once
        rec = ask.word_count(Path("words.txt"), rows=1024, window=64, chunk=1 << 20,
                             run_dir=ex.run_dir)
        assert rec["ask_exact"]

Shared by ``topologies/ask.py`` (one host, local Spark) and ``topologies/ask_cluster.py``
(a Spark cluster).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hosts.ask.control import read_record
from topologies.experiment import Experiment, ExperimentError, host_ip, host_mac

CORPUS_DIR = Path("/usr/share/common-licenses")


def zipf_text(path: Path, words: int, seed: int, vocab: int = 5000, alpha: float = 1.1) -> None:
    """``words`` words drawn from a Zipf(alpha) law over ``vocab`` words, 16 per line."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = ranks**-alpha
    p /= p.sum()
    idx = rng.choice(vocab, size=words, p=p)
    names = np.array([f"w{i}" for i in range(vocab)])
    toks = names[idx]
    with open(path, "w") as f:
        for i in range(0, words, 16):
            f.write(" ".join(toks[i : i + 16].tolist()) + "\n")


def licence_text(min_words: int) -> str:
    """The licence texts Debian's base-files ships (``/usr/share/common-licenses``), real
    English text, repeated to at least ``min_words`` words."""
    parts = [p.read_text(errors="replace") for p in sorted(CORPUS_DIR.glob("*")) if p.is_file()]
    text = "\n".join(parts)
    n = max(1, len(text.split()))
    return "\n".join([text] * (min_words // n + 1))


def zipf_table(path: Path, rows: int, seed: int, keys: int = 2000, alpha: float = 1.2) -> None:
    """A CSV table ``k,v`` of ``rows`` rows: keys Zipf(alpha) over ``keys`` ints, values
    uniform in [-1000, 1000]."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ks = (rng.zipf(alpha, size=rows) - 1) % keys
    vs = rng.integers(-1000, 1001, size=rows)
    with open(path, "w") as f:
        f.write("k,v\n")
        f.writelines(f"{k},{v}\n" for k, v in zip(ks.tolist(), vs.tolist(), strict=True))


class ServingMappers:
    """Long-lived ASK processes: mapper ``i`` on ``hosts[i]`` (``hosts.ask.run mapper
    --serve``) and the reducer on ``h{reducer_host}`` (``reducer --serve``), started once
    (``startup_s``: interpreters and imports, paid once as a Spark session's start is),
    then given one job after another (``word_count``), as Spark's executors run one query
    after another."""

    def __init__(self, ex: Experiment, hosts: list[str], reducer_host: int) -> None:
        self.ex, self.hosts, self.reducer_host = ex, hosts, reducer_host
        self.procs: list[Any] = []
        self.reducer: Any = None
        self.reducer_log = ex.logs / f"h{reducer_host}-ask-reducer.log"
        self.startup_s = 0.0
        self.jobs = 0

    def __enter__(self) -> ServingMappers:
        base = [sys.executable, "-m", "hosts.ask.run"]
        ctl = ["--controller", self.ex.controller_url, "--serve"]
        t0 = time.perf_counter()
        try:
            with open(self.reducer_log, "wb") as f:
                self.reducer = self.ex.popen(f"h{self.reducer_host}", [*base, "reducer", *ctl],
                                             stdin=subprocess.PIPE, stdout=f)  # fmt: skip
            for h in self.hosts:
                self.procs.append(self.ex.popen(h, [*base, "mapper", *ctl], stdin=subprocess.PIPE))
            for p in self.procs:
                line = p.stdout.readline().decode(errors="replace")
                if "ask mapper serving" not in line:
                    raise ExperimentError(f"ASK mapper did not start: {line.strip()}")
            self._wait_reducer("ask reducer serving", 1)
        except BaseException:
            self.__exit__()
            raise
        self.startup_s = time.perf_counter() - t0
        return self

    def __exit__(self, *exc: object) -> None:
        for p in [*self.procs, *([self.reducer] if self.reducer else [])]:
            if p.stdin and not p.stdin.closed:
                p.stdin.close()
            self.ex.stop(p)

    def _wait_reducer(self, marker: str, count: int, timeout: float = 60.0) -> None:
        """Until the reducer's log shows ``marker`` ``count`` times."""
        end = time.monotonic() + timeout
        while self.reducer_log.read_bytes().count(marker.encode()) < count:
            if self.reducer.poll() is not None or time.monotonic() > end:
                tail = self.reducer_log.read_text(errors="replace")[-400:]
                raise ExperimentError(f"the ASK reducer did not say {marker!r}: {tail}")
            time.sleep(0.005)

    def word_count(
        self, text: Path, rows: int, window: int, chunk: int, run_dir: Path
    ) -> dict[str, Any]:
        """ASK's word count of ``text`` (mapper ``i`` reads split ``i``) on the running
        processes: the job admitted and given to the reducer until it is ready
        (``ask_setup_s``), then timed from giving the job to the mappers (each fetches its
        configuration and connects: their start-up for the job is inside) until each says
        it is done, once the reducer holds the result (``ask_s``)."""
        ex, n = self.ex, len(self.procs)
        ports = [int(h[1:]) for h in self.hosts]
        red = self.reducer_host
        t_setup = time.perf_counter()
        job = ex.api.submit({
            "kind": "ask", "name": "ask-wordcount", "workers": n, "rows": rows,
            "window": window, "worker_ports": ports,
            "worker_ips": [host_ip(p) for p in ports], "worker_macs": [host_mac(p) for p in ports],
            "agg_ip": host_ip(red), "agg_mac": host_mac(red), "reducer_port": red,
        })  # fmt: skip
        jid = int(job["job_id"])
        result = (run_dir / f"ask-result-{jid}.json").resolve()
        result.unlink(missing_ok=True)
        self.reducer.stdin.write(json.dumps({"job_id": jid, "out": str(result)}).encode() + b"\n")
        self.reducer.stdin.flush()
        self.jobs += 1
        self._wait_reducer("ask reducer ready", self.jobs)
        t0 = time.perf_counter()
        for i, p in enumerate(self.procs):
            job_line = {"job_id": jid, "worker_id": i, "input": str(text.resolve()),
                        "split": [i, n], "chunk": chunk}  # fmt: skip
            p.stdin.write(json.dumps(job_line).encode() + b"\n")
            p.stdin.flush()
        runs = []
        for p in self.procs:
            line = p.stdout.readline().decode(errors="replace")
            if not line.startswith('{"done"'):
                raise ExperimentError(f"ASK mapper failed: {line.strip()}")
            runs.append(json.loads(line)["stats"])
        elapsed = time.perf_counter() - t0
        self._wait_reducer('{"done": ', self.jobs)
        ex.api.cancel(jid)
        rec = read_record(result)
        reference = Counter(text.read_text(encoding="utf-8", errors="replace").split())
        return {"ask_s": elapsed, "ask_setup_s": t0 - t_setup, "ask_startup_s": self.startup_s,
                "ask_exact": Counter(rec["result"]) == reference,
                "ask_stats": {"reducer": rec["reducer"], "mappers": rec["mappers"],
                              "mapper_runs": runs}}  # fmt: skip
