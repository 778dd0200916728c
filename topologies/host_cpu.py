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
budget: that host is the bottleneck (``stat``).

The
clients of a measured pass join their budget just before the pass starts (``join_after``):
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
import time
from pathlib import Path
from typing import Any

PERIOD_US = 10_000  # a short CFS period: a throttled host waits ~10 ms, not 100
MIN_QUOTA_US = 1_000  # the kernel's smallest quota; smaller shares get longer periods


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
        return self

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
        """``periods``, ``throttled`` (periods that hit the quota) so far."""
        fields = dict(
            line.split() for line in (self.group(host) / "cpu.stat").read_text().splitlines()
        )
        return {"periods": float(fields.get("nr_periods", 0)),
                "throttled": float(fields.get("nr_throttled", 0))}  # fmt: skip

    def __exit__(self, *exc: Any) -> None:
        for g in self.groups.values():
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


def throttled_share(before: dict[str, float], after: dict[str, float]) -> float:
    """The share of a pass's CFS periods in which the host used its whole budget."""
    periods = after["periods"] - before["periods"]
    return (after["throttled"] - before["throttled"]) / periods if periods > 0 else 0.0


def budgets(share: float) -> Any:
    """Every host's CPU budget for a run (``share`` 0: none, a context yielding None)."""
    return HostCpu(share) if share > 0 else contextlib.nullcontext(None)


def in_budget(cpu: HostCpu | None, host: str, cmd: list[str], join_after: float = 0.0) -> list[str]:
    return cmd if cpu is None else cpu.wrap(host, cmd, join_after)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (``/proc/PID/stat``, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runqueue_wait_seconds(pid: int) -> float:
    """Time a process's main thread has spent runnable but waiting for a CPU
    (``/proc/PID/schedstat``, field 2): a process that needs CPU and waits long for it is
    held back by the machine's other load, however little CPU it shows."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
