"""Key-value storage server and client behind the switch's cache (``p4src/kv_cache.p4``).

Example (the client's API, what the library wraps)::

    client = KvClient(KvConfig.from_controller(url, job_id, worker_id))
    version = client.put(42, [1, 2, 3])      # up to KV_VALUE_WORDS int32 words
    client.get(42)                           # [1, 2, 3, 0, 0, 0, 0, 0]
    client.read(42).cached                   # True once the switch holds key 42

Packets (docs/protocol.md, "Key-value cache"): op ``KV_READ``/``KV_WRITE``, ``K`` slots:
slot 0 the key, slots 1..``KV_VALUE_WORDS`` the value; ``psn`` the client's request id,
``bitmap`` the version of the value (replies), ``agg_idx`` the switch's cache stamp, which
the server echoes. This client has one request outstanding and sends it again until a
reply with its ``psn`` comes (``rto``, doubling); ``hosts/kv/pipelined_client.py`` keeps
many in flight. The server applies each client's write once: it keeps the reply to each of
the client's write ids within ``WRITE_WINDOW`` of the newest it has seen and answers a
repeat with it (without the stamp, so it fills no cache entry); an id further back is
ignored. So a write is applied at most once, and a delayed duplicate never undoes a newer
write; writes a client has in flight together are concurrent and may apply in any order.
Request ids start from the clock (ms x 256), so a restarted client continues above its old
ids.

Who is who (docs/protocol.md, *Isolation*, I-KV): the server takes a request only from the
IP the job declares for the client it names (``clients``, from the controller's plan) and
the clients' port, of its job, ``KV_READ`` or ``KV_WRITE`` with ``RETX`` at most and ``K``
slots; a client takes a reply only from the server's address and port, of its job, naming
itself, with ``RESULT`` (and its own ``RETX``) and ``K`` slots, for its request in flight
(``psn``) and its key. Anything else is dropped and counted by reason (``stats.drops``,
``KvClient.drops``, ``wire.header.HostDrop``): a host that is no client changes no value and
no version, and a forged reply completes no request.

``python -m hosts.kv.store server --job-id J`` runs the server; ``... bench`` and
``... check`` drive workloads (``topologies/kv_cache.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hosts.transport.udp import Address, Endpoint
from wire.header import (
    HEADER_LEN,
    HOST_DROPS,
    INC_UDP_PORT,
    KV_ANSWERED_BY_SWITCH,
    KV_VALUE_WORDS,
    SLOTS,
    Flag,
    Header,
    HostDrop,
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


#: A client's writes the server remembers (request id -> stored reply): a pipelined client
#: keeps its requests in flight within this many ids of its oldest unanswered one
#: (``hosts/kv/pipelined_client.py``), so a repeat of any write still in flight is known.
WRITE_WINDOW = 1 << 14
_REQ = struct.Struct("!BBHBxBxII")  # op, flags, job, worker, slot_count, psn, agg_idx
_KEY = struct.Struct("!I")
_REPLY = struct.Struct("!BBHBBBBIIII")  # the header as wire/header.py packs it
_VALUE_END = HEADER_LEN + (1 + KV_VALUE_WORDS) * 4  # key and value words of a request
_PAD = bytes((SLOTS - 1 - KV_VALUE_WORDS) * 4)
_REQUEST_LEN = HEADER_LEN + SLOTS * 4
_READ, _WRITE, _RESULT = int(Op.KV_READ), int(Op.KV_WRITE), int(Flag.RESULT)  # plain ints: fast
_NOT_RETX = 0xFF & ~int(Flag.RETX)  # a request's flags other than RETX: none is a client's


@dataclass
class ServerStats:
    """What the server did, and how busy it was (saturation: ``busy_s`` near the wall time,
    many datagrams per wake-up)."""

    reads: int = 0
    writes: int = 0
    repeats: int = 0  # repeated writes answered with the stored reply
    ignored: int = 0  # writes older than the write window
    # Requests dropped, by wire.header.HostDrop (module doc)
    drops: list[int] = field(default_factory=lambda: [0] * HOST_DROPS)
    wakeups: int = 0
    max_batch: int = 0
    busy_s: float = 0.0  # time spent handling requests (not waiting)


@dataclass
class KvServer:
    """Holds every key: value words and a version that every write increases.

    One thread, one socket: it drains every queued datagram, answers each in turn from a
    dict of ready-made reply bodies (key and value words as they go on the wire), and only
    then waits again; no per-request allocation beyond the reply itself."""

    job_id: int
    endpoint: Endpoint
    # client (worker id) -> the IP the job declares for it; None: any (in-process tests)
    clients: dict[int, str] | None = None
    client_port: int = INC_UDP_PORT  # clients send from it and get their replies on it
    store: dict[int, tuple[int, bytes]] = field(default_factory=dict)  # key -> version, body
    applied: dict[int, dict[int, bytes]] = field(default_factory=dict)  # client -> psn -> reply
    newest: dict[int, int] = field(default_factory=dict)  # client -> newest write id seen
    stats: ServerStats = field(default_factory=ServerStats)

    @property
    def reads(self) -> int:
        return self.stats.reads

    @property
    def writes(self) -> int:
        return self.stats.writes

    def handle(self, payload: bytes, src: Address | None = None) -> bytes | None:
        """The reply to a request from ``src`` (None: dropped, or an old duplicate)."""
        if len(payload) < HEADER_LEN:
            self.stats.drops[HostDrop.MALFORMED] += 1
            return None
        op, flags, job, worker, count, psn, stamp = _REQ.unpack_from(payload)
        reason = self._refuse(op, flags, job, worker, count, src)
        if reason is None and len(payload) < _REQUEST_LEN:
            reason = HostDrop.MALFORMED
        if reason is not None:
            self.stats.drops[reason] += 1
            return None
        if op == _READ:
            self.stats.reads += 1
            key = _KEY.unpack_from(payload, HEADER_LEN)[0]
            version, body = self.store.get(key) or (0, payload[HEADER_LEN : HEADER_LEN + 4] + _ZERO)
            return _REPLY.pack(op, _RESULT, job, worker, 0, SLOTS, 0, psn, stamp, 0, version) + body
        done = self.applied.get(worker)
        if done is None:
            done = self.applied[worker] = {}
        seen = done.get(psn)
        if seen is not None:  # a repeat: the stored reply, carrying no stamp, fills nothing
            self.stats.repeats += 1
            return seen
        newest = self.newest.get(worker)
        if newest is not None and distance(psn, newest) <= -WRITE_WINDOW:
            self.stats.ignored += 1  # older than any write the client can still have in flight
            return None
        if newest is None or distance(psn, newest) > 0:
            self.newest[worker] = newest = psn
        key = _KEY.unpack_from(payload, HEADER_LEN)[0]
        version = ((self.store.get(key) or (0, b""))[0] + 1) & MASK
        body = payload[HEADER_LEN:_VALUE_END] + _PAD
        self.store[key] = (version, body)
        self.stats.writes += 1
        done[psn] = _REPLY.pack(op, _RESULT, job, worker, 0, SLOTS, 0, psn, 0, 0, version) + body
        if len(done) > 2 * WRITE_WINDOW:  # forget the ids no repeat can carry any more
            for old in [p for p in done if distance(p, newest) <= -WRITE_WINDOW]:
                del done[old]
        return _REPLY.pack(op, _RESULT, job, worker, 0, SLOTS, 0, psn, stamp, 0, version) + body

    def _refuse(
        self, op: int, flags: int, job: int, worker: int, count: int, src: Address | None
    ) -> HostDrop | None:
        if job != self.job_id or op not in (_READ, _WRITE):
            return HostDrop.OTHER_JOB
        if flags & _NOT_RETX:
            return HostDrop.FORGED_FLAGS
        if count != SLOTS:
            return HostDrop.BAD_SLOT_COUNT
        if self.clients is not None:
            ip = self.clients.get(worker)
            if ip is None:
                return HostDrop.NOT_A_MEMBER
            if src is not None and src[0] != ip:
                return HostDrop.FOREIGN_ADDRESS
        if src is not None and src[1] != self.client_port:
            return HostDrop.FOREIGN_PORT
        return None

    def serve(self, stop_after: float | None = None) -> None:
        end = None if stop_after is None else time.monotonic() + stop_after
        sock = socket.socket(fileno=os.dup(self.endpoint.fileno()))
        sock.setblocking(False)
        recv, send, handle, stats = sock.recvfrom, sock.sendto, self.handle, self.stats
        try:
            while end is None or time.monotonic() < end:
                if not self.endpoint.wait(0.2):
                    continue
                t0 = time.perf_counter()
                n = 0
                while n < 4096:
                    try:
                        data, addr = recv(2048)
                    except BlockingIOError:
                        break
                    except ConnectionRefusedError:
                        continue
                    n += 1
                    reply = handle(data, addr)
                    if reply is not None:
                        try:
                            send(reply, (addr[0], self.client_port))
                        except BlockingIOError:
                            pass  # a full send buffer: the client's retransmission recovers
                stats.wakeups += 1
                stats.max_batch = max(stats.max_batch, n)
                stats.busy_s += time.perf_counter() - t0
        finally:
            sock.close()


_ZERO = bytes(KV_VALUE_WORDS * 4) + _PAD


def declared_clients(url: str, job_id: int) -> dict[int, str]:
    """Client (worker id) -> the IP the controller's plan declares for it."""
    from controller.api_client import ControllerApi

    job = ControllerApi(url).job(job_id)
    if job.get("kind") != "kv_cache":
        raise KvError(f"job {job_id} is a {job.get('kind')} job, not kv_cache")
    return {int(w["worker_id"]): str(w["ip"]) for w in job["workers"]}


# -- client ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KvConfig:
    job_id: int
    worker_id: int
    server_ip: str
    rto: float = 0.05  # first retransmission timeout; doubles up to 1 s
    tries: int = 30
    port: int = INC_UDP_PORT  # the server's (and the clients') UDP port

    @classmethod
    def from_controller(cls, url: str, job_id: int, worker_id: int) -> KvConfig:
        from controller.api_client import ControllerApi

        cfg = ControllerApi(url).worker_config(job_id, worker_id)
        if cfg.get("kind") != "kv_cache":
            raise KvError(f"job {job_id} is a {cfg.get('kind')} job, not kv_cache")
        return cls(job_id, worker_id, str(cfg["agg_ip"]))


def reply_refused(
    op: int, flags: int, job: int, worker: int, count: int, config: KvConfig
) -> HostDrop | None:
    """Why a client drops a reply whatever request it answers (module doc), or None."""
    if job != config.job_id or op not in (_READ, _WRITE):
        return HostDrop.OTHER_JOB
    if worker != config.worker_id:
        return HostDrop.NOT_A_MEMBER
    if flags & _NOT_RETX != _RESULT:
        return HostDrop.FORGED_FLAGS
    if count != SLOTS:
        return HostDrop.BAD_SLOT_COUNT
    return None


class KvReply(NamedTuple):
    value: list[int]
    version: int
    cached: bool  # answered by the switch


class KvClient:
    """One client of a key-value job: ``get``/``put`` (blocking, retried until answered)."""

    def __init__(self, config: KvConfig, endpoint: Endpoint | None = None) -> None:
        self.config = config
        self.endpoint = endpoint or Endpoint(("0.0.0.0", config.port))
        self.server: Address = (config.server_ip, config.port)
        self.psn = wrap(int(time.time() * 1000) << 8)
        self.retransmissions = 0
        self.cached_replies = 0
        self.drops = [0] * HOST_DROPS  # by wire.header.HostDrop (module doc)

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
                for data, src in self.endpoint.recv_many():
                    reply = self._match(data, src, op, key)
                    if isinstance(reply, HostDrop):
                        self.drops[reply] += 1
                    else:
                        return reply
            rto = min(rto * 2, 1.0)
        raise KvError(f"no reply to {op.name} of key {key} after {self.config.tries} tries")

    def _match(self, data: bytes, src: Address, op: Op, key: int) -> KvReply | HostDrop:
        if src[0] != self.server[0]:
            return HostDrop.FOREIGN_ADDRESS
        if src[1] != self.server[1]:
            return HostDrop.FOREIGN_PORT
        try:
            h, v = unpack(data)
        except ProtocolError:
            return HostDrop.MALFORMED
        reason = reply_refused(h.op, h.flags, h.job_id, h.worker_id, h.slot_count, self.config)
        if reason is not None:
            return reason
        if h.op != op or h.psn != self.psn or int(v[0]) & MASK != key:
            return HostDrop.NOT_IN_FLIGHT  # a late reply to an earlier request too
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
    srv.add_argument(
        "--controller",
        help="the daemon's URL (unix:PATH): take requests only from the job's declared clients",
    )
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
        p.add_argument("--seconds", type=float, default=10.0, help="warm: give up after")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "server":
            signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop: print the counts
            clients = None
            if args.controller is not None:
                clients = declared_clients(args.controller, args.job_id)
            with Endpoint(("0.0.0.0", INC_UDP_PORT)) as ep:
                server = KvServer(args.job_id, ep, clients)
                print(f"kv server: job {args.job_id} listening on {INC_UDP_PORT}", flush=True)
                try:
                    server.serve(args.seconds)
                except KeyboardInterrupt:
                    pass
                print(json.dumps(dataclasses.asdict(server.stats)), flush=True)
            return 0
        client = KvClient(KvConfig.from_controller(args.controller, args.job_id, args.worker_id))
        try:
            if args.cmd == "check":
                out: Any = run_check(client, args.role, args.key, args.count)
            elif args.cmd == "warm":  # read a key until the switch answers it
                # the controller caches hot keys every refresh_ms: wait by time (at least
                # --count reads), since a fast server answers any count within one period
                out = {"reads": 0}
                give_up = time.monotonic() + args.seconds
                while not client.read(args.key).cached:
                    out["reads"] += 1
                    if out["reads"] > args.count and time.monotonic() > give_up:
                        raise KvError(
                            f"key {args.key} not cached after {out['reads']} reads"
                            f" in {args.seconds:g} s"
                        )
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
