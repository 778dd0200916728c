// Dropping and truncation: mark_to_drop in ingress or egress, egress_spec = 511 (the
// drop port), mark_to_drop followed by a new egress_spec (the later write wins), and
// truncate(3) which cuts the packet sent out to its first 3 bytes.
#include <core.p4>
#include <v1model.p4>

header pk_t { bit<8> mode; }

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
    apply {
        sm.egress_spec = 4;
        if (hdr.pk.mode == 1) {
            mark_to_drop(sm);
        } else if (hdr.pk.mode == 2) {
            sm.egress_spec = 511;
        } else if (hdr.pk.mode == 3) {
            mark_to_drop(sm);
            sm.egress_spec = 3;
        } else if (hdr.pk.mode == 4) {
            sm.egress_spec = 2;
            truncate(3);
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.pk.mode == 5) {
            mark_to_drop(sm);
        }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
