// Parser/control instances as constructor arguments (`Twice(inc) t;`, `Twice(Inc()) t;`)
// and direct type invocation (`Bump.apply(x)`, `SubP.apply(...)`): each call site of a
// direct invocation has an instance of its own.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> tag; bit<8> a; bit<8> b; bit<8> c; bit<8> n; }
struct hdrs_t { h_t h; }
struct meta_t {}

control Step(inout bit<8> x);
control Inc(inout bit<8> x) {
    register<bit<8>>(1) calls;
    apply {
        x = x + 1;
        bit<8> k;
        calls.read(k, 0);
        calls.write(0, k + 1);
    }
}
control Twice(inout bit<8> x)(Step s) {
    apply { s.apply(x); s.apply(x); }
}
control Bump(inout bit<8> x) {
    bit<8> seen = 0;  // per instance
    apply { seen = seen + 1; x = x + 0x10 * seen; }
}
parser SubP(packet_in pk, out h_t h) {
    state start { pk.extract(h); transition accept; }
}
parser P(packet_in pk, out hdrs_t hd, inout meta_t m, inout standard_metadata_t sm) {
    state start { SubP.apply(pk, hd.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hd, inout meta_t m, inout standard_metadata_t sm) {
    Inc() inc;
    Twice(inc) t1;
    Twice(Inc()) t2;
    apply {
        sm.egress_spec = 1;
        t1.apply(hd.h.a);       // +2 through the shared inc
        t2.apply(hd.h.b);       // +2 through an instance of its own
        inc.apply(hd.h.c);      // +1, the shared inc's third call
        Bump.apply(hd.h.n);     // two call sites: two instances, each seen == 1
        Bump.apply(hd.h.n);
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
