// result_rewrite.p4 (egress): addresses each multicast copy of a result to its worker.
// The controller builds one multicast group per job whose replicas carry rid = worker_id + 1
// (rid 0 is a unicast packet, which Aggregator already addressed to its sender).
// Programmed by controller/systems/result_rewrite.py together with the job's multicast group.
#ifndef _RESULT_REWRITE_P4_
#define _RESULT_REWRITE_P4_

control ResultRewrite(inout headers_t hdr,
                      inout inc_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    action set_result_dst(bit<48> dst_mac, bit<32> dst_ip, bit<8> worker_id) {
        hdr.ethernet.dstAddr = dst_mac;
        hdr.ipv4.dstAddr = dst_ip;
        hdr.inc.worker_id = worker_id;
    }

    table result_dst {
        key = {
            hdr.inc.job_id: exact;
            standard_metadata.egress_rid: exact;
        }
        actions = { set_result_dst; NoAction; }
        default_action = NoAction();
        size = WORKER_TABLE_SIZE;
    }

    apply {
        if (hdr.inc.isValid() && (hdr.inc.flags & FLAG_RESULT) != 0) {
            result_dst.apply();
        }
    }
}

#endif  // _RESULT_REWRITE_P4_
