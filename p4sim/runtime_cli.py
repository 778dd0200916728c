"""Run-time commands of a running p4sim switch in ``simple_switch_CLI``'s syntax (egress
queues), on the switch's ``--thrift-port``.

BMv2 changes queue rates and depths at run time through its Thrift runtime service
(``simple_switch_CLI``: ``set_queue_rate``, ``set_queue_depth``); P4Runtime has no message
for them. p4sim answers the same commands, one per line, on a plain TCP socket at the
``--thrift-port`` address (localhost), and ``p4sim cli`` sends them, so that a script's
``simple_switch_CLI --thrift-port 9090 < commands.txt`` becomes
``p4sim cli --thrift-port 9090 < commands.txt``::

    set_queue_rate 100 2        # port 2: at most 100 packets/s (0: no limit)
    set_queue_depth 16 2 0      # port 2, priority queue 0: 16 packets
    set_queue_rate 500          # every port

Each command gets one line back: ``ok`` or ``error: ...``. Other simple_switch_CLI commands
(tables, registers ...) are answered with an error that points to P4Runtime.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from p4sim.v1model.traffic_manager import QueueConfigError, TrafficManager

log = logging.getLogger("p4sim.runtime_cli")

USAGE = {
    "set_queue_rate": "set_queue_rate <rate_pps> [<egress_port> [<priority>]]",
    "set_queue_depth": "set_queue_depth <nb_pkts> [<egress_port> [<priority>]]",
}


def run_command(tm: TrafficManager, line: str) -> str:
    """Apply one command line to ``tm``; the answer line."""
    words = line.split()
    if not words or words[0].startswith("#"):
        return "ok"
    cmd, args = words[0], words[1:]
    if cmd not in USAGE:
        return (
            f"error: p4sim's runtime CLI has only {', '.join(USAGE)}; "
            "use P4Runtime for tables, registers, multicast and clone sessions"
        )
    if not 1 <= len(args) <= 3:
        return f"error: usage: {USAGE[cmd]}"
    try:
        nums = [int(a) for a in args]
    except ValueError:
        return f"error: {cmd} takes integers: {USAGE[cmd]}"
    value, port, prio = nums[0], *(nums[1:] + [None, None])[:2]
    try:
        if cmd == "set_queue_rate":
            tm.set_rate(value, port, prio)
        else:
            tm.set_depth(value, port, prio)
    except QueueConfigError as err:
        return f"error: {err}"
    return "ok"


def native_refusal(switch: Any, line: str) -> str | None:
    """The answer to a queue rate asked of a switch on the native back end, which has no
    egress queues (p4sim/native): an error saying how to get them; None otherwise."""
    words = line.split()
    if getattr(switch, "backend", "python") != "native" or words[:1] != ["set_queue_rate"]:
        return None
    if len(words) > 1 and words[1] == "0":
        return None  # no limit: nothing to apply
    return "error: egress queue rates need the Python back end (start p4sim --backend python)"


class RuntimeCommandServer:
    """Serves :func:`run_command` on ``127.0.0.1:port`` in a thread. ``lock()`` gives the
    lock that the packet path holds (the current switch's), so a change never lands in
    the middle of a packet."""

    def __init__(
        self,
        tm: TrafficManager,
        port: int,
        lock: Callable[[], Any],
        refuse: Callable[[str], str | None] | None = None,
    ) -> None:
        """``refuse(line)``: an error answer for a command the running switch cannot
        apply (queue rates on the native back end), or None."""
        self.tm, self.lock, self.refuse = tm, lock, refuse
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for raw in self.rfile:
                    line = raw.decode(errors="replace").strip()
                    answer = outer.refuse(line) if outer.refuse is not None else None
                    if answer is None:
                        with outer.lock():
                            answer = run_command(outer.tm, line)
                    self.wfile.write((answer + "\n").encode())

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def no_lock() -> Iterator[None]:
    yield


def client_main(argv: Sequence[str]) -> int:
    """``p4sim cli [--thrift-port N] [--host H]``: commands from stdin, answers on stdout."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="p4sim cli", description="simple_switch_CLI-style commands (egress queues)"
    )
    ap.add_argument("--thrift-port", type=int, default=9090)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args(list(argv))
    try:
        conn = socket.create_connection((args.host, args.thrift_port), timeout=10)
    except OSError as err:
        print(
            f"p4sim cli: cannot reach a switch at {args.host}:{args.thrift_port}: {err}",
            file=sys.stderr,
        )
        return 1
    failed = False
    with conn, conn.makefile("rw") as f:
        for line in sys.stdin:
            if not line.strip():
                continue
            f.write(line.rstrip("\n") + "\n")
            f.flush()
            answer = f.readline().strip()
            print(answer)
            failed |= answer.startswith("error")
    return 1 if failed else 0
