// `@priority(N)` on const entries goes to BMv2 as is: the lowest N wins, and an entry
// without one counts its 1-based position.
#include <core.p4>
#include <v1model.p4>

header key_h { bit<8> k; bit<8> out; }
struct hdrs_t { key_h h; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    action mark(bit<8> v) { h.h.out = v; }
    table tern {
        key = { h.h.k : ternary; }
        actions = { mark; NoAction; }
        const entries = {
            0x00 &&& 0x00 : mark(1) @priority(5);
            0x0a &&& 0x0f : mark(2);
            0xaa &&& 0xf0 : mark(3) @priority(1);
        }
    }
    apply {
        sm.egress_spec = 1;
        tern.apply();
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h.h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
