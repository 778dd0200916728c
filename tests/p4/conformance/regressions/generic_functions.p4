// Generic functions (P4_16 10.x): explicit and inferred type arguments, two type
// parameters, a local of type T, inout T on a struct, and a generic calling a generic.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<16> c; bit<8> d; }
struct pair_t { bit<8> lo; bit<8> hi; }
struct hdrs_t { h_t h; }
struct meta_t {}

T pick<T>(in bool first, in T p, in T q) {
    if (first) { return p; }
    return q;
}
void swap<T>(inout T p, inout T q) {
    T t = p;
    p = q;
    q = t;
}
// R is only in the return type: callers must write it
R widen<A, R>(in A x) { return (R)x; }
T twice<T>(in T x) { return pick(false, x, x + x); }

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.h.c = pick<bit<16>>(h.h.a == 1, 0x1111, 0x2222);
        swap(h.h.a, h.h.b);
        pair_t p1 = { 1, 2 };
        pair_t p2 = { 3, 4 };
        swap(p1, p2);
        h.h.d = p1.lo[3:0] ++ p2.hi[3:0];  // 3 ++ 2 → 0x32
        h.h.c = h.h.c + widen<bit<8>, bit<16>>(twice(h.h.b));
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
