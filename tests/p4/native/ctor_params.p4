// Constructor parameters of parsers and controls: constants (of the instantiating
// block's own parameters too), instances passed to a control, `C()` made for a
// parameter, and a V1Switch block given by a top-level instance's name, for the native
// back end's differential test (tests/test_native_language.py).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> tag; bit<8> a; bit<8> b; bit<8> c; }
struct hdrs_t { h_t h; }
struct meta_t {}

control Step(inout bit<8> x);
control AddK(inout bit<8> x)(bit<8> k, bool twice) {
    register<bit<8>>(1) calls;  // one register per instance
    apply {
        x = x + k;
        if (twice) { x = x + k; }
        bit<8> n;
        calls.read(n, 0);
        calls.write(0, n + 1);
    }
}
control Twice(inout bit<8> x)(Step s) {
    apply { s.apply(x); s.apply(x); }
}
parser SubP(packet_in pk, out h_t h)(bit<8> mask) {
    state start {
        pk.extract(h);
        h.tag = h.tag & mask;
        transition accept;
    }
}
parser P(packet_in pk, out hdrs_t hd, inout meta_t m, inout standard_metadata_t sm) {
    SubP(8w0x0F) sub;
    state start { sub.apply(pk, hd.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hd, inout meta_t m, inout standard_metadata_t sm)(bit<8> base) {
    AddK(8w1, false) one;
    AddK(base, true) two_base;
    Twice(one) t1;
    Twice(AddK(base + 8w1, false)) t2;
    apply {
        sm.egress_spec = (bit<9>)hd.h.tag;
        t1.apply(hd.h.a);        // +2 through the shared `one`
        t2.apply(hd.h.b);        // +2 * (base + 1) through an instance of its own
        two_base.apply(hd.h.c);  // +2 * base
        one.apply(hd.h.c);       // +1, `one`'s third call
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }

V1Switch(P(), VC(), Ig(8w5), Eg(), CC(), Dp()) main;
