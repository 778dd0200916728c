// inc.p4: the in-network computing switch program for v1model (BMv2 simple_switch, p4sim).
//
//   p4c --target bmv2 --arch v1model p4src/inc.p4
//
// Ingress: first SourceGuard (source_guard.p4): an IPv4 packet from a host-facing port with
// a source address that is not its host's is dropped (SPOOFED_SOURCE) before anything else
// reads it. Then INC aggregation packets (op AGG_SYNC, no RESULT/ACK/FALLBACK/WAIT flag) go through
// JobRegion (admission) and JobMeter (the job's rate, job_meter.p4), then AtpPool for ATP
// jobs (atp.p4), or, for the others, SyncModes (the job's synchronisation mode,
// sync_modes.p4) and Aggregator, then SyncModes again (the clocks move only for a packet the
// aggregator did not drop); key-value packets (op AGG_KV) through Ask; key-value store
// requests and replies (KV_READ, KV_WRITE) through KvCache, which answers cached reads
// itself; consensus requests (CONSENSUS, no RESULT/ACK/FALLBACK flag) through Sequencer.
// Every other packet of those ops carries result-like flags: ResultGuard (result_guard.p4)
// lets it pass only from a binding of its job that allows them (an ATP PS's results and
// ACKs then release their aggregator in AtpPool and are multicast); the rest is dropped.
// INC behind IPv4 options or in a fragment is dropped (the parser does not reach it).
// Everything else, including the op codes reserved for later systems, is forwarded as
// ordinary traffic by Forwarder. Packets refused by admission or the aggregator are dropped
// and counted in inc_drops[DROP_*] and, per job, in job_drops.
// Egress: AtpCopies sends an ATP aggregate the switch completed to the members from the
// aggregation address and to the PS; ResultRewrite addresses each multicast copy of a
// result to its worker; EcnMark
// marks ECN-capable packets CE when their egress queue is deep (ecn.p4).
#include <core.p4>
#include <v1model.p4>

#include "configuration.p4"
#include "headers.p4"
#include "parser.p4"
#include "primitives.p4"
#include "checksum.p4"
#include "forwarder.p4"
#include "source_guard.p4"
#include "job_region.p4"
#include "job_meter.p4"
#include "aggregator.p4"
#include "sync_modes.p4"
#include "ask.p4"
#include "atp.p4"
#include "result_guard.p4"
#include "result_rewrite.p4"
#include "ecn.p4"
#include "kv_cache.p4"
#include "consensus.p4"
#include "deparser.p4"

control IncIngress(inout headers_t hdr,
                   inout inc_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    counter(DROP_REASONS, CounterType.packets) inc_drops;
    // The same drops per job: cell job_id * DROP_STRIDE + reason, for the job id the packet
    // claims; ids from JOB_DROP_JOBS up (never handed out while the jobs table is full)
    // count under job 0, which no job uses.
    counter(JOB_DROP_CELLS, CounterType.packets) job_drops;

    // Every branch that refuses a packet ends here: counted twice (per switch, per job).
    action drop_and_count() {
        inc_drops.count((bit<32>)meta.drop_reason);
        bit<32> job = 0;
        if (hdr.inc.isValid() && hdr.inc.job_id < JOB_DROP_JOBS) {
            job = (bit<32>)hdr.inc.job_id;
        }
        job_drops.count(job * DROP_STRIDE + (bit<32>)meta.drop_reason);
        mark_to_drop(standard_metadata);
    }

    JobRegion() job_region;
    JobMeter() job_meter;
    Aggregator() aggregator;
    SyncModeTable() sync_mode_table;
    SyncModes() sync_modes;
    SyncClocks() sync_clocks;
    SyncLate() sync_late;
    AtpPool() atp;
    ResultGuard() result_guard;
    Forwarder() forwarder;
    SourceGuard() source_guard;
    Ask() ask;
    KvCache() kv_cache;
    Sequencer() sequencer;
    Refuse() refuse;

    // Each control that holds a table is applied at one place only: BMv2 places a table at
    // one point of the control flow (p4c refuses a table with several successors). So the
    // packet's path is decided first, from the header as it arrived, and every step below
    // runs when its path (and the steps before it) say so.
    apply {
        source_guard.apply(hdr, meta, standard_metadata);  // may say SPOOFED_SOURCE
        // A spoofed packet takes no path below: it is only counted.
        bool admitted = meta.drop == 0;
        bit<8> op = hdr.inc.op;
        bit<8> flags = hdr.inc.flags;
        bool inc = admitted && hdr.inc.isValid();
        // an aggregation contribution (not a result, ACK, fallback or wait reply)
        bool agg = inc && op == OP_AGG_SYNC
                && (flags & (FLAG_RESULT | FLAG_ACK | FLAG_FALLBACK | FLAG_WAIT)) == 0;
        // a result or ACK: an ATP job's from its PS releases its aggregator and is multicast
        bool release = inc && op == OP_AGG_SYNC && (flags & FLAG_FALLBACK) == 0
                && (flags & (FLAG_RESULT | FLAG_ACK)) != 0;
        bool kv_agg = inc && op == OP_AGG_KV
                && (flags & (FLAG_RESULT | FLAG_ACK | FLAG_FALLBACK)) == 0;
        bool kv = inc && (op == OP_KV_READ || op == OP_KV_WRITE);
        bool consensus = inc && op == OP_CONSENSUS
                && (flags & (FLAG_RESULT | FLAG_ACK | FLAG_FALLBACK)) == 0;
        // any other packet of those ops: result-like flags, checked against the job's
        // bindings (release is one of them)
        bool flagged = inc && (op == OP_AGG_SYNC || op == OP_AGG_KV || op == OP_CONSENSUS)
                && !(agg || kv_agg || consensus);
        // INC the parser did not reach: behind IPv4 options, or in a fragment
        bool unparsed = admitted && hdr.udp.isValid() && hdr.udp.dstPort == INC_UDP_PORT
                && (hdr.ipv4.ihl != 5 || hdr.ipv4.flags[0:0] == 1);
        // everything else, including the op codes reserved for later systems
        bool forward = !(agg || kv_agg || kv || consensus);

        if (unparsed) {
            refuse.apply(meta, DROP_UNPARSED_IPV4);
        }
        if (flagged) {
            result_guard.apply(hdr, meta, standard_metadata);  // may say FORGED_RESULT
        }
        if (agg) {
            job_region.apply(hdr, meta, standard_metadata);
            if (meta.drop == 0) {
                job_meter.apply(hdr, meta, standard_metadata);  // may say METERED
            }
        }
        if ((release || agg) && meta.drop == 0) {
            atp.apply(hdr, meta, standard_metadata);  // ATP jobs (atp_jobs) end there
        }
        bool synced = agg && meta.drop == 0 && meta.atp == 0;
        if (synced) {
            sync_mode_table.apply(hdr, meta);
            sync_modes.apply(hdr, meta, standard_metadata);  // may say wait
        }
        if (synced && meta.drop == 0 && meta.sync_wait == 0
                && meta.sync_async == 0) {  // async: answered by sync_modes
            aggregator.apply(hdr, meta, standard_metadata);
            sync_late.apply(hdr, meta, standard_metadata);
        }
        if (agg && meta.drop == 0 && meta.sync_advance == 1) {
            // The clocks move only once the aggregator took the packet.
            sync_clocks.apply(hdr, meta);
        }
        if (kv_agg) {
            // ASK: a reply (ACK, drained row) goes back by itself; the rest to the reducer.
            ask.apply(hdr, meta, standard_metadata);
            forward = (hdr.inc.flags & (FLAG_RESULT | FLAG_ACK)) == 0;
        }
        if (kv) {
            bool answered;  // a read served from the cache goes back to its sender
            kv_cache.apply(hdr, meta, standard_metadata, answered);
            forward = !answered;
        }
        if (consensus) {
            sequencer.apply(hdr, meta, standard_metadata);
        }
        if (release && meta.drop == 0) {
            forward = meta.atp == 0;  // an ATP job's: multicast (RESULT) or ended (ACK)
        }
        if (agg && meta.drop == 0 && meta.atp_forward == 1) {
            forward = true;  // a sum an ATP packet took over, to its job's PS
        }
        if (meta.drop == 1) {
            drop_and_count();
        } else if (forward) {
            forwarder.apply(hdr, meta, standard_metadata);
        }
    }
}

control IncEgress(inout headers_t hdr,
                  inout inc_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    AtpCopies() atp_copies;
    ResultRewrite() result_rewrite;
    EcnMark() ecn;

    apply {
        atp_copies.apply(hdr, meta, standard_metadata);  // before ResultRewrite (its source)
        result_rewrite.apply(hdr, meta, standard_metadata);
        ecn.apply(hdr, standard_metadata);
    }
}

V1Switch(IncParser(),
         IncVerifyChecksum(),
         IncIngress(),
         IncEgress(),
         IncComputeChecksum(),
         IncDeparser()) main;
