// Evaluation order where side effects of a call meet other operands and l-values (p4c
// samples issue2205-bmv2, issue2488-bmv2): the left operand of `+` is read before the
// right operand's call changes it; a struct initialiser's calls run in order when the
// control starts, and the whole headers assigned from it reach the deparser.
#include <core.p4>
#include <v1model.p4>

header o_h { bit<8> sum; bit<8> x; bit<8> y; bit<8> i; }
header c_h { bit<8> v; }
struct hdrs_t { o_h o; c_h[2] c; }
struct meta_t {}

bit<8> set_one(inout bit<8> v) {
    v = 1;
    return 1;
}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(h.o);
        pk.extract(h.c.next);
        pk.extract(h.c.next);
        transition accept;
    }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    bit<8> val = 3;
    // x gets y as read first; set_one then changes h.o.y to 1 (and tmp.o.y is 1)
    hdrs_t tmp = { { h.o.sum, h.o.y, set_one(h.o.y), h.o.i }, h.c };
    apply {
        sm.egress_spec = 1;
        h = tmp;
        h.o.sum = val + set_one(val);
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
