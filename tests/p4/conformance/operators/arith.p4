// Arithmetic and bit operations on runtime values: wrap-around, saturating (unsigned and
// signed), shifts (logical, arithmetic, by a runtime amount >= width), slices, concat,
// widening/narrowing/sign-extending casts, signed and unsigned comparisons.
#include <core.p4>
#include <v1model.p4>

header ops_t {
    bit<8>  a;
    bit<8>  b;
    bit<8>  c;          // shift amount
    bit<8>  add;
    bit<8>  sub;
    bit<8>  mul;
    bit<8>  sat_add;
    bit<8>  sat_sub;
    bit<8>  ssat_add;   // int<8> |+| int<8>
    bit<8>  ssat_sub;   // int<8> |-| int<8>
    bit<8>  shl;
    bit<8>  shr;
    bit<8>  sshr;       // int<8> >> 2 (arithmetic)
    bit<8>  shl_var;    // a << c
    bit<8>  shr_var;    // a >> c
    bit<8>  not_a;
    bit<8>  neg_a;
    bit<8>  slices;     // a[7:4] ++ b[3:0]
    bit<16> concat;     // a ++ b
    bit<16> widen;      // (bit<16>) a
    bit<16> sext;       // (bit<16>) (int<16>) (int<8>) a
    bit<4>  narrow;     // (bit<4>) a
    bit<4>  flags;      // signed a<b, unsigned a<b, a==b, signed a>=b
}

struct headers_t { ops_t o; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.o);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        bit<8> a = hdr.o.a;
        bit<8> b = hdr.o.b;
        int<8> sa = (int<8>) a;
        int<8> sb = (int<8>) b;
        hdr.o.add = a + b;
        hdr.o.sub = a - b;
        hdr.o.mul = a * b;
        hdr.o.sat_add = a |+| b;
        hdr.o.sat_sub = a |-| b;
        hdr.o.ssat_add = (bit<8>) (sa |+| sb);
        hdr.o.ssat_sub = (bit<8>) (sa |-| sb);
        hdr.o.shl = a << 3;
        hdr.o.shr = a >> 3;
        hdr.o.sshr = (bit<8>) (sa >> 2);
        hdr.o.shl_var = a << hdr.o.c;
        hdr.o.shr_var = a >> hdr.o.c;
        hdr.o.not_a = ~a;
        hdr.o.neg_a = -a;
        hdr.o.slices = a[7:4] ++ b[3:0];
        hdr.o.concat = a ++ b;
        hdr.o.widen = (bit<16>) a;
        hdr.o.sext = (bit<16>) (int<16>) sa;
        hdr.o.narrow = (bit<4>) a;
        bit<1> f3 = (sa < sb) ? 1w1 : 1w0;
        bit<1> f2 = (a < b) ? 1w1 : 1w0;
        bit<1> f1 = (a == b) ? 1w1 : 1w0;
        bit<1> f0 = (sa >= sb) ? 1w1 : 1w0;
        hdr.o.flags = f3 ++ f2 ++ f1 ++ f0;
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.o); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
