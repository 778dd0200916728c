// bit<65..128> values (IPv6 addresses) on the native back end: extract and emit,
// arithmetic, constant shifts, slices and slice assignment, concatenation, casts (an
// int<8> widened sign-extends), comparisons, hash and checksum field lists and exact,
// lpm and ternary keys of 128 bits, for the differential test
// (tests/test_native_language.py).
#include <core.p4>
#include <v1model.p4>

header ip6_t {
    bit<8>   tag;
    int<8>   small;
    bit<128> src;
    bit<128> dst;
    bit<72>  odd;    // neither 64 nor 128 bits
}
header out_t {
    bit<128> sum;
    bit<128> prod;
    bit<128> mixed;
    bit<128> shifted;
    bit<96>  cat;
    bit<8>   flags;
    bit<32>  crc;
    bit<16>  csum;
    bit<8>   hit_exact;
    bit<8>   hit_lpm;
    bit<8>   hit_tern;
}
struct headers_t { ip6_t ip; out_t o; }
struct meta_t { bit<128> key; }

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.ip);
        transition select(hdr.ip.dst[127:120]) {
            0xff: accept;
            default: check;
        }
    }
    state check {
        transition select(hdr.ip.src) {
            128w1: reject;
            default: accept;
        }
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action mark(bit<8> v) { hdr.o.hit_exact = v; }
    action mark_lpm(bit<8> v) { hdr.o.hit_lpm = v; }
    action mark_tern(bit<8> v) { hdr.o.hit_tern = v; }
    table exact6 { key = { meta.key: exact; } actions = { mark; NoAction; } }
    table lpm6 { key = { hdr.ip.dst: lpm; } actions = { mark_lpm; NoAction; } }
    table tern6 {
        key = { hdr.ip.src: ternary; hdr.ip.tag: exact; }
        actions = { mark_tern; NoAction; }
    }
    apply {
        hdr.o.setValid();
        bit<128> s = hdr.ip.src + hdr.ip.dst;
        hdr.o.sum = s;
        hdr.o.prod = hdr.ip.src * 128w0x10001 - ~hdr.ip.dst;
        hdr.o.mixed = (bit<128>)hdr.ip.tag + (bit<128>)(bit<8>)hdr.ip.small + (bit<128>)hdr.ip.odd;
        hdr.o.shifted = (hdr.ip.src << 68) | (hdr.ip.dst >> 71);
        hdr.o.cat = hdr.ip.src[63:0] ++ hdr.ip.dst[127:96];
        hdr.o.flags = (hdr.ip.src > hdr.ip.dst ? 8w1 : 8w0) | (hdr.ip.src == s ? 8w2 : 8w0);
        hdr.o.mixed[100:93] = hdr.ip.tag;
        hash(hdr.o.crc, HashAlgorithm.crc32, 32w0, { hdr.ip.src, hdr.ip.odd }, 64w0x100000000);
        meta.key = hdr.ip.src ^ 128w0xF0000000000000000000000000000001;
        exact6.apply();
        lpm6.apply();
        tern6.apply();
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.o.isValid(), { hdr.ip.dst, hdr.o.sum }, hdr.o.csum,
            HashAlgorithm.csum16);
    }
}
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr.o); pk.emit(hdr.ip); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
