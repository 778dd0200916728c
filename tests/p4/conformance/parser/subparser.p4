// A sub-parser invoked from a state: it extracts the inner header into the caller's
// header (out parameter); the caller then sets 'seen' = x + 1. The len header's byte
// count is skipped with advance.
#include <core.p4>
#include <v1model.p4>

header len_t { bit<8> nbytes; }
header inner_t {
    bit<8> x;
    bit<8> seen;
}

struct headers_t {
    len_t   len;
    inner_t inner;
}
struct meta_t { }

parser Inner(packet_in pkt, out inner_t ih) {
    state start {
        pkt.extract(ih);
        transition accept;
    }
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Inner() inner_parser;

    state start {
        pkt.extract(hdr.len);
        pkt.advance((bit<32>) hdr.len.nbytes * 8);
        transition parse_inner;
    }
    state parse_inner {
        inner_parser.apply(pkt, hdr.inner);
        hdr.inner.seen = hdr.inner.x + 1;
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.inner.isValid()) {
            sm.egress_spec = 3;
        } else {
            mark_to_drop(sm);
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.len);
        pkt.emit(hdr.inner);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
