// A serializable enum field in a @controller_header header: p4c names the enum in the
// field's type_name (with its width) and lists it in type_info.serializable_enums.
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind { A = 1, B = 2 }
@controller_header("packet_in") header pin_t { bit<9> port; Kind k; bit<7> pad; }
header h_t { bit<8> a; }
struct hdrs_t { pin_t pin; h_t h; }
struct meta_t {}
parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.pin); pk.emit(hdr.h); } }

control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
