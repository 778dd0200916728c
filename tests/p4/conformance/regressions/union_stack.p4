// A stack of header unions: extracting into stack.next.member (the member of the next
// element), validity and field writes through u[i].member, assigning one element to another.
#include <core.p4>
#include <v1model.p4>
header byte_t { bit<8> data; }
header short_t { bit<16> data; }
header_union u_t { byte_t byte; short_t short; }
header h_t { bit<8> kind; }
struct hdrs_t { h_t h; u_t[2] u; }
struct meta_t {}
parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition select(hdr.h.kind) { 1: one; 2: two; default: accept; } }
    state one { pk.extract(hdr.u.next.byte); transition select(hdr.u.last.byte.data) { 0: accept; default: start2; } }
    state two { pk.extract(hdr.u.next.short); transition accept; }
    state start2 { pk.extract(hdr.u.next.short); transition accept; }
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.u[0].byte.isValid()) {
            hdr.u[0].byte.data = hdr.u[0].byte.data + 1;
        }
        if (hdr.u[1].short.isValid()) {
            hdr.u[1].short.data = hdr.u[1].short.data + 1;
            hdr.u[0] = hdr.u[1];
        }
        if (hdr.u[0].isValid()) { hdr.h.kind = hdr.h.kind | 0x80; }
    }
}
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.h); pk.emit(hdr.u); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
