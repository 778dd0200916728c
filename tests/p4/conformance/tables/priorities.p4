// Ternary priorities from the control plane: the highest priority matching entry wins,
// whatever the insertion order; removing it lets the next one match.
#include <core.p4>
#include <v1model.p4>

header pk_t {
    bit<16> k;
    bit<8>  r;
}

struct headers_t { pk_t pk; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.pk);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set(bit<8> v, bit<9> port) {
        hdr.pk.r = v;
        sm.egress_spec = port;
    }
    action drop() { mark_to_drop(sm); }
    table acl {
        key = { hdr.pk.k: ternary; }
        actions = { set; drop; }
        default_action = drop();
    }
    apply {
        acl.apply();
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
