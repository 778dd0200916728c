// Header fields of struct type (structs of bit<W>, bool and nested structs, P4_16 7.2.2)
// and of typedef'd and `type`-declared bit<W> (p4c sample bvec-hdr-bmv2): extracted and
// emitted in declaration order, matched as table keys, read and written.
#include <core.p4>
#include <v1model.p4>

typedef bit<16> Port_t;
type bit<8> Color_t;
struct nibbles_t { bit<4> hi; bit<4> lo; }
struct row_t { bit<8> e; nibbles_t n; Port_t port; bool flag; bit<7> rest; }

header row_h { row_t row; Color_t color; }
struct hdrs_t { row_h h; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    action to(bit<9> p) { sm.egress_spec = p; }
    table by_e {
        key = { h.h.row.e : exact; h.h.row.n.lo : exact; }
        actions = { to; }
        default_action = to(0);
        const entries = {
            (1, 5) : to(1);
            (2, 5) : to(2);
        }
    }
    apply {
        by_e.apply();
        h.h.row.n.hi = h.h.row.n.hi + 1;
        h.h.row.port = h.h.row.port + (Port_t)h.h.row.rest;
        if (h.h.row.flag) {
            h.h.color = (Color_t)8w0xcc;
        }
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h.h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
