// Actions with out/inout/in parameters called directly, for the native back end's
// differential test (tests/test_native.py): parameters are copies (a direct write to the
// argument inside the action is overwritten by the copy-out), an out parameter reads its
// default, an in header is the value at the call, the same header passed twice.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}
header g_t {
    bit<8> v;
}
struct headers_t {
    h_t h;
    g_t g;
}
struct meta_t { }

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.h);
        pk.extract(hdr.g);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action bump(inout bit<8> x, in bit<8> by) {
        hdr.h.a = 0x77;  // lost when x is hdr.h.a: the copy-out writes x over it
        x = x + by;
    }
    action set_out(out bit<8> o) {
        hdr.h.d = o;  // an out parameter starts from 0
        o = 3;
    }
    action header_copy(in g_t g, inout g_t g2) {
        hdr.g.v = 0x55;  // g and g2 are copies taken at the call
        g2.v = g.v + 1;
    }
    apply {
        if (hdr.h.c == 1) {
            bump(hdr.h.a, hdr.h.b);
        } else if (hdr.h.c == 2) {
            bump(hdr.h.b, hdr.h.a);
        } else if (hdr.h.c == 3) {
            set_out(hdr.h.c);
        } else if (hdr.h.c == 4) {
            header_copy(hdr.g, hdr.g);
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers_t hdr) {
    apply {
        pk.emit(hdr);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
