/* MPLS label stack parsed into a header stack, a parser value set for custom
 * ethertypes, a register-based flow counter and a switch on the action run. */
#include <core.p4>
#include <v1model.p4>

#define MAX_LABELS 4

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header mpls_t { bit<20> label; bit<3> tc; bit<1> bos; bit<8> ttl; }
header custom_t { bit<8> kind; bit<8> len; }

struct headers {
    ethernet_t ethernet;
    mpls_t[MAX_LABELS] mpls;
    custom_t custom;
}

struct metadata {
    bit<32> flow_index;
    bit<8>  depth;
}

parser StackParser(packet_in pkt, out headers hdr, inout metadata meta,
                   inout standard_metadata_t sm) {
    value_set<bit<16>>(4) custom_types;

    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x8847: parse_mpls;
            custom_types: parse_custom;
            default: accept;
        }
    }
    state parse_mpls {
        pkt.extract(hdr.mpls.next);
        meta.depth = meta.depth + 1;
        transition select(hdr.mpls.last.bos) {
            1w0: parse_mpls;
            1w1: accept;
        }
    }
    state parse_custom {
        pkt.extract(hdr.custom);
        verify(hdr.custom.len >= 2, error.PacketTooShort);
        pkt.advance((bit<32>) (hdr.custom.len - 2) << 3);
        transition accept;
    }
}

control NoCheck(inout headers hdr, inout metadata meta) { apply { } }

control StackIngress(inout headers hdr, inout metadata meta,
                     inout standard_metadata_t sm) {
    register<bit<32>>(1024) flow_packets;
    bit<32> seen;

    action pop_label() {
        hdr.mpls.pop_front(1);
    }
    action push_label(bit<20> label) {
        hdr.mpls.push_front(1);
        hdr.mpls[0].setValid();
        hdr.mpls[0].label = label;
        hdr.mpls[0].bos = hdr.mpls[1].isValid() ? 1w0 : 1w1;
        hdr.mpls[0].ttl = 64;
    }
    action set_port(bit<9> port) { sm.egress_spec = port; }

    table labels {
        key = {
            hdr.mpls[0].label: exact @name("top_label");
            hdr.mpls[0].isValid(): exact;
        }
        actions = { pop_label; push_label; set_port; @defaultonly NoAction; }
        default_action = NoAction();
        size = 256;
    }

    apply {
        hash(meta.flow_index, HashAlgorithm.crc32, 32w0,
             { hdr.ethernet.src, hdr.ethernet.dst }, 32w1024);
        flow_packets.read(seen, meta.flow_index);
        flow_packets.write(meta.flow_index, seen |+| 1);
        switch (labels.apply().action_run) {
            pop_label: {
                if (hdr.mpls[0].isValid() && hdr.mpls.lastIndex == 0) {
                    sm.egress_spec = 1;
                }
            }
            push_label:
            set_port: { }
            default: { mark_to_drop(sm); }
        }
    }
}

control StackEgress(inout headers hdr, inout metadata meta,
                    inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers hdr, inout metadata meta) { apply { } }
control StackDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.mpls);
        pkt.emit(hdr.custom);
    }
}

V1Switch(StackParser(), NoCheck(), StackIngress(), StackEgress(), NoUpdate(),
         StackDeparser()) main;
