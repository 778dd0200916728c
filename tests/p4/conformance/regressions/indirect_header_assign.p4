// Writes that reach a header through another name than the `inout` parameter bound to it
// are overwritten by the copy-out (p4c sample gauntlet_indirect_hdr_assign_1-bmv2): the
// parameter is a copy made at the call, and its value is what the argument gets back.
#include <core.p4>
#include <v1model.p4>

header a_h { bit<8> f; bit<8> g; bit<8> k; }
struct hdrs_t { a_h a; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.a); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    // h.a.f written directly; the copy-out of `all` (h as it was) puts it back
    action overwrite(inout hdrs_t all) { h.a.f = 2; }
    // x.g written through the parameter, h.a.k directly: only x's writes survive
    action through(inout a_h x) { x.g = 5; h.a.k = 7; }
    apply {
        sm.egress_spec = 1;
        overwrite(h);
        if (h.a.f == 0x10) {
            through(h.a);
        }
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
