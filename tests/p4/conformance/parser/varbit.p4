// A varbit field whose length comes from an earlier header (two-argument extract).
// Output: len header, the varbit bytes, the inner header with 'seen' = x + 1.
#include <core.p4>
#include <v1model.p4>

header len_t { bit<8> nbytes; }
header opt_t { varbit<64> data; }
header inner_t {
    bit<8> x;
    bit<8> seen;
}

struct headers_t {
    len_t   len;
    opt_t   opt;
    inner_t inner;
}
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.len);
        pkt.extract(hdr.opt, (bit<32>) hdr.len.nbytes * 8);
        transition parse_inner;
    }
    state parse_inner {
        pkt.extract(hdr.inner);
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
        pkt.emit(hdr.opt);
        pkt.emit(hdr.inner);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
