// Source routing: frames of type 0x1234 carry a list of 16-bit hops (bottom-of-stack bit
// + 15-bit port). Each switch sends the frame out of the first hop's port and pops it;
// when the last hop is popped the etherType becomes IPv4 again. The IPv4 TTL is
// decremented at every hop. Frames without a route are dropped.
#include <core.p4>
#include <v1model.p4>

#define MAX_HOPS 4

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header hop_h {
    bit<1>  bos;
    bit<15> port;
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
    bit<32> srcAddr;
    bit<32> dstAddr;
}

struct headers_t {
    ethernet_h      ethernet;
    hop_h[MAX_HOPS] hops;
    ipv4_h          ipv4;
}

struct meta_t { }

parser SrParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x1234: parse_hop;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_hop {
        pkt.extract(hdr.hops.next);
        transition select(hdr.hops.last.bos) {
            1: parse_ipv4;
            default: parse_hop;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control SrVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control SrIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t smeta) {
    apply {
        if (hdr.hops[0].isValid()) {
            if (hdr.hops[0].bos == 1) {
                hdr.ethernet.etherType = 0x0800;
            }
            smeta.egress_spec = (bit<9>) hdr.hops[0].port;
            hdr.hops.pop_front(1);
            if (hdr.ipv4.isValid()) {
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            }
        } else {
            mark_to_drop(smeta);
        }
    }
}

control SrEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t smeta) {
    apply { }
}

control SrCompute(inout headers_t hdr, inout meta_t meta) {
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

control SrDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.hops);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(SrParser(), SrVerify(), SrIngress(), SrEgress(), SrCompute(), SrDeparser()) main;
