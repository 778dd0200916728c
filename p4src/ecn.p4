// ecn.p4 (egress): ECN marking (RFC 3168). A packet that says it is ECN-capable (ECT(0) or
// ECT(1) in the low two bits of the IPv4 TOS byte) and found its egress queue at least
// ECN_THRESHOLD packets deep is marked Congestion Experienced (both bits set). The queue
// depth comes from the target's traffic manager (standard_metadata.enq_qdepth): on p4sim,
// ports given a rate (--queue-rate) queue; others never build a queue and never mark.
// ATP's workers and PS send ECN-capable; a worker halves its window on a marked result
// (hosts/atp/worker.py). The IPv4 checksum is recomputed on the way out (checksum.p4).
#ifndef _ECN_P4_
#define _ECN_P4_

control EcnMark(inout headers_t hdr, inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.ipv4.isValid() && (hdr.ipv4.diffserv & 3) != 0
                && (bit<32>)standard_metadata.enq_qdepth >= ECN_THRESHOLD) {
            hdr.ipv4.diffserv = hdr.ipv4.diffserv | 3;
        }
    }
}

#endif  // _ECN_P4_
