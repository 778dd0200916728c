"""Fuzzing ``p4src/inc.p4`` with mutated INC packets, against an oracle.

Two NetReduce jobs are admitted by the controller's own code over P4Runtime (job 1:
workers on ports 1..3, aggregators 8..11; job 2: workers on ports 4 and 5, aggregators
12..15), a key-value cache job (3: client on port 2, server on port 6, cache entries
16..19), a replicated log (4: client on port 3, sequencer counter 2) and an ATP job (5:
workers on ports 2 and 4, ATP pool range [0, 4), its PS on port 6), with forwarding to
six hosts; the packets then go through that p4sim switch in-process. A
stream of valid worker packets drives both jobs through every aggregator state (in
progress, complete, reused); between them go mutated packets: INC fields set to edge
values (other jobs, workers, region bounds, psns around the copy's, slot counts, flags,
ops), random flag combinations on every system op, IPv4 options and fragments, bit flips,
truncations, extensions, random bytes, and arrivals on the wrong port.

Oracle, per packet, over **every register of the program** (whatever systems inc.p4 grows):
- the pipeline raises nothing, and every output is bytes on a valid port;
- a packet counted in ``inc_drops`` (one reason at most) changes no register cell;
- only a packet that passes admission as docs/protocol.md states it (IPv4 without options,
  UDP to ``INC_UDP_PORT``, op ``AGG_SYNC`` without RESULT/ACK/FALLBACK, K slots present, a
  known (job, worker, ingress port), ``agg_idx`` in the job's region) may change anything,
  and then only the cells of the copy it addresses, ``2 * agg_idx + ver``, which it then
  tags with its own job (``ADMISSION`` holds this rule per op: a new system adds its own);
  a Serene job's packet also its own job's synchronisation clocks (``sync_cells``), and
  an async Serene job's (job 8) its workers' ``async_last`` and its region's running
  aggregates;
  an ATP job's packet (``atp_copy``) only ATP's cells of ``agg_idx`` (the hash of (job, psn)
  in its range), tagged with its job, and its job's mark of its psn; an ATP result or ACK
  only from its PS's port; an ASK mapper's packet (``ask_cells``) only its row copy and
  seen entry, a drain nothing;
- a packet of a system op (AGG_SYNC, AGG_KV, CONSENSUS) that is not a contribution or a
  request carries result-like flags: it passes only from a binding of its job that allows
  every flag it carries (``flag_binding``: the ATP job's PS port, the ASK job's mappers and
  reducer, the log's client and replicas), else it leaves nothing and is counted once as
  ``FORGED_RESULT`` (docs/protocol.md, "Isolation"); a UDP packet to ``INC_UDP_PORT`` behind
  IPv4 options or in a first fragment leaves nothing and is counted as ``UNPARSED_IPV4``;
- an IPv4 packet on a host port (1..6, the source guard's bindings) with a source that is
  not that port's host leaves nothing and is counted as ``SPOOFED_SOURCE``, before any other
  guard (arrivals on the wrong port and mutated addresses make them; ports 0 and 7 are
  unbound, as trunks, and check nothing);
- the ATP job is metered: its meter cell (``meter_cells``) may move on any of its worker
  packets that admission lets through, whatever happens to it next (a packet over the rate
  is counted as ``METERED``, on a switch clock that advances per packet);
- anything else leaves the switch as at most one packet (forwarding never replicates).

The seed is fixed and printed; ``INC_FUZZ_SEED=N`` reproduces or varies a run.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from controller.jobs.job import Job as AdmittedJob
from controller.jobs.job import host_ip, host_mac
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import Pipeline, SwitchConnection, SwitchSpec
from controller.systems import kv_cache
from controller.systems.ask import Ask, AskRequest, layout_of
from controller.systems.atp import Atp, AtpRequest
from controller.systems.consensus import Consensus, ConsensusRequest
from controller.systems.kv_cache import KvCache, KvCacheRequest
from controller.systems.netreduce import NetReduce, NetReduceRequest
from controller.systems.serene import Serene, SereneRequest
from controller.systems.source_guard import SourceBinding, table_entries
from controller.systems.sync_modes import sync_slot
from hosts.ask.wire import kv_packet
from p4sim.switch import Switch
from topologies.local_switch import LocalSwitch, compile_pipeline
from wire.framing import FRAME_OVERHEAD, encapsulate, ipv4_checksum
from wire.header import (
    AGG_POOL_SIZE,
    ASK_ROWS,
    ASK_TUPLES,
    ATP_MARKS_PER_JOB,
    ATP_POOL_SIZE,
    FIELDS,
    HEADER_LEN,
    INC_UDP_PORT,
    MAX_WORKERS,
    SLOTS,
    SYNC_RING,
    VALUE_BYTES,
    DropReason,
    Field,
    Flag,
    Header,
    Op,
    aggregator_address,
    atp_index,
    pack,
)

INC_P4 = Path(__file__).resolve().parents[1] / "p4src" / "inc.p4"
SEED = int(os.environ.get("INC_FUZZ_SEED", "16"))
PACKETS = 2000  # ~6 ms each: comparing every register cell dominates
AGG_HOST = 6
HOST_PORTS = range(1, AGG_HOST + 1)  # host h{p} on port p: the source guard binds its address
NOT_AGGREGATED = Flag.RESULT | Flag.ACK | Flag.FALLBACK | Flag.WAIT
FRAME_LEN = FRAME_OVERHEAD + HEADER_LEN + SLOTS * VALUE_BYTES


@dataclass(frozen=True)
class Job:
    job_id: int
    ports: tuple[int, ...]  # worker i on ports[i]
    offset: int
    size: int


JOBS = (Job(1, (1, 2, 3), 8, 4), Job(2, (4, 5), 12, 4))
ATP_JOB = Job(5, (2, 4), 0, 4)  # ATP: range [0, 4) of ATP's pool, PS on port AGG_HOST
# ATP's job is metered (p4src/job_meter.p4): packets/s and burst, on a switch clock that
# advances CLOCK_STEP_US per packet, so that the stream mostly passes and the replays of
# its packets exceed the rate now and then (METERED), the same way on every run.
ATP_METER = (30, 4)
CLOCK_STEP_US = 1000
METER = "IncIngress.job_meter."
# A Serene job (bounded 1: its packets carry epochs and move per-worker clocks).
SERENE = Job(6, (1, 5), 20, 4)
# A Serene job in async (running aggregates per chunk: the packet's index in its epoch).
ASYNC = Job(8, (2, 4), 24, 4)
WORKERS = {
    (j.job_id, w, p): j for j in (*JOBS, ATP_JOB, SERENE, ASYNC) for w, p in enumerate(j.ports)
}
# A key-value cache job (client 0 on port 2, its server on port 6, cache entries 16..19,
# key 5 cached) and a replicated log (client 0 on port 3, replicas on 4..6, counter 2).
KV = Job(3, (2,), 16, 4)
KV_SERVER_PORT, KV_KEY = 6, 5
LOG = Job(4, (3,), 2, 1)
LOG_REPLICAS = (4, 5, 6)
# An ASK job: mappers 0 and 1 on ports 1 and 5, its reducer (flow 2) on port 6, rows 40..55
# of the ASK pool (two partitions), window 4.
ASK_JOB = Job(7, (1, 5), 40, 16)
ASK_REDUCER = 2
ASK_WINDOW = 4


def mac(port: int) -> bytes:
    return bytes.fromhex(host_mac(port).replace(":", ""))


def ip(port: int) -> bytes:
    return socket.inet_aton(host_ip(port))


def program(tmp: Path) -> Iterator[Switch]:
    """inc.p4 with both jobs installed by the controller's own code (``NetReduce.install``
    over P4Runtime), and forwarding to every host and the source guard of every host port
    (``HOST_PORTS``; ports 0 and 7 stay unbound, as trunks) as a topology's runtime file
    gives them."""
    files = compile_pipeline(INC_P4, tmp)
    kind = NetReduce()

    async def install(address: str) -> None:
        pipeline = Pipeline.from_files(files.p4info, files.device_config)
        async with SwitchConnection(SwitchSpec(0, address), pipeline) as conn:
            for j in JOBS:
                ps = list(j.ports)
                req = NetReduceRequest(
                    workers=len(ps), window=j.size, worker_ports=ps,
                    worker_ips=[host_ip(p) for p in ps], worker_macs=[host_mac(p) for p in ps],
                    agg_ip=host_ip(AGG_HOST), agg_mac=host_mac(AGG_HOST),
                )  # fmt: skip
                job = kind.make_job(req, j.job_id, 0, Region(j.offset, j.size), created_at=0.0)
                await kind.install(conn, job)
            await install_serene(conn)
            await install_kv_and_log(conn)
            await install_atp(conn)
            await install_ask(conn)
            await conn.insert(table_entries(SourceBinding(p, host_ip(p)) for p in HOST_PORTS))

    with LocalSwitch(device_id=0) as local:
        asyncio.run(install(local.address))
        sw = local.server.switch
        for p in range(1, AGG_HOST + 1):
            dst_mac, dst_ip = int.from_bytes(mac(p)), int.from_bytes(ip(p))
            sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (dst_ip, 32)}, "ipv4_forward",
                         {"dst_mac": dst_mac, "port": p})  # fmt: skip
            sw.table_add("l2_exact", {"hdr.ethernet.dstAddr": dst_mac}, "l2_forward", {"port": p})
        yield sw


async def install_serene(conn: SwitchConnection) -> None:
    for job, mode in ((SERENE, "bounded 1"), (ASYNC, "async")):
        ps = list(job.ports)
        req = SereneRequest(
            workers=len(ps), window=job.size, worker_ports=ps, mode=mode,
            worker_ips=[host_ip(p) for p in ps], worker_macs=[host_mac(p) for p in ps],
            agg_ip=host_ip(AGG_HOST), agg_mac=host_mac(AGG_HOST),
        )  # fmt: skip
        kind = Serene()
        region = Region(job.offset, job.size)
        await kind.install(conn, kind.make_job(req, job.job_id, 0, region, created_at=0.0))


async def install_kv_and_log(conn: SwitchConnection) -> None:
    kv_kind, log_kind = KvCache(), Consensus()
    kv_req = KvCacheRequest(
        kind="kv_cache", workers=1, worker_ports=list(KV.ports), server=KV_SERVER_PORT,
        worker_ips=[host_ip(p) for p in KV.ports], worker_macs=[host_mac(p) for p in KV.ports],
        agg_ip=host_ip(KV_SERVER_PORT), agg_mac=host_mac(KV_SERVER_PORT), cache_size=KV.size,
    )  # fmt: skip
    kv_job = kv_kind.make_job(kv_req, KV.job_id, 0, Region(KV.offset, KV.size), created_at=0.0)
    await kv_kind.clear(conn, kv_job.region)
    await kv_kind.install(conn, kv_job)
    await kv_cache.cache_keys(conn, kv_job, [KV_KEY])
    log_req = ConsensusRequest(
        kind="consensus", workers=1, worker_ports=list(LOG.ports), replica_ports=LOG_REPLICAS,
        worker_ips=[host_ip(p) for p in LOG.ports], worker_macs=[host_mac(p) for p in LOG.ports],
    )  # fmt: skip
    log_job = log_kind.make_job(log_req, LOG.job_id, 0, Region(LOG.offset, 1), created_at=0.0)
    await log_kind.clear(conn, log_job.region)
    await log_kind.install(conn, log_job)


async def install_atp(conn: SwitchConnection) -> None:
    ps = list(ATP_JOB.ports)
    req = AtpRequest(
        workers=len(ps), window=ATP_JOB.size, pool_size=ATP_JOB.size, ps_port=AGG_HOST,
        worker_ports=ps, worker_ips=[host_ip(p) for p in ps], worker_macs=[host_mac(p) for p in ps],
        agg_ip=host_ip(AGG_HOST), agg_mac=host_mac(AGG_HOST),
        meter_pps=ATP_METER[0], meter_burst=ATP_METER[1],
    )  # fmt: skip
    kind = Atp()
    region = Region(ATP_JOB.offset, ATP_JOB.size)
    await kind.install(conn, kind.make_job(req, ATP_JOB.job_id, 0, region, created_at=0.0))


def ask_job() -> AdmittedJob:
    ps = list(ASK_JOB.ports)
    req = AskRequest(
        workers=len(ps), rows=ASK_JOB.size, window=ASK_WINDOW, worker_ports=ps,
        worker_ips=[host_ip(p) for p in ps], worker_macs=[host_mac(p) for p in ps],
        agg_ip=host_ip(AGG_HOST), agg_mac=host_mac(AGG_HOST), reducer_port=AGG_HOST,
    )  # fmt: skip
    return Ask().make_job(req, ASK_JOB.job_id, 0, Region(ASK_JOB.offset, ASK_JOB.size), 0.0)


async def install_ask(conn: SwitchConnection) -> None:
    job = ask_job()
    await Ask().clear(conn, job.region)
    await Ask().install(conn, job)


def ask_frame(worker: int, psn: int, rng: random.Random) -> tuple[int, bytes]:
    """An ASK packet: a mapper's tuples in a row of its partition, or a reducer's DRAIN."""
    epoch = 1 + psn // 8
    keys = [rng.choice((0, 0, 7, 9, rng.randrange(1, 2**32))) for _ in range(ASK_TUPLES)]
    vals = [rng.randrange(-(2**31), 2**31) for _ in range(ASK_TUPLES)]
    if worker == ASK_REDUCER:
        row = ASK_JOB.offset + rng.randrange(ASK_JOB.size)
        h = Header(op=Op.AGG_KV, flags=Flag.DRAIN, job_id=ASK_JOB.job_id, worker_id=worker,
                   agg_idx=row, epoch=epoch)  # fmt: skip
        port = AGG_HOST
    else:
        lay = layout_of(ask_job(), worker)
        row = lay.part_base + rng.randrange(lay.part_size)
        h = Header(op=Op.AGG_KV, job_id=ASK_JOB.job_id, worker_id=worker, psn=psn, agg_idx=row,
                   epoch=epoch)  # fmt: skip
        port = ASK_JOB.ports[worker]
    return port, encapsulate(kv_packet(h, keys, vals), mac(port), mac(AGG_HOST), ip(port),
                             ip(AGG_HOST))  # fmt: skip


def kv_frame(port: int, rng: random.Random) -> bytes:
    """A request of the key-value client, or a reply of its server (random stamp/version)."""
    vals = np.array([rng.choice((KV_KEY, 9))] + [rng.randrange(2**31) for _ in range(SLOTS - 1)])
    if port == KV_SERVER_PORT:
        h = Header(op=Op.KV_READ, flags=Flag.RESULT, job_id=KV.job_id, agg_idx=rng.choice((0, 1)),
                   bitmap=rng.randrange(4))  # fmt: skip
        return encapsulate(pack(h, vals), mac(port), mac(KV.ports[0]), ip(port), ip(KV.ports[0]))
    op = rng.choice((Op.KV_READ, Op.KV_WRITE))
    h = Header(op=op, job_id=KV.job_id, worker_id=0, psn=rng.randrange(2**32))
    return encapsulate(pack(h, vals), mac(port), mac(KV_SERVER_PORT), ip(port), ip(KV_SERVER_PORT))


def log_frame(rng: random.Random) -> bytes:
    h = Header(op=Op.CONSENSUS, job_id=LOG.job_id, worker_id=0, psn=rng.randrange(2**32))
    vals = np.array([rng.randrange(2**31) for _ in range(SLOTS)])
    group = socket.inet_aton("239.100.0.4")
    return encapsulate(pack(h, vals), mac(LOG.ports[0]), mac(LOG_REPLICAS[0]), ip(3), group)


def contribution(job: Job, worker: int, psn: int, values: np.ndarray, **fields: int) -> bytes:
    idx, ver = aggregator_address(psn, job.offset, job.size)
    if job is ATP_JOB:
        idx, ver = atp_index(job.job_id, psn, job.offset, job.size), 0
    h = Header(job_id=job.job_id, worker_id=worker, psn=psn, agg_idx=idx, ver=ver, **fields)
    port = job.ports[worker]
    return encapsulate(pack(h, values), mac(port), mac(AGG_HOST), ip(port), ip(AGG_HOST))


def valid_stream(rng: random.Random) -> list[tuple[int, bytes]]:
    """(port, frame) of both jobs' workers, psn by psn, six rounds of each region."""
    out = []
    ask_rng = random.Random(rng.random())
    for psn in range(24):
        for j in JOBS:
            for w, p in enumerate(j.ports):
                vals = np.array([rng.randrange(-(2**31), 2**31) for _ in range(SLOTS)])
                out.append((p, contribution(j, w, psn, vals)))
        port = rng.choice((KV.ports[0], KV_SERVER_PORT))
        out += [(port, kv_frame(port, rng)), (LOG.ports[0], log_frame(rng))]
        # The ATP job: its workers, then its PS's result through the switch (a release).
        for w, p in enumerate(ATP_JOB.ports):
            vals = np.array([rng.randrange(-(2**20), 2**20) for _ in range(SLOTS)])
            out.append((p, contribution(ATP_JOB, w, psn, vals)))
        result = contribution(ATP_JOB, 0, psn, np.zeros(SLOTS, dtype=np.int64), flags=Flag.RESULT)
        out.append((AGG_HOST, result))
        for w, p in enumerate(SERENE.ports):  # two packets per epoch
            vals = np.array([rng.randrange(-(2**31), 2**31) for _ in range(SLOTS)])
            out.append((p, contribution(SERENE, w, psn, vals, epoch=psn // 2)))
        for w, p in enumerate(ASYNC.ports):  # two packets (chunks 0 and 1) per epoch
            vals = np.array([rng.randrange(-(2**31), 2**31) for _ in range(SLOTS)])
            out.append((p, contribution(ASYNC, w, psn, vals, epoch=psn // 2, bitmap=psn % 2)))
        if psn == 16:  # a very late duplicate of epoch 0: older than any round (OLD_EPOCH)
            out.append((SERENE.ports[0], contribution(SERENE, 0, 0, vals, epoch=0)))
        # The ASK job: both mappers (psn sometimes repeated: a retransmission), a drain.
        for w in (0, 1, ASK_REDUCER):
            out.append(ask_frame(w, max(0, psn - ask_rng.randrange(2)), ask_rng))
        out += bound_flagged(psn, rng)
    return out


def bound_flagged(psn: int, rng: random.Random) -> list[tuple[int, bytes]]:
    """Flagged packets the roles of the ASK job and the log send (forwarded): a mapper's
    cold keys, the reducer's ACK, a replica's reply, a client's request to a host leader."""
    vals = np.array([rng.randrange(2**31) for _ in range(SLOTS)])
    w = psn % 2
    sends = (
        (ASK_JOB.ports[w], AGG_HOST, Header(op=Op.AGG_KV, flags=Flag.FALLBACK,
                                            job_id=ASK_JOB.job_id, worker_id=w, psn=psn)),
        (AGG_HOST, ASK_JOB.ports[w], Header(op=Op.AGG_KV, flags=Flag.ACK,
                                            job_id=ASK_JOB.job_id, worker_id=w, psn=psn)),
        (LOG_REPLICAS[w], LOG.ports[0], Header(op=Op.CONSENSUS, flags=Flag.RESULT,
                                               job_id=LOG.job_id, psn=psn, agg_idx=psn)),
        (LOG.ports[0], LOG_REPLICAS[0], Header(op=Op.CONSENSUS, flags=Flag.FALLBACK,
                                               job_id=LOG.job_id, psn=psn)),
    )  # fmt: skip
    return [(src, encapsulate(pack(h, vals), mac(src), mac(dst), ip(src), ip(dst)))
            for src, dst, h in sends]  # fmt: skip


def other_traffic() -> list[tuple[int, bytes]]:
    """Packets that are not aggregated: forged results, ACKs, fallbacks and WAITs (dropped),
    reserved ops, plain UDP, non-IP (forwarded)."""
    job, vals = JOBS[0], np.arange(SLOTS)
    frames = [contribution(job, 0, 0, vals, flags=f) for f in NOT_AGGREGATED]
    frames += [contribution(job, 1, 1, vals, op=op) for op in Op if op != Op.AGG_SYNC]
    frames.append(encapsulate(b"not an INC header", mac(1), mac(AGG_HOST), ip(1), ip(3)))
    frames.append(mac(3) + mac(1) + b"\x08\x06" + bytes(28))  # ARP
    # in other hosts' names: a contribution of job 1's worker 1 and plain UDP from port 1
    spoofed = [contribution(job, 1, 2, vals)]
    spoofed.append(encapsulate(b"in h2's name", mac(1), mac(AGG_HOST), ip(2), ip(3)))
    return [(1, f) for f in frames + spoofed]


# --- mutations --------------------------------------------------------------------------------

INC_AT = FRAME_OVERHEAD  # the INC header's offset in a frame without IPv4 options


def get_field(frame: bytes | bytearray, f: Field) -> int:
    nbytes = (f.bit + f.width + 7) // 8
    word = int.from_bytes(frame[INC_AT + f.offset : INC_AT + f.offset + nbytes], "big")
    return (word >> (nbytes * 8 - f.bit - f.width)) & ((1 << f.width) - 1)


def set_field(frame: bytearray, f: Field, value: int) -> None:
    nbytes = (f.bit + f.width + 7) // 8
    at = INC_AT + f.offset
    if len(frame) < at + nbytes:
        return
    shift = nbytes * 8 - f.bit - f.width
    mask = ((1 << f.width) - 1) << shift
    word = int.from_bytes(frame[at : at + nbytes], "big")
    word = (word & ~mask) | ((value << shift) & mask)
    frame[at : at + nbytes] = word.to_bytes(nbytes, "big")


def edge_values(f: Field, frame: bytearray, rng: random.Random) -> list[int]:
    top = (1 << f.width) - 1
    now = get_field(frame, f)
    vals = [0, top, now ^ 1, (now + 1) & top, (now - 1) & top, rng.randrange(top + 1)]
    if f.name == "job_id":
        vals += [j.job_id for j in (*JOBS, KV, LOG, SERENE, ASYNC)]
    elif f.name == "epoch":  # the worker's next epoch, further ahead, far behind its clock
        vals += [(now + d) & top for d in (1, 2, 3, -3, -8, 2**31)]
    elif f.name == "worker_id":
        vals += [0, 1, 2, 3]
    elif f.name == "agg_idx":
        for j in JOBS:
            vals += [j.offset - 1, j.offset, j.offset + j.size - 1, j.offset + j.size]
        vals += [AGG_POOL_SIZE - 1, AGG_POOL_SIZE, ASK_ROWS - 1, ASK_ROWS]
        vals += [
            ASK_JOB.offset - 1,
            ASK_JOB.offset + ASK_JOB.size // 2,
            ASK_JOB.offset + ASK_JOB.size,
        ]
    elif f.name == "psn":
        vals += [(now + d) & top for d in (4, -4, 8, -8, 2**31, 2**31 - 1, -(2**31) + 1)]
    elif f.name == "slot_count":
        vals += [SLOTS - 1, SLOTS + 1]
    elif f.name in ("flags", "op"):
        vals += [1 << b for b in range(8)] + [1, 2, 8]
    return vals


def mutate(frame: bytes, rng: random.Random) -> bytes:
    pkt = bytearray(frame)
    kind = rng.randrange(11)
    if kind == 8:  # random flags on a system op: every flagged path
        set_field(pkt, FIELD["op"], rng.choice((Op.AGG_SYNC, Op.AGG_KV, Op.CONSENSUS)))
        set_field(pkt, FIELD["flags"], rng.randrange(256))
        return bytes(pkt)
    if kind == 9:  # IPv4 options (1..10 words of no-op options) before the UDP header
        return with_ipv4_options(bytes(pkt), rng.randrange(1, 11))
    if kind == 10:  # a fragment: MF, or an offset, or both
        return as_fragment(bytes(pkt), rng.choice((1, 2, 3)))
    if kind <= 2:  # one to three INC fields to edge values
        for _ in range(1 + kind):
            f = rng.choice(FIELDS)
            set_field(pkt, f, rng.choice(edge_values(f, pkt, rng)))
    elif kind == 3:  # bit flips anywhere (Ethernet, IPv4, UDP included)
        for _ in range(rng.randrange(1, 4)):
            j = rng.randrange(len(pkt))
            pkt[j] ^= 1 << rng.randrange(8)
    elif kind == 4:  # truncate, often inside the INC header or the values
        del pkt[
            rng.randrange(INC_AT if len(pkt) > INC_AT and rng.random() < 0.5 else 0, len(pkt)) :
        ]
    elif kind == 5:  # extend with garbage
        pkt += rng.randbytes(rng.randrange(1, 64))
    elif kind == 6:  # overwrite a span with random bytes
        a = rng.randrange(len(pkt))
        b = min(len(pkt), a + rng.randrange(1, 9))
        pkt[a:b] = rng.randbytes(b - a)
    else:
        return rng.randbytes(rng.randrange(0, 200))
    return bytes(pkt)


FIELD = {f.name: f for f in FIELDS}


def with_ipv4_options(frame: bytes, words: int) -> bytes:
    """``frame`` with ``words`` 32-bit words of no-op options in its IPv4 header (IHL and
    lengths adjusted, checksum recomputed); unchanged if it is not IPv4 without options."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[14] != 0x45:
        return frame
    opts = b"\x01" * (4 * words)
    ipv4 = bytearray(frame[14:34])
    ipv4[0] = 0x40 | (5 + words)
    struct.pack_into("!H", ipv4, 2, struct.unpack_from("!H", ipv4, 2)[0] + len(opts))
    header = bytes(ipv4[:10]) + b"\0\0" + bytes(ipv4[12:]) + opts
    header = header[:10] + struct.pack("!H", ipv4_checksum(header)) + header[12:]
    return frame[:14] + header + frame[34:]


def as_fragment(frame: bytes, how: int) -> bytes:
    """``frame`` marked as a fragment: ``how`` 1 sets MF, 2 an offset, 3 both."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return frame
    pkt = bytearray(frame)
    word = struct.unpack_from("!H", pkt, 20)[0]
    word |= (0x2000 if how & 1 else 0) | (0x0010 if how & 2 else 0)
    struct.pack_into("!H", pkt, 20, word)
    return bytes(pkt)


# --- the oracle ---------------------------------------------------------------------------------


def inc_fields(frame: bytes) -> dict[str, int] | None:
    """The INC header's fields if the parser reaches it: IPv4 without options, not a
    fragment, UDP to ``INC_UDP_PORT``, the whole header present; else None."""
    if len(frame) < INC_AT + HEADER_LEN or frame[12:14] != b"\x08\x00":
        return None
    ver_ihl, frag, proto = frame[14], struct.unpack_from("!H", frame, 20)[0], frame[23]
    if ver_ihl & 0x0F != 5 or frag & 0x3FFF or proto != 17:  # offset or MF: a fragment
        return None
    if struct.unpack_from("!H", frame, 36)[0] != INC_UDP_PORT:
        return None
    return {f.name: get_field(frame, f) for f in FIELDS}


class Target(NamedTuple):
    """What an admitted packet may write: cells ``cells`` of the registers under ``prefix``,
    and ``also`` (register name prefix, cells) pairs besides."""

    job_id: int
    cells: Sequence[int]
    prefix: str
    also: tuple[tuple[str, range], ...] = ()


AGGREGATOR = "IncIngress.aggregator."


def netreduce_copy(frame: bytes, fields: dict[str, int], port: int) -> Target | None:
    """Admission of an aggregation packet (docs/protocol.md): no RESULT/ACK/FALLBACK, K
    slots present, a known (job, worker, ingress port), agg_idx in the job's region."""
    if fields["flags"] & NOT_AGGREGATED or fields["slot_count"] != SLOTS:
        return None
    job = WORKERS.get((fields["job_id"], fields["worker_id"], port))
    if len(frame) < FRAME_LEN or job is None:
        return None
    idx = fields["agg_idx"]
    if not job.offset <= idx < job.offset + job.size or idx >= AGG_POOL_SIZE:
        return None
    cell = 2 * idx + fields["ver"]
    also = sync_cells(job) if job in (SERENE, ASYNC) else ()
    if job is ASYNC:  # its workers' newest psns and its region's running aggregates
        slot = sync_slot(job.job_id) * MAX_WORKERS
        also += ((SYNC + "async_last", range(slot, slot + len(job.ports))),
                 (SYNC + "async_sum_", range(job.offset, job.offset + job.size)))  # fmt: skip
    return Target(job.job_id, range(cell, cell + 1), AGGREGATOR, also)


SYNC = "IncIngress.sync_modes."


def sync_cells(job: Job) -> tuple[tuple[str, range], ...]:
    """A Serene job's synchronisation state (p4src/sync_modes.p4): its workers' clocks,
    its slowest epoch and its ring of reached counts, nothing of another job's."""
    slot = sync_slot(job.job_id)
    return (
        ("sync_clock", range(slot * MAX_WORKERS, slot * MAX_WORKERS + len(job.ports))),
        ("sync_min", range(slot, slot + 1)),
        ("IncIngress.sync_clocks.sync_reached", range(slot * SYNC_RING, (slot + 1) * SYNC_RING)),
    )


ATP = "IncIngress.atp."
# The ATP job's count of aggregators it holds (p4src/atp.p4): cell job_id % JOB_TABLE_SIZE.
ATP_HELD = ((ATP + "atp_held", range(ATP_JOB.job_id, ATP_JOB.job_id + 1)),)


def atp_copy(frame: bytes, fields: dict[str, int], port: int) -> Target | None:
    """ATP (docs/protocol.md, "ATP"): a worker packet admitted as for NetReduce with
    ``agg_idx`` the hash of (job, psn) in its range; a RESULT/ACK (no FALLBACK) of the job
    from its PS's port, any slot count, ``agg_idx`` in the pool. Either writes only ATP's
    cells of ``agg_idx``."""
    flags = fields["flags"]
    if flags & (Flag.RESULT | Flag.ACK) and not flags & Flag.FALLBACK:
        idx = fields["agg_idx"]
        ok = fields["job_id"] == ATP_JOB.job_id and flag_binding(fields, port)
        ok = ok and idx < ATP_POOL_SIZE
        return Target(ATP_JOB.job_id, range(idx, idx + 1), ATP, ATP_HELD) if ok else None
    if flags & NOT_AGGREGATED or fields["slot_count"] != SLOTS or len(frame) < FRAME_LEN:
        return None
    if WORKERS.get((fields["job_id"], fields["worker_id"], port)) is not ATP_JOB:
        return None
    idx = atp_index(ATP_JOB.job_id, fields["psn"], ATP_JOB.offset, ATP_JOB.size)
    if fields["agg_idx"] != idx:
        return None
    # and the job's mark of its psn, should it fall back (cell job_id % JOB_TABLE_SIZE)
    mark = ATP_JOB.job_id * ATP_MARKS_PER_JOB + fields["psn"] % ATP_MARKS_PER_JOB
    also = (*ATP_HELD, (ATP + "atp_marked", range(mark, mark + 1)))
    return Target(ATP_JOB.job_id, range(idx, idx + 1), ATP, also)


def meter_cells(frame: bytes, port: int) -> range:
    """The meter cell a packet may move (p4src/job_meter.p4): one of the metered job's
    worker packets that admission lets through (K slots, a known (job, worker, port),
    ``agg_idx`` in the job's region), whatever befalls it after the meter."""
    fields = inc_fields(frame)
    if fields is None or fields["op"] != Op.AGG_SYNC or fields["flags"] & NOT_AGGREGATED:
        return range(0)
    if fields["slot_count"] != SLOTS or len(frame) < FRAME_LEN:
        return range(0)
    if WORKERS.get((fields["job_id"], fields["worker_id"], port)) is not ATP_JOB:
        return range(0)
    if not ATP_JOB.offset <= fields["agg_idx"] < ATP_JOB.offset + ATP_JOB.size:
        return range(0)
    cell = ATP_JOB.job_id  # job_id % JOB_TABLE_SIZE (1024)
    return range(cell, cell + 1)


def agg_sync(frame: bytes, fields: dict[str, int], port: int) -> Target | None:
    """AGG_SYNC: the job's kind decides (ATP's job, else NetReduce's rule)."""
    if fields["job_id"] == ATP_JOB.job_id:
        return atp_copy(frame, fields, port)
    return netreduce_copy(frame, fields, port)


def kv_entries(frame: bytes, fields: dict[str, int], port: int) -> Target | None:
    """Key-value admission: K slots, the KV job, a request from its client's (id, port) or a
    reply (RESULT) from its server's port; it may write the job's cache entries only."""
    if fields["slot_count"] != SLOTS or len(frame) < FRAME_LEN or fields["job_id"] != KV.job_id:
        return None
    if fields["flags"] & Flag.RESULT:
        ok = port == KV_SERVER_PORT
    else:
        ok = (fields["worker_id"], port) == (0, KV.ports[0])
    return (
        Target(KV.job_id, range(KV.offset, KV.offset + KV.size), "IncIngress.kv_cache.")
        if ok
        else None
    )


def log_counter(frame: bytes, fields: dict[str, int], port: int) -> Target | None:
    """Sequencer admission: a client request (no RESULT/ACK/FALLBACK) of the log job from its
    client's (id, port), K slots; it may advance the job's counter only."""
    not_sequenced = Flag.RESULT | Flag.ACK | Flag.FALLBACK
    if fields["flags"] & not_sequenced or fields["slot_count"] != SLOTS or len(frame) < FRAME_LEN:
        return None
    if fields["job_id"] != LOG.job_id or (fields["worker_id"], port) != (0, LOG.ports[0]):
        return None
    return Target(LOG.job_id, range(LOG.offset, LOG.offset + 1), "IncIngress.sequencer.")


ASK = "IncIngress.ask."


def ask_cells(frame: bytes, fields: dict[str, int], port: int) -> Target | None:
    """ASK (docs/protocol.md, "Key-value aggregation"): K slots, no RESULT/ACK/FALLBACK, the
    ASK job; a mapper's packet from its own (flow, port) with ``agg_idx`` in its partition may
    write its row copy ``2 agg_idx + (epoch & 1)`` and its seen entry ``seen_base + psn % W``;
    the reducer's DRAIN (rows of the job) writes nothing."""
    if fields["flags"] & NOT_AGGREGATED or fields["slot_count"] != SLOTS or len(frame) < FRAME_LEN:
        return None
    job, w, idx = fields["job_id"], fields["worker_id"], fields["agg_idx"]
    if job != ASK_JOB.job_id:
        return None
    if fields["flags"] & Flag.DRAIN:
        in_rows = ASK_JOB.offset <= idx < ASK_JOB.offset + ASK_JOB.size
        ok = (w, port) == (ASK_REDUCER, AGG_HOST) and in_rows
        return Target(job, (), ASK) if ok else None
    if w >= len(ASK_JOB.ports) or port != ASK_JOB.ports[w]:
        return None
    lay = layout_of(ask_job(), w)
    if not lay.part_base <= idx < lay.part_base + lay.part_size:
        return None
    cells = (2 * idx + (fields["epoch"] & 1), lay.seen_base + fields["psn"] % lay.window)
    return Target(job, cells, ASK)


def is_flagged(fields: dict[str, int]) -> bool:
    """A packet of a system op that is not a contribution or request: result-like flags."""
    op, flags = fields["op"], fields["flags"]
    if op == Op.AGG_SYNC:
        return bool(flags & NOT_AGGREGATED)
    if op in (Op.AGG_KV, Op.CONSENSUS):
        return bool(flags & (Flag.RESULT | Flag.ACK | Flag.FALLBACK))
    return False


def flag_binding(fields: dict[str, int], port: int) -> bool:
    """Whether a binding of the packet's job allows every flag it carries from ``port``
    (docs/protocol.md, "Isolation"): the roles of each job, as the controller installs them."""
    job, op, flags, w = fields["job_id"], fields["op"], fields["flags"], fields["worker_id"]
    allowed = 0
    if (job, op) == (ATP_JOB.job_id, Op.AGG_SYNC) and port == AGG_HOST:
        allowed = Flag.RESULT | Flag.ACK  # its PS
    elif (job, op) == (ASK_JOB.job_id, Op.AGG_KV):
        if port == AGG_HOST:
            allowed |= Flag.ACK  # its reducer
        if w < len(ASK_JOB.ports) and port == ASK_JOB.ports[w]:
            allowed |= Flag.FALLBACK | Flag.RETX  # a mapper, by id
    elif (job, op) == (LOG.job_id, Op.CONSENSUS):
        if port in LOG_REPLICAS:
            allowed |= Flag.RESULT | Flag.FALLBACK
        if (w, port) == (0, LOG.ports[0]):
            allowed |= Flag.FALLBACK  # its client
    return flags & ~allowed == 0


def unparsed_inc(frame: bytes) -> bool:
    """UDP to ``INC_UDP_PORT`` behind IPv4 options or in a first fragment."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return False
    ihl, frag = frame[14] & 0x0F, struct.unpack_from("!H", frame, 20)[0]
    if ihl < 5 or frag & 0x1FFF or (ihl == 5 and not frag & 0x2000):
        return False
    at = 14 + 4 * ihl
    return len(frame) >= at + 8 and struct.unpack_from("!H", frame, at + 2)[0] == INC_UDP_PORT


def spoofed(frame: bytes, port: int) -> bool:
    """IPv4 on a host port (``HOST_PORTS``) from a source that is not its host's."""
    if port not in HOST_PORTS or len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return False
    return frame[26:30] != ip(port)


def must_refuse(frame: bytes, port: int) -> DropReason | None:
    """The drop the guards owe this packet whatever else holds: SPOOFED_SOURCE first, then
    UNPARSED_IPV4, or FORGED_RESULT for a flagged packet no binding allows."""
    if spoofed(frame, port):
        return DropReason.SPOOFED_SOURCE
    if unparsed_inc(frame):
        return DropReason.UNPARSED_IPV4
    fields = inc_fields(frame)
    if fields is not None and is_flagged(fields) and not flag_binding(fields, port):
        return DropReason.FORGED_RESULT
    return None


# The ops whose packets may write switch state, with the rule that admits them: what it may
# write, or None. A system whose packets write state adds its rule here; until then this
# fuzzer reports its writes as writes by a packet not admitted.
ADMISSION = {
    Op.AGG_SYNC: agg_sync,
    Op.KV_READ: kv_entries,
    Op.KV_WRITE: kv_entries,
    Op.CONSENSUS: log_counter,
    Op.AGG_KV: ask_cells,
}


def admitted_copy(frame: bytes, port: int) -> Target | None:
    """What the packet may write, or None if admission must refuse it."""
    fields = inc_fields(frame)
    if fields is None or fields["op"] not in ADMISSION:
        return None
    return ADMISSION[Op(fields["op"])](frame, fields, port)


def first_difference(now: list[int], before: list[int]) -> int:
    return next(i for i, (a, b) in enumerate(zip(now, before, strict=True)) if a != b)


# the reasons must_refuse owes: counted only where it owes them
GUARDS = (DropReason.SPOOFED_SOURCE, DropReason.UNPARSED_IPV4, DropReason.FORGED_RESULT)


@pytest.fixture
def switch(tmp_path: Path) -> Iterator[Switch]:
    yield from program(tmp_path)


@pytest.mark.slow
def test_mutated_inc_packets_never_touch_state_they_are_not_admitted_to(switch: Switch) -> None:
    print(f"inc.p4 fuzz seed {SEED} (INC_FUZZ_SEED={SEED} reproduces this run)")
    rng = random.Random(SEED)
    sw = switch
    registers = {e.name: sw.extern(e.name) for e in sw.externs() if e.kind == "register"}
    snapshot = {name: list(r.values) for name, r in registers.items()}
    agg_job = next(r for name, r in registers.items() if name.endswith(".agg_job"))
    atp_job = next(r for name, r in registers.items() if name.endswith(".atp_job"))
    stream, others = valid_stream(rng), other_traffic()
    recent: list[tuple[int, bytes]] = list(others)
    seen: Counter[str] = Counter()

    def drops() -> dict[DropReason, int]:
        return {r: sw.counter_read("inc_drops", int(r))[0] for r in DropReason}

    clock = iter(range(CLOCK_STEP_US, 1 << 48, CLOCK_STEP_US))
    sw.pipeline.clock = lambda: next(clock)
    for step in range(PACKETS):
        if stream and rng.random() < len(stream) / (PACKETS - step):  # spread over the run
            port, frame = stream.pop(0)
            recent.append((port, frame))
        else:
            port, frame = rng.choice(recent[-40:])
            frame = mutate(frame, rng)
            if rng.random() < 0.2:
                port = rng.randrange(0, 8)
        where = f"seed {SEED}, packet {step} on port {port}: {frame.hex()}"
        before = drops()
        outs = sw.send(port, frame)
        after = drops()
        counted = [r for r in DropReason if after[r] != before[r]]
        for out_port, data in outs:
            assert isinstance(data, bytes) and 0 <= out_port < 511, where
        assert sum(after.values()) - sum(before.values()) <= 1, f"{counted}: {where}"
        owed = must_refuse(frame, port)
        if owed is not None:
            assert counted == [owed] and outs == [], f"{owed.name} owed, got {counted}: {where}"
        elif counted and counted[0] in GUARDS:
            pytest.fail(f"refused by a guard it passes: {where}")
        target = None if counted else admitted_copy(frame, port)
        if target is not None:
            mine = {n: r for n, r in registers.items() if n.startswith(target.prefix)}
            if target.prefix in (AGGREGATOR, ATP):
                tag = agg_job if target.prefix == AGGREGATOR else atp_job
                cell = target.cells[0]
                changed = any(r.values[cell] != snapshot[n][cell] for n, r in mine.items())
                assert not changed or tag.values[cell] == target.job_id, f"foreign tag: {where}"
            for name, r in mine.items():
                for cell in target.cells:
                    snapshot[name][cell] = r.values[cell]
            for prefix, cells in target.also:
                for name, r in registers.items():
                    if name.startswith(prefix):
                        for cell in cells:
                            snapshot[name][cell] = r.values[cell]
        else:
            assert len(outs) <= 1, f"a refused packet was replicated: {where}"
        for name, r in registers.items():
            if name.startswith(METER):  # whatever the verdict (a token spent, or not)
                for cell in meter_cells(frame, port):
                    snapshot[name][cell] = r.values[cell]
        for name, r in registers.items():
            if r.values != snapshot[name]:
                i = first_difference(r.values, snapshot[name])
                pytest.fail(f"{name}[{i}] changed by a packet not admitted to it: {where}")
        seen[counted[0].name if counted else "admitted" if target else "not aggregated"] += 1
        if target is not None and outs:
            seen["result"] += 1
    print(dict(seen))
    # The run reached every verdict, or it proved less than it claims.
    reasons = {r.name for r in DropReason}
    assert reasons | {"admitted", "result", "not aggregated"} <= set(seen), dict(seen)
    running = registers[SYNC + "async_sum_00"].values[ASYNC.offset : ASYNC.offset + ASYNC.size]
    assert any(running), "no contribution reached the async job's running aggregates"
