// `exit` inside an action still copies its inout/out parameters back to the arguments,
// also through a second action and through an action-list binding.
#include <core.p4>
#include <v1model.p4>

header vals_h { bit<8> a; bit<8> b; bit<8> c; bit<8> after; }
struct hdrs_t { vals_h v; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.v); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    action set_and_stop(inout bit<8> x, bit<8> val) {
        x = val;
        exit;
    }
    action outer(inout bit<8> y) {
        y = y + 1;
        set_and_stop(y, y + 0x10);
    }
    table t {
        key = { h.v.a : exact; }
        actions = { set_and_stop(h.v.c); NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        t.apply();
        if (h.v.a == 2) {
            outer(h.v.b);
        }
        h.v.after = 0xff;  // not reached when an action exits
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h.v); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
