"""The ASK reducer process: its job's packets over UDP, its mappers' and collectors' control
lines over TCP (``hosts/ask/control.py``), epochs and drains, the exact result.

Example (the job admitted; ``python -m hosts.ask.run reducer`` does this)::

    run_reducer(parser().parse_args(["reducer", "--controller", url, "--job-id", "1",
                                     "--out", "result.json"]))

``serve_reducer`` (``reducer --serve``) is a long-lived one: one job after another, so that
its interpreter and imports are paid once.
"""

from __future__ import annotations

import argparse
import json
import secrets
import select
import socket
import sys
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from hosts.ask import control
from hosts.ask.control import Lines, control_key
from hosts.ask.keys import decode, decode_counts, encode_columns
from hosts.ask.reducer import Reducer, owners
from hosts.transport.control_auth import ChannelAuth
from hosts.transport.udp import Endpoint


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
    ep = Endpoint(("0.0.0.0", control.INC_UDP_PORT))
    lst = socket.create_server(("0.0.0.0", control.CONTROL_PORT))
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
            red.drain_source = (ip, control.INC_UDP_PORT)
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
            "result": encode_columns(result), "seconds": seconds, "epochs": epoch,
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


def serve_reducer(a: argparse.Namespace) -> int:
    """A long-lived reducer process (``reducer --serve``): once up it prints ``ask reducer
    serving`` and then runs one job's reducer per line on stdin, ``{"job_id": j, "out":
    path}`` (``out`` optional), each printing ``ask reducer ready`` once its sockets are
    bound and, at its end, one JSON line ``{"done": j, "code": c}``; EOF ends it. Jobs
    run one at a time (each binds the reducer's ports)."""
    print("ask reducer serving", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        one = argparse.Namespace(**{**vars(a), "job_id": int(job["job_id"]),
                                    "out": job.get("out", a.out), "serve": False})  # fmt: skip
        try:
            code = run_reducer(one)
        except (OSError, ConnectionError, ValueError) as e:
            print(f"ask reducer: job {one.job_id}: {e}", flush=True)
            code = 1
        print(json.dumps({"done": one.job_id, "code": code}), flush=True)
    return 0
