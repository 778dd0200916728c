// Action-list items that bind an action's directional parameters: `put(h.d.lo)`.
// The control plane supplies only the directionless `val`.
#include <core.p4>
#include <v1model.p4>

header data_h { bit<8> sel; bit<8> hi; bit<8> lo; }
struct hdrs_t { data_h d; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.d); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    action put(out bit<8> dst, bit<8> val) { dst = val; }
    action bump(inout bit<8> x) { x = x + 1; }
    table pick {
        key = { h.d.sel : exact; }
        actions = { put(h.d.lo); bump(h.d.hi); }
        default_action = put(h.d.lo, 0x77);
    }
    apply {
        sm.egress_spec = 1;
        pick.apply();
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h.d); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
