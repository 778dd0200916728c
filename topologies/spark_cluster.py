"""A Spark standalone cluster on Mininet hosts: Spark's own Master and Workers.

Example (root; inside an ``Experiment``)::

    with SparkCluster(ex, master="h3", workers=["h1", "h2"]) as cluster:
        ex.popen("h4", [sys.executable, "-c", driver, cluster.url])   # spark://10.0.0.3:7077
    assert not cluster.alive()                    # every process it started has ended

The daemons are Spark's own classes, ``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker``, started with the ``spark-class`` script PySpark
ships (its ``bin/`` and ``jars/``, ``SPARK_HOME`` = the pyspark package) on Debian's OpenJDK
17 (``JAVA_HOME``; ``java`` on the PATH otherwise). Each binds its host's address
(``SPARK_LOCAL_IP``, ``--host``), so everything between the master, the workers, their
executors and the driver, shuffle blocks included, crosses the emulated links and the
switch. A worker offers ``cores`` cores and ``memory`` to executors; the daemons' own heaps
are ``daemon_memory``. Logs, work and shuffle directories live under ``run_dir/spark``.

Stopping: ``spark-class`` execs the JVM, so the PID a host's ``popen`` returns is the
daemon's. A worker's executors (``CoarseGrainedExecutorBackend``) and their Python workers
are its children: the cluster remembers every descendant it has seen (PID and start time,
so a reused PID is never taken for one of them), stops the workers, then the master, by
PID, and then any descendant still running. ``alive()`` lists what is left (nothing, after
``stop``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from topologies.experiment import Experiment, ExperimentError, terminate

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER_PORT = 7077
START_S = 120.0


def spark_home() -> Path:
    """PySpark's own Spark distribution (``bin/spark-class``, ``jars/``)."""
    try:
        import pyspark
    except ImportError:
        raise ExperimentError("pyspark is not installed (make setup-test)") from None
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise ExperimentError(f"no bin/spark-class in {home}: a PySpark without its scripts")
    return home


def java_home() -> str:
    """Debian's OpenJDK 17 where installed (openjdk-17-jre-headless), else the ``java`` on
    the PATH."""
    debian = Path("/usr/lib/jvm/java-17-openjdk-amd64")
    if (debian / "bin" / "java").exists():
        return str(debian)
    java = shutil.which("java")
    if java is None:
        raise ExperimentError("no Java: install openjdk-17-jre-headless (make setup-test)")
    return str(Path(java).resolve().parent.parent)


def spark_env(ip: str, run_dir: Path, name: str, daemon_memory: str = "256m") -> dict[str, str]:
    """The environment of a Spark process on the host with address ``ip``."""
    base = run_dir.resolve() / "spark"
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        JAVA_HOME=java_home(),
        SPARK_LOCAL_IP=ip,
        SPARK_LOCAL_HOSTNAME=ip,
        SPARK_LOG_DIR=str(base / "logs"),
        SPARK_LOCAL_DIRS=str(base / f"local-{name}"),
        SPARK_WORKER_DIR=str(base / f"work-{name}"),
        SPARK_DAEMON_MEMORY=daemon_memory,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    for key in ("SPARK_LOCAL_DIRS", "SPARK_WORKER_DIR", "SPARK_LOG_DIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


# --- process trees ------------------------------------------------------------------------
def _stat(pid: int) -> tuple[int, int] | None:
    """(parent PID, start time in clock ticks) of ``pid``; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def descendants(pid: int) -> set[tuple[int, int]]:
    """Every process below ``pid`` now, as (PID, start time)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(st[0], []).append(int(entry.name))
    out: set[tuple[int, int]] = set()
    todo = list(children.get(pid, ()))
    while todo:
        p = todo.pop()
        if (st := _stat(p)) is not None:
            out.add((p, st[1]))
            todo.extend(children.get(p, ()))
    return out


def still_running(procs: set[tuple[int, int]]) -> list[int]:
    """The PIDs of ``procs`` still running as the same processes (same start time)."""
    out = []
    for pid, started in procs:
        st = _stat(pid)
        if st is not None and st[1] == started and not _zombie(pid):
            out.append(pid)
    return sorted(out)


def _zombie(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return text[text.rindex(")") + 2] == "Z"


def kill_all(procs: set[tuple[int, int]], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, each of ``procs`` still running (by PID, start time checked)."""
    for sig in (15, 9):
        pids = still_running(procs)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while still_running(procs) and time.monotonic() < deadline:
            time.sleep(0.05)


class Tracked:
    """Processes started here and every descendant seen so far, as (PID, start time) with
    their names (``/proc/PID/comm`` when last seen: ``spark-class`` is bash until it execs
    the JVM): what ``stop`` ends, what ``alive`` checks."""

    def __init__(self) -> None:
        self.names: dict[tuple[int, int], str] = {}

    def add(self, pid: int) -> None:
        """``pid`` and its descendants now."""
        st = _stat(pid)
        found = set(descendants(pid)) | ({(pid, st[1])} if st is not None else set())
        for proc in found:
            try:
                self.names[proc] = Path(f"/proc/{proc[0]}/comm").read_text().strip()
            except OSError:
                continue

    def alive(self) -> list[int]:
        return still_running(set(self.names))

    def kill(self) -> None:
        kill_all(set(self.names))

    def record(self) -> list[tuple[int, int, str]]:
        return sorted((pid, t, name) for (pid, t), name in self.names.items())


# --- the cluster --------------------------------------------------------------------------
class SparkCluster:
    """Spark's Master on ``master``, a Worker on each of ``workers`` (Mininet host names of
    ``ex``); a context manager that stops all of it (see the module doc)."""

    def __init__(
        self, ex: Experiment, master: str, workers: list[str], cores: int = 1,
        memory: str = "1g", daemon_memory: str = "256m",
    ) -> None:  # fmt: skip
        self.ex = ex
        self.master = master
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.procs: list[Any] = []
        self.tracked = Tracked()  # every process started here, and below

    def ip(self, host: str) -> str:
        return self.ex.layout.host(host).ip

    @property
    def url(self) -> str:
        return f"spark://{self.ip(self.master)}:{MASTER_PORT}"

    def env(self, host: str) -> dict[str, str]:
        return spark_env(self.ip(host), self.ex.run_dir, host, self.daemon_memory)

    def __enter__(self) -> SparkCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _daemon(self, host: str, cls: str, args: list[str], ready: str, name: str) -> None:
        cmd = [str(spark_home() / "bin" / "spark-class"), cls, *args]
        path = self.ex.logs / f"{name}.log"
        with open(path, "wb") as out:
            p = self.ex.popen(host, cmd, stdout=out, env=self.env(host))
        self.procs.append(p)
        self.tracked.add(p.pid)
        deadline = time.monotonic() + START_S
        while ready.encode() not in path.read_bytes():
            if p.poll() is not None or time.monotonic() > deadline:
                tail = path.read_text(errors="replace")[-1500:]
                what = "exited" if p.poll() is not None else f"not ready after {START_S:g} s"
                raise ExperimentError(f"Spark {name} on {host} {what}:\n{tail}")
            time.sleep(0.1)
        self.tracked.add(p.pid)

    def start(self) -> None:
        ip = self.ip(self.master)
        self._daemon(self.master, MASTER_CLASS,
                     ["--host", ip, "--port", str(MASTER_PORT), "--webui-port", "8080"],
                     "I have been elected leader", "spark-master")  # fmt: skip
        for i, w in enumerate(self.workers):
            args = ["--host", self.ip(w), "--cores", str(self.cores), "--memory", self.memory,
                    "--webui-port", str(8081 + i),
                    "--work-dir", self.env(w)["SPARK_WORKER_DIR"], self.url]  # fmt: skip
            self._daemon(w, WORKER_CLASS, args, "Successfully registered with master",
                         f"spark-worker-{w}")  # fmt: skip

    def watch(self) -> None:
        """Remember the processes below the daemons now (executors, Python workers): call
        while an application runs, so that ``stop`` knows them even once orphaned."""
        for p in self.procs:
            self.tracked.add(p.pid)

    def stop(self) -> None:
        self.watch()
        for p in reversed(self.procs):  # workers (and their executors) first, then the master
            terminate(p, grace=10.0)
            if p in self.ex.procs:
                self.ex.procs.remove(p)
        self.procs.clear()
        self.tracked.kill()

    def alive(self) -> list[int]:
        """PIDs of processes this cluster started (or that its daemons started) still running."""
        return self.tracked.alive()


def run_tracked(
    ex: Experiment, host: str, cmd: list[str], log: Path, timeout: float, tracked: Tracked,
    env: dict[str, str] | None = None,
) -> int:  # fmt: skip
    """Run ``cmd`` on ``host`` to its end (output to ``log``), tracking every process it
    starts (a driver's JVM), and stop what is left of them by PID; its exit status."""
    with open(log, "wb") as out:
        p = ex.popen(host, cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout
    try:
        while p.poll() is None:
            tracked.add(p.pid)
            if time.monotonic() > deadline:
                raise ExperimentError(f"{cmd[2] if len(cmd) > 2 else cmd[0]} on {host} still"
                                      f" runs after {timeout:g} s (see {log})")  # fmt: skip
            time.sleep(0.2)
        return int(p.returncode)
    finally:
        ex.stop(p)
        tracked.kill()
