// lookahead peeks without consuming, advance skips bits (they are not emitted again),
// verify raises a user error that reaches ingress in standard_metadata.parser_error.
// Output: a result header (code, error flag) followed by the parsed headers and payload.
#include <core.p4>
#include <v1model.p4>

error { ZeroValue }

header res_t {
    bit<8> code;
    bit<8> err;
}
header pre_t { bit<8> tag; }
header body_t { bit<16> v; }

struct headers_t {
    res_t  res;
    pre_t  pre;
    body_t body;
}
struct meta_t { bit<8> code; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        transition select(pkt.lookahead<bit<8>>()) {
            0xAA: skip_tag;
            0xBB: keep_tag;
            default: accept;
        }
    }
    state skip_tag {
        meta.code = 1;
        pkt.advance(8);
        transition parse_body;
    }
    state keep_tag {
        meta.code = 2;
        pkt.extract(hdr.pre);
        transition parse_body;
    }
    state parse_body {
        // lookahead of a whole header type
        body_t peek = pkt.lookahead<body_t>();
        pkt.extract(hdr.body);
        verify(peek.v != 0, error.ZeroValue);
        meta.code = meta.code + 0x10;
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.res.setValid();
        hdr.res.code = meta.code;
        if (sm.parser_error == error.ZeroValue) {
            hdr.res.err = 1;
        } else if (sm.parser_error == error.NoError) {
            hdr.res.err = 0;
        } else {
            hdr.res.err = 0xEE;
        }
        sm.egress_spec = 2;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.res);
        pkt.emit(hdr.pre);
        pkt.emit(hdr.body);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
