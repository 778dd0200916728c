"""Language constructs the native back end covers, each against the Python back end on
the same packets (tests/p4/native/*.p4), found by running p4c's v1model STF samples on
the native back end: varbits wider than a machine word, checksums with the payload or
other algorithms, an untyped constant typed by the operand beside it, a lookahead whose
value is unused, a control applied by its type name, local header stacks."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from p4sim.runtime import hashes
from p4sim.switch import Switch
from tests.test_native import run_both

ROOT = Path(__file__).resolve().parents[1]


def both(path: str) -> tuple[Switch, Switch]:
    program = str(ROOT / path)
    py = Switch.from_file(program)
    nat = Switch.from_file(program, backend="native")
    assert nat.backend == "native", nat.backend_notice
    return py, nat


def ipv4(rng: random.Random, ihl: int, proto: int, good_csum: bool) -> bytes:
    """An IPv4 header of ``ihl`` words (random options) and, for proto 1, two words."""
    opts = rng.randbytes(4 * ihl - 20)
    head = bytes([0x40 | ihl, 0, 0, 4 * ihl, 0, 1, 0, 0, 64, proto, 0, 0])
    head += rng.randbytes(8)
    fields = [(b, 8) for b in head[:10]] + [(int.from_bytes(head[12:20]), 64)]
    fields += [(int.from_bytes(opts), 8 * len(opts))] if opts else []
    csum = hashes.checksum("csum16", fields) ^ (0 if good_csum else 1)
    frame = head[:10] + csum.to_bytes(2) + head[12:] + opts
    return frame + (rng.randbytes(4) if proto == 1 else b"") + rng.randbytes(rng.randrange(9))


def test_ipv4_options_and_payload_checksums_run_native_with_pythons_outputs() -> None:
    py, nat = both("tests/p4/native/options_checksums.p4")
    rng = random.Random(3)
    frames = []
    for _ in range(200):
        f = ipv4(rng, rng.randrange(5, 16), rng.choice([1, 6]), rng.random() < 0.7)
        if rng.random() < 0.1:  # cut short: the extract fails in the parser
            f = f[: rng.randrange(len(f))]
        frames.append((1, f))
    frames.append((1, bytes([0x44]) + bytes(30)))  # ihl 4: a negative option length
    run_both(py, nat, frames)
    f = ipv4(rng, 15, 1, True)
    ((_, out),) = nat.send(1, f)
    same, differs, csum_err = out[0], out[1], out[2]
    assert (same, differs, csum_err) == (0x11, 0x02, 0)  # equal options, Mark applied
    payload = f[60 + 4 :]
    assert int.from_bytes(out[3:5]) == hashes.compute("crc16", f[12:16] + payload)
    assert int.from_bytes(out[5:7]) == hashes.compute("csum16", f[16:20] + payload)
    assert int.from_bytes(out[7:11]) == hashes.compute("crc32", f[20:60])
    assert out[11] == 1  # the local stack equals the parsed one
    assert out[12:] == f  # the IPv4 header, its options, the words and the payload again
    bad = bytearray(ipv4(rng, 6, 6, True))
    bad[21] ^= 1  # an option byte changed: the checksum no longer verifies
    ((_, out),) = nat.send(1, bytes(bad))
    assert out[2] == 1


def test_constructor_parameters_run_native_with_pythons_outputs_and_state() -> None:
    py, nat = both("tests/p4/native/ctor_params.p4")
    rng = random.Random(5)
    frames = [(0, rng.randbytes(rng.randrange(3, 8))) for _ in range(100)]
    frames.append((0, bytes([0x31, 10, 20, 30])))
    run_both(py, nat, frames)
    ((port, out),) = py.send(0, bytes([0x31, 10, 20, 30]))
    assert port == 1  # the parser's constructor argument masked the tag
    assert list(out[:4]) == [1, 12, 20 + 2 * 6, 30 + 2 * 5 + 1]
    ((port, out),) = nat.send(0, bytes([0x31, 10, 20, 30]))
    assert port == 1 and list(out[:4]) == [1, 12, 20 + 2 * 6, 30 + 2 * 5 + 1]
    for name in ("Ig.one.calls", "Ig.two_base.calls", "Ig.t2.s.calls"):
        assert py.extern(name).values[0] == nat.extern(name).values[0] > 0, name
    assert nat.extern("Ig.one.calls").values[0] == 3 * (len(frames) + 1) % 256


SEL_PROG = "tests/p4/conformance/action_profiles/ecmp_selector.p4"
SEL, PROF = "MyIngress.ecmp_selector", "MyIngress.smac_profile"


def five_tuple_frame(rng: random.Random, dst: int) -> bytes:
    eth = b"\xff" * 6 + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
    src, proto = rng.getrandbits(32), rng.choice([6, 17])
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 24, 0, 0, 64, proto, 0, src, dst)
    return eth + ip + struct.pack("!HH", rng.getrandbits(16), rng.getrandbits(16))


def test_action_selector_groups_and_members_run_native_with_pythons_outputs() -> None:
    """Groups picked by the crc16 of the selector keys, member entries, an action
    profile's member, an empty group (a miss), and control-plane changes to members and
    groups between packets: the native back end gives Python's outputs throughout."""
    py, nat = both(SEL_PROG)
    rng = random.Random(11)
    dsts = [0x0A000001, 0x0B000001, 0x0C000001, 0x0D000001]

    def traffic(n: int) -> list[tuple[int, bytes]]:
        return [(0, five_tuple_frame(rng, rng.choice(dsts))) for _ in range(n)]

    def both_do(op: str, *args: object, **kw: object) -> None:
        for sw in (py, nat):
            getattr(sw, op)(*args, **kw)

    for i in range(4):
        both_do("act_prof_create_member", SEL, i + 1, "set_nhop", {"dmac": 0xB0 + i, "port": i + 1})
    both_do("act_prof_create_group", SEL, 100, [1, 2, 3, 4])
    both_do("act_prof_create_group", SEL, 200)  # empty: a miss, the default action
    both_do("table_indirect_add", "ecmp", {"hdr.ipv4.dstAddr": (0x0A000000, 8)}, group=100)
    both_do("table_indirect_add", "ecmp", {"hdr.ipv4.dstAddr": (0x0B000000, 8)}, member=3)
    both_do("table_indirect_add", "ecmp", {"hdr.ipv4.dstAddr": (0x0C000000, 8)}, group=200)
    both_do("act_prof_create_member", PROF, 7, "set_src", {"smac": 0xAAAA})
    both_do("table_indirect_add", "smac", {"sm.egress_spec": 2}, member=7)
    ports = set()
    for port, f in traffic(200):
        a, b = py.send(port, f), nat.send(port, f)
        assert a == b
        ports |= {p for p, _ in a}
    assert ports == {1, 2, 3, 4}  # the group spread the flows over its four members
    both_do("act_prof_remove_member_from_group", SEL, 2, 100)
    both_do("act_prof_modify_member", SEL, 3, "set_nhop", {"dmac": 0xC3, "port": 6})
    both_do("act_prof_modify_member", PROF, 7, "set_src", {"smac": 0xCCCC})
    both_do("act_prof_add_member_to_group", SEL, 1, 200)
    run_both(py, nat, traffic(200))
    f = five_tuple_frame(rng, 0x0C000002)  # group 200 now holds member 1 alone
    assert nat.send(0, f)[0][0] == 1


def test_direct_meters_and_random_run_native_with_pythons_outputs() -> None:
    """tests/p4/conformance/externs/meter_random_digest.p4: a direct meter configured on
    one entry (its colours turn yellow and red under the load), unset on another (GREEN),
    a miss (not metered), a reconfiguration between packets, an indexed meter, random()
    in a range and of one value, and digests: the same outputs and digests on both."""
    py, nat = both("tests/p4/conformance/externs/meter_random_digest.p4")
    handles = {}
    for sw in (py, nat):
        handles[sw] = [sw.table_add("metered", {"hdr.pk.key": k}, "read_dm", {}) for k in (1, 2)]
        sw.meter_set_rates("dm", handles[sw][0], (0.0005, 2), (0.001, 3))
        sw.meter_set_rates("m", 1, (0.05, 100), (0.1, 200))
    rng = random.Random(2)

    def frame(key: int) -> bytes:
        return bytes([key]) + rng.randbytes(8)

    frames = [(0, frame(rng.choice([1, 1, 1, 2, 3]))) for _ in range(150)]
    run_both(py, nat, frames)
    assert py.digests == nat.digests and len(nat.digests) == len(frames)
    colours = {nat.send(0, frame(1))[0][1][5] for _ in range(20)}
    for _ in range(20):
        py.send(0, frame(1))
    assert 2 in colours  # red: twenty packets within one millisecond
    for sw in (py, nat):  # a faster meter on the same entry: laid out again for C
        sw.meter_set_rates("dm", handles[sw][0], (1.0, 1000), (2.0, 2000))
    run_both(py, nat, frames[:50])
    out = nat.send(0, frame(2))[0][1]
    assert out[5] == 0 and out[6:8] == b"\x12\x34" and out[8] == 1  # unset: GREEN


def test_serializable_enum_action_data_runs_native_with_pythons_outputs() -> None:
    """tests/p4/native/enum_action_data.p4: entries whose action data is a serializable
    enum, stored into a bit<8> field and enum-typed ones and compared."""
    py, nat = both("tests/p4/native/enum_action_data.p4")
    for sw in (py, nat):
        sw.table_add("t", {"hd.h.key": 7}, "punt", {"reason": 2})
        sw.table_add("t", {"hd.h.key": 9}, "punt", {"reason": 3})
    rng = random.Random(4)
    run_both(py, nat, [(0, bytes([rng.choice([7, 9, 1]), 0, 0, 0])) for _ in range(50)])
    assert nat.send(0, bytes([7, 0, 0, 0]))[0][1] == bytes([7, 2, 2, 1])
    assert nat.send(0, bytes([9, 0, 0, 0]))[0][1] == bytes([9, 3, 3, 0])
    assert nat.send(0, bytes([5, 0, 0, 0]))[0][1] == bytes([5, 1, 1, 0])  # the default


def test_128_bit_values_and_keys_run_native_with_pythons_outputs() -> None:
    """tests/p4/native/wide_bits.p4: bit<128>/bit<72>/bit<96> values through extract,
    arithmetic, shifts, slices, concatenation, casts, hash and checksum lists, a select
    on 128 bits, and exact/lpm/ternary keys of 128 bits with entries on both sides."""
    py, nat = both("tests/p4/native/wide_bits.p4")
    rng = random.Random(8)
    pre = rng.getrandbits(128)
    srcs = [rng.getrandbits(128) for _ in range(4)] + [1, 0, (1 << 128) - 1]
    for sw in (py, nat):
        for i, s in enumerate(srcs[:3]):
            sw.table_add("exact6", {"meta.key": s ^ (0xF << 124 | 1)}, "mark", {"v": i + 1})
        for plen in (17, 100):
            prefix = pre >> (128 - plen) << (128 - plen)
            sw.table_add("lpm6", {"hdr.ip.dst": (prefix, plen)}, "mark_lpm", {"v": plen})
        high = (1 << 128) - (1 << 70)
        sw.table_add(
            "tern6",
            {"hdr.ip.src": (srcs[0] & high, high), "hdr.ip.tag": 5},
            "mark_tern",
            {"v": 9},
            priority=1,
        )

    def frame() -> bytes:
        src = rng.choice(srcs) ^ (rng.getrandbits(60) if rng.random() < 0.3 else 0)
        dst = pre ^ rng.getrandbits(rng.choice([8, 20, 40, 128]))
        head = bytes([rng.choice([5, 5, 6]), rng.getrandbits(8)])
        body = src.to_bytes(16) + dst.to_bytes(16) + rng.randbytes(9)
        return head + body + rng.randbytes(rng.randrange(4))

    frames = [(0, frame()) for _ in range(300)]
    frames += [(0, frame()[: rng.randrange(40)]) for _ in range(20)]  # cut short
    run_both(py, nat, frames)
    f = bytes([5, 0x80]) + srcs[1].to_bytes(16) + (pre ^ 1).to_bytes(16) + bytes(9)
    ((_, out),) = nat.send(0, f)
    assert int.from_bytes(out[:16]) == (srcs[1] + (pre ^ 1)) % (1 << 128)
    assert int.from_bytes(out[32:48]) & 0xFF == (5 + 0xFFFFFFFFFFFFFFFF80) & 0xFF  # int<8> -128
    assert out[83:86] == bytes([2, 100, 0])  # srcs[1]'s exact entry, the longer prefix


def test_out_and_inout_arguments_at_run_time_indices_run_native_with_pythons_outputs() -> None:
    """tests/p4/native/index_args.p4: a function's inout/out arguments at run-time stack
    indices, in range and out of it, as a statement and inside an index."""
    py, nat = both("tests/p4/native/index_args.p4")
    rng = random.Random(6)
    frames = [
        (0, bytes([rng.getrandbits(8) for _ in range(3)] + [rng.randrange(5), rng.randrange(5), 0]))
        for _ in range(200)
    ]
    run_both(py, nat, frames)
    ((_, out),) = nat.send(0, bytes([10, 20, 30, 1, 2, 0]))
    # h[1] += 7 (old 20 into r); then h[2] += 7 (37, odd: index 1) and h[1] = its old 30
    assert out == bytes([10, 30, 37, 1, 2, 20])
    ((_, out),) = nat.send(0, bytes([10, 20, 30, 3, 0, 0]))
    # index 3: read as 0 (r = 0), the write lost; then h[0] += 7 (17, odd) and h[1] = 10
    assert out == bytes([17, 10, 30, 3, 0, 0])


WIDER_THAN_128 = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<256> x; }
struct hs { h_t h; }
struct ms { }
parser P(packet_in pk, out hs h, inout ms m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hs h, inout ms m) { apply { } }
control I(inout hs h, inout ms m, inout standard_metadata_t sm) {
    apply { h.h.x = h.h.x + 1; sm.egress_spec = 2; }
}
control E(inout hs h, inout ms m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs h, inout ms m) { apply { } }
control D(packet_out pk, in hs h) { apply { pk.emit(h.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_values_wider_than_128_bits_read_as_numbers_fall_back_to_python_in_one_line() -> None:
    sw = Switch.from_source(WIDER_THAN_128, backend="native")
    assert sw.backend == "python"
    assert sw.backend_notice == (
        "p4sim: native back end unavailable (not covered by the C generator: type bit<256> "
        "(wider than 128 bits) in an expression); running on the Python back end"
    )
    ((port, out),) = sw.send(0, (2**256 - 1).to_bytes(32))
    assert port == 2 and out == bytes(32)


WIDE_FIELDS = """
#include <core.p4>
#include <v1model.p4>
header w_t { bit<4> a; bit<336> x; bit<4> b; bit<200> y; bit<8> k; }
header t_t { bit<8> v; }
struct hs { t_t t; w_t w; w_t c; }
struct ms { }
parser P(pkt_in pk, out hs h, inout ms m, inout standard_metadata_t sm) {
    state start { pk.extract(h.t); transition select(h.t.v) { 0: skip; default: wide; } }
    state skip { pk.advance(4); transition wide; }
    state wide { pk.extract(h.w); transition accept; }
}
control VC(inout hs h, inout ms m) { apply { } }
control I(inout hs h, inout ms m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (h.t.v == 1) { h.c = h.w; h.c.k = h.c.k + 1; }
        else if (h.t.v == 2) { h.c = h.w; h.w.setInvalid(); }
        else if (h.t.v == 3) { h.c = h.w; }
        h.t.v = h.c == h.w ? 8w0xee : 8w0x11;
    }
}
control E(inout hs h, inout ms m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs h, inout ms m) { apply { } }
control D(packet_out pk, in hs h) { apply { pk.emit(h.t); pk.emit(h.c); pk.emit(h.w); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
""".replace("pkt_in", "packet_in")


def test_header_fields_wider_than_128_bits_are_parsed_copied_compared_and_emitted_natively() -> (
    None
):
    """bit<336> and bit<200> fields (p4c's issue1879 sample has one), at odd bit offsets:
    C keeps them as 64-bit chunks; header copies and == carry them."""
    py = Switch.from_source(WIDE_FIELDS)
    nat = Switch.from_source(WIDE_FIELDS, backend="native")
    assert nat.backend == "native", nat.backend_notice
    rng = random.Random(1879)
    frames = []
    for _ in range(300):
        body = rng.randbytes(rng.choice([69, 70, 74, 80, 30]))
        frames.append((0, bytes([rng.choice([0, 1, 2, 3, 4])]) + body))
    run_both(py, nat, frames)
    w = bytes(range(69))
    ((_, out),) = nat.send(0, bytes([1]) + w)
    assert out == bytes([0x11]) + w[:-1] + bytes([w[-1] + 1]) + w  # c differs in k only
    ((_, out),) = nat.send(0, bytes([2]) + w)
    assert out == bytes([0x11]) + w  # c, a copy of w; w invalid, not emitted
    ((_, out),) = nat.send(0, bytes([3]) + w)
    assert out == bytes([0xEE]) + w + w  # an exact copy: equal
    ((_, out),) = nat.send(0, bytes([4]) + w)
    assert out == bytes([0x11]) + w  # c invalid, w valid


CONSTANT_INTS = """
#include <core.p4>
#include <v1model.p4>
header h_t { bool a; bool b; bit<6> pad; bit<8> v; }
struct hs { h_t h; }
struct ms { }
parser P(packet_in pk, out hs h, inout ms m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hs h, inout ms m) { apply { } }
control I(inout hs h, inout ms m, inout standard_metadata_t sm) {
    apply {
        const int k = 3;
        h.h.a = 1 == 1;
        h.h.b = k != 3;
        h.h.v = h.h.v + k;
        sm.egress_spec = 1;
    }
}
control E(inout hs h, inout ms m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs h, inout ms m) { apply { } }
control D(packet_out pk, in hs h) { apply { pk.emit(h.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_untyped_constants_compared_and_declared_locally_run_native() -> None:
    """``1 == 1`` of two untyped constants is a bool; ``const int k`` in a block."""
    nat = Switch.from_source(CONSTANT_INTS, backend="native")
    assert nat.backend == "native", nat.backend_notice
    py = Switch.from_source(CONSTANT_INTS)
    run_both(py, nat, [(0, bytes([b, 7])) for b in (0, 0xC0, 0x55)])
    assert nat.send(0, bytes([0x00, 7])) == [(1, bytes([0x80, 10]))]


def test_extract_into_a_full_stack_at_the_end_of_the_packet_is_stack_out_of_bounds() -> None:
    """StackOutOfBounds (``.next`` of a full stack) before PacketTooShort, as on Python and
    on BMv2 (simple_switch answers 01 for this frame); found by tests/test_native_mutants.py."""
    py, nat = both("tests/p4/conformance/parser/stack_errors.p4")
    frame = bytes.fromhex("000100d70003")  # three items without bottom-of-stack, then nothing
    assert nat.send(0, frame) == py.send(0, frame) == [(1, bytes([1, 3]) + frame)]


SINGLE_STATEMENT_BRANCHES = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; }
struct hs { h_t h; }
struct ms { }
bit<8> bump(inout bit<8> v) { v = v + 1; return v; }
parser P(packet_in pk, out hs h, inout ms m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hs h, inout ms m) { apply { } }
control I(inout hs h, inout ms m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (h.h.a == 1) bump(h.h.b); else h.h.c = 3;
        if (h.h.a == 2) h.h.c = bump(h.h.b) + bump(h.h.b);
    }
}
control E(inout hs h, inout ms m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs h, inout ms m) { apply { } }
control D(packet_out pk, in hs h) { apply { pk.emit(h.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_an_if_branch_of_one_statement_that_becomes_several_in_c_runs_natively() -> None:
    """A call with an inout argument, as the only statement of an if branch, is several C
    statements: the branch is braced (else the C compiler failed and the switch fell back)."""
    py = Switch.from_source(SINGLE_STATEMENT_BRANCHES)
    nat = Switch.from_source(SINGLE_STATEMENT_BRANCHES, backend="native")
    assert nat.backend == "native", nat.backend_notice
    run_both(py, nat, [(0, bytes([a, 5, 0])) for a in (0, 1, 2, 3)])
    assert nat.send(0, bytes([1, 5, 0])) == [(1, bytes([1, 6, 0]))]
    assert nat.send(0, bytes([2, 5, 0])) == [(1, bytes([2, 7, 13]))]
