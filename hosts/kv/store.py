"""Key-value storage server and client behind the switch's cache (``p4src/kv_cache.p4``).

Example (the client's API, what the library wraps)::

    client = KvClient(KvConfig.from_controller(url, job_id, worker_id))
    version = client.put(42, [1, 2, 3])      # up to KV_VALUE_WORDS int32 words
    client.get(42)                           # [1, 2, 3, 0, 0, 0, 0, 0]
    client.read(42).cached                   # True once the switch holds key 42

Packets (docs/protocol.md, "Key-value cache"): op ``KV_READ``/``KV_WRITE``, ``K`` slots:
slot 0 the key, slots 1..``KV_VALUE_WORDS`` the value; ``psn`` the client's request id,
``bitmap`` the version of the value (replies), ``agg_idx`` the switch's cache stamp, which
the server echoes. The client has one request outstanding and sends it again until a reply
with its ``psn`` comes (``rto``, doubling); the server applies each client's write once
(it keeps the last request id and reply per client and answers a repeat with that reply;
older ids are ignored), so a delayed duplicate can never undo a newer write. Request ids
start from the clock (ms x 256), so a restarted client continues above its old ids.

``python -m hosts.kv.store server --job-id J`` runs the server; ``... bench`` and
``... check`` drive workloads (``topologies/kv_cache.py``).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hosts.transport.udp import Address, Endpoint
from wire.header import (
    INC_UDP_PORT,
    KV_ANSWERED_BY_SWITCH,
    KV_VALUE_WORDS,
    SLOTS,
    Flag,
    Header,
    Op,
    ProtocolError,
    pack,
    unpack,
)
from wire.serial import distance, wrap

HALF = 1 << 31
MASK = (1 << 32) - 1


class KvError(RuntimeError):
    """A request that got no reply after every retry, or a bad argument."""


def _values(key: int, value: Sequence[int] = ()) -> np.ndarray:
    if not 0 <= key <= MASK:
        raise KvError(f"key {key} is not a 32-bit unsigned integer")
    if len(value) > KV_VALUE_WORDS:
        raise KvError(f"a value holds at most {KV_VALUE_WORDS} words, got {len(value)}")
    v = np.zeros(SLOTS, dtype=np.int64)
    v[0] = key
    v[1 : 1 + len(value)] = np.asarray(value, dtype=np.int64)
    if (v[1:] < -HALF).any() or (v[1:] >= HALF).any():
        raise KvError("value words are int32")
    return v.astype(np.uint32).view(np.int32)


# -- server ------------------------------------------------------------------------------------


@dataclass
class KvServer:
    """Holds every key: value words and a version that every write increases."""

    job_id: int
    endpoint: Endpoint
    store: dict[int, tuple[int, np.ndarray]] = field(default_factory=dict)
    last: dict[int, tuple[int, bytes]] = field(default_factory=dict)  # client -> (psn, reply)
    reads: int = 0
    writes: int = 0

    def handle(self, payload: bytes) -> bytes | None:
        """The reply to one request (None: not ours, or an old duplicate)."""
        try:
            h, v = unpack(payload)
        except ProtocolError:
            return None
        if h.job_id != self.job_id or h.flags & Flag.RESULT or h.slot_count != SLOTS:
            return None
        key = int(v[0]) & MASK
        if h.op == Op.KV_WRITE:
            seen = self.last.get(h.worker_id)
            if seen is not None:
                delta = distance(h.psn, seen[0])
                if delta == 0:  # a repeat: the stored reply, carrying no stamp, fills nothing
                    return seen[1]
                if delta < 0:
                    return None  # older than the client's last write: a delayed duplicate
            version = (self.store.get(key, (0, None))[0] + 1) & MASK
            self.store[key] = (version, v[1 : 1 + KV_VALUE_WORDS].copy())
            self.writes += 1
            reply = self._reply(h, key, version)
            self.last[h.worker_id] = (h.psn, self._reply(h, key, version, stamp=0))
            return reply
        if h.op == Op.KV_READ:
            self.reads += 1
            return self._reply(h, key, self.store.get(key, (0, None))[0])
        return None

    def _reply(self, h: Header, key: int, version: int, stamp: int | None = None) -> bytes:
        value = self.store.get(key, (0, np.zeros(KV_VALUE_WORDS, np.int32)))[1]
        out = np.zeros(SLOTS, dtype=np.int32)
        out[0] = np.uint32(key).view(np.int32)
        out[1 : 1 + KV_VALUE_WORDS] = value
        reply = Header(
            op=h.op,
            flags=Flag.RESULT,
            job_id=h.job_id,
            worker_id=h.worker_id,
            psn=h.psn,
            agg_idx=h.agg_idx if stamp is None else stamp,  # the switch's stamp, echoed
            bitmap=version,
        )
        return pack(reply, out)

    def serve(self, stop_after: float | None = None) -> None:
        end = None if stop_after is None else time.monotonic() + stop_after
        while end is None or time.monotonic() < end:
            if not self.endpoint.wait(0.2):
                continue
            out = []
            for data, (ip, _) in self.endpoint.recv_many():
                reply = self.handle(data)
                if reply is not None:
                    out.append((reply, (ip, INC_UDP_PORT)))
            if out:
                self.endpoint.send_many(out)


# -- client ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KvConfig:
    job_id: int
    worker_id: int
    server_ip: str
    rto: float = 0.05  # first retransmission timeout; doubles up to 1 s
    tries: int = 30

    @classmethod
    def from_controller(cls, url: str, job_id: int, worker_id: int) -> KvConfig:
        from controller.api_client import ControllerApi

        cfg = ControllerApi(url).worker_config(job_id, worker_id)
        if cfg.get("kind") != "kv_cache":
            raise KvError(f"job {job_id} is a {cfg.get('kind')} job, not kv_cache")
        return cls(job_id, worker_id, str(cfg["agg_ip"]))


class KvReply(NamedTuple):
    value: list[int]
    version: int
    cached: bool  # answered by the switch


class KvClient:
    """One client of a key-value job: ``get``/``put`` (blocking, retried until answered)."""

    def __init__(self, config: KvConfig, endpoint: Endpoint | None = None) -> None:
        self.config = config
        self.endpoint = endpoint or Endpoint(("0.0.0.0", INC_UDP_PORT))
        self.server: Address = (config.server_ip, INC_UDP_PORT)
        self.psn = wrap(int(time.time() * 1000) << 8)
        self.retransmissions = 0
        self.cached_replies = 0

    def get(self, key: int) -> list[int]:
        return self.read(key).value

    def put(self, key: int, value: Sequence[int]) -> int:
        """Write ``value`` (padded with zeros to KV_VALUE_WORDS); returns its version."""
        return self.request(Op.KV_WRITE, key, value).version

    def read(self, key: int) -> KvReply:
        return self.request(Op.KV_READ, key)

    def request(self, op: Op, key: int, value: Sequence[int] = ()) -> KvReply:
        self.psn = wrap(self.psn + 1)
        h = Header(op=op, job_id=self.config.job_id, worker_id=self.config.worker_id, psn=self.psn)
        payload = pack(h, _values(key, value))
        rto = self.config.rto
        for attempt in range(self.config.tries):
            if attempt:
                self.retransmissions += 1
                payload = pack(h.with_flags(Flag.RETX), _values(key, value))
            self.endpoint.send_many([(payload, self.server)])
            deadline = time.monotonic() + rto
            while (left := deadline - time.monotonic()) > 0:
                if not self.endpoint.wait(left):
                    break
                for data, _ in self.endpoint.recv_many():
                    reply = self._match(data, op)
                    if reply is not None:
                        return reply
            rto = min(rto * 2, 1.0)
        raise KvError(f"no reply to {op.name} of key {key} after {self.config.tries} tries")

    def _match(self, data: bytes, op: Op) -> KvReply | None:
        try:
            h, v = unpack(data)
        except ProtocolError:
            return None
        if h.psn != self.psn or h.op != op or not h.flags & Flag.RESULT or h.slot_count != SLOTS:
            return None
        cached = h.epoch == KV_ANSWERED_BY_SWITCH
        self.cached_replies += cached
        return KvReply([int(x) for x in v[1 : 1 + KV_VALUE_WORDS]], h.bitmap, cached)

    def close(self) -> None:
        self.endpoint.close()


# -- workloads ---------------------------------------------------------------------------------


def zipf_keys(n_keys: int, alpha: float, count: int, seed: int) -> np.ndarray:
    """``count`` keys in [0, n_keys) drawn with P(rank r) ~ 1 / r^alpha (hot keys first)."""
    ranks = np.arange(1, n_keys + 1, dtype=np.float64)
    p = ranks**-alpha
    p /= p.sum()
    return np.random.default_rng(seed).choice(n_keys, size=count, p=p)


def run_check(client: KvClient, role: str, key: int, count: int) -> list[dict[str, Any]]:
    """The consistency workload: a writer puts values 1..count to ``key`` one after
    another; a reader reads it ``count`` times. Each operation is logged with its start and
    end on the machine's monotonic clock (shared by every Mininet host)."""
    log = []
    for i in range(1, count + 1):
        start = time.monotonic()
        if role == "writer":
            version = client.put(key, [i] * KV_VALUE_WORDS)
            log.append({"op": "w", "s": start, "e": time.monotonic(), "ver": version, "val": i})
        else:
            r = client.read(key)
            log.append(
                {"op": "r", "s": start, "e": time.monotonic(), "ver": r.version,
                 "val": r.value[0], "cached": r.cached, "whole": len(set(r.value)) == 1}
            )  # fmt: skip
    return log


def run_bench(client: KvClient, n_keys: int, alpha: float, count: int, seed: int) -> dict[str, Any]:
    """Reads of Zipf-distributed keys: throughput, latency percentiles, switch-served share."""
    keys = zipf_keys(n_keys, alpha, count, seed)
    lat = np.empty(count)
    hit = np.zeros(count, dtype=bool)
    start = time.monotonic()
    for i, k in enumerate(keys):
        t = time.monotonic()
        hit[i] = client.read(int(k)).cached
        lat[i] = time.monotonic() - t
    wall = time.monotonic() - start

    def median_us(sel: np.ndarray) -> float | None:
        return float(np.median(lat[sel]) * 1e6) if sel.any() else None

    return {
        "reads": count,
        "ops_per_s": count / wall,
        "p50_us": float(np.percentile(lat, 50) * 1e6),
        "p99_us": float(np.percentile(lat, 99) * 1e6),
        "hit_p50_us": median_us(hit),
        "miss_p50_us": median_us(~hit),
        "cached": int(hit.sum()),
        "retransmissions": client.retransmissions,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hosts.kv.store", description=__doc__.split("\n")[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    srv = sub.add_parser("server", help="run the storage server of a key-value job")
    srv.add_argument("--job-id", type=int, required=True)
    srv.add_argument("--seconds", type=float, default=None, help="stop after (default: never)")
    for name in ("check", "bench", "warm"):
        p = sub.add_parser(name)
        p.add_argument("--controller", required=True, help="the daemon's URL (unix:PATH)")
        p.add_argument("--job-id", type=int, required=True)
        p.add_argument("--worker-id", type=int, required=True)
        p.add_argument("--count", type=int, default=200)
        p.add_argument("--key", type=int, default=7)
        p.add_argument("--role", choices=("reader", "writer"), default="reader")
        p.add_argument("--keys", type=int, default=1000)
        p.add_argument("--alpha", type=float, default=0.99)
        p.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "server":
            signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop: print the counts
            with Endpoint(("0.0.0.0", INC_UDP_PORT)) as ep:
                server = KvServer(args.job_id, ep)
                print(f"kv server: job {args.job_id} listening on {INC_UDP_PORT}", flush=True)
                try:
                    server.serve(args.seconds)
                except KeyboardInterrupt:
                    pass
                print(json.dumps({"reads": server.reads, "writes": server.writes}), flush=True)
            return 0
        client = KvClient(KvConfig.from_controller(args.controller, args.job_id, args.worker_id))
        try:
            if args.cmd == "check":
                out: Any = run_check(client, args.role, args.key, args.count)
            elif args.cmd == "warm":  # read a key until the switch answers it
                out = {"reads": 0}
                while not client.read(args.key).cached:
                    out["reads"] += 1
                    if out["reads"] > args.count:
                        raise KvError(f"key {args.key} not cached after {args.count} reads")
            else:
                out = run_bench(client, args.keys, args.alpha, args.count, args.seed)
        finally:
            client.close()
        print(json.dumps(out), flush=True)
        return 0
    except (KvError, OSError) as err:
        print(f"kv_store: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
