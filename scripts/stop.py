"""`make stop`: stop what `make run` started, by the PIDs it recorded, and remove the
interfaces it created. Never kills by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

RUN = Path("run")
OURS = (b"p4sim", b"mininet:", b"simple_switch", b"topologies.", b"hosts.", b"controller.")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _stop_pid(pid: int) -> bool:
    """SIGTERM, then SIGKILL after 5 s; only for processes that look like ours (PIDs can be
    reused after a reboot or a long time)."""
    cmd = _cmdline(pid)
    if not cmd or not any(tag in cmd for tag in OURS):
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(50):
        if not _cmdline(pid):
            return True
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def main() -> int:
    pids: set[int] = set()
    intfs: list[str] = []
    nft_tables: list[str] = []
    for state in RUN.glob("**/state.json"):
        try:
            data = json.loads(state.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        pids.update(int(p) for p in data.get("pids", []))
        if data.get("runner_pid"):
            pids.add(int(data["runner_pid"]))
        intfs.extend(data.get("interfaces", []))
        nft_tables.extend(data.get("nft_tables", []))
        state.unlink(missing_ok=True)
    for pidfile in RUN.glob("**/*.pid"):
        try:
            pids.add(int(pidfile.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
        pidfile.unlink(missing_ok=True)
    stopped = [p for p in sorted(pids) if _stop_pid(p)]
    removed = []
    for name in intfs:
        if Path(f"/sys/class/net/{name}").exists():
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
            removed.append(name)
    # Loss-injection tables (netdev family) outlive their interfaces: remove ours by name.
    for table in nft_tables:
        subprocess.run(["nft", "delete", "table", *table.split()], capture_output=True, check=False)
    print(
        f"stop: {len(stopped)} process(es) stopped, {len(removed)} interface(s) removed, "
        f"{len(nft_tables)} nftables table(s) removed"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
