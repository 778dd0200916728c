// forwarder.p4: plain forwarding for everything that is not aggregated (ARP, control
// traffic, PS and ring baselines, results of other switches). IPv4 longest prefix match
// first; on a miss (or for non-IPv4 frames) exact match on the destination MAC; else drop.
#ifndef _FORWARDER_P4_
#define _FORWARDER_P4_

control Forwarder(inout headers_t hdr,
                  inout inc_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    // Routed hop: the next hop's MAC becomes the destination, our port's old dst the source.
    action ipv4_forward(bit<48> dst_mac, bit<9> port) {
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        standard_metadata.egress_spec = port;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; NoAction; }
        default_action = NoAction();
        size = FORWARD_TABLE_SIZE;
    }

    action l2_forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    table l2_exact {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { l2_forward; drop; }
        default_action = drop();
        size = FORWARD_TABLE_SIZE;
    }

    apply {
        // A TTL that would expire is not routed; such packets may still be switched at L2.
        bool routed = false;
        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            routed = ipv4_lpm.apply().hit;
        }
        if (!routed) {
            l2_exact.apply();
        }
    }
}

#endif  // _FORWARDER_P4_
