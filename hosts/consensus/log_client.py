"""The replicated log's blocking client: one append at a time, and reads.

Example (what ``inclib/log.py`` wraps)::

    log = LogClient(LogConfig.from_controller(url, job_id, worker_id))
    session, index = log.append(b"hello")     # returns once committed
    log.read()                                # [(client, request id, b"hello"), ...]

An append goes to the job's group address (the switch numbers it and multicasts it to the
replicas) or, with ``host_sequencer``, to the leader with ``FALLBACK``; it is repeated with
backoff until the answers of one view's leader and ``f`` others name one (session, index)
(``count_vote``). A read asks every replica with a sealed READ and takes the entries of the
one that answers as leader. ``pipelined_client.py`` keeps many appends in flight instead.
"""

from __future__ import annotations

import json
import select
import time
from dataclasses import dataclass, field

from hosts.consensus.log_wire import (
    CTL_PORT,
    LEADER,
    RETRY,
    VIEW_SHIFT,
    Entry,
    LogError,
    count_vote,
    distinct,
    encode_data,
    udp_socket,
)
from hosts.transport.control_mac import ControlMac
from wire.header import INC_UDP_PORT, Flag, Header, Op, ProtocolError, pack, unpack
from wire.serial import wrap


@dataclass(frozen=True)
class LogConfig:
    job_id: int
    worker_id: int
    ip: str
    group_ip: str
    replicas: tuple[str, ...]  # replica IPs by id
    host_sequencer: bool = False
    key: bytes | None = field(default=None, repr=False)  # the job's control key
    rto: float = 0.05
    tries: int = 60
    port: int = INC_UDP_PORT  # as Replica.port

    @classmethod
    def from_controller(
        cls, url: str, job_id: int, worker_id: int, host: bool = False
    ) -> LogConfig:
        from controller.api_client import ControllerApi

        api = ControllerApi(url)
        cfg = api.worker_config(job_id, worker_id)
        if cfg.get("kind") != "consensus":
            raise LogError(f"job {job_id} is a {cfg.get('kind')} job, not consensus")
        reps = tuple(str(r["ip"]) for r in cfg["replicas"])
        key = api.control_key(job_id)
        return cls(job_id, worker_id, str(cfg["ip"]), str(cfg["group_ip"]), reps, host, key)


class LogClient:
    """Appends to and reads the job's replicated log (blocking)."""

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.sock = udp_socket(config.port, ip=config.ip)
        self.ctl = udp_socket(CTL_PORT)
        self.mac = ControlMac(config.key)
        self.req = wrap(int(time.time() * 1000) << 8)
        self.retransmissions = 0
        self.dropped = 0  # answers and read replies not from a replica of the job

    def append(self, data: bytes) -> tuple[int, int]:
        """Append ``data``; returns (session, log index) once committed."""
        self.req = wrap(self.req + 1)
        values = encode_data(data)
        flags = Flag.FALLBACK if self.config.host_sequencer else Flag.NONE
        h = Header(op=Op.CONSENSUS, flags=flags, job_id=self.config.job_id,
                   worker_id=self.config.worker_id, psn=self.req)  # fmt: skip
        dest = self.config.replicas[LEADER] if self.config.host_sequencer else self.config.group_ip
        votes: dict[tuple[int, int, int], int] = {}
        rto = self.config.rto
        for attempt in range(self.config.tries):
            if attempt:
                self.retransmissions += 1
            self.sock.sendto(pack(h, values), (dest, self.config.port))
            deadline = time.monotonic() + rto
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([self.sock], [], [], left)
                if not ready:
                    break
                got = self._votes(votes)
                if got is not None:
                    return got
            rto = min(rto * 2, 0.5)
        raise LogError(f"request {self.req} not committed after {self.config.tries} tries")

    def _votes(self, votes: dict[tuple[int, int, int], int]) -> tuple[int, int] | None:
        n = len(self.config.replicas)
        while True:
            try:
                data, addr = self.sock.recvfrom(65535)
            except BlockingIOError:
                return None
            try:
                r, _ = unpack(data)
            except ProtocolError:
                continue
            if r.op != Op.CONSENSUS or not r.flags & Flag.RESULT or r.psn != self.req:
                continue
            if (
                addr != (self.answerer(r.bitmap), self.config.port)
                or r.job_id != self.config.job_id
            ):
                self.dropped += 1  # one replica's bit, from that replica's address only
                continue
            if count_vote(votes, r.epoch, r.agg_idx, r.bitmap, n):
                return r.epoch, r.agg_idx

    def answerer(self, bitmap: int) -> str | None:
        """The IP of the one replica whose bit ``bitmap`` carries (``None``: not one)."""
        bits = bitmap & ((1 << VIEW_SHIFT) - 1)
        rid = bits.bit_length() - 1
        if bits != 1 << rid or rid >= len(self.config.replicas):
            return None
        return self.config.replicas[rid]

    def read(self, timeout: float = 10.0) -> list[Entry]:
        """The log as the current leader holds it (every committed entry), no-ops and
        repeated requests left out. Asks every replica; the leader answers as such."""
        raw: list[Entry] = []
        end = time.monotonic() + timeout
        total = None
        while total is None or len(raw) < total:
            if time.monotonic() > end:
                raise LogError("no leader answered the read")
            msg = self.mac.seal(json.dumps({"t": "READ", "from": len(raw)}).encode())
            for ip in self.config.replicas:
                self.ctl.sendto(msg, (ip, CTL_PORT))
            deadline = time.monotonic() + RETRY
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([self.ctl], [], [], left)
                if not ready:
                    break
                try:
                    data, addr = self.ctl.recvfrom(65535)
                    opened = self.mac.open(data)
                    got = json.loads(opened) if opened is not None else None
                except (ValueError, BlockingIOError):
                    continue
                if (
                    not isinstance(got, dict)
                    or not isinstance(got.get("r"), int)
                    or not 0 <= got["r"] < len(self.config.replicas)
                    or addr[0] != self.config.replicas[got["r"]]
                ):
                    self.dropped += 1  # not sealed with the job's key, or not from a replica
                    continue
                if got.get("t") == "ENTRIES" and got.get("leader") and got["from"] == len(raw):
                    raw.extend(Entry.of(e) for e in got["e"])
                    total = int(got["len"])
                    break
        return distinct(raw)

    def close(self) -> None:
        self.sock.close()
        self.ctl.close()
