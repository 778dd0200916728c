// A 12-bit header: BMv2 (through p4c's `_padding` field) extracts and emits it as two
// whole bytes and keeps the 4 padding bits it read; a header made valid here pads with 0.
#include <core.p4>
#include <v1model.p4>

header odd_h { bit<4> kind; bit<8> val; }
header tag_h { bit<3> t; }
struct hdrs_t { odd_h o; tag_h tag; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.o); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        h.o.kind = 1;
        sm.egress_spec = 1;
        if (h.o.val == 0xff) {
            h.tag.setValid();
            h.tag.t = 7;
        }
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h.o); pk.emit(h.tag); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
