"""Pipelined key-value client: many requests in flight, every operation recorded.

Example (``topologies/kv_cache.py`` runs one per client host)::

    python -m hosts.kv.pipelined_client --controller unix:run/d.sock --job-id 1 \\
        --worker-id 0 --count 20000 --window 32 --write-share 0.05 --history h0.npz

The workload is drawn before the first send: ``count`` keys from Zipf(``alpha``) over
``keys`` keys, each request a write with probability ``write_share``, else a read. Request
payloads are built at once with numpy (the packets of ``hosts/kv/store.py``: slot 0 the
key, slots 1..8 the value), and sent through ``hosts/transport/request_window.py`` with up
to ``window`` in flight. A write's value is a tag unique to (client, request), all eight
words the same, so a read names the write it saw (a torn value would show mixed words).

The history (``--history``, numpy ``.npz``) holds per operation: key, write or read, the tag
written, the version and first value word returned, whether all eight words agreed,
whether the switch answered, and the invocation (first send) and response times on the
monotonic clock every Mininet host shares. ``hosts/kv/linearizability.py`` checks it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hosts.kv.store import KvConfig, KvError, reply_refused, zipf_keys
from hosts.transport.request_window import RequestWindow
from hosts.transport.udp import Endpoint
from wire.header import (
    HEADER_LEN,
    KV_ANSWERED_BY_SWITCH,
    KV_VALUE_WORDS,
    SLOTS,
    Flag,
    HostDrop,
    Op,
)
from wire.serial import wrap

_REPLY = struct.Struct(
    "!BBHBxBxIIII"
)  # op, flags, job, worker, slot_count, psn, idx, epoch, bitmap
_WORD = struct.Struct("!i")
_KEY = struct.Struct("!I")
_READ, _WRITE, _RESULT = int(Op.KV_READ), int(Op.KV_WRITE), int(Flag.RESULT)
_VALUE = slice(HEADER_LEN + 4, HEADER_LEN + 4 * (1 + KV_VALUE_WORDS))
TAG_BITS = 22  # a write's tag: (client + 1) << TAG_BITS | request number


@dataclass(frozen=True)
class Workload:
    count: int
    keys: int = 1000
    alpha: float = 0.99
    write_share: float = 0.0
    window: int = 32
    seed: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or self.count >= 1 << TAG_BITS:
            raise KvError(f"count must be in [1, {1 << TAG_BITS}), got {self.count}")
        if not 0.0 <= self.write_share <= 1.0:
            raise KvError(f"write share must be in [0, 1], got {self.write_share}")
        if self.window < 1 or self.keys < 1 or not self.alpha > 0:
            raise KvError("window, keys and alpha must be positive")


def tag(worker_id: int, i: Any) -> Any:
    """The value client ``worker_id`` writes in its request ``i`` (int or numpy array)."""
    return ((worker_id + 1) << TAG_BITS) | i


class PipelinedKvClient:
    """One client's run of a workload (``run``), its history afterwards (``history``)."""

    def __init__(self, config: KvConfig, work: Workload, endpoint: Endpoint | None = None):
        self.config, self.work = config, work
        self.endpoint = endpoint or Endpoint(("0.0.0.0", config.port))
        n = work.count
        rng = np.random.default_rng(work.seed)
        self.keys = zipf_keys(work.keys, work.alpha, n, work.seed)
        self.is_write = rng.random(n) < work.write_share
        self.tags = np.where(self.is_write, tag(config.worker_id, np.arange(n)), 0)
        self.first_id = wrap(int(time.time() * 1000) << 8)
        self.writes = self.is_write.tolist()
        self.keys_list = self.keys.tolist()
        self.version = [0] * n  # lists: a reply's fields cost less to store than in numpy
        self.value = [0] * n
        self.whole = [False] * n
        self.cached = [False] * n
        self.window = RequestWindow(
            socket.socket(fileno=os.dup(self.endpoint.fileno())),
            self._payloads(),
            (config.server_ip, config.port),
            self.first_id,
            self._on_reply,
            window=work.window,
            rto=config.rto,
            tries=config.tries,
            retx_flag=int(Flag.RETX),
            timed=self._from_server,
            source=(config.server_ip, config.port),
        )

    def _payloads(self) -> list[bytes]:
        n, c = self.work.count, self.config
        words = np.zeros((n, (HEADER_LEN + SLOTS * 4) // 4), dtype=">u4")
        ops = np.where(self.is_write, int(Op.KV_WRITE), int(Op.KV_READ)).astype(np.uint32)
        words[:, 0] = (ops << 24) | c.job_id
        words[:, 1] = (c.worker_id << 24) | (SLOTS << 8)
        words[:, 2] = (self.first_id + np.arange(n, dtype=np.uint64)) & 0xFFFFFFFF
        words[:, 6] = self.keys
        words[:, 7 : 7 + KV_VALUE_WORDS] = self.tags[:, None].astype(np.uint32)
        return [row.tobytes() for row in words]

    def _from_server(self, i: int) -> bool:
        """Whether request ``i``'s answer came from the server: its round trip is what a
        resend timeout must outlast (a hit's says nothing of the server's queue)."""
        return not self.cached[i]

    def _on_reply(self, i: int, data: bytes) -> bool:
        """Whether ``data`` answers request ``i`` (``hosts/kv/store.py``'s checks, each drop
        counted in the window's ``drops``)."""
        reason = self._refuse(i, data)
        if reason is not None:
            self.window.drops[reason] += 1
            return False
        _, _, _, _, _, _, _, epoch, version = _REPLY.unpack_from(data)
        value = data[_VALUE]
        self.version[i] = version
        self.value[i] = _WORD.unpack_from(value)[0]
        self.whole[i] = value == value[:4] * KV_VALUE_WORDS
        self.cached[i] = epoch == KV_ANSWERED_BY_SWITCH
        return True

    def _refuse(self, i: int, data: bytes) -> HostDrop | None:
        if len(data) < HEADER_LEN:
            return HostDrop.MALFORMED
        op, flags, job, worker, count, _, _, _, _ = _REPLY.unpack_from(data)
        reason = reply_refused(op, flags, job, worker, count, self.config)
        if reason is not None:
            return reason
        if len(data) < HEADER_LEN + SLOTS * 4:
            return HostDrop.MALFORMED
        want = _WRITE if self.writes[i] else _READ
        if op != want or _KEY.unpack_from(data, HEADER_LEN)[0] != self.keys_list[i]:
            return HostDrop.NOT_IN_FLIGHT
        return None

    def run(self) -> dict[str, Any]:
        cpu = time.process_time()
        self.window.run()
        cpu = time.process_time() - cpu
        w = self.window
        ok = w.done()
        lat = w.latencies()
        began, ended = float(np.nanmin(w.start)), float(np.nanmax(w.end))
        return {
            "ops": int(ok.sum()), "writes": int((ok & self.is_write).sum()),
            "cpu_s": cpu,
            "began": began, "ended": ended,
            "ops_per_s": float(ok.sum() / (ended - began)) if ended > began else 0.0,
            "p50_us": float(np.percentile(lat, 50) * 1e6) if lat.size else None,
            "p99_us": float(np.percentile(lat, 99) * 1e6) if lat.size else None,
            "cached": int((ok & np.array(self.cached)).sum()), "retransmissions": w.retransmissions,
            "given_up": w.given_up, "max_in_flight": w.max_in_flight,
        }  # fmt: skip

    def history(self) -> dict[str, np.ndarray]:
        w = self.window
        return {
            "client": np.full(self.work.count, self.config.worker_id, dtype=np.int64),
            "key": self.keys.astype(np.int64), "write": self.is_write, "tag": self.tags,
            "version": np.array(self.version, dtype=np.int64),
            "value": np.array(self.value, dtype=np.int64), "whole": np.array(self.whole),
            "cached": np.array(self.cached), "start": np.array(w.start), "end": np.array(w.end),
            "done": w.done(),
        }  # fmt: skip

    def close(self) -> None:
        self.window.sock.close()
        self.endpoint.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hosts.kv.pipelined_client", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--controller", required=True, help="the daemon's URL (unix:PATH)")
    ap.add_argument("--job-id", type=int, required=True)
    ap.add_argument("--worker-id", type=int, required=True)
    ap.add_argument("--count", type=int, default=10000, help="operations")
    ap.add_argument("--window", type=int, default=32, help="requests in flight")
    ap.add_argument("--write-share", type=float, default=0.0)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.99, help="Zipf exponent")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start-at", type=float, default=None, help="monotonic time to begin")
    ap.add_argument("--history", type=Path, default=None, help="write the history here (.npz)")
    a = ap.parse_args(argv)
    try:
        work = Workload(a.count, a.keys, a.alpha, a.write_share, a.window, a.seed)
        client = PipelinedKvClient(
            KvConfig.from_controller(a.controller, a.job_id, a.worker_id), work
        )
        try:
            if a.start_at is not None:
                time.sleep(max(0.0, a.start_at - time.monotonic()))
            out = client.run()
            if a.history is not None:
                hist: dict[str, Any] = client.history()
                np.savez(a.history, **hist)
        finally:
            client.close()
        print(json.dumps(out), flush=True)
        return 0
    except (KvError, OSError) as err:
        print(f"kv_client: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
