// Multicast replication: ingress sets mcast_grp from the packet; egress writes each
// copy's egress_rid, egress_port and instance_type (5 = replication, 0 = normal) into it.
#include <core.p4>
#include <v1model.p4>

header pk_t {
    bit<16> grp;
    bit<16> rid;
    bit<16> port;
    bit<8>  itype;
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
    apply {
        if (hdr.pk.grp == 0) {
            sm.egress_spec = 7;
        } else {
            sm.mcast_grp = hdr.pk.grp;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.pk.rid = sm.egress_rid;
        hdr.pk.port = (bit<16>) sm.egress_port;
        hdr.pk.itype = (bit<8>) sm.instance_type;
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
