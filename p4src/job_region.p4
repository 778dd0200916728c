// job_region.p4: admission of aggregation packets. A job owns a region [offset, offset+size)
// of the aggregator pool; a worker is known by (job, worker id, ingress port), which binds
// it to where it is attached so that a host cannot speak for another job's workers.
// Anything that fails a check is marked for drop with a DROP_* reason (IncIngress counts it)
// and never reaches the aggregator, so it cannot touch another job's memory.
// Epoch slots (docs/protocol.md, "Switch-over at an epoch boundary"): a job whose layout
// changes while it runs has two configurations, selected by the parity of the packet's
// epoch; they override the region and quorum of its `jobs` entry, so that a new layout
// is written into the idle slot and takes effect for the whole of the next epoch.
// Programmed by controller/systems/job_region.py.
#ifndef _JOB_REGION_P4_
#define _JOB_REGION_P4_

control JobRegion(inout headers_t hdr,
                  inout inc_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    // quorum: contributions that complete an aggregation (the job's worker count for
    // synchronous aggregation); mcast_grp: the group holding all of the job's workers;
    // slot_count: the job's values per packet (INC_SLOTS, or whole blocks of it up to
    // INC_VALUE_BLOCKS for synchronous aggregation), the only count its packets may carry.
    action set_region(bit<32> offset, bit<32> size, bit<8> quorum, bit<16> mcast_grp,
                      bit<8> slot_count) {
        meta.region_offset = offset;
        meta.region_size = size;
        meta.quorum = quorum;
        meta.mcast_grp = mcast_grp;
        meta.slot_count = slot_count;
    }

    // Packets and bytes each job's entry admitted, and each worker's: the controller reads
    // them over P4Runtime for per-job throughput and per-worker progress (stragglers).
    direct_counter(CounterType.packets_and_bytes) job_packets;
    direct_counter(CounterType.packets_and_bytes) worker_packets;

    table jobs {
        key = { hdr.inc.job_id: exact; }
        actions = { set_region; @defaultonly NoAction; }
        default_action = NoAction();
        counters = job_packets;
        size = JOB_TABLE_SIZE;
    }

    // Epoch slot (job, epoch parity): the region and quorum of that epoch's packets.
    action set_slot(bit<32> offset, bit<32> size, bit<8> quorum) {
        meta.region_offset = offset;
        meta.region_size = size;
        meta.quorum = quorum;
    }

    table epoch_slots {
        key = {
            hdr.inc.job_id: exact;
            meta.epoch_slot: exact;
        }
        actions = { set_slot; @defaultonly NoAction; }
        default_action = NoAction();
        size = EPOCH_SLOT_TABLE_SIZE;
    }

    // bit_index: the worker's position (0 .. MAX_WORKERS-1) in the contributor bitmap.
    action set_worker(bit<8> bit_index) {
        meta.worker_bit = 32w1 << bit_index;
        meta.worker_index = bit_index;
    }

    table workers {
        key = {
            hdr.inc.job_id: exact;
            hdr.inc.worker_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { set_worker; @defaultonly NoAction; }
        default_action = NoAction();
        counters = worker_packets;
        size = WORKER_TABLE_SIZE;
    }

    Refuse() refuse;
    RegionGuard() region_guard;

    apply {
        if (!hdr.inc_values.isValid()) {
            refuse.apply(meta, DROP_BAD_SLOT_COUNT);
        } else if (!jobs.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_JOB);
        } else if (hdr.inc.slot_count != meta.slot_count) {
            refuse.apply(meta, DROP_BAD_SLOT_COUNT);
        } else if (!workers.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_WORKER);
        } else {
            meta.epoch_slot = hdr.inc.epoch[0:0];
            epoch_slots.apply();  // a miss keeps the region of the jobs entry
            region_guard.apply(meta, hdr.inc.agg_idx, meta.region_offset, meta.region_size,
                               AGG_POOL_SIZE);
        }
    }
}

#endif  // _JOB_REGION_P4_
