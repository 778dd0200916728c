// Parser select: masks, ranges, tuples with don't-care, an empty value_set, default, and
// first-match order. The parser records which state it reached in meta.code; ingress
// copies it into h.result and sends the packet to port 1.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> kind;
    bit<8> a;
    bit<8> b;
    bit<8> result;
}

struct headers_t { h_t h; }
struct meta_t { bit<8> code; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<8>>(4) pvs;

    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.kind) {
            0x25: s_exact;                 // listed before the range that also covers it
            0x10 &&& 0xF0: s_mask;
            0x20 .. 0x2F: s_range;
            0x30: s_tuple;
            0x40: s_vs;
            default: s_default;
        }
    }
    state s_exact { meta.code = 9; transition accept; }
    state s_mask { meta.code = 1; transition accept; }
    state s_range { meta.code = 2; transition accept; }
    state s_tuple {
        transition select(hdr.h.a, hdr.h.b) {
            (1, 2): t_12;
            (1, _): t_1x;
            (_, 0xF0 &&& 0xF0): t_xf;
            default: t_other;
        }
    }
    state t_12 { meta.code = 3; transition accept; }
    state t_1x { meta.code = 4; transition accept; }
    state t_xf { meta.code = 5; transition accept; }
    state t_other { meta.code = 6; transition accept; }
    state s_vs {
        transition select(hdr.h.a) {
            pvs: vs_hit;
            default: vs_miss;
        }
    }
    state vs_hit { meta.code = 7; transition accept; }
    state vs_miss { meta.code = 8; transition accept; }
    state s_default { meta.code = 0xdd; transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.result = meta.code;
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
