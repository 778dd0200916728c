// A function's out/inout arguments at run-time indices of a header stack (in range and
// out of it, where a read gives a zeroed invalid header's field and the write is lost),
// called as a statement and inside an index expression, for the native back end's
// differential test (tests/test_native_language.py).
#include <core.p4>
#include <v1model.p4>

header H { bit<8> a; }
header I { bit<8> idx; bit<8> idx2; bit<8> r; }
struct Headers { H[3] h; I i; }
struct Meta {}

bit<8> bump(inout bit<8> v, out bit<8> old) {
    old = v;
    v = v + 8w7;
    return v & 8w1;
}

parser p(packet_in pkt, out Headers hdr, inout Meta m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h.next);
        pkt.extract(hdr.h.next);
        pkt.extract(hdr.h.next);
        pkt.extract(hdr.i);
        transition accept;
    }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    apply {
        bit<8> old;
        bump(h.h[h.i.idx].a, old);
        h.i.r = old;
        h.h[bump(h.h[h.i.idx2].a, old)].a = old;
        sm.egress_spec = 1;
    }
}
control vrfy(inout Headers h, inout Meta m) { apply {} }
control update(inout Headers h, inout Meta m) { apply {} }
control egress(inout Headers h, inout Meta m, inout standard_metadata_t sm) { apply {} }
control deparser(packet_out pkt, in Headers h) { apply { pkt.emit(h.h); pkt.emit(h.i); } }
V1Switch(p(), vrfy(), ingress(), egress(), update(), deparser()) main;
