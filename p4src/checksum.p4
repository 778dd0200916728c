// checksum.p4: IPv4 header checksum, options included. The aggregator rewrites IPv4
// addresses and TTL, so the checksum is recomputed on the way out; UDP checksums of switch results are set to 0 (none).
#ifndef _CHECKSUM_P4_
#define _CHECKSUM_P4_

// The option words (IPV4_OPTION_WORDS of them): fields of invalid headers are left out.
#define IPV4_OPTIONS \
    hdr.ipv4_options[0].word, hdr.ipv4_options[1].word, hdr.ipv4_options[2].word, \
    hdr.ipv4_options[3].word, hdr.ipv4_options[4].word, hdr.ipv4_options[5].word, \
    hdr.ipv4_options[6].word, hdr.ipv4_options[7].word, hdr.ipv4_options[8].word, \
    hdr.ipv4_options[9].word

control IncVerifyChecksum(inout headers_t hdr, inout inc_metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, IPV4_OPTIONS },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control IncComputeChecksum(inout headers_t hdr, inout inc_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, IPV4_OPTIONS },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

#endif  // _CHECKSUM_P4_
