// Actions reached three ways, for P4Info: `mark` only by a direct call from the apply
// block, `nested` only by a direct call from another action, `fwd` only from a table and
// `both` from a table and directly. p4c lists the data parameters of `fwd` and `both` and
// none of `mark` and `nested` (its front end turns those into locals).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
struct hdrs_t { h_t h; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action nested(bit<8> v) { hdr.h.b = hdr.h.b + v; }
    action mark(bit<8> v, bit<8> w) { hdr.h.b = v; nested(w); }
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action both(bit<8> v) { hdr.h.a = v; }
    table t {
        key = { hdr.h.a : exact; }
        actions = { fwd; both; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        mark(7, 1);
        both(9);
        t.apply();
    }
}
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
