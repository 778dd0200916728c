// Assigning to a slice of a slice: x[7:4][2:1] is bits [6:5] of x.
#include <core.p4>
#include <v1model.p4>

header byte_h { bit<8> v; }
struct hdrs_t { byte_h b; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.b); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.b.v[7:4][2:1] = 2w3;
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h.b); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
