// A header union (extract of a member invalidates the others, setValid likewise,
// setInvalid of one member, isValid of the union, emit) and a plain enum in metadata
// with a switch on it, for the native back end's differential test (tests/test_native.py).
#include <core.p4>
#include <v1model.p4>

header ctl_h {
    bit<8> kind;
    bit<8> op;
}
header a_h {
    bit<8> tag;
    bit<8> x;
}
header b_h {
    bit<8>  tag;
    bit<16> y;
}
header_union u_t {
    a_h a;
    b_h b;
}
struct headers_t {
    ctl_h ctl;
    u_t   u;
}
enum Dir { IN, OUT, DROP }
struct meta_t {
    Dir d;
}

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.ctl);
        transition select(hdr.ctl.kind) {
            1: pa;
            2: pb;
            3: pab;
            default: accept;
        }
    }
    state pa { pk.extract(hdr.u.a); transition accept; }
    state pb { pk.extract(hdr.u.b); transition accept; }
    state pab { pk.extract(hdr.u.a); pk.extract(hdr.u.b); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        meta.d = Dir.IN;
        if (hdr.u.isValid()) {
            meta.d = Dir.OUT;
        }
        if (hdr.ctl.op == 1) {
            hdr.u.b.setValid();
            hdr.u.b.y = 0x1234;
            hdr.u.b.tag = 9;
        } else if (hdr.ctl.op == 2) {
            hdr.u.a.setValid();
            hdr.u.a.x = hdr.u.a.x + 7;
        } else if (hdr.ctl.op == 3) {
            hdr.u.a.setInvalid();
        } else if (hdr.ctl.op == 4) {
            meta.d = Dir.DROP;
        }
        switch (meta.d) {
            Dir.IN: { sm.egress_spec = 1; }
            Dir.OUT: { sm.egress_spec = 2; }
            Dir.DROP: { mark_to_drop(sm); }
        }
        hdr.ctl.op = (hdr.u.a.isValid() ? 8w1 : 8w0) | (hdr.u.b.isValid() ? 8w2 : 8w0)
                     | (hdr.u.isValid() ? 8w4 : 8w0) | (meta.d == Dir.OUT ? 8w8 : 8w0);
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
