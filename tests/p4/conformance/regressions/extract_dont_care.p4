// `extract<H>(_)`: the bits of an H are read (and must be there) and dropped (p4c sample
// issue774-4-bmv2); a packet too short for them is a PacketTooShort parser error.
#include <core.p4>
#include <v1model.p4>

header skip_h { bit<32> data; }
header keep_h { bit<16> v; }
struct hdrs_t { keep_h k; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract<skip_h>(_);
        pk.extract(h.k);
        transition accept;
    }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.PacketTooShort) {
            sm.egress_spec = 2;
        }
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
