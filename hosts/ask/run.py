"""ASK mapper and reducer processes over real sockets (Mininet hosts, any IPv4 network).

Example (each in its own host; the job admitted with kind ``ask``)::

    python -m hosts.ask.run reducer --controller unix:run/ask/controller.sock --job-id 1 \\
        --out run/ask/result.json
    python -m hosts.ask.run mapper --controller unix:run/ask/controller.sock --job-id 1 \\
        --worker-id 0 --input run/ask/words0.txt

Data: AGG_KV packets over UDP port ``INC_UDP_PORT`` through the switch (``MapperFlow``,
``Reducer``). Control: one TCP connection per mapper to the reducer (port
``CONTROL_PORT``), JSON lines: the reducer moves the mappers to a new epoch every
``--swap-s`` seconds (``{"epoch": e}`` / ``{"moved": e}``) and drains the copy they left;
a mapper whose tuples are all acknowledged sends its vocabulary (``{"done": ..., "fps":
[...], "keys": [...]}``, each key under its fingerprint) and its cold keys' exact sums
(``"cold"``: keys that bypass the switch travel here, by key, not as FALLBACK packets the
reducer would take one by one); when all are done the reducer
drains the last epoch, asks for the exact sums of colliding fingerprints, if any
(``{"counts_for": [...]}``), writes the result (key -> total) as JSON and
says ``{"bye": true}``. A collector (``collect``: the Spark driver) says ``{"collect": true}``,
is answered ``{"collecting": true}`` and gets ``{"record": ...}`` at the end.

Who is who: a mapper says ``{"hello": w, "port": p}`` (``p``: the UDP port it sends from)
and waits for ``{"welcome": w}`` before sending; the reducer welcomes only a connection
from the IP the job declares for mapper ``w`` (the controller's plan), once, and then takes
``w``'s packets only from that IP and port (``Reducer.bind_flow``), and ``moved``, ``done``
and ``counts`` only over ``w``'s connection (once each mapper for ``counts``). Anything else
is refused (``{"refused": why}``) and the connection closed; a connection that closes, sends
a line that is not a JSON object or more than ``MAX_LINE`` bytes without a newline is
dropped, and the reducer goes on. With a token that gets the job's control key from the daemon
(``ControllerApi.control_key``: the job's or the operator's, ``$INC_TOKEN`` or the token
files the daemon writes) every line between a mapper and the reducer is signed with that
key (``hosts/transport/control_auth.py``): the reducer
opens each connection with ``{"nonce": ...}``, and a line that is not signed with the key,
replayed, reordered or reflected closes its connection; a host that is not the job's cannot
speak for a mapper even from the mapper's own address. A collector only reads (its
``collect`` and what it is sent are not signed). Keys are
any ASK key (str, bytes, int, tuples of them): they cross every connection, and the
result file, in ``hosts/ask/keys.py``'s form, and come back as they were sent.
"""

from __future__ import annotations

import argparse
import json
import secrets
import select
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from controller.api_client import ApiError
from hosts.ask.keys import decode, decode_counts, encode, encode_counts
from hosts.ask.mapper import MapperConfig, MapperFlow
from hosts.ask.reducer import Reducer, owners
from hosts.transport.control_auth import ChannelAuth
from hosts.transport.udp import Endpoint
from wire.header import ASK_TUPLES, INC_UDP_PORT

CONTROL_PORT = INC_UDP_PORT + 1
MAX_LINE = 256 << 20  # bytes a control message may take (a vocabulary of a few million keys)


class Lines:
    """JSON lines over a TCP socket (non-blocking reads); ``ConnectionError`` when the peer
    closed, or sent what is not a JSON object per line within ``MAX_LINE`` bytes. With
    ``auth``, lines are signed and must verify, except a message in ``unsigned``."""

    def __init__(self, sock: socket.socket, auth: ChannelAuth | None = None) -> None:
        self.sock = sock
        self.buf = b""
        self.auth = auth
        self.unsigned: frozenset[str] = frozenset()  # keys a message may come unsigned with

    def send(self, msg: dict[str, Any], signed: bool = True) -> None:
        if self.auth is not None and signed:
            msg = self.auth.seal(msg)
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def read(self) -> list[dict[str, Any]]:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the peer closed the control connection")
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        if len(self.buf) > MAX_LINE:
            raise ConnectionError(f"a control message over {MAX_LINE} bytes")
        try:
            msgs = [json.loads(x) for x in lines if x]
        except ValueError as e:
            raise ConnectionError(f"a control line that is not JSON: {e}") from None
        if not all(isinstance(m, dict) for m in msgs):
            raise ConnectionError("a control line that is not a JSON object")
        auth = self.auth
        if auth is None:
            return msgs
        return [m if m.keys() <= self.unsigned else auth.open(m) for m in msgs]


def control_key(api: Any, job_id: int) -> bytes | None:
    """The job's control-channel key (None: this host holds no token that gets it)."""
    try:
        return bytes(api.control_key(job_id))
    except ApiError:
        return None


def split_blocks(
    path: Path, part: int = 0, parts: int = 1, block: int = 1 << 20
) -> Iterator[bytes]:
    """Split ``part`` of ``parts`` of a file as Hadoop's text input splits it (and Spark's
    ``textFile``), in blocks of about ``block`` bytes of whole lines: split ``i`` is the
    byte range ``[i S / n, (i + 1) S / n)``; a line belongs to the split its first byte is
    in. Every line is in exactly one split."""
    size = path.stat().st_size
    start, end = size * part // parts, size * (part + 1) // parts
    with open(path, "rb") as f:
        if start:
            f.seek(start - 1)
            f.readline()  # the rest of a line that began before the split
        pos = f.tell()
        while pos < end:
            data = f.read(min(block, end - pos))
            if not data:
                break
            if not data.endswith(b"\n"):
                data += f.readline()  # the last line began in this split: all of it
            pos += len(data)
            yield data


def chunk_counts_of(
    path: Path, size: int, part: int = 0, parts: int = 1
) -> Iterator[dict[Hashable, int]]:
    """The words (``str.split`` of UTF-8 text) of split ``part`` of ``path``, counted in
    chunks of about ``size`` words (blocks of ``6 size`` bytes; a bounded map-side combine,
    ``Counter`` in C)."""
    for data in split_blocks(path, part, parts, max(1024, 6 * size)):
        yield Counter(data.decode("utf-8", errors="replace").split())


def send_partition(
    controller: str, job_id: int, worker_id: int,
    chunks: Iterable[Mapping[Hashable, int] | tuple[Sequence[Hashable], Any]],
    hot: int = 0, tuples: int = ASK_TUPLES, rto: float = 0.05, verbose: bool = False,
    ready: Callable[[], None] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Mapper ``worker_id`` of ASK job ``job_id``: send ``chunks`` (each a map key -> value,
    e.g. a chunk's word counts, or two columns: distinct keys, a numpy array of values)
    through the switch and answer the reducer until it has the result; returns the mapper's
    figures. With ``hot`` (keys counted fewer times bypass the switch), at most as many of a
    chunk's keys as the switch has cells for the job go through it, its most counted. The
    reducer must be running. ``ready`` is called once the mapper is set up (configuration,
    connections), before it reads any input; ``phases`` in the figures are seconds from then
    to the end of each phase, ``busy`` the seconds spent in each kind of work (taking the
    input, packing it, sending, waiting for the sockets)."""
    from controller.api_client import ControllerApi

    t_start = time.perf_counter()
    api = ControllerApi(controller, timeout=30.0)
    cfg = api.worker_config(job_id, worker_id)
    key = control_key(api, job_id)
    mcfg = MapperConfig(
        job_id=job_id, flow=worker_id, part_base=cfg["part_base"], part_size=cfg["part_size"],
        window=cfg["window"], hot_threshold=hot, tuples_per_packet=tuples, rto=rto,
        reducer=(cfg["agg_ip"], INC_UDP_PORT),
        switch_keys=cfg["part_size"] * ASK_TUPLES if hot else 0, cold_to_host=True,
    )  # fmt: skip
    m = MapperFlow(mcfg)
    dest = (cfg["agg_ip"], INC_UDP_PORT)
    ep = Endpoint(("0.0.0.0", 0))  # replies come back to this port (ask.p4 swaps ports)
    try:
        ctl = Lines(socket.create_connection((cfg["agg_ip"], CONTROL_PORT), timeout=30.0))
    except BaseException:
        ep.close()
        raise
    try:
        early = _hello(ctl, worker_id, ep.address[1], key)
    except BaseException:
        ep.close()
        ctl.sock.close()
        raise
    setup_s = time.perf_counter() - t_start
    if ready is not None:
        ready()
    t0 = t_start = time.perf_counter()
    phases: dict[str, float] = {}  # seconds from ``ready`` to the end of each phase
    # seconds spent taking the input (its source: Spark, Arrow, the combine), packing it
    # into packets, building and sending packets, and waiting for the sockets
    busy = dict.fromkeys(("input", "pack", "send", "wait"), 0.0)
    source = iter(chunks)
    more = True
    done_sent = False
    told = m.epoch
    next_report = 0.0
    try:
        while True:
            # keep a few packets ready beyond the window, not the whole input
            while more and m.ready < 4 * mcfg.window:
                t1 = time.perf_counter()
                c = next(source, None)
                t2 = time.perf_counter()
                busy["input"] += t2 - t1
                if c is None:
                    m.flush()
                    phases["input"] = time.perf_counter() - t_start
                    more = False
                elif isinstance(c, tuple):  # (keys, values) columns: hosts/ask/spark_arrow.py
                    m.add_columns(*c)
                elif tuples < ASK_TUPLES:  # a map key -> value, tuple by tuple
                    m.add_counts(c)
                else:  # a map key -> value, packed as columns
                    m.add_columns(list(c), np.fromiter(c.values(), np.int64, len(c)))
                busy["pack"] += time.perf_counter() - t2
            now = time.monotonic()
            if verbose and now >= next_report:
                next_report = now + 2.0
                print(f"ask mapper {worker_id}: {m.stats}, in flight {m.in_flight}", flush=True)
            t1 = time.perf_counter()
            out = m.to_send(now)
            if out:
                ep.send_many((p, dest) for p in out)
            busy["send"] += time.perf_counter() - t1
            if not more and m.idle and m.moved and not done_sent:
                # the vocabulary as two parallel lists: a fingerprint once per key under it
                fps = [fp for fp, ks in m.vocab.items() for _ in ks]
                keys = [encode(k) for ks in m.vocab.values() for k in ks]
                phases["acked"] = time.perf_counter() - t_start
                ctl.send({"done": worker_id, "fps": fps, "keys": keys, "stats": m.stats.__dict__,
                          "cold": encode_counts(m.cold)})  # fmt: skip
                done_sent = True
            t1 = time.perf_counter()
            r, _, _ = select.select([ep.fileno(), ctl.sock], [], [], mcfg.rto / 2)
            busy["wait"] += time.perf_counter() - t1
            if ep.fileno() in r:
                for payload, src in ep.recv_many():
                    m.on_datagram(payload, src)
            if ctl.sock in r or early:
                msgs, early = early + (ctl.read() if ctl.sock in r else []), []
                for msg in msgs:
                    if "epoch" in msg:
                        m.start_epoch(int(msg["epoch"]))
                    elif "counts_for" in msg:
                        counts = m.counts_for(int(x) for x in msg["counts_for"])
                        ctl.send({"counts": encode_counts(counts)})
                    elif msg.get("bye"):
                        phases["bye"] = time.perf_counter() - t_start
                        return {**m.stats.__dict__, "seconds": time.perf_counter() - t0,
                                "setup_s": setup_s, "phases": phases, "busy": busy}  # fmt: skip
            if m.moved and told != m.epoch:
                ctl.send({"moved": m.epoch})
                told = m.epoch
    finally:
        ep.close()
        ctl.sock.close()


def _hello(ctl: Lines, worker_id: int, port: int, key: bytes | None) -> list[dict[str, Any]]:
    """Bind this mapper's flow to its UDP port at the reducer (module doc); returns what
    the reducer said after its welcome in the same read."""
    msgs: list[dict[str, Any]] = []
    while not msgs:  # the reducer's first line: the connection's nonce
        msgs = ctl.read()
    if not isinstance(msgs[0].get("nonce"), str):
        raise ConnectionError(f"the reducer did not open with a nonce: {msgs[0]}")
    if key is not None:
        ctl.auth = ChannelAuth(key, msgs[0]["nonce"], "mapper")
        msgs = [ctl.auth.open(m) for m in msgs[1:]]
    else:
        msgs = msgs[1:]
    ctl.unsigned = frozenset({"refused"})  # a refusal closes the connection anyway
    ctl.send({"hello": worker_id, "port": port})
    while True:
        for i, msg in enumerate(msgs):
            if msg.get("welcome") == worker_id:
                return msgs[i + 1 :]
            if "refused" in msg:
                raise ConnectionError(f"the reducer refused mapper {worker_id}: {msg['refused']}")
        msgs = ctl.read()


def subscribe(reducer_ip: str) -> Lines:
    """Tell the reducer to send its record of the job here; returns once it has said so."""
    ctl = Lines(socket.create_connection((reducer_ip, CONTROL_PORT), timeout=30.0))
    try:
        ctl.send({"collect": True})
        while True:
            if any("collecting" in msg for msg in ctl.read()):
                return ctl
    except BaseException:
        ctl.sock.close()
        raise


def wait_record(ctl: Lines, timeout: float = 600.0) -> dict[str, Any]:
    """The record of a ``subscribe``d reducer (``result``: key -> total, figures)."""
    try:
        ctl.sock.settimeout(timeout)
        while True:
            for msg in ctl.read():
                if "record" in msg:
                    return _decoded(msg["record"])
    finally:
        ctl.sock.close()


class RecordWatch:
    """A driver's wait for the reducer's record, in a thread of its own while the job runs:
    ``RecordWatch(ip)`` subscribes (the reducer knows the driver before any mapper starts),
    ``record()`` joins and returns it (or raises what the wait met), ``cancel()`` (the job
    failed) closes the connection so that the wait gives up too."""

    def __init__(self, reducer_ip: str) -> None:
        self._ctl = subscribe(reducer_ip)
        self._record: dict[str, Any] = {}
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        try:
            self._record.update(wait_record(self._ctl))
        except (OSError, ValueError) as e:
            self._errors.append(e)

    def cancel(self) -> None:
        self._ctl.sock.close()

    def record(self) -> dict[str, Any]:
        self._thread.join()
        if self._errors:
            raise self._errors[0]
        return self._record


def read_record(path: Path) -> dict[str, Any]:
    """The record a reducer wrote with ``--out`` (``result``: key -> total, figures)."""
    return _decoded(json.loads(Path(path).read_text()))


def _decoded(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "result": decode_counts(record["result"])}


def collect(reducer_ip: str, timeout: float = 600.0) -> dict[str, Any]:
    """Wait for the reducer's record of the job (``result``: key -> total, figures)."""
    return wait_record(subscribe(reducer_ip), timeout)


def _wait_go() -> None:
    print("ask mapper ready", flush=True)
    sys.stdin.readline()


def run_mapper(a: argparse.Namespace) -> int:
    stats = send_partition(
        a.controller, a.job_id, a.worker_id, chunk_counts_of(Path(a.input), a.chunk, *a.split),
        hot=a.hot, tuples=a.tuples, rto=a.rto, verbose=a.verbose,
        ready=_wait_go if a.wait_go else None,
    )  # fmt: skip
    n, retx, secs = stats["packets"], stats["retransmissions"], stats["seconds"]
    phases = " ".join(f"{k} {v:.3f}" for k, v in stats["phases"].items())
    print(f"ask mapper {a.worker_id}: {n} packets, {retx} retransmitted, {secs:.2f} s"
          f" (seconds from start: {phases})", flush=True)  # fmt: skip
    return 0


def serve_mapper(a: argparse.Namespace) -> int:
    """A long-lived mapper process (``mapper --serve``): once up it prints ``ask mapper
    serving`` and then runs one mapper per line on stdin, a JSON job ``{"job_id", "worker_id",
    "input", "split": [i, n], "chunk", "hot"}``, printing the mapper's figures as one JSON
    line each; EOF ends it. The interpreter, its imports and the packet code are paid once,
    as a Spark executor's are, not once per job."""
    print("ask mapper serving", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        i, n = job.get("split", (0, 1))
        chunks = chunk_counts_of(Path(job["input"]), int(job.get("chunk", a.chunk)), i, n)
        stats = send_partition(
            a.controller, int(job["job_id"]), int(job["worker_id"]), chunks,
            hot=int(job.get("hot", a.hot)), tuples=a.tuples, rto=a.rto,
        )  # fmt: skip
        print(json.dumps({"done": job["worker_id"], "stats": stats}), flush=True)
    return 0


def run_reducer(a: argparse.Namespace) -> int:
    from controller.api_client import ControllerApi

    api = ControllerApi(a.controller, timeout=30.0)
    job = api.job(a.job_id)
    key = control_key(api, a.job_id)
    n = int(job["n_workers"]) if "n_workers" in job else len(job["workers"])
    region = job["region"]
    rows = range(int(region["offset"]), int(region["offset"]) + int(region["size"]))
    red = Reducer(a.job_id, n, rows, rto=a.rto)
    declared = {int(w["worker_id"]): str(w["ip"]) for w in job["workers"]}
    ep = Endpoint(("0.0.0.0", INC_UDP_PORT))
    lst = socket.create_server(("0.0.0.0", CONTROL_PORT))
    signed = "signed" if key else "unsigned (no token for the job on this host)"
    print(f"ask reducer ready: job {a.job_id}, {n} mappers, rows {rows.start}..{rows.stop},"
          f" control lines {signed}", flush=True)  # fmt: skip
    peers: dict[int, Lines] = {}
    socks: dict[socket.socket, Lines] = {}
    moved: dict[int, int] = {}
    vocabs: dict[int, tuple[list[int], list[Hashable]]] = {}  # mapper -> fingerprints, keys
    keys: dict[int, Hashable] = {}
    colliding: set[int] = set()
    stats: dict[int, Any] = {}
    counts: dict[int, dict[Hashable, int]] = {}  # mapper -> its colliding keys' sums
    cold: dict[int, dict[Hashable, int]] = {}  # mapper -> its cold keys' exact sums
    epoch, moving, final, asked = 1, False, False, False
    last_swap = time.monotonic()
    t_first: float | None = None
    collectors: list[Lines] = []

    def hello(peer: Lines, msg: dict[str, Any]) -> None:
        w, port = int(msg["hello"]), int(msg["port"])
        ip = peer.sock.getpeername()[0]
        if w not in declared or w in red.flows:
            raise ConnectionError(f"mapper {w} is not a mapper of the job, or bound already")
        if ip != declared[w]:
            raise ConnectionError(f"mapper {w} is declared at {declared[w]}, not {ip}")
        peers[w] = peer
        red.bind_flow(w, (ip, port))
        if w == 0:  # DRAINs go to mapper 0's host; the switch answers in its name
            red.drain_source = (ip, INC_UDP_PORT)
        peer.send({"welcome": w})

    def on_control(peer: Lines, msg: dict[str, Any]) -> None:
        if peer in collectors:
            raise ConnectionError("a collector only reads")
        if "collect" in msg:
            collectors.append(peer)
            peer.send({"collecting": True}, signed=False)
            return
        if key is None and "mac" in msg:
            raise ConnectionError(f"a signed line, but this reducer has no key for job {a.job_id}")
        if "hello" in msg:
            hello(peer, msg)
            return
        w = next((w for w, p in peers.items() if p is peer), None)
        if w is None:
            raise ConnectionError(f"{sorted(msg)} from a connection that is no mapper's")
        if "moved" in msg:
            moved[w] = int(msg["moved"])
        elif "done" in msg and w not in vocabs:
            fps = [int(fp) for fp in msg["fps"]]
            vocabs[w] = (fps, [decode(k) for k in msg["keys"]])
            cold[w] = decode_counts(msg.get("cold", []))
            stats[w] = msg.get("stats", {})
            print(f"ask reducer: mapper {w} done", flush=True)
        elif "counts" in msg and asked and w not in counts:
            counts[w] = decode_counts(msg["counts"])

    def close(sock: socket.socket, why: str) -> None:
        peer = socks.pop(sock)
        for w in [w for w, p in peers.items() if p is peer]:
            del peers[w]  # its flow stays bound: a mapper says hello once
        if peer in collectors:
            collectors.remove(peer)
        print(f"ask reducer: control connection closed: {why}", flush=True)
        try:
            peer.send({"refused": why}, signed=False)
        except OSError:
            pass
        sock.close()

    t_ready = time.perf_counter()
    phases: dict[str, float] = {}  # seconds from ready to: every mapper done, each drain...
    try:
        while True:
            now = time.monotonic()
            reqs = red.drain_requests(now)
            if reqs:
                # addressed to a mapper so that they leave this host; the switch answers them
                ep.send_many((p, red.drain_source) for p in reqs if red.drain_source)
            waiting = [ep.fileno(), lst, *socks]
            r, _, _ = select.select(waiting, [], [], red.rto / 2)
            if ep.fileno() in r:
                acks = []
                for payload, addr in ep.recv_many():
                    if t_first is None:
                        t_first = time.perf_counter()
                    ack = red.on_packet(payload, addr)
                    if ack is not None:
                        acks.append((ack, addr))
                if acks:
                    ep.send_many(acks)
            if lst in r:
                conn, peer_addr = lst.accept()
                nonce = secrets.token_hex(16)
                socks[conn] = Lines(conn, ChannelAuth(key, nonce, "reducer") if key else None)
                socks[conn].unsigned = frozenset({"collect"})
                print(f"ask reducer: control connection from {peer_addr}", flush=True)
                try:
                    socks[conn].send({"nonce": nonce}, signed=False)
                except OSError as e:
                    close(conn, str(e))
            for s in [s for s in r if s in socks]:
                try:
                    for msg in socks[s].read():
                        on_control(socks[s], msg)
                except (ConnectionError, OSError, ValueError, KeyError, TypeError) as e:
                    close(s, str(e))
            # epochs
            everyone = len(peers) == n
            if moving and everyone and all(moved.get(w) == epoch for w in peers):
                moving = False
                phases[f"drain {epoch - 1}"] = time.perf_counter() - t_ready
                red.start_drain(epoch - 1)
                print(f"ask reducer: draining epoch {epoch - 1}", flush=True)
            elif everyone and not moving and not red.draining:
                if len(vocabs) == n:
                    if not final:
                        phases["done"] = time.perf_counter() - t_ready
                        final, epoch, moving = True, epoch + 1, True
                        for p in peers.values():
                            p.send({"epoch": epoch})
                    elif not asked:
                        phases["drained"] = time.perf_counter() - t_ready
                        keys, colliding = owners(vocabs.values())
                        if not colliding:  # nothing to ask the mappers
                            break
                        asked = True
                        for p in peers.values():
                            p.send({"counts_for": sorted(colliding)})
                    elif len(counts) == n:
                        break
                elif a.swap_s and now - last_swap >= a.swap_s:
                    last_swap, epoch, moving = now, epoch + 1, True
                    for p in peers.values():
                        p.send({"epoch": epoch})
        phases["counts"] = time.perf_counter() - t_ready
        result = red.result_of(keys, colliding, [*counts.values(), *cold.values()])
        seconds = time.perf_counter() - (t_first or time.perf_counter())
        phases["result"] = time.perf_counter() - t_ready
        if t_first is not None:
            phases["first packet"] = t_first - t_ready
        out = {
            "result": encode_counts(result), "seconds": seconds, "epochs": epoch,
            "reducer": {**red.stats.__dict__, "phases": phases}, "mappers": stats,
        }  # fmt: skip
        if a.out:
            Path(a.out).write_text(json.dumps(out))
        for c in collectors:
            c.send({"record": out}, signed=False)
        for p in peers.values():
            p.send({"bye": True})
        print(f"ask reducer: {len(result)} keys, {epoch} epochs, {seconds:.2f} s", flush=True)
        return 0
    finally:
        ep.close()
        lst.close()
        for s in socks:
            s.close()


def _split(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N, got {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"split {text!r}: need 0 <= I < N")
    return i, n


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m hosts.ask.run", description=__doc__)
    sub = ap.add_subparsers(dest="role", required=True)
    for role in ("mapper", "reducer"):
        p = sub.add_parser(role)
        p.add_argument("--controller", required=True, help="daemon URL (unix:PATH)")
        p.add_argument(
            "--job-id", type=int, required=role == "reducer", help="(mapper: or --serve)"
        )
        p.add_argument("--rto", type=float, default=0.05, help="retransmission timeout (s)")
    m = sub.choices["mapper"]
    m.add_argument("--worker-id", type=int, help="required without --serve")
    m.add_argument("--verbose", action="store_true", help="print progress every 2 s")
    m.add_argument("--input", help="text file: its words are the keys")
    m.add_argument(
        "--serve",
        action="store_true",
        help="stay up and run one mapper per JSON job line on stdin (long-lived mapper)",
    )
    m.add_argument(
        "--split",
        type=_split,
        default=(0, 1),
        metavar="I/N",
        help="read split I of N of the input (byte ranges, whole lines)",
    )
    m.add_argument(
        "--wait-go",
        action="store_true",
        help="once set up, print 'ask mapper ready' and wait for a line on stdin",
    )
    m.add_argument("--chunk", type=int, default=4096, help="about so many words combined")
    m.add_argument("--hot", type=int, default=0, help="keys counted fewer times bypass")
    m.add_argument("--tuples", type=int, default=16, help="tuples per packet (1..16)")
    r = sub.choices["reducer"]
    r.add_argument("--out", help="JSON file for the result")
    r.add_argument("--swap-s", type=float, default=0.0, help="array swap period (s), 0: none")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        if a.role == "mapper" and a.serve:
            return serve_mapper(a)
        if a.role == "mapper" and None in (a.input, a.worker_id, a.job_id):
            print("ask mapper: --job-id, --worker-id and --input are required (or --serve)",
                  file=sys.stderr)  # fmt: skip
            return 2
        return run_mapper(a) if a.role == "mapper" else run_reducer(a)
    except (OSError, ConnectionError, ValueError) as e:
        print(f"ask {a.role}: {e}", file=sys.stderr, flush=True)
        import traceback

        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
