/* Every arithmetic operator on bit<8>/int<8>: inputs in `in_t`, results in `res_t`. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8> a;
    bit<8> b;
    int<8> sa;
    int<8> sb;
}

header res_t {
    bit<8> add;
    bit<8> sub;
    bit<8> mul;
    bit<8> shl;
    bit<8> shr;
    bit<8> sat_add;
    bit<8> sat_sub;
    bit<8> band;
    bit<8> bor;
    bit<8> bxor;
    bit<8> bnot;
    bit<8> neg;
    int<8> s_add;
    int<8> s_sub;
    int<8> s_mul;
    int<8> s_shr;
    int<8> s_shl;
    int<8> s_sat_add;
    int<8> s_sat_sub;
    int<8> s_neg;
    bit<16> cat;
    bit<16> s_widen;
    bit<8> slice_mid;
    bit<4> narrow;
    bit<1> lt;
    bit<1> s_lt;
    bit<1> ge;
    bit<1> s_ge;
    bit<1> eq;
    bit<1> bool_cast;
    bit<8> ternary;
    bit<8> set_slice;
    bit<6> pad;
    bit<8> div3;
    bit<8> mod7;
}

struct headers_t {
    in_t i;
    res_t r;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.i);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        bit<8> a = hdr.i.a;
        bit<8> b = hdr.i.b;
        int<8> sa = hdr.i.sa;
        int<8> sb = hdr.i.sb;
        hdr.r.setValid();
        hdr.r.add = a + b;
        hdr.r.sub = a - b;
        hdr.r.mul = a * b;
        hdr.r.shl = a << b;
        hdr.r.shr = a >> b;
        hdr.r.sat_add = a |+| b;
        hdr.r.sat_sub = a |-| b;
        hdr.r.band = a & b;
        hdr.r.bor = a | b;
        hdr.r.bxor = a ^ b;
        hdr.r.bnot = ~a;
        hdr.r.neg = -a;
        hdr.r.s_add = sa + sb;
        hdr.r.s_sub = sa - sb;
        hdr.r.s_mul = sa * sb;
        hdr.r.s_shr = sa >> b;
        hdr.r.s_shl = sa << b;
        hdr.r.s_sat_add = sa |+| sb;
        hdr.r.s_sat_sub = sa |-| sb;
        hdr.r.s_neg = -sa;
        hdr.r.cat = a ++ b;
        hdr.r.s_widen = (bit<16>)(int<16>)sa;
        hdr.r.slice_mid = (bit<8>)a[5:2];
        hdr.r.narrow = (bit<4>)b;
        hdr.r.lt = (bit<1>)(a < b);
        hdr.r.s_lt = (bit<1>)(sa < sb);
        hdr.r.ge = (bit<1>)(a >= b);
        hdr.r.s_ge = (bit<1>)(sa >= sb);
        hdr.r.eq = a == b ? 1w1 : 1w0;
        hdr.r.bool_cast = (bit<1>)((bool)hdr.r.lt);
        hdr.r.ternary = (a > 100) ? a : b + 1;
        bit<8> t = a;
        t[7:4] = b[3:0];
        hdr.r.set_slice = t;
        hdr.r.div3 = a / 3;
        hdr.r.mod7 = a % 7;
        sm.egress_spec = 1;
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Dep(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;
