// A table keyed on the parser error, for the native back end's differential test
// (tests/test_native.py): the control plane writes p4c's error numbers (declaration
// order from 1: NoError 1, the core errors, then the program's own).
#include <core.p4>
#include <v1model.p4>

error { Unwanted }

header h_t {
    bit<8> kind;
    bit<8> out;
}
struct headers_t {
    h_t h;
}
struct meta_t { }

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.h);
        verify(hdr.h.kind != 2, error.Unwanted);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set1(bit<8> v) {
        hdr.h.out = v;
    }
    table by_error {
        key = { sm.parser_error: exact; }
        actions = { set1; NoAction; }
        default_action = NoAction();
    }
    apply {
        by_error.apply();
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers_t hdr) {
    apply {
        pk.emit(hdr);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
