// int<W> operations for the native back end's differential test (tests/test_native.py):
// comparisons, division and modulo, arithmetic shift right, saturating add/subtract (and
// their unsigned forms), sign-extending casts, negation, concatenation and signed
// literals, at widths 8 and 64. Each result is written out as bits.
#include <core.p4>
#include <v1model.p4>

header in_h {
    bit<8>  a;
    bit<8>  b;
    bit<64> c;
    bit<64> d;
    bit<8>  sh;
}
header out_h {
    bit<8>  cmp8;
    bit<8>  cmp64;
    bit<8>  div8;
    bit<8>  mod8;
    bit<64> div64;
    bit<64> mod64;
    bit<8>  sar8;
    bit<64> sar64;
    bit<8>  sadd8;
    bit<8>  ssub8;
    bit<64> sadd64;
    bit<64> ssub64;
    bit<8>  uadd8;
    bit<8>  usub8;
    bit<32> wide;
    bit<16> cat;
    bit<8>  neg;
    bit<8>  lit;
    bit<8>  sar_const;
}
struct headers_t {
    in_h  i;
    out_h o;
}
struct meta_t { }

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.i);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        int<8> x = (int<8>)hdr.i.a;
        int<8> y = (int<8>)hdr.i.b;
        int<64> X = (int<64>)hdr.i.c;
        int<64> Y = (int<64>)hdr.i.d;
        hdr.o.setValid();
        hdr.o.cmp8 = (x < y ? 8w1 : 8w0) | (x <= y ? 8w2 : 8w0) | (x > y ? 8w4 : 8w0)
                     | (x >= y ? 8w8 : 8w0) | (x == y ? 8w16 : 8w0) | (x < 8s0 ? 8w32 : 8w0);
        hdr.o.cmp64 = (X < Y ? 8w1 : 8w0) | (X <= Y ? 8w2 : 8w0) | (X > Y ? 8w4 : 8w0)
                      | (X >= Y ? 8w8 : 8w0) | (X != Y ? 8w16 : 8w0);
        hdr.o.div8 = (bit<8>)(x / y);
        hdr.o.mod8 = (bit<8>)(x % y);
        hdr.o.div64 = (bit<64>)(X / Y);
        hdr.o.mod64 = (bit<64>)(X % Y);
        hdr.o.sar8 = (bit<8>)(x >> hdr.i.sh);
        hdr.o.sar64 = (bit<64>)(X >> hdr.i.sh);
        hdr.o.sadd8 = (bit<8>)(x |+| y);
        hdr.o.ssub8 = (bit<8>)(x |-| y);
        hdr.o.sadd64 = (bit<64>)(X |+| Y);
        hdr.o.ssub64 = (bit<64>)(X |-| Y);
        hdr.o.uadd8 = hdr.i.a |+| hdr.i.b;
        hdr.o.usub8 = hdr.i.a |-| hdr.i.b;
        hdr.o.wide = (bit<32>)(int<32>)x;
        hdr.o.cat = (bit<16>)(x ++ y);
        hdr.o.neg = (bit<8>)(-x);
        hdr.o.lit = (bit<8>)(x + (-8s3) - 8s100);
        hdr.o.sar_const = (bit<8>)(x >> 3);
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers_t hdr) {
    apply {
        pk.emit(hdr.o);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
