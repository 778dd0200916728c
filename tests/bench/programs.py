"""The benchmark's programs, their table entries and their traffic, shared by the in-process
and the on-the-wire measurements (and by BMv2, which gets the same entries as runtime JSON).

Example::

    case = CASES["inc.p4 aggregation round"]
    sw = case.switch()                 # a p4sim Switch with the entries installed
    frames = case.frames(64)           # [(ingress port, bytes), ...] in sending order
    case.runtime_json()                # the same entries, tutorial runtime-JSON form

Three programs: basic IPv4 forwarding (topologies/basic/basic.p4, one LPM table, TTL and
IPv4 checksum), 32 register read-modify-writes per packet (tests/bench/register_heavy.p4),
and ``p4src/inc.p4``'s aggregation round: one job of 4 workers on ports 1..4, each round
is 4 contributions (one per port) for the same psn, the fourth completes it and the
result is multicast to the 4 ports. Rounds walk through the job's region so that every
aggregator copy is reused, as in a real all-reduce.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BASIC = ROOT / "topologies/basic/basic.p4"
REGISTERS = ROOT / "tests/bench/register_heavy.p4"
INC = ROOT / "p4src/inc.p4"

WORKERS = 4
JOB = 7
REGION = 64  # aggregators of the job (window = region, as NetReduce)


def mac(i: int) -> int:
    return 0x020000000000 | i


def ip(i: int) -> int:
    return 0x0A000000 | i


def ipv4_frame(dst: str = "10.0.2.2", payload: int = 64) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(
        Ether(dst="08:00:00:00:02:00", src="08:00:00:00:01:11")
        / IP(src="10.0.1.1", dst=dst, ttl=64)
        / UDP(sport=1234, dport=4321)
        / (b"x" * payload)
    )


def words_frame(index: int) -> bytes:
    words = struct.pack("!33I", index, *range(1, 33))
    return b"\x02" * 6 + b"\x04" * 6 + b"\x88\xb5" + words


def inc_frame(worker: int, psn: int) -> bytes:
    """Worker ``worker``'s (0-based) contribution for ``psn``: values worker+1, ..."""
    import numpy as np

    from wire.framing import encapsulate
    from wire.header import Header, aggregator_address, pack

    idx, ver = aggregator_address(psn, 0, REGION)
    h = Header(job_id=JOB, worker_id=worker, ver=ver, psn=psn, agg_idx=idx)
    values = np.arange(32, dtype=np.int32) * (worker + 1) + psn
    payload = pack(h, values)
    return encapsulate(
        payload,
        mac(worker + 1).to_bytes(6, "big"),
        mac(100).to_bytes(6, "big"),
        ip(worker + 1).to_bytes(4, "big"),
        ip(100).to_bytes(4, "big"),
    )


@dataclass(frozen=True)
class TableEntry:
    table: str
    match: dict[str, Any]  # key name -> value, or (value, prefix) for lpm
    action: str
    params: dict[str, int]


@dataclass(frozen=True)
class Case:
    """One benchmark program: source, entries, multicast groups and a traffic pattern."""

    name: str
    program: Path
    entries: tuple[TableEntry, ...]
    groups: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]  # (gid, ((port, rid), ...))
    make_frames: Callable[[int], list[tuple[int, bytes]]]
    ports: tuple[int, ...]  # switch ports the traffic enters and leaves by
    outputs_per_input: float  # packets out per packet in, on average

    def frames(self, n: int) -> list[tuple[int, bytes]]:
        return self.make_frames(n)

    def switch(self, **kwargs: Any) -> Any:
        from p4sim.switch import Switch

        sw = Switch.from_file(str(self.program), **kwargs)
        self.install(sw)
        return sw

    def install(self, sw: Any) -> None:
        for e in self.entries:
            sw.table_add(e.table, e.match, e.action, e.params)
        for gid, reps in self.groups:
            sw.mc_group_create(gid, list(reps))

    def runtime_json(self) -> dict[str, Any]:
        """The entries in the p4lang tutorials' ``sN-runtime.json`` form."""

        def match(v: Any) -> Any:
            return list(v) if isinstance(v, tuple) else v

        return {
            "target": "bmv2",
            "table_entries": [
                {
                    "table": e.table,
                    "match": {k: match(v) for k, v in e.match.items()},
                    "action_name": e.action,
                    "action_params": dict(e.params),
                }
                for e in self.entries
            ],
            "multicast_group_entries": [
                {
                    "multicast_group_id": gid,
                    "replicas": [{"egress_port": p, "instance": r} for p, r in reps],
                }
                for gid, reps in self.groups
            ],
        }

    def write_runtime_json(self, path: Path) -> Path:
        path.write_text(json.dumps(self.runtime_json(), indent=1))
        return path


def _basic_frames(n: int) -> list[tuple[int, bytes]]:
    return [(1, ipv4_frame())] * n


def _register_frames(n: int) -> list[tuple[int, bytes]]:
    return [(1, words_frame(i % 4096)) for i in range(n)]


def _inc_frames(n: int) -> list[tuple[int, bytes]]:
    """Whole rounds: worker w's packet enters on port w + 1."""
    out = []
    for psn in range(max(1, n // WORKERS)):
        for w in range(WORKERS):
            out.append((w + 1, inc_frame(w, psn)))
    return out


def _inc_entries() -> tuple[TableEntry, ...]:
    jr, rr = "IncIngress.job_region", "IncEgress.result_rewrite"
    entries = [
        TableEntry(
            f"{jr}.jobs",
            {"hdr.inc.job_id": JOB},
            f"{jr}.set_region",
            {"offset": 0, "size": REGION, "quorum": WORKERS, "mcast_grp": JOB, "slot_count": 32},
        )
    ]
    for w in range(WORKERS):
        entries.append(
            TableEntry(
                f"{jr}.workers",
                {
                    "hdr.inc.job_id": JOB,
                    "hdr.inc.worker_id": w,
                    "standard_metadata.ingress_port": w + 1,
                },
                f"{jr}.set_worker",
                {"bit_index": w},
            )
        )
        entries.append(
            TableEntry(
                f"{rr}.result_dst",
                {"hdr.inc.job_id": JOB, "standard_metadata.egress_rid": w + 1},
                f"{rr}.set_result_dst",
                {"dst_mac": mac(w + 1), "dst_ip": ip(w + 1), "worker_id": w},
            )
        )
    return tuple(entries)


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case(
            "basic IPv4 forwarding",
            BASIC,
            (
                TableEntry(
                    "RouterIngress.ipv4_route",
                    {"hdr.ipv4.dst_addr": (0x0A000202, 32)},
                    "RouterIngress.forward",
                    {"next_hop_mac": 0x080000000200, "port": 2},
                ),
            ),
            (),
            _basic_frames,
            (1, 2),
            1.0,
        ),
        Case("32 register RMW / packet", REGISTERS, (), (), _register_frames, (1, 2), 1.0),
        Case(
            "inc.p4 aggregation round",
            INC,
            _inc_entries(),
            ((JOB, tuple((w + 1, w + 1) for w in range(WORKERS))),),
            _inc_frames,
            tuple(range(1, WORKERS + 1)),
            1.0,
        ),
    )
}
