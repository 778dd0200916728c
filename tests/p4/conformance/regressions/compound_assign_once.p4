// `a op= b` evaluates `a` once: a stack index computed by a call with an inout argument
// runs once for the read and the write, in a control, in an action and with the right
// side calling too.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> i; bit<8> j; bit<8> k; }
header e_t { bit<8> v; }
struct hdrs_t { h_t h; e_t[4] s; }
struct meta_t {}

bit<2> next_index(inout bit<8> i) {
    i = i + 1;
    return (bit<2>)i;
}

parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.h);
        pk.extract(hdr.s.next); pk.extract(hdr.s.next); pk.extract(hdr.s.next); pk.extract(hdr.s.next);
        transition accept;
    }
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action in_action() { hdr.s[next_index(hdr.h.j)].v += 0x10; }
    apply {
        sm.egress_spec = 1;
        hdr.s[next_index(hdr.h.i)].v |= 0xf0;
        in_action();
        hdr.s[next_index(hdr.h.k)].v ^= (bit<8>)next_index(hdr.h.k);
    }
}
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.h); pk.emit(hdr.s); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
