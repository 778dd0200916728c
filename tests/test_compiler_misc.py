"""More compiled features (tests/compiler_programs/misc.p4): runtime stack indexes,
lastIndex/last, verify_checksum setting checksum_error, tuples, functions with out
parameters used in expressions, enum switch, keyless tables, entry priorities, bool
action data, header copies and list assignment to headers.

Packet: op, i, csum16(op, i), then 4 bytes parsed as a 3-element stack + 1 payload byte.
Output: out_t (r1 r2 r3 r4), the stack, the optional `extra` header, the payload.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim import Switch
from p4sim.runtime import hashes

PROG = Path(__file__).parent / "compiler_programs" / "misc.p4"


@pytest.fixture(scope="module", params=["python", "native"])
def sw(request: pytest.FixtureRequest) -> Switch:
    """misc.p4 on each back end (the native one must not fall back)."""
    s = Switch.from_file(str(PROG), target="p4sim", backend=request.param)
    assert s.backend == request.param, s.backend_notice
    return s


def run(sw: Switch, op: int, i: int, good_csum: bool = True) -> bytes:
    cs = hashes.checksum("csum16", [(op, 8), (i, 8)]) ^ (0 if good_csum else 1)
    out = sw.send(0, bytes([op, i]) + cs.to_bytes(2, "big") + b"\x0a\x0b\x0c\x0d")
    assert len(out) == 1 and out[0][0] == 1
    return out[0][1]


def test_runtime_stack_index_read_and_write(sw: Switch) -> None:
    assert run(sw, 1, 1) == bytes.fromhex("0b0c00000aee0c0d")
    assert run(sw, 1, 2) == bytes.fromhex("0cee00000a0bee0d")  # last sees the write


def test_verify_checksum_sets_checksum_error(sw: Switch) -> None:
    assert run(sw, 2, 0)[0] == 0
    assert run(sw, 2, 0, good_csum=False)[0] == 1


def test_tuple_and_function_with_out_parameter_in_expression(sw: Switch) -> None:
    assert run(sw, 3, 0)[:4] == bytes([0x07, 0x12, 0xAB, 0xCD])


def test_switch_on_plain_enum(sw: Switch) -> None:
    assert [run(sw, 4, i)[0] for i in (0, 1, 9)] == [1, 2, 3]


def test_keyless_table_default_with_bool_data_and_entry_priorities(sw: Switch) -> None:
    assert run(sw, 5, 0)[2:4] == bytes([5, 1])
    assert run(sw, 5, 0x12)[3] == 2  # priority 20 beats the catch-all priority 10


def test_header_copy_is_independent_and_list_assignment_validates(sw: Switch) -> None:
    assert run(sw, 6, 0) == bytes.fromhex("0a0001000a550c660b0d")


def test_out_of_bounds_stack_index_reads_invalid_and_ignores_write(sw: Switch) -> None:
    assert run(sw, 1, 7) == bytes.fromhex("000c00000a0b0c0d")


LOOP = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> v; }
struct headers_t { h_t h; }
struct meta_t { bit<8> n; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition spin; }
    state spin { meta.n = meta.n + 1; transition select(hdr.h.v) { 1: spin; default: accept; } }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        log_msg("v={} n={}", {hdr.h.v, meta.n});
        sm.egress_spec = (sm.parser_error == error.ParserTimeout) ? 9w2 : 9w1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), C(), D()) main;
"""


def test_parser_loop_without_progress_ends_with_parser_timeout() -> None:
    sw = Switch.from_source(LOOP, "loop.p4")
    assert sw.send(0, b"\x01") == [(2, b"\x01")]
    assert sw.send(0, b"\x05") == [(1, b"\x05")]


def test_log_msg_goes_to_the_log_hook() -> None:
    lines: list[str] = []
    sw = Switch.from_source(LOOP, "loop.p4", log=lines.append)
    sw.send(0, b"\x05")
    assert "v=5 n=1" in lines


CONSTS = """
#include <core.p4>
#include <v1model.p4>
const bit<32> W = 12;
const int HALF = W / 2 + 2;
typedef bit<(16 - W)> nib_t;
type bit<8> port8_t;
enum bit<4> Tag { A = 3, B = 10 }
header h_t { bit<W> a; nib_t b; }
header r_t { bit<8> size_bits; bit<8> size_bytes; bit<8> half; bit<8> tag; }
struct headers_t { h_t h; r_t r; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.r.setValid();
        hdr.r.size_bits = (bit<8>)sizeInBits(hdr.h);
        hdr.r.size_bytes = (bit<8>)sizeInBytes(h_t);
        hdr.r.half = HALF;
        Tag t = (Tag)hdr.h.b;
        hdr.r.tag = (t == Tag.B) ? (bit<8>)(bit<4>)Tag.B : 8w0;
        port8_t p = (port8_t)8w1;
        sm.egress_spec = (bit<9>)(bit<8>)p;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), C(), D()) main;
"""


def test_constant_widths_typedefs_and_serializable_enums() -> None:
    sw = Switch.from_source(CONSTS, "consts.p4")
    out = sw.send(0, bytes([0xAB, 0xCA]))
    assert out == [(1, bytes([0xAB, 0xCA, 16, 2, 8, 10]))]
    out = sw.send(0, bytes([0xAB, 0xC3]))
    assert out[0][1][-1] == 0


VALIDITY = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; h_t r; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.setValid();          // already valid: fields kept
        hdr.r.setValid();
        hdr.r.a = hdr.h.a;
        hdr.h.setInvalid();
        hdr.r.b = hdr.h.b;         // reading an invalid header: the stored value
        hdr.h.setValid();          // invalid -> valid: fields start at zero
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), C(), D()) main;
"""


def test_set_valid_zeroes_an_invalid_header_but_not_a_valid_one() -> None:
    sw = Switch.from_source(VALIDITY, "validity.p4")
    assert sw.send(0, bytes([7, 9])) == [(1, bytes([0, 0, 7, 9]))]


def test_long_else_if_chain_compiles_and_runs() -> None:
    body = "if (hdr.h.a == 0) { hdr.h.b = 1; }\n" + "".join(
        f"        else if (hdr.h.a == {i}) {{ hdr.h.b = {i + 1}; }}\n" for i in range(1, 150)
    )
    src = VALIDITY.replace("        hdr.h.setValid();          // already valid: fields kept", body)
    sw = Switch.from_source(src, "chain.p4")
    assert sw.send(0, bytes([120, 0]))[0][1][:2] == bytes([0, 0])  # h re-validated: zeroed
    assert sw.send(0, bytes([120, 0]))[0][1][2:] == bytes([120, 121])  # branch 120 ran
