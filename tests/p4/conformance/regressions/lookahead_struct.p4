// lookahead<S>() of a struct (bit, bool, int, a nested struct and a header field) reads
// the next bits without consuming them; too few bits left is PacketTooShort.
#include <core.p4>
#include <v1model.p4>

header tag_h { bit<4> kind; bit<4> len; }
struct inner_t { bit<3> x; bool flag; }
struct peek_t { bit<8> first; inner_t in1; int<4> s; tag_h tag; }
header body_h { bit<8> b0; bit<8> b1; bit<8> b2; }
header out_h { bit<8> first; bit<8> x; bit<8> flag; bit<8> s; bit<8> tag; bit<8> err; }
struct hdrs_t { body_h body; out_h o; }
struct meta_t { peek_t p; }

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        m.p = pk.lookahead<peek_t>();
        pk.extract(h.body);  // the same bits again: lookahead consumed nothing
        transition accept;
    }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.o.setValid();
        h.o.first = m.p.first;
        h.o.x = (bit<8>)m.p.in1.x;
        h.o.flag = m.p.in1.flag ? 8w1 : 8w0;
        h.o.s = (bit<8>)(int<8>)m.p.s;
        h.o.tag = m.p.tag.isValid() ? m.p.tag.kind ++ m.p.tag.len : 8w0xee;
        h.o.err = sm.parser_error == error.PacketTooShort ? 8w1 : 8w0;
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
