// IPv4 router with ECN marking: in egress, an ECN-capable packet (ECN 01 or 10) whose
// enqueue depth reached the threshold leaves with ECN 11 (congestion experienced).
// The threshold comes from the ecn_threshold table's default action (10 unless the
// control plane changes it), so tests can exercise the marking path with threshold 0.
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
    bit<6>  diffserv;
    bit<2>  ecn;
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

struct headers_t {
    ethernet_h ethernet;
    ipv4_h     ipv4;
}

struct meta_t {
    bit<19> threshold;
}

parser RouterParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                    inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
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
    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        }
    }
}

control RouterEgress(inout headers_t hdr, inout meta_t meta,
                     inout standard_metadata_t smeta) {
    action set_threshold(bit<19> depth) {
        meta.threshold = depth;
    }
    table ecn_threshold {
        actions = { set_threshold; }
        default_action = set_threshold(10);
    }
    action mark_ecn() {
        hdr.ipv4.ecn = 3;
    }
    apply {
        ecn_threshold.apply();
        if (hdr.ipv4.isValid() && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)) {
            if (smeta.enq_qdepth >= meta.threshold) {
                mark_ecn();
            }
        }
    }
}

control RouterCompute(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.ecn, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control RouterDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(RouterParser(), RouterVerify(), RouterIngress(), RouterEgress(),
         RouterCompute(), RouterDeparser()) main;
