// Layer-2 switch with multicast: a destination MAC maps either to one port or to a
// multicast group; egress drops the copy that would go back out of the ingress port
// and writes the replica id into the source MAC's low 16 bits for broadcast copies.
#include <core.p4>
#include <v1model.p4>

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

struct headers_t {
    ethernet_h ethernet;
}

struct meta_t { }

parser McParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control McVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control McIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t smeta) {
    action drop() {
        mark_to_drop(smeta);
    }
    action mac_forward(bit<9> port) {
        smeta.egress_spec = port;
    }
    action multicast(bit<16> grp) {
        smeta.mcast_grp = grp;
    }
    table mac_lookup {
        key = { hdr.ethernet.dst: exact; }
        actions = { mac_forward; multicast; drop; }
        size = 64;
        default_action = multicast(1);
    }
    apply {
        mac_lookup.apply();
    }
}

control McEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t smeta) {
    apply {
        if (smeta.egress_port == smeta.ingress_port) {
            mark_to_drop(smeta);
        } else if (smeta.mcast_grp != 0) {
            hdr.ethernet.src[15:0] = smeta.egress_rid;
        }
    }
}

control McCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control McDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(McParser(), McVerify(), McIngress(), McEgress(), McCompute(), McDeparser()) main;
