// Operands are evaluated left to right also when a later one is a call that changes an
// earlier one through an out/inout argument: binary operators, shifts, concatenation,
// function and action arguments, list and struct initializers, a comparison; and the
// control-local variables' initializers run in order before the apply block.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; bit<8> f; bit<16> g; }
struct pair_t { bit<8> p; bit<8> q; }
struct hdrs_t { h_t h; }
struct meta_t {}

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return x;
}
bit<8> sub(in bit<8> l, in bit<8> r) { return l - r; }

parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    bit<8> first = bump(hdr.h.f);             // f0 + 1
    bit<8> second = hdr.h.f + bump(hdr.h.f);  // (f0 + 1) + (f0 + 2)
    action put(bit<8> l, bit<8> r) { hdr.h.d = l - r; }
    apply {
        sm.egress_spec = 1;
        hdr.h.a = hdr.h.a + bump(hdr.h.a);          // a0 + (a0 + 1)
        pair_t pr = { hdr.h.b, bump(hdr.h.b) };     // list: p = b0, q = b0 + 1
        pair_t ps = { q = bump(hdr.h.c), p = hdr.h.c };  // written order: q first
        hdr.h.b = pr.p - pr.q;                      // 0xff
        hdr.h.c = ps.p - ps.q;                      // 0
        put(hdr.h.d, bump(hdr.h.d));                // action arguments: d0 - (d0 + 1)
        hdr.h.e = sub(hdr.h.e, bump(hdr.h.e));      // function arguments: 0xff
        hdr.h.g = hdr.h.e ++ bump(hdr.h.e);         // concatenation: 0xff, 0x00
        if (hdr.h.f == bump(hdr.h.f)) {             // comparison: f0+2 != f0+3
            hdr.h.f = 0;
        } else {
            hdr.h.f = second - first;
        }
    }
}
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
