// parser.p4: Ethernet / IPv4 / UDP, then the INC header and its K slots on INC_UDP_PORT.
#ifndef _PARSER_P4_
#define _PARSER_P4_

parser IncParser(packet_in packet,
                 out headers_t hdr,
                 inout inc_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    // Only unfragmented, option-less IPv4 reaches the INC parser: the aggregator rewrites
    // addresses and relies on a fixed 20-byte IPv4 header.
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        // flags[0:0] is MF: a first fragment (offset 0, more to come) is a fragment too.
        transition select(hdr.ipv4.ihl, hdr.ipv4.flags[0:0], hdr.ipv4.fragOffset,
                          hdr.ipv4.protocol) {
            (4w5, 1w0, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            INC_UDP_PORT: parse_inc;
            default: accept;
        }
    }

    // Values are parsed only when the packet carries exactly K slots; otherwise inc_values
    // stays invalid and JobRegion drops the packet as DROP_BAD_SLOT_COUNT.
    state parse_inc {
        packet.extract(hdr.inc);
        transition select(hdr.inc.slot_count) {
            INC_SLOTS: parse_values;
            default: accept;
        }
    }

    state parse_values {
        packet.extract(hdr.inc_values);
        transition accept;
    }
}

#endif  // _PARSER_P4_
