"""Pipelined replicated-log client: many appends in flight, every commit recorded.

Example (``topologies/consensus.py`` runs one per client host)::

    python -m hosts.consensus.pipelined_client --controller unix:run/d.sock --job-id 1 \\
        --worker-id 0 --count 20000 --window 32 --sequencer switch --history c0.json

The requests are those of ``hosts/consensus/log_client.py`` (``LogClient.append``),
built before the first send, append ``i`` carrying the data ``c<worker>-<first id>-<i>``, sent
through ``hosts/transport/request_window.py`` with up to ``window`` in flight: to the
group address (``--sequencer switch``) or to the leader with ``FALLBACK`` (``host``). An
append is committed when the client holds the answers of the leader of a view and ``f``
others of that view for one (session, index), as in ``LogClient``.

The history (``--history``, JSON): per committed append the client, request id, data,
session, log index, and its invocation and commit times. ``hosts/consensus/log_check.py``
checks it against the replicas' logs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from hosts.consensus.log_client import LogConfig
from hosts.consensus.log_wire import LEADER, LogError, count_vote, encode_data, udp_socket
from hosts.transport.request_window import RequestWindow
from wire.header import SLOTS, Flag, Header, Op, pack
from wire.serial import wrap

_REPLY = struct.Struct(
    "!BBHBxBxIIII"
)  # op, flags, job, worker, slot_count, psn, idx, epoch, bitmap
_CONSENSUS, _RESULT = int(Op.CONSENSUS), int(Flag.RESULT)


class PipelinedLogClient:
    """One client's ``count`` appends (``run``), its commits afterwards (``history``)."""

    def __init__(self, config: LogConfig, count: int, window: int) -> None:
        if count < 1 or window < 1:
            raise LogError("count and window must be positive")
        self.config, self.count = config, count
        self.sock = udp_socket(config.port, ip=config.ip)
        self.first_id = wrap(int(time.time() * 1000) << 8)
        # unique per append across runs too (the first id comes from the clock)
        self.data = [f"c{config.worker_id}-{self.first_id:x}-{i}".encode() for i in range(count)]
        self.n = len(config.replicas)
        self.votes: list[dict[tuple[int, int, int], int]] = [{} for _ in range(count)]
        self.session = [0] * count
        self.index = [-1] * count
        dest = config.replicas[LEADER] if config.host_sequencer else config.group_ip
        flags = Flag.FALLBACK if config.host_sequencer else Flag.NONE
        payloads = [
            pack(Header(op=Op.CONSENSUS, flags=flags, job_id=config.job_id,
                        worker_id=config.worker_id, psn=wrap(self.first_id + i)),
                 encode_data(d))
            for i, d in enumerate(self.data)
        ]  # fmt: skip
        self.window = RequestWindow(
            socket.socket(fileno=os.dup(self.sock.fileno())),
            payloads,
            (dest, config.port),
            self.first_id,
            self._on_reply,
            window=window,
            rto=config.rto,
            max_rto=0.5,
            tries=config.tries,
            source=frozenset((ip, config.port) for ip in config.replicas),  # replicas only
        )

    def _on_reply(self, i: int, data: bytes) -> bool:
        if len(data) < _REPLY.size:
            return False
        op, flags, job, _, count, _, idx, epoch, bitmap = _REPLY.unpack_from(data)
        if op != _CONSENSUS or not flags & _RESULT or job != self.config.job_id or count != SLOTS:
            return False
        if count_vote(self.votes[i], epoch, idx, bitmap, self.n):
            self.session[i], self.index[i] = epoch, idx
            self.votes[i] = {}
            return True
        return False

    def run(self) -> dict[str, Any]:
        cpu = time.process_time()
        self.window.run()
        cpu = time.process_time() - cpu
        w = self.window
        ok = w.done()
        lat = w.latencies()
        began, ended = float(np.nanmin(w.start)), float(np.nanmax(w.end))
        return {
            "appends": int(ok.sum()), "cpu_s": cpu, "began": began, "ended": ended,
            "ops_per_s": float(ok.sum() / (ended - began)) if ended > began else 0.0,
            "p50_us": float(np.percentile(lat, 50) * 1e6) if lat.size else None,
            "p99_us": float(np.percentile(lat, 99) * 1e6) if lat.size else None,
            "retransmissions": w.retransmissions, "given_up": w.given_up,
        }  # fmt: skip

    def history(self) -> list[list[Any]]:
        """[client, request id, data, session, index, start, end] of each committed append."""
        w, c = self.window, self.config.worker_id
        return [
            [c, wrap(self.first_id + i), self.data[i].decode(), int(self.session[i]),
             int(self.index[i]), float(w.start[i]), float(w.end[i])]
            for i in np.flatnonzero(w.done()).tolist()
        ]  # fmt: skip

    def close(self) -> None:
        self.window.sock.close()
        self.sock.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hosts.consensus.pipelined_client", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--controller", required=True, help="the daemon's URL (unix:PATH)")
    ap.add_argument("--job-id", type=int, required=True)
    ap.add_argument("--worker-id", type=int, required=True)
    ap.add_argument("--sequencer", choices=("switch", "host"), default="switch")
    ap.add_argument("--count", type=int, default=10000, help="appends")
    ap.add_argument("--window", type=int, default=32, help="appends in flight")
    ap.add_argument("--start-at", type=float, default=None, help="monotonic time to begin")
    ap.add_argument("--history", type=Path, default=None, help="write the commits here (JSON)")
    a = ap.parse_args(argv)
    try:
        cfg = LogConfig.from_controller(a.controller, a.job_id, a.worker_id, a.sequencer == "host")
        client = PipelinedLogClient(cfg, a.count, a.window)
        try:
            if a.start_at is not None:
                time.sleep(max(0.0, a.start_at - time.monotonic()))
            out = client.run()
            if a.history is not None:
                a.history.write_text(json.dumps(client.history()))
        finally:
            client.close()
        print(json.dumps(out), flush=True)
        return 0
    except (LogError, OSError, KeyError) as err:
        print(f"consensus client: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
