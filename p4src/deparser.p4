// deparser.p4: emits the headers in wire order; invalid headers are skipped.
#ifndef _DEPARSER_P4_
#define _DEPARSER_P4_

control IncDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.udp);
        packet.emit(hdr.inc);
        packet.emit(hdr.inc_values);
        packet.emit(hdr.inc_values_b1);
        packet.emit(hdr.inc_values_b2);
        packet.emit(hdr.inc_values_b3);
    }
}

#endif  // _DEPARSER_P4_
