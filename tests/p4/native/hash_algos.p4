// v1model hash() with identity and xor16 (and crc16/crc32 beside them) over fields of
// odd widths, for the native back end's differential test (tests/test_native.py).
#include <core.p4>
#include <v1model.p4>

header in_h {
    bit<8>  a;
    bit<16> b;
    bit<32> c;
    bit<12> d;
    bit<4>  e;
}
header out_h {
    bit<64> id_all;
    bit<32> id_mod;
    bit<16> x_all;
    bit<16> x_odd;
    bit<16> crc16;
    bit<32> crc32;
    bit<8>  id_small;
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
        hdr.o.setValid();
        hash(hdr.o.id_all, HashAlgorithm.identity, 64w0, { hdr.i.a, hdr.i.b, hdr.i.c, hdr.i.d },
             64w0xFFFFFFFFFFFFFFFF);
        hash(hdr.o.id_mod, HashAlgorithm.identity, 32w7, { hdr.i.c, hdr.i.e }, 32w1000);
        hash(hdr.o.x_all, HashAlgorithm.xor16, 16w0, { hdr.i.a, hdr.i.b, hdr.i.c, hdr.i.d },
             32w65536);
        hash(hdr.o.x_odd, HashAlgorithm.xor16, 16w1, { hdr.i.a, hdr.i.d, hdr.i.e }, 32w50000);
        hash(hdr.o.crc16, HashAlgorithm.crc16, 16w0, { hdr.i.b, hdr.i.e }, 32w65536);
        hash(hdr.o.crc32, HashAlgorithm.crc32, 32w0, { hdr.i.a, hdr.i.d }, 64w0x100000000);
        hash(hdr.o.id_small, HashAlgorithm.identity, 8w0, { hdr.i.e }, 16w256);
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
