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

    // Options are parsed word by word (so that the UDP header behind them is seen, and the
    // checksum covers them); the UDP header is in the first fragment (offset 0) only. INC is
    // parsed only in unfragmented IPv4 without options: the aggregator rewrites addresses and
    // relies on a fixed 20-byte IPv4 header. A UDP packet to INC_UDP_PORT behind options or
    // in a first fragment is refused by IncIngress (DROP_UNPARSED_IPV4): it is never routed
    // around admission. Later fragments hold no header; without the first, no host
    // reassembles them.
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        meta.ipv4_option_words = hdr.ipv4.ihl - 5;
        transition select(hdr.ipv4.ihl) {
            4w5: parse_ipv4_payload;
            4w6 &&& 4w0xE: parse_ipv4_options;  // 6, 7
            4w8 &&& 4w0x8: parse_ipv4_options;  // 8 .. 15
            default: accept;                    // below 5: not an IPv4 header
        }
    }

    state parse_ipv4_options {
        packet.extract(hdr.ipv4_options.next);
        meta.ipv4_option_words = meta.ipv4_option_words - 1;
        transition select(meta.ipv4_option_words) {
            4w0: parse_ipv4_payload;
            default: parse_ipv4_options;
        }
    }

    state parse_ipv4_payload {
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    // flags[0:0] is MF: a first fragment (offset 0, more to come) is a fragment too.
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort, hdr.ipv4.ihl, hdr.ipv4.flags[0:0]) {
            (INC_UDP_PORT, 4w5, 1w0): parse_inc;
            default: accept;
        }
    }

    // Values are parsed only when the packet carries whole blocks of K slots (one block;
    // up to INC_VALUE_BLOCKS for a synchronous aggregation); otherwise inc_values stays
    // invalid and JobRegion drops the packet as DROP_BAD_SLOT_COUNT.
    state parse_inc {
        packet.extract(hdr.inc);
        transition select(hdr.inc.op, hdr.inc.slot_count) {
            (_, INC_SLOTS): parse_values;
            (OP_AGG_SYNC, 2 * INC_SLOTS): parse_values;
            (OP_AGG_SYNC, 3 * INC_SLOTS): parse_values;
            (OP_AGG_SYNC, 4 * INC_SLOTS): parse_values;
            default: accept;
        }
    }

    state parse_values {
        packet.extract(hdr.inc_values);
        transition select(hdr.inc.slot_count) {
            INC_SLOTS: accept;
            default: parse_values_b1;
        }
    }

    state parse_values_b1 {
        packet.extract(hdr.inc_values_b1);
        transition select(hdr.inc.slot_count) {
            2 * INC_SLOTS: accept;
            default: parse_values_b2;
        }
    }

    state parse_values_b2 {
        packet.extract(hdr.inc_values_b2);
        transition select(hdr.inc.slot_count) {
            3 * INC_SLOTS: accept;
            default: parse_values_b3;
        }
    }

    state parse_values_b3 {
        packet.extract(hdr.inc_values_b3);
        transition accept;
    }
}

#endif  // _PARSER_P4_
