// Serializable enum members as the value of a masked key (`&&&`) in const entries, for
// ternary and lpm keys, beside exact ones (p4c sample table-entries-ser-enum-bmv2).
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind { SHORT = 0, LONG = 0xff }
enum bit<16> Code { LOW = 10, HIGH = 0xab00 }

header h_t { Kind kind; Code code; Code prefix; bit<8> tag; }
struct hdrs_t { h_t h; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    action to(bit<9> port) { sm.egress_spec = port; }
    action tag(bit<8> t) { h.h.tag = t; }
    table by_code {
        key = { h.h.kind : exact; h.h.code : ternary; }
        actions = { to; }
        const default_action = to(0);
        const entries = {
            (Kind.SHORT, _) : to(1);
            (Kind.LONG, Code.HIGH &&& 0xff00) : to(2);
            (Kind.LONG, _) : to(3);
        }
    }
    table by_prefix {
        key = { h.h.prefix : lpm; }
        actions = { tag; NoAction; }
        default_action = NoAction();
        const entries = {
            Code.HIGH &&& 0xff00 : tag(0x11);
            Code.LOW &&& 0xffff : tag(0x22);
        }
    }
    apply {
        by_code.apply();
        by_prefix.apply();
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
