"""The INC wire format: struct packer, Scapy layer and framing agree byte for byte."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from hosts.transport.sliding_window import ResultAssembler, SendWindow
from wire.framing import decapsulate, encapsulate, ipv4_checksum
from wire.header import (
    AGG_SLOT_COUNTS,
    FIELDS,
    HEADER_LEN,
    INC_UDP_PORT,
    MAX_JOBS,
    SLOTS,
    DropReason,
    Flag,
    Header,
    Op,
    ProtocolError,
    aggregator_address,
    hash_params,
    hashed_address,
    pack,
    pack_header,
    unpack,
)
from wire.scapy_layers import INC

MAC_A, MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
IP_A, IP_B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])

headers = st.builds(
    Header,
    op=st.sampled_from(list(Op)),
    flags=st.integers(0, 0x1F),
    job_id=st.integers(0, 2**16 - 1),
    worker_id=st.integers(0, 255),
    ver=st.integers(0, 1),
    psn=st.integers(0, 2**32 - 1),
    agg_idx=st.integers(0, 2**32 - 1),
    epoch=st.integers(0, 2**32 - 1),
    bitmap=st.integers(0, 2**32 - 1),
)
value_vectors = st.lists(st.integers(-(2**31), 2**31 - 1), min_size=0, max_size=64)


@settings(max_examples=60, deadline=None)
@given(h=headers, values=value_vectors)
def test_pack_unpack_round_trip_preserves_every_field(h: Header, values: list[int]) -> None:
    got, v = unpack(pack(h, np.array(values, dtype=np.int64)))
    for f in ("op", "flags", "job_id", "worker_id", "ver", "psn", "agg_idx", "epoch", "bitmap"):
        assert getattr(got, f) == getattr(h, f), f
    assert got.slot_count == len(values)
    assert v.dtype == np.int32 and v.tolist() == values


@settings(max_examples=40, deadline=None)
@given(h=headers, values=value_vectors)
def test_scapy_layer_builds_the_same_bytes_as_struct_packer(h: Header, values: list[int]) -> None:
    layer = INC(
        op=h.op, flags=h.flags, job_id=h.job_id, worker_id=h.worker_id, ver=h.ver,
        psn=h.psn, agg_idx=h.agg_idx, epoch=h.epoch, bitmap=h.bitmap, values=values,
    )  # fmt: skip
    assert bytes(layer) == pack(h, np.array(values, dtype=np.int32))


def test_scapy_dissects_a_struct_built_frame_as_inc() -> None:
    values = np.arange(-16, 16, dtype=np.int32)
    h = Header(job_id=9, worker_id=3, psn=77, agg_idx=5, ver=1, flags=Flag.RETX)
    frame = encapsulate(pack(h, values), MAC_A, MAC_B, IP_A, IP_B)
    pkt = Ether(frame)
    assert pkt[UDP].dport == INC_UDP_PORT and pkt.haslayer(INC)
    inc = pkt[INC]
    assert (inc.job_id, inc.worker_id, inc.psn, inc.agg_idx, inc.ver) == (9, 3, 77, 5, 1)
    assert inc.slot_count == SLOTS and inc.values == values.tolist()
    assert "RETX" in str(inc.flags)


def test_scapy_built_frame_decapsulates_to_the_same_header_and_values() -> None:
    pkt = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP() / INC(job_id=4, values=[7, -7])
    payload = decapsulate(bytes(pkt))
    assert payload is not None
    h, v = unpack(payload)
    assert h.job_id == 4 and v.tolist() == [7, -7]


def test_encapsulate_writes_a_valid_ipv4_checksum() -> None:
    frame = encapsulate(pack(Header(), np.zeros(SLOTS, np.int32)), MAC_A, MAC_B, IP_A, IP_B)
    ip = IP(frame[14:34])
    sent = ip.chksum
    del ip.chksum  # let Scapy recompute it
    assert IP(bytes(ip)).chksum == sent
    assert ipv4_checksum(frame[14:34]) == 0  # a correct header sums to all ones


def test_decapsulate_ignores_other_udp_ports_and_non_ip() -> None:
    other = Ether() / IP() / UDP(sport=1234, dport=53) / (b"x" * 30)
    assert decapsulate(bytes(other)) is None
    assert decapsulate(bytes(Ether(type=0x0806) / (b"\0" * 60))) is None


SETTABLE = [f for f in FIELDS if not f.name.startswith("reserved")]  # reserved: always 0


@pytest.mark.parametrize("field", SETTABLE, ids=lambda f: f.name)
def test_field_table_matches_the_packed_bit_positions(field) -> None:
    ones = (1 << field.width) - 1
    kwargs = {"op": 0, field.name: ones} if field.name != "slot_count" else {"op": 0}
    raw = pack_header(Header(**kwargs), slot_count=ones if field.name == "slot_count" else 0)
    bits = int.from_bytes(raw, "big")
    start = field.offset * 8 + field.bit  # from the most significant bit of byte 0
    expected = ones << (HEADER_LEN * 8 - start - field.width)
    assert bits == expected


def test_field_table_covers_the_header_without_gaps() -> None:
    pos = 0
    for f in FIELDS:
        assert f.offset * 8 + f.bit == pos, f.name
        pos += f.width
    assert pos == HEADER_LEN * 8


def test_unpack_rejects_payload_shorter_than_its_slot_count() -> None:
    raw = pack(Header(), np.zeros(SLOTS, dtype=np.int32))
    with pytest.raises(ProtocolError, match="slot_count 32"):
        unpack(raw[:-1])
    with pytest.raises(ProtocolError, match="shorter than the header"):
        unpack(raw[: HEADER_LEN - 1])


def test_pack_rejects_out_of_range_field_with_a_readable_error() -> None:
    with pytest.raises(ProtocolError, match="out of range"):
        pack_header(Header(job_id=2**16))
    with pytest.raises(ProtocolError, match="at most 255"):
        pack(Header(), np.zeros(256, dtype=np.int32))


def test_consecutive_rounds_use_both_copies_and_reuse_after_two_rounds() -> None:
    offset, size = 100, 8
    for p in range(40):
        idx, ver = aggregator_address(p, offset, size)
        assert offset <= idx < offset + size
        assert aggregator_address(p + size, offset, size) == (idx, 1 - ver)
        assert aggregator_address(p + 2 * size, offset, size) == (idx, ver)


@settings(max_examples=200, deadline=None)
@given(job=st.integers(0, MAX_JOBS - 1), offset=st.integers(0, 1000), size=st.integers(1, 300))
def test_hashed_addressing_permutes_the_region_with_the_reuse_pattern_of_modulo(
    job: int, offset: int, size: int
) -> None:
    a, b = hash_params(job, size)
    assert 1 <= a and math.gcd(a, size) == 1 and 0 <= b < size
    for start in (0, 5 * size + 3):  # any run of `size` consecutive psns, aligned or not
        cells = {hashed_address(p, job, offset, size)[0] for p in range(start, start + size)}
        assert cells == set(range(offset, offset + size))  # no collisions, the whole region
    for p in range(0, 3 * size, max(1, size // 7)):
        idx, ver = hashed_address(p, job, offset, size)
        assert ver == aggregator_address(p, offset, size)[1]
        assert hashed_address(p + size, job, offset, size) == (idx, 1 - ver)
        assert hashed_address(p + 2 * size, job, offset, size) == (idx, ver)


def test_hashed_addressing_differs_between_jobs() -> None:
    orders = {tuple(hashed_address(p, job, 0, 16)[0] for p in range(16)) for job in range(1, 9)}
    assert len(orders) > 4  # the jobs' psns are spread differently over the region


# --- through the switch program (p4src/inc.p4 on p4sim) --------------------------------------
INC_P4 = Path(__file__).resolve().parents[1] / "p4src" / "inc.p4"
JOB, MGID, OFFSET, SIZE = 7, 7, 16, 4
WORKER_PORTS = {0: 1, 1: 2}  # worker id -> switch port
PS_MAC, PS_IP = bytes.fromhex("0200000000ff"), bytes([10, 0, 0, 254])


def worker_mac(w: int) -> bytes:
    return bytes.fromhex(f"02000000001{w}")


def worker_ip(w: int) -> bytes:
    return bytes([10, 0, 0, 10 + w])


def admit_job(sw, job: int, offset: int, size: int, mgid: int, slots: int = SLOTS) -> None:
    """What the controller installs for a job of the workers in WORKER_PORTS."""
    sw.table_add(
        "jobs", {"hdr.inc.job_id": job}, "set_region",
        {"offset": offset, "size": size, "quorum": len(WORKER_PORTS), "mcast_grp": mgid,
         "slot_count": slots},
    )  # fmt: skip
    for w, port in WORKER_PORTS.items():
        key = {"hdr.inc.job_id": job, "hdr.inc.worker_id": w}
        key["standard_metadata.ingress_port"] = port
        sw.table_add("workers", key, "set_worker", {"bit_index": w})
        sw.table_add(
            "result_dst", {"hdr.inc.job_id": job, "standard_metadata.egress_rid": w + 1},
            "set_result_dst",
            {"dst_mac": int.from_bytes(worker_mac(w)), "dst_ip": int.from_bytes(worker_ip(w)),
             "worker_id": w},
        )  # fmt: skip
    sw.mc_group_create(mgid, [(port, w + 1) for w, port in WORKER_PORTS.items()])


@pytest.fixture(scope="module")
def switch():
    """inc.p4 with one two-worker job: region [16, 20), quorum 2, multicast group 7."""
    p4sim_switch = pytest.importorskip("p4sim.switch", reason="p4sim's Switch is not built yet")
    sw = p4sim_switch.Switch.from_file(str(INC_P4))
    admit_job(sw, JOB, OFFSET, SIZE, MGID)
    return sw


class Out(NamedTuple):
    port: int
    dst_mac: bytes
    src_ip: bytes
    dst_ip: bytes
    header: Header
    values: np.ndarray


def send_update(sw, w: int, psn: int, values, **fields) -> list[Out]:
    """One worker packet through the switch; returns what leaves it."""
    idx, ver = aggregator_address(psn, OFFSET, SIZE)
    h = Header(job_id=JOB, worker_id=w, psn=psn, agg_idx=idx, ver=ver, **fields)
    frame = encapsulate(pack(h, np.asarray(values)), worker_mac(w), PS_MAC, worker_ip(w), PS_IP)
    out = []
    for port, data in sw.send(port=WORKER_PORTS[w], data=frame):
        payload = decapsulate(data)
        assert payload is not None, f"non-INC packet out of port {port}"
        assert ipv4_checksum(data[14:34]) == 0, "switch left a wrong IPv4 checksum"
        out.append(Out(port, data[0:6], data[26:30], data[30:34], *unpack(payload)))
    return sorted(out, key=lambda o: o.port)


def drops(sw, reason: DropReason) -> int:
    return sw.counter_read("inc_drops", int(reason))[0]


def test_switch_multicasts_the_sum_when_the_last_worker_arrives(switch) -> None:
    a, b = np.arange(SLOTS), np.full(SLOTS, -3) * np.arange(SLOTS)
    assert send_update(switch, 0, psn=0, values=a) == []
    out = send_update(switch, 1, psn=0, values=b)
    assert [o.port for o in out] == [WORKER_PORTS[0], WORKER_PORTS[1]]
    for o, w in zip(out, (0, 1), strict=True):
        assert o.values.tolist() == (a + b).tolist()
        assert o.header.flags & Flag.RESULT and o.header.bitmap == 0b11
        assert (o.dst_mac, o.dst_ip, o.header.worker_id) == (worker_mac(w), worker_ip(w), w)
        assert o.src_ip == PS_IP  # results come from the aggregation address


def test_switch_serves_a_lost_result_again_by_unicast(switch) -> None:
    a, b = np.ones(SLOTS), np.full(SLOTS, 2)
    send_update(switch, 0, psn=1, values=a)
    send_update(switch, 1, psn=1, values=b)
    out = send_update(switch, 0, psn=1, values=a, flags=Flag.RETX)
    assert len(out) == 1
    o = out[0]
    assert (o.port, o.dst_ip, o.src_ip) == (WORKER_PORTS[0], worker_ip(0), PS_IP)
    assert o.header.flags & Flag.RESULT and o.values.tolist() == [3] * SLOTS


def test_switch_ignores_a_duplicate_of_an_update_in_progress(switch) -> None:
    before = drops(switch, DropReason.DUPLICATE)
    send_update(switch, 0, psn=2, values=np.ones(SLOTS))
    assert send_update(switch, 0, psn=2, values=np.ones(SLOTS)) == []
    assert drops(switch, DropReason.DUPLICATE) == before + 1
    out = send_update(switch, 1, psn=2, values=np.ones(SLOTS))
    assert len(out) == 2 and all(o.values.tolist() == [2] * SLOTS for o in out)  # counted once


def test_switch_reuses_a_copy_two_rounds_later_and_drops_the_stale_use(switch) -> None:
    p = 3
    for psn, val in ((p, 5), (p + SIZE, 6), (p + 2 * SIZE, 7)):  # same idx; copies v, 1-v, v
        send_update(switch, 0, psn=psn, values=np.full(SLOTS, val))
        out = send_update(switch, 1, psn=psn, values=np.full(SLOTS, val))
        assert {int(o.values[0]) for o in out} == {2 * val}  # fresh sum, nothing left over
    before = drops(switch, DropReason.STALE)
    assert send_update(switch, 0, psn=p, values=np.ones(SLOTS)) == []
    assert drops(switch, DropReason.STALE) == before + 1


@pytest.mark.parametrize("slots", AGG_SLOT_COUNTS[1:])
def test_switch_sums_every_block_of_a_wide_packet(switch, slots: int) -> None:
    """A job of ``slots`` values per packet (whole blocks of K): every block is summed, a
    lost result is served again whole, and a packet of another count is refused."""
    job = 20 + slots // SLOTS
    offset = 300 + 8 * (slots // SLOTS)
    admit_job(switch, job, offset, 4, mgid=job, slots=slots)
    rng = np.random.default_rng(slots)
    a, b = (rng.integers(-(2**30), 2**30, size=slots) for _ in range(2))

    def frame(w: int, psn: int, values: np.ndarray, **fields: int) -> tuple[int, bytes]:
        h = Header(job_id=job, worker_id=w, psn=psn, agg_idx=offset + psn % 4, **fields)
        return WORKER_PORTS[w], encapsulate(
            pack(h, values), worker_mac(w), PS_MAC, worker_ip(w), PS_IP
        )

    def sent(w: int, psn: int, values: np.ndarray, **fields: int) -> list[np.ndarray]:
        port, data = frame(w, psn, values, **fields)
        outs = [unpack(decapsulate(d))[1] for _, d in switch.send(port=port, data=data)]  # type: ignore[arg-type]
        return outs

    for psn in (0, 1):
        assert sent(0, psn, a) == []
        outs = sent(1, psn, b)
        assert len(outs) == 2 and all(o.tolist() == (a + b).tolist() for o in outs)
    again = sent(0, 1, a, flags=Flag.RETX)
    assert len(again) == 1 and again[0].tolist() == (a + b).tolist()
    before = drops(switch, DropReason.BAD_SLOT_COUNT)
    assert sent(0, 2, a[:SLOTS]) == []  # one block to a job of wider packets
    assert drops(switch, DropReason.BAD_SLOT_COUNT) == before + 1


def test_switch_refuses_a_wide_packet_to_a_job_of_one_block(switch) -> None:
    before = drops(switch, DropReason.BAD_SLOT_COUNT)
    h = Header(job_id=JOB, worker_id=0, psn=1000, agg_idx=OFFSET)
    wide = encapsulate(pack(h, np.ones(2 * SLOTS)), worker_mac(0), PS_MAC, worker_ip(0), PS_IP)
    assert switch.send(port=1, data=wide) == []
    assert drops(switch, DropReason.BAD_SLOT_COUNT) == before + 1


def test_switch_drops_and_counts_foreign_or_out_of_region_packets(switch) -> None:
    cases = [
        (DropReason.UNKNOWN_JOB, {"job_id": JOB + 1}),
        (DropReason.OUT_OF_REGION, {"agg_idx": OFFSET + SIZE}),
        (DropReason.OUT_OF_REGION, {"agg_idx": OFFSET - 1}),
    ]
    for reason, override in cases:
        before = drops(switch, reason)
        h = Header(**{"job_id": JOB, "worker_id": 0, "psn": 1000, "agg_idx": OFFSET, **override})
        frame = encapsulate(pack(h, np.ones(SLOTS)), worker_mac(0), PS_MAC, worker_ip(0), PS_IP)
        assert switch.send(port=1, data=frame) == []
        assert drops(switch, reason) == before + 1, reason
    # A registered worker id on another worker's port is somebody else speaking for it.
    before = drops(switch, DropReason.UNKNOWN_WORKER)
    h = Header(job_id=JOB, worker_id=1, psn=1000, agg_idx=OFFSET)
    frame = encapsulate(pack(h, np.ones(SLOTS)), worker_mac(0), PS_MAC, worker_ip(0), PS_IP)
    assert switch.send(port=1, data=frame) == []
    assert drops(switch, DropReason.UNKNOWN_WORKER) == before + 1


def test_switch_sums_are_exact_under_loss_duplication_and_reordering(switch) -> None:
    """Two workers, window = region size, the real P4 program, 10% loss, 10% duplication,
    random delays, and 5% of packets held back for rounds (stale when they arrive)."""
    job, offset, size, count = 9, 100, 4, 30
    admit_job(switch, job, offset, size, mgid=job)
    stale_before = drops(switch, DropReason.STALE)
    rng, now = random.Random(5), [0.0]
    data = [rng.choices(range(-(2**20), 2**20), k=count * SLOTS) for _ in WORKER_PORTS]
    windows = [SendWindow(0, count, size, timeout=4.0, clock=lambda: now[0]) for _ in data]
    results = [ResultAssembler(0, count, SLOTS) for _ in data]
    port_worker = {port: w for w, port in WORKER_PORTS.items()}
    net: list[tuple[float, int, str, int, bytes]] = []  # (time, seq, "up"|"down", worker, frame)

    def transmit(direction: str, w: int, frame: bytes) -> None:
        for _ in range(0 if rng.random() < 0.1 else 2 if rng.random() < 0.1 else 1):
            delay = rng.uniform(10, 40) if rng.random() < 0.05 else rng.uniform(0.1, 3.0)
            net.append((now[0] + delay, rng.random(), direction, w, frame))

    while not all(w.done for w in windows):
        assert now[0] < 1000, "aggregation did not finish"
        for w, window in enumerate(windows):
            for psn, retx in window.poll():
                idx, ver = aggregator_address(psn, offset, size)
                h = Header(job_id=job, worker_id=w, psn=psn, agg_idx=idx, ver=ver,
                           flags=Flag.RETX if retx else Flag.NONE)  # fmt: skip
                payload = pack(h, np.array(data[w][psn * SLOTS : (psn + 1) * SLOTS]))
                transmit("up", w, encapsulate(payload, worker_mac(w), PS_MAC, worker_ip(w), PS_IP))
        net.sort()
        while net and net[0][0] <= now[0]:
            _, _, direction, w, frame = net.pop(0)
            if direction == "up":
                for port, out in switch.send(port=WORKER_PORTS[w], data=frame):
                    transmit("down", port_worker[port], out)
                continue
            h, values = unpack(decapsulate(frame))
            assert h.flags & Flag.RESULT and h.job_id == job
            results[w].accept(h.psn, values)
            windows[w].ack(h.psn)
        now[0] += 0.5
    expected = np.sum(np.array(data, dtype=np.int64), axis=0)
    for r in results:
        assert np.array_equal(r.result(), expected)
    assert drops(switch, DropReason.STALE) > stale_before  # late packets were refused


def test_switch_forwards_other_traffic_and_reserved_ops_by_ipv4_lpm(switch) -> None:
    ps_port = 3
    switch.table_add(
        "ipv4_lpm", {"hdr.ipv4.dstAddr": (int.from_bytes(PS_IP), 32)}, "ipv4_forward",
        {"dst_mac": int.from_bytes(PS_MAC), "port": ps_port},
    )  # fmt: skip
    unassigned = 0xEE  # an op no system uses (KV_READ, once reserved, has a path of its own)
    h = Header(op=unassigned, job_id=JOB)
    frame = encapsulate(pack(h, np.ones(SLOTS)), worker_mac(0), PS_MAC, worker_ip(0), PS_IP)
    out = switch.send(port=1, data=frame)
    assert [port for port, _ in out] == [ps_port]
    data = out[0][1]
    assert data[22] == 63 and ipv4_checksum(data[14:34]) == 0  # routed: TTL 64 -> 63
    assert unpack(decapsulate(data))[1].tolist() == [1] * SLOTS  # values untouched
    # A result no binding of its job allows is not other traffic: only the switch makes
    # results (docs/protocol.md, "Isolation").
    h = Header(job_id=JOB, flags=Flag.RESULT)
    frame = encapsulate(pack(h, np.ones(SLOTS)), worker_mac(0), PS_MAC, worker_ip(0), PS_IP)
    assert switch.send(port=1, data=frame) == []
    plain = Ether(dst="02:00:00:00:00:ff") / IP(src="10.0.0.10", dst="10.0.0.254") / UDP(dport=53)
    assert [port for port, _ in switch.send(port=1, data=bytes(plain))] == [ps_port]
