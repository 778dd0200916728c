// IPv4 with options (varbit<320>: wider than a machine word), checksums over them,
// checksums with the payload and other algorithms, and constructs the p4c samples use
// beside them: an untyped constant beside a cast (typed by it), a lookahead whose value
// is unused, a control applied by its type name and a local header stack, for the
// native back end's differential test (tests/test_native_language.py).
#include <core.p4>
#include <v1model.p4>

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  tos;
    bit<16> len;
    bit<16> id;
    bit<16> frag;
    bit<8>  ttl;
    bit<8>  proto;
    bit<16> csum;
    bit<32> src;
    bit<32> dst;
    varbit<320> options;
}
header ihl_t { bit<4> version; bit<4> ihl; }
header copy_t { varbit<320> options; }
header out_t {
    bit<8>  same;       // options == their copy (bit 0); 0x10 from Mark
    bit<8>  differs;    // an invalid header == the copy (bit 0); a copy of it (bit 1)
    bit<8>  csum_ok;    // the IPv4 checksum verified (options included)
    bit<16> crc_pl;     // crc16 over the source address and the payload
    bit<16> csum_pl;    // csum16 over the destination address and the payload
    bit<32> crc_opts;   // crc32 over the options alone
    bit<8>  stack_eq;   // a local stack compared with one copied from the headers
}
header word_t { bit<16> w; }
struct headers_t { ipv4_t ip; copy_t c; out_t o; word_t[2] words; }
struct meta_t { bit<1> unused; }

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.lookahead<ihl_t>();
        pk.extract(hdr.ip, (bit<32>)(8 * (4 * (bit<9>)pk.lookahead<ihl_t>().ihl - 20)));
        transition select(hdr.ip.proto) {
            1: words;
            default: accept;
        }
    }
    state words {
        pk.extract(hdr.words.next);
        pk.extract(hdr.words.next);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.ip.isValid(),
            { hdr.ip.version, hdr.ip.ihl, hdr.ip.tos, hdr.ip.len, hdr.ip.id, hdr.ip.frag,
              hdr.ip.ttl, hdr.ip.proto, hdr.ip.src, hdr.ip.dst, hdr.ip.options },
            hdr.ip.csum, HashAlgorithm.csum16);
    }
}

control Mark(inout out_t o) {
    apply { o.same = o.same | 8w0x10; }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.o.setValid();
        hdr.c.setValid();
        hdr.c.options = hdr.ip.options;
        hdr.o.same = hdr.ip.options == hdr.c.options ? 8w1 : 8w0;
        Mark.apply(hdr.o);
        copy_t other;
        hdr.o.differs = other == hdr.c ? 8w1 : 8w0;
        other = hdr.c;
        hdr.o.differs = hdr.o.differs | (other == hdr.c ? 8w2 : 8w0);
        hdr.o.csum_ok = (bit<8>)sm.checksum_error;
        word_t[2] local;
        local[0] = hdr.words[0];
        local[1] = hdr.words[1];
        hdr.o.stack_eq = local == hdr.words ? 8w1 : 8w0;
        hdr.c.setInvalid();
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum_with_payload(hdr.o.isValid(), { hdr.ip.src }, hdr.o.crc_pl,
            HashAlgorithm.crc16);
        update_checksum_with_payload(hdr.o.isValid(), { hdr.ip.dst }, hdr.o.csum_pl,
            HashAlgorithm.csum16);
        update_checksum(hdr.o.isValid(), { hdr.ip.options }, hdr.o.crc_opts,
            HashAlgorithm.crc32);
    }
}

control D(packet_out pk, in headers_t hdr) {
    apply {
        pk.emit(hdr.o);
        pk.emit(hdr.ip);
        pk.emit(hdr.c);
        pk.emit(hdr.words);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
