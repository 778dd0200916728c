// `table t() { ... }`: an empty parameter list (p4c refuses it, as P4_16's grammar; p4sim runs it with --target p4sim).
#include <core.p4>
#include <v1model.p4>

header pair_h { bit<8> x; bit<8> y; }
struct hdrs_t { pair_h p; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.p); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    action double_it() { h.p.y = h.p.x + h.p.x; sm.egress_spec = 1; }
    table twice() {
        actions = { double_it; }
        const default_action = double_it;
    }
    apply { twice.apply(); }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h.p); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
