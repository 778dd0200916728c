/* Custom tunnel header in front of IPv4: forward on the tunnel id when present. */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_TUNNEL = 0x1212;
const bit<16> TYPE_IPV4 = 0x800;

typedef bit<9>  port_t;
typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_t { mac_t dst; mac_t src; bit<16> etherType; }
header tunnel_t { bit<16> proto_id; bit<16> dst_id; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum; ip4_t srcAddr; ip4_t dstAddr;
}

struct metadata { }
struct headers { ethernet_t ethernet; tunnel_t tunnel; ipv4_t ipv4; }

parser TunnelParser(packet_in pkt, out headers hdr, inout metadata meta,
                    inout standard_metadata_t std_meta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_TUNNEL: parse_tunnel;
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_tunnel {
        pkt.extract(hdr.tunnel);
        transition select(hdr.tunnel.proto_id) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout metadata meta) { apply { } }

control TunnelIngress(inout headers hdr, inout metadata meta,
                      inout standard_metadata_t std_meta) {
    counter(1024, CounterType.packets_and_bytes) tunnel_counter;

    action drop() { mark_to_drop(std_meta); }

    action ipv4_forward(mac_t dstAddr, port_t port) {
        std_meta.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action tunnel_forward(port_t port) {
        std_meta.egress_spec = port;
        tunnel_counter.count((bit<32>) hdr.tunnel.dst_id);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }

    table tunnel_exact {
        key = { hdr.tunnel.dst_id: exact; }
        actions = { tunnel_forward; drop; }
        size = 1024;
        default_action = drop();
    }

    apply {
        if (hdr.ipv4.isValid() && !hdr.tunnel.isValid()) {
            ipv4_lpm.apply();
        }
        if (hdr.tunnel.isValid()) {
            tunnel_exact.apply();
        }
    }
}

control TunnelEgress(inout headers hdr, inout metadata meta,
                     inout standard_metadata_t std_meta) { apply { } }

control TunnelChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control TunnelDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.tunnel);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(TunnelParser(), NoVerify(), TunnelIngress(), TunnelEgress(),
         TunnelChecksum(), TunnelDeparser()) main;
