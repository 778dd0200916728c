"""An ASK mapper process: a partition's tuples through the switch over UDP, the control
channel to the reducer over TCP (``hosts/ask/control.py``).

Example (a running job, its reducer up; ``python -m hosts.ask.run mapper`` does this)::

    stats = send_partition("unix:run/ask/controller.sock", job_id=1, worker_id=0,
                           chunks=chunk_counts_of(Path("words0.txt"), 4096))

``serve_mapper`` (``mapper --serve``) is a long-lived one: it runs one job after another,
so that its interpreter and imports are paid once.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hosts.ask import control
from hosts.ask.control import Lines, control_key
from hosts.ask.keys import encode, encode_columns, encode_counts
from hosts.ask.mapper import MapperConfig, MapperFlow
from hosts.ask.text_splits import chunk_counts_of
from hosts.transport.control_auth import ChannelAuth
from hosts.transport.udp import Endpoint
from wire.header import ASK_TUPLES


def send_partition(
    controller: str, job_id: int, worker_id: int,
    chunks: Iterable[Mapping[Hashable, int] | tuple[Sequence[Hashable], Any]],
    hot: int = 0, tuples: int = ASK_TUPLES, rto: float = 0.05, verbose: bool = False,
    ready: Callable[[], None] | None = None,
    configured: Callable[[dict[str, Any], bytes | None], None] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Mapper ``worker_id`` of ASK job ``job_id``: send ``chunks`` (each a map key -> value,
    e.g. a chunk's word counts, or two columns: distinct keys, a numpy array of values)
    through the switch and answer the reducer until it has the result; returns the mapper's
    figures. With ``hot`` (keys counted fewer times bypass the switch), at most as many of a
    chunk's keys as the switch has cells for the job go through it, its most counted. The
    reducer must be running. ``ready`` is called once the mapper is set up (configuration,
    connections), before it reads any input; ``phases`` in the figures are seconds from then
    to the end of each phase, ``busy`` the seconds spent in each kind of work (taking the
    input, packing it, sending, waiting for the sockets). ``configured`` is called with the
    mapper's configuration from the controller and the job's control key (None: none for
    this host) before any input is read: ``chunks`` may be a generator that needs them."""
    from controller.api_client import ControllerApi

    t_start = time.perf_counter()
    api = ControllerApi(controller, timeout=30.0)
    cfg = api.worker_config(job_id, worker_id)
    key = control_key(api, job_id)
    if configured is not None:
        configured(cfg, key)
    mcfg = MapperConfig(
        job_id=job_id, flow=worker_id, part_base=cfg["part_base"], part_size=cfg["part_size"],
        window=cfg["window"], hot_threshold=hot, tuples_per_packet=tuples, rto=rto,
        reducer=(cfg["agg_ip"], control.INC_UDP_PORT),
        switch_keys=cfg["part_size"] * ASK_TUPLES if hot else 0, cold_to_host=True,
    )  # fmt: skip
    m = MapperFlow(mcfg)
    dest = (cfg["agg_ip"], control.INC_UDP_PORT)
    ep = Endpoint(("0.0.0.0", 0))  # replies come back to this port (ask.p4 swaps ports)
    try:
        ctl = Lines(socket.create_connection((cfg["agg_ip"], control.CONTROL_PORT), timeout=30.0))
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
                          "cold": encode_columns(m.cold)})  # fmt: skip
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
