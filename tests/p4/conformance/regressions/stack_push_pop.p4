// push_front and pop_front on a header stack holding valid and invalid elements, run in
// a sub-control whose `inout` headers are copied in and out (p4c sample
// header-stack-ops-bmv2): the shifted elements keep their own validity, the freed ones
// are invalid, and the ingress sees the result after the copy-out.
#include <core.p4>
#include <v1model.p4>

header ops_h { bit<8> op1; bit<8> op2; bit<8> valid_bits; }
header elem_h { bit<8> more; bit<8> v; }
struct hdrs_t { ops_h ops; elem_h[4] s; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(h.ops);
        transition parse_elem;
    }
    state parse_elem {
        pk.extract(h.s.next);
        transition select(h.s.last.more) {
            1: parse_elem;
            default: accept;
        }
    }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }

// 0x1N: push_front(N); 0x2N: pop_front(N); 0x3I: element I made valid (0x99, 0xa0 + I);
// 0x4I: element I made invalid
control DoOp(inout hdrs_t h, in bit<8> op) {
    apply {
        if (op[7:4] == 1) {
            if (op[3:0] == 1) { h.s.push_front(1); } else if (op[3:0] == 2) { h.s.push_front(2); }
        } else if (op[7:4] == 2) {
            if (op[3:0] == 1) { h.s.pop_front(1); } else if (op[3:0] == 2) { h.s.pop_front(2); }
        } else if (op[7:4] == 3) {
            if (op[3:0] == 0) { h.s[0].setValid(); h.s[0].more = 0x99; h.s[0].v = 0xa0; }
            else if (op[3:0] == 1) { h.s[1].setValid(); h.s[1].more = 0x99; h.s[1].v = 0xa1; }
        } else if (op[7:4] == 4) {
            if (op[3:0] == 0) { h.s[0].setInvalid(); } else if (op[3:0] == 1) { h.s[1].setInvalid(); }
        }
    }
}

control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    DoOp() do_op;
    apply {
        sm.egress_spec = 1;
        do_op.apply(h, h.ops.op1);
        do_op.apply(h, h.ops.op2);
        h.ops.valid_bits = 0;
        if (h.s[0].isValid()) { h.ops.valid_bits[0:0] = 1; }
        if (h.s[1].isValid()) { h.ops.valid_bits[1:1] = 1; }
        if (h.s[2].isValid()) { h.ops.valid_bits[2:2] = 1; }
        if (h.s[3].isValid()) { h.ops.valid_bits[3:3] = 1; }
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
