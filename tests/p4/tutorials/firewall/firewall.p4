// Stateful firewall with a Bloom filter. Ports 1-2 are inside, 3-4 outside. A TCP SYN
// going out sets one bit in each of two 1-bit registers, indexed by CRC-16 and CRC-32
// hashes of the flow (src, dst, sport, dport, proto). TCP coming in is let through only
// when both bits of the reversed flow are set. Non-TCP traffic is simply routed.
#include <core.p4>
#include <v1model.p4>

#define BLOOM_ENTRIES 4096

header ethernet_h {
    bit<48> dst;
    bit<48> src;
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
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header tcp_h {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<4>  res;
    bit<1>  cwr;
    bit<1>  ece;
    bit<1>  urg;
    bit<1>  ack;
    bit<1>  psh;
    bit<1>  rst;
    bit<1>  syn;
    bit<1>  fin;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

struct headers_t {
    ethernet_h ethernet;
    ipv4_h     ipv4;
    tcp_h      tcp;
}

struct meta_t { }

parser FwParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
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
        transition select(hdr.ipv4.protocol) {
            6: parse_tcp;
            default: accept;
        }
    }
    state parse_tcp {
        pkt.extract(hdr.tcp);
        transition accept;
    }
}

control FwVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control FwIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t smeta) {
    register<bit<1>>(BLOOM_ENTRIES) bloom_1;
    register<bit<1>>(BLOOM_ENTRIES) bloom_2;

    bit<32> pos_1;
    bit<32> pos_2;
    bit<1> bit_1;
    bit<1> bit_2;
    bit<1> direction;

    action drop() {
        mark_to_drop(smeta);
    }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        smeta.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; }
        default_action = drop();
    }
    action set_direction(bit<1> dir) {
        direction = dir;
    }
    table check_ports {
        key = {
            smeta.ingress_port: exact;
            smeta.egress_spec: exact;
        }
        actions = { set_direction; NoAction; }
        default_action = NoAction();
    }
    action flow_positions(bit<32> a, bit<32> b, bit<16> pa, bit<16> pb) {
        hash(pos_1, HashAlgorithm.crc16, (bit<32>) 0,
             { a, b, pa, pb, hdr.ipv4.protocol }, (bit<32>) BLOOM_ENTRIES);
        hash(pos_2, HashAlgorithm.crc32, (bit<32>) 0,
             { a, b, pa, pb, hdr.ipv4.protocol }, (bit<32>) BLOOM_ENTRIES);
    }
    apply {
        if (!hdr.ipv4.isValid()) {
            return;
        }
        ipv4_lpm.apply();
        if (!hdr.tcp.isValid()) {
            return;
        }
        direction = 0;
        if (check_ports.apply().hit) {
            if (direction == 0) {
                flow_positions(hdr.ipv4.srcAddr, hdr.ipv4.dstAddr,
                               hdr.tcp.srcPort, hdr.tcp.dstPort);
            } else {
                flow_positions(hdr.ipv4.dstAddr, hdr.ipv4.srcAddr,
                               hdr.tcp.dstPort, hdr.tcp.srcPort);
            }
            if (direction == 0) {
                if (hdr.tcp.syn == 1) {
                    bloom_1.write(pos_1, 1);
                    bloom_2.write(pos_2, 1);
                }
            } else {
                bloom_1.read(bit_1, pos_1);
                bloom_2.read(bit_2, pos_2);
                if (bit_1 != 1 || bit_2 != 1) {
                    drop();
                }
            }
        }
    }
}

control FwEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t smeta) {
    apply { }
}

control FwCompute(inout headers_t hdr, inout meta_t meta) {
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

control FwDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.tcp);
    }
}

V1Switch(FwParser(), FwVerify(), FwIngress(), FwEgress(), FwCompute(), FwDeparser()) main;
