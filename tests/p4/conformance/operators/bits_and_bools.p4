// Slice assignment, bitwise and/or/xor, bool operators with short-circuit (the right
// side would read an invalid header), the conditional operator, int<> literals and
// comparisons against negative numbers, and a 64-bit product wrapping.
#include <core.p4>
#include <v1model.p4>

header v_t {
    bit<8>  x;
    bit<8>  y;
    bit<8>  sliced;
    bit<8>  andv;
    bit<8>  orv;
    bit<8>  xorv;
    bit<8>  boolbits;
    bit<8>  cond;
    bit<64> big;
}
header opt_t { bit<8> z; }

struct headers_t {
    v_t   v;
    opt_t opt;
}
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.v);
        transition select(hdr.v.x) {
            0xFF: parse_opt;
            default: accept;
        }
    }
    state parse_opt {
        pkt.extract(hdr.opt);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        bit<8> x = hdr.v.x;
        bit<8> y = hdr.v.y;
        hdr.v.sliced = x;
        hdr.v.sliced[3:0] = y[7:4];
        hdr.v.sliced[7:7] = 1;
        hdr.v.andv = x & y;
        hdr.v.orv = x | y;
        hdr.v.xorv = x ^ y;
        bool b0 = hdr.opt.isValid() && hdr.opt.z == 7;
        bool b1 = !hdr.opt.isValid() || hdr.opt.z == 7;
        bool b2 = (x > y) != (y > x);
        int<8> sx = (int<8>) x;
        bool b3 = sx < -3;
        bool b4 = sx >= -128 && sx <= 127;
        hdr.v.boolbits = (b0 ? 8w1 : 8w0) | (b1 ? 8w2 : 8w0) | (b2 ? 8w4 : 8w0)
                       | (b3 ? 8w8 : 8w0) | (b4 ? 8w16 : 8w0);
        hdr.v.cond = (x == y) ? x : ((x > y) ? x - y : y - x);
        hdr.v.big = (x ++ 56w0) * 64w3;
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.v);
        pkt.emit(hdr.opt);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
