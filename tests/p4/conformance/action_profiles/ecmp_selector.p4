/* ECMP over an action_selector hashing the IPv4 5-tuple, plus an action_profile table. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header ports_t { bit<16> srcPort; bit<16> dstPort; }

struct headers { ethernet_t ethernet; ipv4_t ipv4; ports_t ports; }
struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 { pkt.extract(hdr.ipv4); pkt.extract(hdr.ports); transition accept; }
}

control MyVerify(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action set_nhop(bit<48> dmac, bit<9> port) {
        hdr.ethernet.dstAddr = dmac;
        sm.egress_spec = port;
    }
    action set_src(bit<48> smac) { hdr.ethernet.srcAddr = smac; }

    action_selector(HashAlgorithm.crc16, 32w64, 32w14) ecmp_selector;
    action_profile(32w16) smac_profile;

    table ecmp {
        key = {
            hdr.ipv4.dstAddr: lpm;
            hdr.ipv4.srcAddr: selector;
            hdr.ipv4.dstAddr: selector;
            hdr.ipv4.protocol: selector;
            hdr.ports.srcPort: selector;
            hdr.ports.dstPort: selector;
        }
        actions = { set_nhop; drop; }
        default_action = drop();
        implementation = ecmp_selector;
        size = 256;
    }
    table smac {
        key = { sm.egress_spec: exact; }
        actions = { set_src; NoAction; }
        implementation = smac_profile;
    }
    apply {
        if (hdr.ipv4.isValid()) {
            ecmp.apply();
            smac.apply();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}
control MyCompute(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.ports); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
