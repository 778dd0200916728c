// A conditional expression takes its width from its branches, not from a cast around it
// (p4c sample gauntlet_mux_typecasting-bmv2): `-(c ? 2 : 3w1)` is a bit<3>, negated in 3
// bits, then widened.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> sel; bit<16> r; }
struct hdrs_t { h_t h; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.h.r = (bit<16>)-((h.h.sel == 1) ? 2 : 3w1);
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
