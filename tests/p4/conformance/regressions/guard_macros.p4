// p4c's core.p4 / v1model.p4 define _CORE_P4_ / _V1_MODEL_P4_; shared program fragments
// test them with #ifdef. Port 3 when both are defined, port 2 otherwise.
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
        sm.egress_spec = 2;
#ifdef _CORE_P4_
#ifdef _V1_MODEL_P4_
        sm.egress_spec = 3;
#endif
#endif
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h.b); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
