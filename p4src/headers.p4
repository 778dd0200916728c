// headers.p4: packet headers and the metadata the INC controls share.
// The layout of inc_h is documented in docs/protocol.md and defined in wire/header.py.
#ifndef _HEADERS_P4_
#define _HEADERS_P4_

#if INC_SLOTS != 32
#error "inc_values_h and aggregator.p4 spell out 32 slots; extend them with INC_SLOTS"
#endif
#if INC_VALUE_BLOCKS != 4
#error "headers.p4, parser.p4 and aggregator.p4 spell out 4 value blocks; extend them"
#endif

header ethernet_h {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

// One 32-bit word of IPv4 options (IHL > 5): parsed so that the UDP header behind them is
// seen (INC there is refused, UNPARSED_IPV4) and so that the checksum covers them.
header ipv4_option_h {
    bit<32> word;
}

header udp_h {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> len;
    bit<16> checksum;
}

// 24 bytes; field order and widths are checked against wire/header.py FIELDS.
header inc_h {
    bit<8>  op;          // OP_*: what the switch computes
    bit<8>  flags;       // FLAG_*: role and state
    bit<16> job_id;      // 0 is reserved ("no job" in aggregator state)
    bit<8>  worker_id;   // rank inside the job
    bit<1>  ver;         // which of the aggregator's two copies
    bit<7>  reserved0;
    bit<8>  slot_count;  // number of 32-bit slots that follow
    bit<8>  reserved1;
    bit<32> psn;         // packet sequence number inside the job
    bit<32> agg_idx;     // aggregator index, computed by the end host
    bit<32> epoch;       // iteration clock for synchronisation modes (Serene)
    bit<32> bitmap;      // contributors of a result (set by the switch)
}

// K = INC_SLOTS two's complement values; written out because P4 has no loops.
header inc_values_h {
    bit<32> v00; bit<32> v01; bit<32> v02; bit<32> v03;
    bit<32> v04; bit<32> v05; bit<32> v06; bit<32> v07;
    bit<32> v08; bit<32> v09; bit<32> v10; bit<32> v11;
    bit<32> v12; bit<32> v13; bit<32> v14; bit<32> v15;
    bit<32> v16; bit<32> v17; bit<32> v18; bit<32> v19;
    bit<32> v20; bit<32> v21; bit<32> v22; bit<32> v23;
    bit<32> v24; bit<32> v25; bit<32> v26; bit<32> v27;
    bit<32> v28; bit<32> v29; bit<32> v30; bit<32> v31;
}

struct headers_t {
    ethernet_h   ethernet;
    ipv4_h       ipv4;
    ipv4_option_h[IPV4_OPTION_WORDS] ipv4_options;
    udp_h        udp;
    inc_h        inc;
    inc_values_h inc_values;
    // A synchronous aggregation packet may carry up to INC_VALUE_BLOCKS blocks of K values
    // (slot_count 32, 64, 96 or 128): fewer, larger frames for the same vector. Blocks 1..3
    // are parsed only for OP_AGG_SYNC, and only the aggregator adds them (its job's slot
    // count, JobRegion, admits no other path's wide packet).
    inc_values_h inc_values_b1;
    inc_values_h inc_values_b2;
    inc_values_h inc_values_b3;
}

// Filled by JobRegion, read by Aggregator; drop/drop_reason feed the inc_drops counter.
struct inc_metadata_t {
    bit<4>  ipv4_option_words;  // parser: option words still to extract
    bit<32> region_offset;
    bit<32> region_size;
    bit<8>  quorum;        // contributions that complete an aggregation
    bit<8>  slot_count;    // the job's values per packet: a packet with another count is refused
    bit<16> mcast_grp;     // the job's workers
    bit<32> worker_bit;    // this worker's bit in the contributor bitmap
    bit<1>  epoch_slot;    // parity of hdr.inc.epoch: which epoch slot configures the job
    bit<1>  atp;           // the job is an ATP job on this switch (atp.p4, atp_jobs)
    bit<1>  atp_direct;    // an ATP aggregate the switch completed: multicast to the members
                           // and the PS (atp.p4, AtpCopies)
    bit<1>  atp_forward;   // an ATP job's sum that goes to its PS by its address (Forwarder)
    bit<16> atp_owner;     // the job holding the aggregator a packet found (atp.p4)
    bit<1>  drop;
    bit<8>  drop_reason;   // DROP_*
    bit<8>  worker_index;  // the worker's bit position (set with worker_bit)
    bit<1>  sync_on;       // the job has a sync_modes entry (sync_modes.p4)
    bit<32> sync_slot;     // its index in the synchronisation clocks
    bit<8>  sync_mode;     // SYNC_MODE_* of this packet's epoch
    bit<8>  sync_max_lead; // that mode's largest lead over the slowest worker
    bit<32> sync_boundary; // the epoch from which the new mode holds
    bit<1>  sync_fenced;   // the epoch is past a fenced boundary: it waits
    bit<1>  sync_wait;     // told to wait: sent back unaggregated with FLAG_WAIT
    bit<1>  late;          // a contribution that found its round already complete
    bit<1>  sync_advance;  // the worker starts its next epoch: clocks move if not dropped
    bit<8>  sync_workers;  // the job's N (for the clocks' commit)
    bit<32> sync_lead;     // the epoch's lead over the slowest worker (for the commit)
    bit<1>  sync_async;    // async: answered by SyncModes (running aggregate), no aggregator
}

#endif  // _HEADERS_P4_
