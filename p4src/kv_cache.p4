// kv_cache.p4: an in-switch cache of hot keys in front of a key-value storage server
// (ops KV_READ / KV_WRITE; docs/protocol.md, "Key-value cache"). Programmed and read by
// controller/systems/kv_cache.py; the server and clients are hosts/kv/store.py.
//
// Packet: slot 0 (v00) is the key, slots 1..KV_VALUE_WORDS the value; psn is the client's
// request id, bitmap the value's version (set by the server, per key, increasing), agg_idx
// the cache stamp: the generation of the key's cache entry, written here into requests on
// their way to the server and echoed by the server in its reply.
//
// Memory: a job owns the range [offset, offset + size) of KV_CACHE_SIZE cache entries.
// Entry i holds a key's value (one register per word), its version, a valid bit, its
// generation (written by the controller when it gives the entry to a key) and a hit
// counter. The same indices also hold the job's read-frequency sketch of uncached keys
// (two count rows) and, per bucket, the most frequent key seen there (a candidate for the
// cache), which the controller reads to decide which keys are hot.
//
// Consistency (no read that starts after a write completed returns an older value):
//  C1. The server gives every write of a key a larger version; a reply carries the version
//      of the value it holds. The entry's version only ever grows.
//  C2. A reply raises the entry's version to its own when larger; it makes the entry valid
//      (and stores its value) only when its stamp is the entry's current generation, i.e.
//      its request passed the switch after the key got the entry; any other newer reply
//      leaves it invalid.
//  C3. Every operation completes by a reply that passes here (a hit is one). So a write
//      request need not invalidate the entry: until the write's reply (or any other reply
//      as new) passes, the write has not completed and reads may be ordered before it;
//      keeping hot keys valid while writes queue at the server is what keeps the cache
//      ahead of the server under writes (an invalidation lasted the server's queue).
//  Then a write W completed when its reply passed here: either the entry existed (C1/C2:
//  its version is >= W's from then on), or the key got its entry later, and every value
//  the entry may serve comes from a request that reached the server after W was applied.
#ifndef _KV_CACHE_P4_
#define _KV_CACHE_P4_

#define KV_LOAD(F, R) R.read(hdr.inc_values.F, idx);
#define KV_STORE(F, R) R.write(idx, hdr.inc_values.F);

control KvCache(inout headers_t hdr,
                inout inc_metadata_t meta,
                inout standard_metadata_t standard_metadata,
                out bool answered) {
    register<bit<32>>(KV_CACHE_SIZE) kv_value_1;
    register<bit<32>>(KV_CACHE_SIZE) kv_value_2;
    register<bit<32>>(KV_CACHE_SIZE) kv_value_3;
    register<bit<32>>(KV_CACHE_SIZE) kv_value_4;
    register<bit<32>>(KV_CACHE_SIZE) kv_value_5;
    register<bit<32>>(KV_CACHE_SIZE) kv_value_6;
    register<bit<32>>(KV_CACHE_SIZE) kv_value_7;
    register<bit<32>>(KV_CACHE_SIZE) kv_value_8;
    register<bit<32>>(KV_CACHE_SIZE) kv_version;   // version of the stored value
    register<bit<8>>(KV_CACHE_SIZE) kv_valid;      // 1: reads are answered here
    register<bit<32>>(KV_CACHE_SIZE) kv_gen;       // generation of the entry (controller)
    register<bit<32>>(KV_CACHE_SIZE) kv_hits;      // reads answered since the last refresh
    register<bit<32>>(KV_CACHE_SIZE) kv_sketch_a;  // misses of uncached keys, two rows
    register<bit<32>>(KV_CACHE_SIZE) kv_sketch_b;
    register<bit<32>>(KV_CACHE_SIZE) kv_cand_key;   // the most read uncached key per bucket
    register<bit<32>>(KV_CACHE_SIZE) kv_cand_count; // and its estimated count

    bit<32> offset;
    bit<32> size;
    bit<32> mask;  // sketch buckets: offset + (h & mask), mask + 1 a power of two <= size
    bit<32> idx;

    action set_kv_job(bit<32> region_offset, bit<32> region_size, bit<32> sketch_mask) {
        offset = region_offset;
        size = region_size;
        mask = sketch_mask;
    }

    table kv_jobs {
        key = { hdr.inc.job_id: exact; }
        actions = { set_kv_job; @defaultonly NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    // Clients send requests from their own port; only the job's server port sends replies.
    table kv_clients {
        key = {
            hdr.inc.job_id: exact;
            hdr.inc.worker_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { NoAction; }
        default_action = NoAction();
        size = WORKER_TABLE_SIZE;
    }

    table kv_server {
        key = {
            hdr.inc.job_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    action cached(bit<32> entry) {
        idx = entry;
    }

    // The cached keys: (job, key) -> entry. The controller inserts and evicts at run time.
    table kv_keys {
        key = {
            hdr.inc.job_id: exact;
            hdr.inc_values.v00: exact;
        }
        actions = { cached; @defaultonly NoAction; }
        default_action = NoAction();
        size = KV_CACHE_SIZE;
    }

    Refuse() refuse;
    RegionGuard() region_guard;
    ReturnToSender() return_to_sender;

    // Answer a read from the entry (then returned to the client from the server's address).
    action answer_read() {
        KV_LOAD(v01, kv_value_1)
        KV_LOAD(v02, kv_value_2)
        KV_LOAD(v03, kv_value_3)
        KV_LOAD(v04, kv_value_4)
        KV_LOAD(v05, kv_value_5)
        KV_LOAD(v06, kv_value_6)
        KV_LOAD(v07, kv_value_7)
        KV_LOAD(v08, kv_value_8)
        kv_version.read(hdr.inc.bitmap, idx);
        hdr.inc.epoch = KV_ANSWERED_BY_SWITCH;
    }

    action fill_entry() {
        KV_STORE(v01, kv_value_1)
        KV_STORE(v02, kv_value_2)
        KV_STORE(v03, kv_value_3)
        KV_STORE(v04, kv_value_4)
        KV_STORE(v05, kv_value_5)
        KV_STORE(v06, kv_value_6)
        KV_STORE(v07, kv_value_7)
        KV_STORE(v08, kv_value_8)
        kv_version.write(idx, hdr.inc.bitmap);
        kv_valid.write(idx, 1);
    }

    bit<32> bucket_a;
    bit<32> bucket_b;
    bit<32> count_a;
    bit<32> count_b;

    // A read of an uncached key: count it in both sketch rows (buckets inside the job's
    // range); the smaller count is its estimate. Two mixes of (job, key) instead of hash
    // externs, so that every back end runs them as plain arithmetic.
    action count_miss() {
        bit<32> k = hdr.inc_values.v00 ^ ((bit<32>)hdr.inc.job_id << 16);
        bucket_a = offset + ((k ^ (k >> 15)) & mask);
        bucket_b = offset + (((k * 32w0x9E3779B1) >> 13) & mask);
        kv_sketch_a.read(count_a, bucket_a);
        kv_sketch_b.read(count_b, bucket_b);
        count_a = count_a + 1;
        count_b = count_b + 1;
        kv_sketch_a.write(bucket_a, count_a);
        kv_sketch_b.write(bucket_b, count_b);
    }

    apply {
        answered = false;
        bool reply = (hdr.inc.flags & FLAG_RESULT) != 0;
        if (!hdr.inc_values.isValid()) {
            refuse.apply(meta, DROP_BAD_SLOT_COUNT);
        } else if (!kv_jobs.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_JOB);
        } else if (reply && !kv_server.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_WORKER);
        } else if (!reply && !kv_clients.apply().hit) {
            refuse.apply(meta, DROP_UNKNOWN_WORKER);
        } else if (!kv_keys.apply().hit) {
            if (!reply) {
                hdr.inc.agg_idx = 0;  // no entry: the reply may not fill one
                hdr.udp.checksum = 0;  // the packet changed: no UDP checksum (legal in IPv4)
                if (hdr.inc.op == OP_KV_READ && size != 0) {
                    count_miss();
                    if (count_b < count_a) {
                        count_a = count_b;
                    }
                    bit<32> lead;
                    kv_cand_count.read(lead, bucket_a);
                    if (count_a >= lead) {  // the key leads its bucket: a cache candidate
                        kv_cand_count.write(bucket_a, count_a);
                        kv_cand_key.write(bucket_a, hdr.inc_values.v00);
                    }
                }
            }
        } else {
            // An entry outside the job's range is never used.
            region_guard.apply(meta, idx, offset, size, KV_CACHE_SIZE);
            if (meta.drop == 0) {
                bit<32> gen;
                kv_gen.read(gen, idx);
                if (!reply) {
                    bit<8> valid;
                    kv_valid.read(valid, idx);
                    if (hdr.inc.op == OP_KV_READ && valid == 1) {
                        bit<32> hits;
                        kv_hits.read(hits, idx);
                        kv_hits.write(idx, hits + 1);
                        answer_read();
                        return_to_sender.apply(hdr, standard_metadata, FLAG_RESULT);
                        answered = true;
                    } else {
                        // A write leaves the entry valid (C3): until its reply passes
                        // here it has not completed, so reads may still get the old value.
                        hdr.inc.agg_idx = gen;  // the stamp the server echoes
                        hdr.udp.checksum = 0;
                    }
                } else {
                    bit<32> version;
                    kv_version.read(version, idx);
                    bit<32> delta = hdr.inc.bitmap - version;  // serial-number arithmetic
                    if (delta < PSN_HALF) {
                        if (hdr.inc.agg_idx == gen && gen != 0) {
                            fill_entry();
                        } else if (delta != 0) {
                            kv_version.write(idx, hdr.inc.bitmap);
                            kv_valid.write(idx, 0);
                        }
                    }
                }
            }
        }
    }
}

#endif  // _KV_CACHE_P4_
