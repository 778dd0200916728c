// v1model hash() with each algorithm over the same 40 bits (a: 32, b: 8), base 0 and
// max 2^16, so each result is the algorithm's value modulo 65536; one more call uses
// base 100 and max 7. Bits are serialised big-endian, fields back to back.
#include <core.p4>
#include <v1model.p4>

header pk_t {
    bit<32> a;
    bit<8>  b;
    bit<16> crc16;
    bit<16> crc32;
    bit<16> identity;
    bit<16> csum16;
    bit<16> xor16;
    bit<16> crc16_custom;
    bit<16> based;
}

struct headers_t { pk_t pk; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.pk);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hash(hdr.pk.crc16, HashAlgorithm.crc16, 16w0, { hdr.pk.a, hdr.pk.b }, 32w65536);
        hash(hdr.pk.crc32, HashAlgorithm.crc32, 16w0, { hdr.pk.a, hdr.pk.b }, 32w65536);
        hash(hdr.pk.identity, HashAlgorithm.identity, 16w0, { hdr.pk.a, hdr.pk.b }, 32w65536);
        hash(hdr.pk.csum16, HashAlgorithm.csum16, 16w0, { hdr.pk.a, hdr.pk.b }, 32w65536);
        hash(hdr.pk.xor16, HashAlgorithm.xor16, 16w0, { hdr.pk.a, hdr.pk.b }, 32w65536);
        hash(hdr.pk.crc16_custom, HashAlgorithm.crc16_custom, 16w0, { hdr.pk.a, hdr.pk.b },
             32w65536);
        hash(hdr.pk.based, HashAlgorithm.crc16, 16w100, { hdr.pk.a, hdr.pk.b }, 32w7);
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
