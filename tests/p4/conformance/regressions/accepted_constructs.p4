// Constructs p4c and BMv2 accept: header fields of a `type`-declared new type and of a
// typedef of one, table keys of type error (const entries name errors), serializable
// enum members as const entry keys, `_` for out arguments nobody reads.
#include <core.p4>
#include <v1model.p4>

type bit<8> Tag_t;
typedef Tag_t TagAlias_t;
enum bit<8> Kind { SHORT = 1, LONG = 2 }
error { Unwanted }

header h_t { Tag_t tag; TagAlias_t alias; Kind kind; bit<8> out1; bit<8> out2; bit<8> out3; }
struct hdrs_t { h_t h; }
struct meta_t {}

void halve(in bit<8> x, out bit<8> half, out bit<8> rest) {
    half = x >> 1;
    rest = x & 1;
}

parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.h);
        verify(hdr.h.kind != Kind.LONG || hdr.h.out1 == 0, error.Unwanted);
        transition accept;
    }
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set1(bit<8> v) { hdr.h.out1 = v; }
    action set2(bit<8> v) { hdr.h.out2 = v; }
    action set3(bit<8> v) { hdr.h.out3 = v; }
    action both(out bit<8> a, out bit<8> b) { a = 7; b = 8; hdr.h.out3 = hdr.h.out3 + 1; }
    table by_error {
        key = { sm.parser_error : exact; }
        actions = { set1; NoAction; }
        const entries = {
            error.NoError : set1(0x10);
            error.Unwanted : set1(0xee);
        }
        default_action = NoAction();
    }
    table by_kind {
        key = { hdr.h.kind : exact; }
        actions = { set2; NoAction; }
        const entries = {
            Kind.SHORT : set2(0x21);
            Kind.LONG : set2(0x22);
        }
        default_action = NoAction();
    }
    table by_tag {
        key = { hdr.h.tag : exact; }
        actions = { set3; NoAction; }
        const entries = { (Tag_t)8w5 : set3(0x35); }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        by_error.apply();
        by_kind.apply();
        by_tag.apply();
        hdr.h.alias = (TagAlias_t)((bit<8>)hdr.h.alias + (bit<8>)hdr.h.tag);
        bit<8> half;
        halve((bit<8>)hdr.h.tag, half, _);
        hdr.h.tag = (Tag_t)half;
        both(_, _);
    }
}
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
