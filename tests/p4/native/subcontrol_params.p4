// Sub-control parameters for the native back end's differential test (tests/test_native.py):
// an out parameter starts from its type's default (0 / an invalid header) whatever the
// argument held, as the Python back end's copy-in/copy-out gives; inout and in ones see
// the caller's values, taken before any out argument is reset; out and inout scalar
// arguments are not written back when the callee exits or a sub-parser rejects.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}
header aux_t {
    bit<8> v;
}
struct headers_t {
    h_t   h;
    aux_t aux;
}
struct meta_t {
    bit<8> m;
}

control Sub(out bit<8> o, inout bit<8> io, in bit<8> i, out aux_t hdr_out) {
    apply {
        io = io + o + i;  // o reads its default here
        if (hdr_out.isValid()) {
            io = io + 100;
        }
        o = 5;
    }
}

control Inc(out bit<8> o, in bit<8> i) {
    apply {
        o = i + 1;  // i is the argument's value at the call, before o is reset
    }
}

control Quit(out bit<8> o, inout bit<8> io) {
    apply {
        o = 1;
        io = 99;
        exit;  // neither is copied out: the caller's arguments keep their values
    }
}

parser Inner(packet_in pk, out aux_t x) {
    state start {
        pk.extract(x);
        transition select(x.v) {
            0xFF: reject;  // rejected: x is not copied out, the caller's stays invalid
            default: accept;
        }
    }
}

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Inner() inner;
    state start {
        pk.extract(hdr.h);
        inner.apply(pk, hdr.aux);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Sub() sub;
    Inc() inc;
    Quit() quit;
    apply {
        sm.egress_spec = 1;
        if (hdr.h.a == 0xEE) {
            quit.apply(hdr.h.b, hdr.h.c);
        }
        meta.m = hdr.h.c;
        sub.apply(hdr.h.a, hdr.h.b, meta.m, hdr.aux);
        inc.apply(hdr.h.c, hdr.h.c);
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
