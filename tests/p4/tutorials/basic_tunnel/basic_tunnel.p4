// IPv4 router plus a tunnel: frames with etherType 0x1212 carry a tunnel header
// (proto_id, dst_id) and are forwarded on dst_id alone, untouched; plain IPv4 is routed.
#include <core.p4>
#include <v1model.p4>

typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_h {
    mac_t   dst;
    mac_t   src;
    bit<16> etherType;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  tos;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    ip4_t   srcAddr;
    ip4_t   dstAddr;
}

header tunnel_h {
    bit<16> proto_id;
    bit<16> dst_id;
}

struct headers_t {
    ethernet_h ethernet;
    tunnel_h   tunnel;
    ipv4_h     ipv4;
}

struct meta_t { }

parser RouterParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                    inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x1212: parse_tunnel;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_tunnel {
        pkt.extract(hdr.tunnel);
        transition select(hdr.tunnel.proto_id) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control RouterVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control RouterIngress(inout headers_t hdr, inout meta_t meta,
                      inout standard_metadata_t smeta) {
    action drop() {
        mark_to_drop(smeta);
    }
    action ipv4_forward(mac_t dstAddr, bit<9> port) {
        smeta.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }
    action tunnel_forward(bit<9> port) {
        smeta.egress_spec = port;
    }
    table tunnel_exact {
        key = { hdr.tunnel.dst_id: exact; }
        actions = { tunnel_forward; drop; }
        size = 1024;
        default_action = drop();
    }
    apply {
        if (hdr.tunnel.isValid()) {
            tunnel_exact.apply();
        } else if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        }
    }
}

control RouterEgress(inout headers_t hdr, inout meta_t meta,
                     inout standard_metadata_t smeta) {
    apply { }
}

control RouterCompute(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control RouterDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.tunnel);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(RouterParser(), RouterVerify(), RouterIngress(), RouterEgress(),
         RouterCompute(), RouterDeparser()) main;
