"""The INC header: one definition of the wire format for the switch program, controller and hosts.

Example:
    >>> import numpy as np
    >>> h = Header(op=Op.AGG_SYNC, job_id=7, worker_id=2, psn=41, agg_idx=9, ver=1)
    >>> payload = pack(h, np.arange(SLOTS, dtype=np.int32))
    >>> len(payload) == HEADER_LEN + 4 * SLOTS
    True
    >>> unpack(payload)[0].psn
    41

Layout (docs/protocol.md has the byte diagram): Ethernet / IPv4 / UDP (both ports
``INC_UDP_PORT``) / 24-byte INC header / ``slot_count`` big-endian signed 32-bit values.
This module is the single source of truth for every constant shared with p4src/;
tests/test_p4src_constants.py checks that p4src/configuration.p4 and p4src/headers.p4 agree.
It needs only ``struct`` and numpy, so the controller, the hosts and the switch-side tools
all import it cheaply; the Scapy layer lives in ``wire.scapy_layers`` and the
Ethernet/IPv4/UDP framing for raw sockets in ``wire.framing``.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass, replace
from enum import IntEnum, IntFlag
from typing import NamedTuple

import numpy as np

# --- constants shared with p4src/configuration.p4 -------------------------------------------
INC_UDP_PORT = 20050  # 0x4E52 ("NR"); used as both source and destination port
HEADER_LEN = 24  # bytes of the INC header, values start here (4-byte aligned)
SLOTS = 32  # K: value slots per packet that the switch aggregates
# A synchronous aggregation job (NetReduce) may send whole blocks of K values, up to this
# many, in one packet (p4src: inc_values, inc_values_b1..b3): fewer and larger frames.
VALUE_BLOCKS = 4
AGG_SLOT_COUNTS = tuple(SLOTS * b for b in range(1, VALUE_BLOCKS + 1))  # 32, 64, 96, 128
VALUE_BYTES = 4  # every slot is a two's complement int32, big-endian on the wire
MAX_SLOTS = 255  # slot_count is 8 bits; key-value ops use pairs (key, value) of slots
MAX_JOBS = 1 << 16  # job_id is 16 bits; job 0 is reserved ("no job") in switch state
MAX_WORKERS = 32  # workers per job: one bit each in the 32-bit contributor bitmap
AGG_POOL_SIZE = 32768  # aggregators in the switch pool; each holds two versions
AGG_VERSIONS = 2  # shadow copies per aggregator (switch memory = 2 x window)
SYNC_JOBS = 64  # jobs that can have a synchronisation mode at once (p4src/sync_modes.p4)
SYNC_RING = 8  # epochs above the slowest worker's that the switch's clocks track
ASYNC_UNSET = 0xFFFFFFFF  # async_last before a worker's first async packet (sync_modes.p4)
KV_CACHE_SIZE = 4096  # key-value cache entries in the switch, shared by all KV jobs
KV_VALUE_WORDS = 8  # a key-value value: slots 1..8 (32 bytes); slot 0 holds the key
KV_ANSWERED_BY_SWITCH = 1  # epoch of a KV reply the switch served from its cache
CONS_GROUPS = 1024  # sequencer counters in the switch: consensus groups (jobs) at once
ATP_POOL_SIZE = 4096  # aggregators of ATP's shared pool (p4src/atp.p4, registers of its own)
# Per job (cell job_id % JOB_TABLE_SIZE), the psns that fell back to the PS, psn % this: a
# later packet of such a psn follows it to the PS instead of claiming (p4src/atp.p4).
ATP_MARKS_PER_JOB = 128
# Replication id of the PS's copy in an ATP job's multicast group: a completed aggregate
# goes to the job's members and, with this rid, to its PS (p4src/atp.p4, AtpCopies).
ATP_PS_RID = 0xFFFF
VALUE_DTYPE = np.dtype(">i4")
# Key-value aggregation (ASK, p4src/ask.p4): a rows x tuples array, two copies of each row.
ASK_ROWS = 4096  # rows in the switch (the "ask" memory pool of the controller)
ASK_TUPLES = SLOTS // 2  # columns: (key, value) tuples per packet, slots (2j, 2j + 1)
IPV4_ETHERTYPE = 0x0800
UDP_PROTO = 17


class Op(IntEnum):
    """What the switch computes for this packet (byte 0)."""

    AGG_SYNC = 1  # synchronous value aggregation (NetReduce, ATP)
    AGG_KV = 2  # asynchronous key-value aggregation (slots are (key, value) pairs)
    KV_READ = 3  # key-value store read
    KV_WRITE = 4  # key-value store write
    CONSENSUS = 5  # consensus message (library class 4)
    RESULT = 6  # a result sent by a host (e.g. the PS after a fallback)
    ACK = 7  # a standalone acknowledgement that releases an aggregator (ATP)
    FALLBACK = 8  # a host-to-PS packet that the switch must not aggregate


class Flag(IntFlag):
    """Per-packet role and state bits (byte 1)."""

    NONE = 0
    RETX = 0x01  # set by a worker on a retransmission
    RESULT = 0x02  # set by the switch (or PS) on an aggregated result
    ACK = 0x04  # acknowledgement (ATP: releases the aggregator on the way back)
    COLLISION = 0x08  # set by the switch: the aggregator belonged to another (job, psn)
    FALLBACK = 0x10  # set by the switch: forwarded to the PS unaggregated
    DRAIN = 0x20  # AGG_KV: the reducer reads a row of the key-value array (ASK)
    WAIT = 0x40  # set by the switch: not aggregated, resend later (bounded staleness, fence)
    RUNNING = 0x80  # with RESULT: the values are a running aggregate (Serene async), no round


class SyncMode(IntEnum):
    """A job's synchronisation mode in ``p4src/sync_modes.p4`` (Serene)."""

    SYNC = 0  # a round completes with all N workers
    PARTIAL = 1  # a round completes at the first k contributions
    BOUNDED = 2  # stale synchronous parallel: at most `bound` epochs past the slowest
    ASYNC = 3  # no rounds: each contribution is added to a running aggregate and returned


class DropReason(IntEnum):
    """Index of the switch's ``inc_drops`` counter (p4src/job_region.p4, aggregator.p4)."""

    UNKNOWN_JOB = 0  # job_id not in the job_region table
    UNKNOWN_WORKER = 1  # (job_id, worker_id) not in the job_worker table
    OUT_OF_REGION = 2  # agg_idx outside [offset, offset + size) or outside the pool
    BAD_SLOT_COUNT = 3  # slot_count != SLOTS: the switch cannot parse the values
    STALE = 4  # psn older than the use held by the aggregator copy
    DUPLICATE = 5  # contribution already counted, aggregation still in progress
    OLD_EPOCH = 6  # epoch further below the worker's clock than its mode allows (sync_modes)
    FORGED_RESULT = 7  # result-like flags no binding of the job allows from that port
    METERED = 8  # over its job's meter rate (p4src/job_meter.p4)
    UNPARSED_IPV4 = 9  # UDP to INC_UDP_PORT behind IPv4 options or in a fragment
    SPOOFED_SOURCE = 10  # IPv4 source not one the port's host may use (source_guard.p4)


DROP_REASONS = len(DropReason)


class HostDrop(IntEnum):
    """Why a host agent dropped a datagram that reached its socket (a worker's
    ``ClientStats.drops``; hosts/transport/result_filter.py and the native loops count the
    same cells; the ASK and key-value agents too). A host takes only what its switch
    admitted: results come from the aggregation address and port, of its job, with the flags
    the switch or PS sets; requests and contributions from the address the job declares for
    their member."""

    FOREIGN_ADDRESS = 0  # source IP is not the aggregation address (switch or PS)
    FOREIGN_PORT = 1  # right IP, wrong source port: another process on that host
    MALFORMED = 2  # shorter than its header and slot_count say
    OTHER_JOB = 3  # op or job id not this job's
    FORGED_FLAGS = 4  # flags no switch or PS sets on what it sends this host
    BAD_SLOT_COUNT = 5  # slot_count is not the job's
    NOT_A_MEMBER = 6  # names a member (worker, flow, client) the job or this agent has not
    NOT_IN_FLIGHT = 7  # answers nothing this agent has in flight: psn, epoch, echoed nonce


HOST_DROPS = len(HostDrop)
# Flags a worker's own packets carry, and what the switch or PS adds on its answers: a
# result (RESULT, Serene's running aggregate RUNNING) or a hold-back (WAIT). An answer
# with any other bit is forged (HostDrop.FORGED_FLAGS).
WORKER_FLAGS = Flag.RETX
RESULT_FLAGS = Flag.RESULT | Flag.RUNNING
# The switch's per-job drop counter (job_drops): cell job_id * DROP_STRIDE + reason, for
# job ids below JOB_DROP_JOBS; a packet claiming a higher job id counts under job 0.
DROP_STRIDE = 32
JOB_DROP_JOBS = 1024
assert DROP_REASONS <= DROP_STRIDE, "more drop reasons than job_drops has cells per job"


class AtpEvent(IntEnum):
    """Index of ATP's ``atp_events`` counter (p4src/atp.p4): the shared pool's statistics."""

    CLAIMED = 0  # a first packet took a free aggregator
    ADDED = 1  # a contribution was added to a held aggregator
    COMPLETED = 2  # an aggregation reached its quorum: multicast to members and PS (or up)
    COLLISION = 3  # the aggregator held another (job, psn): COLLISION|FALLBACK to the PS
    RETX_FALLBACK = 4  # a retransmission went to the PS unaggregated
    OVERFLOW = 5  # a sum would overflow int32: the contribution went to the PS
    RELEASED = 6  # a result/ACK freed the aggregator holding its (job, psn)
    RELEASE_MISSED = 7  # a result/ACK found its aggregator holding something else
    RECLAIMED = 8  # a finished use of the same job (psn older by >= window) was taken over
    CAPPED = 9  # the job held its cap of aggregators: the packet went to the PS instead
    FOLLOWED = 10  # its psn fell back earlier (another worker's packet): to the PS as well
    LENT = 11  # another job's complete use, its ACK not back, taken over: its sum to its PS


ATP_EVENTS = len(AtpEvent)


class Field(NamedTuple):
    """One header field: byte offset, bit offset inside that byte (0 = MSB) and width."""

    name: str
    offset: int
    bit: int
    width: int


# Field order is the wire order; P4 headers.p4 declares the same fields in the same order.
FIELDS: tuple[Field, ...] = (
    Field("op", 0, 0, 8),
    Field("flags", 1, 0, 8),
    Field("job_id", 2, 0, 16),
    Field("worker_id", 4, 0, 8),
    Field("ver", 5, 0, 1),
    Field("reserved0", 5, 1, 7),
    Field("slot_count", 6, 0, 8),
    Field("reserved1", 7, 0, 8),
    Field("psn", 8, 0, 32),
    Field("agg_idx", 12, 0, 32),
    Field("epoch", 16, 0, 32),
    Field("bitmap", 20, 0, 32),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}

# op, flags, job_id, worker_id, ver|reserved0, slot_count, reserved1, psn, agg_idx, epoch, bitmap
_HEADER = struct.Struct("!BBHBBBBIIII")
assert _HEADER.size == HEADER_LEN
_VER_SHIFT = 7  # ver is the most significant bit of byte 5


class ProtocolError(ValueError):
    """A packet or header that does not follow docs/protocol.md."""


@dataclass(frozen=True, slots=True)
class Header:
    """The INC header as plain values (``slot_count`` is derived from the values on pack)."""

    op: int = Op.AGG_SYNC
    flags: int = Flag.NONE
    job_id: int = 0
    worker_id: int = 0
    ver: int = 0
    psn: int = 0
    agg_idx: int = 0
    epoch: int = 0
    bitmap: int = 0
    slot_count: int = SLOTS

    def with_flags(self, flags: int) -> Header:
        """A copy with ``flags`` OR-ed in."""
        return replace(self, flags=self.flags | flags)


def pack_header(h: Header, slot_count: int | None = None) -> bytes:
    """Serialise ``h`` to 24 bytes; ``slot_count`` overrides ``h.slot_count``."""
    count = h.slot_count if slot_count is None else slot_count
    try:
        return _HEADER.pack(
            h.op,
            h.flags,
            h.job_id,
            h.worker_id,
            (h.ver & 1) << _VER_SHIFT,
            count,
            0,
            h.psn,
            h.agg_idx,
            h.epoch,
            h.bitmap,
        )
    except struct.error as e:
        raise ProtocolError(f"header field out of range: {e} in {h}") from None


def pack(h: Header, values: np.ndarray) -> bytes:
    """Header + values as the UDP payload. ``values`` is any int array of <= MAX_SLOTS."""
    v = np.asarray(values)
    if v.ndim != 1 or v.size > MAX_SLOTS:
        raise ProtocolError(f"values must be 1-D with at most {MAX_SLOTS} slots, got {v.shape}")
    return pack_header(h, v.size) + v.astype(VALUE_DTYPE, copy=False).tobytes()


def unpack(payload: bytes | memoryview) -> tuple[Header, np.ndarray]:
    """Parse a UDP payload into (header, int32 values in native byte order)."""
    if len(payload) < HEADER_LEN:
        raise ProtocolError(f"payload of {len(payload)} bytes is shorter than the header")
    op, flags, job, worker, vb, count, _, psn, idx, epoch, bitmap = _HEADER.unpack_from(payload)
    end = HEADER_LEN + count * VALUE_BYTES
    if len(payload) < end:
        raise ProtocolError(f"slot_count {count} needs {end} bytes, payload has {len(payload)}")
    values = np.frombuffer(payload, dtype=VALUE_DTYPE, count=count, offset=HEADER_LEN)
    h = Header(op, flags, job, worker, vb >> _VER_SHIFT, psn, idx, epoch, bitmap, count)
    return h, values.astype(np.int32)


def atp_hash(job_id: int) -> int:
    """Hash(job_id): CRC-32 over the 16-bit job id, big-endian, modulo 2**31, as v1model's
    ``hash(..., HashAlgorithm.crc32, 0, {job_id}, 0x80000000)`` computes it: where the job's
    psns start in a range.

    >>> atp_hash(1) == zlib.crc32(bytes([0, 1])) % 2**31
    True
    """
    return zlib.crc32(_ATP_KEY.pack(job_id)) & 0x7FFFFFFF


_ATP_KEY = struct.Struct("!H")


def atp_index(job_id: int, psn: int, offset: int, size: int) -> int:
    """ATP's addressing: ``(Hash(job_id) + psn) mod 2**32 % size + offset``: consecutive psns
    take consecutive aggregators from a point the job id chooses, so any ``size`` consecutive
    psns of a job (its whole window, ``window <= size``) use ``size`` different aggregators
    and a job never collides with itself; jobs sharing a range start at different points.

    >>> [atp_index(3, p, offset=100, size=8) - 100 for p in range(3)] == [
    ...     (atp_hash(3) + p) % 8 for p in range(3)]
    True
    """
    if size <= 0:
        raise ProtocolError(f"region size must be positive, got {size}")
    return offset + ((atp_hash(job_id) + psn) & 0xFFFFFFFF) % size


def aggregator_address(psn: int, offset: int, size: int) -> tuple[int, int]:
    """NetReduce addressing: (agg_idx, ver) = (offset + psn % size, (psn // size) % 2).

    >>> aggregator_address(psn=13, offset=100, size=8)
    (105, 1)
    """
    if size <= 0:
        raise ProtocolError(f"region size must be positive, got {size}")
    return offset + psn % size, (psn // size) & 1


ADDRESSING = ("modulo", "hashed")  # per memory-managed job (controller.jobs.job.Scheduling)


def hash_params(job_id: int, size: int) -> tuple[int, int]:
    """(a, b) of the job's address hash ``Hash(psn, job) = a psn + b`` for a region of
    ``size``: both from crc32 of the job id, ``a`` coprime to ``size``.

    >>> hash_params(7, 8)
    (3, 7)
    """
    if size <= 0:
        raise ProtocolError(f"region size must be positive, got {size}")
    h = zlib.crc32(job_id.to_bytes(4, "big"))
    a = max(1, (h >> 8) % size)
    while math.gcd(a, size) != 1:
        a += 1
    return a, h % size


def hashed_address(psn: int, job_id: int, offset: int, size: int) -> tuple[int, int]:
    """Hashed addressing in a job's own region: ``agg_idx = Hash(psn, job) % size + offset``
    with ``Hash = a psn + b`` (``hash_params``), ``ver`` as NetReduce's.

    ``a`` being coprime to ``size``, ``(a psn + b) % size`` depends on ``psn % size`` only
    and is a permutation of ``[0, size)``: two psns share an aggregator copy exactly when
    they share one under ``aggregator_address`` (same ``psn % size`` and block parity). The
    cells are relabelled, the reuse pattern is not, so NetReduce's invariants hold and no
    two live psns of the job collide (docs/protocol.md, "Memory-managed jobs").

    >>> [hashed_address(p, job_id=7, offset=100, size=8)[0] for p in range(8)]
    [107, 102, 105, 100, 103, 106, 101, 104]
    >>> hashed_address(13, 7, 100, 8)[1] == aggregator_address(13, 100, 8)[1]
    True
    """
    a, b = hash_params(job_id, size)
    return offset + (a * psn + b) % size, (psn // size) & 1
