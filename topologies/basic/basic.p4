/* IPv4 forwarding: Ethernet + IPv4 parsing, longest-prefix-match routing that rewrites
 * the MAC addresses and decrements the TTL, and the IPv4 header checksum recomputed on
 * the way out. The program `make run` runs before the aggregation job exists. */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;

typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_h {
    mac_t   dst;
    mac_t   src;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    ip4_t   src_addr;
    ip4_t   dst_addr;
}

struct headers_t {
    ethernet_h ethernet;
    ipv4_h     ipv4;
}

struct meta_t { }

parser RouterParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                    inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
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
                      inout standard_metadata_t std) {
    action drop() {
        mark_to_drop(std);
    }
    action forward(mac_t next_hop_mac, bit<9> port) {
        std.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = next_hop_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ipv4_route {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            ipv4_route.apply();
        } else {
            drop();
        }
    }
}

control RouterEgress(inout headers_t hdr, inout meta_t meta,
                     inout standard_metadata_t std) {
    apply { }
}

control RouterChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control RouterDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(RouterParser(), RouterVerify(), RouterIngress(), RouterEgress(),
         RouterChecksum(), RouterDeparser()) main;
