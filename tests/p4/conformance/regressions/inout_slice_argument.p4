// A bit slice as an out/inout argument: the callee's value is written back to just
// those bits (one bit, a middle field, a slice of a slice, an out parameter, a function).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<16> c; bit<8> d; }
struct hdrs_t { h_t h; }
struct meta_t {}

void twice(inout bit<4> x) { x = x + x; }

parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action flip(inout bit<1> x) { x = ~x; }
    action incr(inout bit<4> x) { x = x + 1; }
    action set3(out bit<3> x) { x = 5; }
    table t {
        key = { hdr.h.d : exact; }
        actions = { incr(hdr.h.d[3:0]); NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        flip(hdr.h.a[0:0]);
        incr(hdr.h.b[7:4]);
        set3(hdr.h.c[15:8][6:4]);
        twice(hdr.h.c[3:0]);
        t.apply();
    }
}
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
