"""A CPU budget per Mininet host, so that hosts behave as machines of equal size.

Example::

    with HostCpu(0.1) as cpu:                        # every host: 10 % of one core
        p = ex.popen("h3", cpu.wrap("h3", [sys.executable, "-m", "hosts.kv.store", ...]))
        ...
        cpu.stat("h3")                               # CPU seconds used, periods throttled

Mininet hosts are processes on one kernel: without a budget, every client, the server and
the switch draw from the same cores, so adding client hosts adds no capacity and the
machine, not the server, saturates. With a budget (the cgroup ``cpu`` controller, CFS
quota ``share`` x period, the idea of Mininet's ``CPULimitedHost``), ``n`` client hosts
have ``n`` times the server's CPU, as ``n`` client machines would. The switch gets no
budget: it stands for switch hardware. A host throttled in most periods used its whole
budget: that host is the bottleneck (``stat``). The hosts' parent group weighs one task per
host, so a busy machine cannot hold a host below its quota (the quotas still cap them).

What a host used is measured over a pass's span only (``Sampler``: CPU and run-queue wait
of each thread to the nanosecond, the group's CFS counters, the request socket's queue and
drops, sampled in a thread and interpolated at the span's ends). Taken from ``/proc/PID/stat``
before and after the harness's run of the clients, it once counted the clients' start-up
and the replicas' heartbeats around the pass against the pass's span, and a host at its
quota showed 126-166 % of its budget: the kernel's limit held (a busy loop and a UDP sender
both measure 100.0 %), the figure did not.

The clients of a measured pass join their budget just before the pass starts (``join_after``):
a Python process's start (imports, building its requests) is no part of the measurement.

The cgroup v1 ``cpu`` hierarchy is used where it is mounted; otherwise (inside
``scripts/netns.sh``, which remounts ``/sys``) it is mounted on a private directory for the
run and unmounted after. A process joins its host's group by a shell that writes its own
PID to the group and then runs the command (``wrap``): every child stays inside.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PERIOD_US = 10_000  # a short CFS period: a throttled host waits ~10 ms, not 100
MIN_QUOTA_US = 1_000  # the kernel's smallest quota; smaller shares get longer periods
HOST_WEIGHT = 1024  # cpu.shares of the hosts' parent group per host: see HostCpu.__enter__
MAX_SHARES = 262_144  # the kernel's largest cpu.shares
SWITCH_WEIGHT = 4  # a switch's group weighs as many hosts (HostCpu.hardware)


class HostCpuError(RuntimeError):
    """No cgroup cpu controller to limit hosts with."""


class HostCpu:
    def __init__(self, share: float) -> None:
        if not 0 < share <= 64:
            raise HostCpuError(f"a host's CPU share must be in (0, 64] cores, got {share}")
        self.share = share
        self.root: Path | None = None
        self.base: Path | None = None
        self.mounted: Path | None = None
        self.groups: dict[str, Path] = {}
        self.hardware_groups: set[str] = set()

    def __enter__(self) -> HostCpu:
        system = Path("/sys/fs/cgroup/cpu")
        if (system / "cpu.cfs_quota_us").exists():
            self.root = system
        else:
            where = Path(tempfile.mkdtemp(prefix="inc-cpu-"))
            done = subprocess.run(["mount", "-t", "cgroup", "-o", "cpu", "inc-cpu", str(where)],
                                  capture_output=True, text=True)  # fmt: skip
            if done.returncode != 0:
                where.rmdir()
                raise HostCpuError(f"cannot mount the cgroup cpu controller: {done.stderr.strip()}")
            self.root = self.mounted = where
        self.base = self.root / f"inc-hosts-{os.getpid()}"
        self.base.mkdir(exist_ok=True)
        self._weigh()
        return self

    def hardware(self, name: str, pid: int) -> None:
        """Process ``pid`` (a switch: it stands for hardware) in a group of its own with no
        quota and the weight of ``SWITCH_WEIGHT`` hosts: unlimited, but not starved by the
        machine's other load either (a niced switch in the root group waited for a CPU
        while packets queued, and every design that crosses it measured the machine)."""
        if self.base is None:
            raise HostCpuError("HostCpu used outside its with-block")
        g = self.groups[name] = self.base / name
        g.mkdir(exist_ok=True)
        (g / "cpu.shares").write_text(str(HOST_WEIGHT * SWITCH_WEIGHT))
        (g / "cgroup.procs").write_text(str(pid))
        self.hardware_groups.add(name)
        self._weigh()

    def _weigh(self) -> None:
        """The hosts' parent group weighs as many tasks as it holds hosts. Its default weight
        (1024, one task's) made every host together one task against the machine's other
        load: on a busy machine a host then got less than its quota (waited in the run
        queue), and what a design measured was the machine's load, not its budget. The
        quotas still cap each host, so the weight cannot take more than the budgets add up
        to; it only makes the budget a guarantee."""
        if self.base is not None:
            hosts = len(self.groups) + (SWITCH_WEIGHT - 1) * len(self.hardware_groups)
            shares = min(MAX_SHARES, HOST_WEIGHT * max(1, hosts))
            (self.base / "cpu.shares").write_text(str(shares))

    def group(self, host: str) -> Path:
        if self.base is None:
            raise HostCpuError("HostCpu used outside its with-block")
        g = self.groups.get(host)
        if g is None:
            g = self.groups[host] = self.base / host
            g.mkdir(exist_ok=True)
            period = max(PERIOD_US, int(MIN_QUOTA_US / self.share))
            (g / "cpu.cfs_period_us").write_text(str(period))
            (g / "cpu.cfs_quota_us").write_text(str(int(self.share * period)))
            self._weigh()
        return g

    def wrap(self, host: str, cmd: list[str], join_after: float = 0.0) -> list[str]:
        """``cmd`` run inside ``host``'s budget: from its start (its PID stays the shell's,
        which execs it), or only after ``join_after`` seconds (a client's imports and set-up
        run unlimited, its measured work within the budget; the shell waits for it, passes
        on its exit status and a SIGTERM)."""
        procs = str(self.group(host) / "cgroup.procs")
        if join_after <= 0:
            return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *cmd]
        script = ('trap \'kill $p 2>/dev/null\' TERM; "$@" & p=$!; sleep ' f"{join_after:.3f}"
                  '; echo $p > "$0" 2>/dev/null; wait $p')  # fmt: skip
        return ["sh", "-c", script, procs, *cmd]

    def stat(self, host: str) -> dict[str, float]:
        """``periods``, ``throttled`` (periods that hit the quota) and ``throttled_s``
        (seconds spent throttled) so far."""
        fields = dict(
            line.split() for line in (self.group(host) / "cpu.stat").read_text().splitlines()
        )
        return {"periods": float(fields.get("nr_periods", 0)),
                "throttled": float(fields.get("nr_throttled", 0)),
                "throttled_s": float(fields.get("throttled_time", 0)) / 1e9}  # fmt: skip

    def __exit__(self, *exc: Any) -> None:
        for name, g in self.groups.items():
            if name in self.hardware_groups and self.root is not None:
                for pid in (g / "cgroup.procs").read_text().split():  # a switch left running
                    with contextlib.suppress(OSError):
                        (self.root / "cgroup.procs").write_text(pid)
            for _ in range(50):  # the host's processes were stopped by PID; wait for them
                try:
                    g.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
        if self.base is not None:
            try:
                self.base.rmdir()
            except OSError:
                pass
        if self.mounted is not None:
            subprocess.run(["umount", str(self.mounted)], check=False)
            try:
                self.mounted.rmdir()
            except OSError:
                pass


def budgets(share: float) -> Any:
    """Every host's CPU budget for a run (``share`` 0: none, a context yielding None)."""
    return HostCpu(share) if share > 0 else contextlib.nullcontext(None)


def in_budget(cpu: HostCpu | None, host: str, cmd: list[str], join_after: float = 0.0) -> list[str]:
    return cmd if cpu is None else cpu.wrap(host, cmd, join_after)


def realtime(pid: int, priority: int = 1) -> None:
    """Every thread of process ``pid`` (a switch: it stands for hardware) under SCHED_FIFO at
    ``priority`` (1, the lowest realtime one), so that a packet that wakes it is forwarded
    at once, ahead of every ordinary task. A group's weight (``HostCpu.hardware``) is not
    that: with four hosts' weight p4sim still waited 0.2-0.7 s in the run queue in 3 s of
    a goodput run on the busy 2-core machine, without it 0.6-1.5 s, under SCHED_FIFO
    0.01-0.09 s (tests/bench/netreduce.py). The process must be in the root ``cpu`` group
    (a child group has no realtime budget); threads it starts later inherit the policy.
    Raises ``HostCpuError`` when the kernel refuses (not root)."""
    param = os.sched_param(priority)
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, param)
        except ProcessLookupError:
            continue  # a thread that ended meanwhile
        except OSError as err:
            msg = f"cannot run process {pid} at realtime priority: {err.strerror}"
            raise HostCpuError(msg) from None


def udp_queue(pid: int, port: int) -> tuple[int, int]:
    """Bytes queued to receive and datagrams dropped (full buffer) on the UDP sockets bound
    to ``port`` in the network namespace of process ``pid`` (``/proc/PID/net/udp``)."""
    queued = dropped = 0
    for line in Path(f"/proc/{pid}/net/udp").read_text().splitlines()[1:]:
        f = line.split()
        if int(f[1].rsplit(":", 1)[1], 16) == port:
            queued += int(f[4].split(":")[1], 16)
            dropped += int(f[-1])
    return queued, dropped


def task_times(pid: int) -> tuple[float, float]:
    """CPU seconds and run-queue wait seconds of all of a process's threads, to the
    nanosecond (``/proc/PID/task/*/schedstat``; ``/proc/PID/stat`` counts 10 ms ticks)."""
    run = wait = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            a, b, _ = Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # a thread that ended meanwhile
        run, wait = run + int(a), wait + int(b)
    return run / 1e9, wait / 1e9


@dataclass
class _Watched:
    pid: int
    host: str | None
    port: int | None
    times: list[float] = field(default_factory=list)
    values: list[dict[str, float]] = field(default_factory=list)


class Sampler:
    """Each watched process's CPU, run-queue wait, its host's CFS counters and its socket's
    queue, sampled every ``every`` seconds in a thread, so that a pass's figures cover
    exactly the pass (``between``) and not the processes' start or the harness's waits.

    Example::

        with Sampler(cpu) as s:
            s.watch("leader", pid, host="h7", port=INC_UDP_PORT)
            ... the pass ...
        s.between("leader", began, ended)  # {"cpu_s", "wait_s", "throttled", ...}

    Counters are interpolated linearly between the samples around ``t0`` and ``t1``; the
    queue is the mean of the samples inside the interval."""

    def __init__(self, cpu: HostCpu | None, every: float = 0.05) -> None:
        self.cpu, self.every = cpu, every
        self.watched: dict[str, _Watched] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def watch(self, name: str, pid: int, host: str | None = None, port: int | None = None) -> None:
        with self._lock:
            self.watched[name] = _Watched(pid, host, port)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()  # the last state, after the pass

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def _sample(self) -> None:
        with self._lock:
            for w in self.watched.values():
                try:
                    run, wait = task_times(w.pid)
                    v = {"cpu_s": run, "wait_s": wait}
                    if w.port is not None:
                        v["queue"], v["drops"] = map(float, udp_queue(w.pid, w.port))
                    if self.cpu is not None and w.host is not None:
                        v |= self.cpu.stat(w.host)
                except (FileNotFoundError, ProcessLookupError):
                    continue  # the process ended
                w.times.append(time.monotonic())
                w.values.append(v)

    def between(self, name: str, t0: float, t1: float) -> dict[str, float]:
        """Each counter's change over [t0, t1] (``queue``: its mean bytes there)."""
        import numpy as np

        w = self.watched[name]
        if len(w.times) < 2:
            raise HostCpuError(f"sampler: fewer than two samples of {name}")
        t = np.array(w.times)
        out = {}
        for key in w.values[0]:
            v = np.array([x[key] for x in w.values])
            if key == "queue":
                inside = v[(t >= t0) & (t <= t1)]
                out[key] = float(inside.mean()) if inside.size else float(np.interp(t0, t, v))
            else:
                out[key] = float(np.interp(t1, t, v) - np.interp(t0, t, v))
        return out
