// job_meter.p4: a per-job meter on the aggregation packets JobRegion admitted, so that a
// tenant who floods the switch gets no more than its rate and cannot starve the others
// (in ATP's shared pool a flood would otherwise hold the aggregators other jobs hash to).
//
// A token bucket per job, in registers: `rate` packets per second refill it, up to `burst`
// packets; a packet that finds less than one token is dropped and counted, DROP_METERED.
// Tokens are kept in millionths of a packet so that rate x elapsed microseconds needs no
// division; a job's first packet finds its bucket full, and a refill counts at most
// METER_MAX_GAP microseconds (so that gap x rate fits in 64 bits for any rate the
// controller sets, below 2^24 packets/s). v1model's meter extern would
// do the same (colour-blind, one rate); it is spelled out here because p4sim's native back
// end runs register programs and falls back to its Python back end for meter externs.
//
// `job_meters`: job_id -> set_meter(rate, burst), written by the controller at admission
// (controller/systems/job_meter.py) for a job submitted with a meter. Cell: job_id % JOB_TABLE_SIZE.
#ifndef _JOB_METER_P4_
#define _JOB_METER_P4_

#define METER_UNIT 1000000       // tokens per packet: millionths
#define METER_MAX_GAP 0xFFFFFFFF // microseconds of refill counted after a pause (71 min)

control JobMeter(inout headers_t hdr,
                 inout inc_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    register<bit<64>>(JOB_TABLE_SIZE) meter_tokens;  // millionths of a packet
    register<bit<48>>(JOB_TABLE_SIZE) meter_time;    // ingress timestamp of the last refill

    Refuse() refuse;

    bit<64> rate_pps;
    bit<64> burst_pkts;

    action set_meter(bit<32> rate, bit<32> burst) {
        rate_pps = (bit<64>)rate;
        burst_pkts = (bit<64>)burst;
    }

    table job_meters {
        key = { hdr.inc.job_id: exact; }
        actions = { set_meter; @defaultonly NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    apply {
        if (job_meters.apply().hit) {
            bit<32> cell = ((bit<32>)hdr.inc.job_id) & (JOB_TABLE_SIZE - 1);
            bit<64> tokens;
            bit<48> then;
            meter_tokens.read(tokens, cell);
            meter_time.read(then, cell);
            bit<48> now = standard_metadata.ingress_global_timestamp;
            bit<64> gap = (bit<64>)(now - then);
            if (gap > METER_MAX_GAP) {
                gap = METER_MAX_GAP;
            }
            tokens = tokens + gap * rate_pps;
            bit<64> cap = burst_pkts * METER_UNIT;
            if (tokens > cap || then == 0) {  // full, or the job's first packet
                tokens = cap;
            }
            if (tokens >= METER_UNIT) {
                meter_tokens.write(cell, tokens - METER_UNIT);
                meter_time.write(cell, now);
            } else {
                // Nothing written: the next packet refills from the same instant, so no
                // time is lost, and a dropped packet changes no state.
                refuse.apply(meta, DROP_METERED);
            }
        }
    }
}

#endif  // _JOB_METER_P4_
