// The order of P4Info's actions (tests/test_p4info.py): top-level actions used by two
// controls and by a nested control, unused ones, egress declared before ingress.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hdrs_t { h_t h; }
struct meta_t {}
action gact(bit<8> v) { }
action gb() { }
action gunused() { }
parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action e1() { hdr.h.a = 1; }
    table te { key = { hdr.h.a : exact; } actions = { gb; e1; gact; } }
    apply { te.apply(); }
}
control Sub(inout hdrs_t hdr) {
    action s1() { hdr.h.a = 2; }
    table ts { key = { hdr.h.a : exact; } actions = { s1; gb; } }
    apply { ts.apply(); }
}
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action unused() { hdr.h.b = 3; }
    action i1() { hdr.h.b = 4; }
    Sub() sub;
    action i2() { hdr.h.b = 5; }
    table ti { key = { hdr.h.a : exact; } actions = { i2; gact; i1; NoAction; } }
    apply { ti.apply(); sub.apply(hdr); }
}
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
