// configuration.p4: every size and constant of the INC data plane, in one place.
//
// The wire constants (UDP port, header length, slot count, op codes, flag bits, drop
// reasons) mirror wire/header.py, the single source of truth; tests/test_p4src_constants.py
// fails when the two disagree. Values are plain literals so that the test can read them.
#ifndef _CONFIGURATION_P4_
#define _CONFIGURATION_P4_

// ---- sizes (used as extern and table sizes, hence macros) ----
#define INC_HEADER_LEN 24        // bytes of inc_h
#define INC_SLOTS 32             // K: 32-bit value slots per packet (headers.p4 spells them out)
#define INC_VALUE_BYTES 4
#define INC_VALUE_BLOCKS 4       // blocks of K values a synchronous aggregation packet may carry
#define MAX_WORKERS 32           // workers per job: width of the contributor bitmap
#define AGG_POOL_SIZE 32768      // aggregators shared by all jobs (tens of thousands)
#define AGG_VERSIONS 2           // two copies per aggregator: switch memory = 2 x window
#define AGG_COPIES 65536         // AGG_POOL_SIZE * AGG_VERSIONS: size of every aggregator register
#define KV_CACHE_SIZE 4096       // key-value cache entries shared by all KV jobs (kv_cache.p4)
#define KV_VALUE_WORDS 8         // a cached value: slots 1..8 (32 bytes); slot 0 is the key
#define CONS_GROUPS 1024         // sequencer counters (consensus groups), one per job
#define IPV4_OPTION_WORDS 10     // the most an IPv4 header holds (IHL 15)
#define DROP_REASONS 11          // entries of the inc_drops counter
#define DROP_STRIDE 32           // job_drops cells per job: room for every drop reason
#define JOB_DROP_JOBS 1024       // job ids counted per job in job_drops (the rest under 0)
#define JOB_DROP_CELLS 32768     // JOB_DROP_JOBS * DROP_STRIDE: size of job_drops
#define ASK_ROWS 4096            // rows of the key-value aggregator array (ask.p4)
#define ASK_TUPLES 16            // its columns: (key, value) tuples per packet, INC_SLOTS / 2
#define ASK_COPIES 8192          // ASK_ROWS * AGG_VERSIONS: size of every ask.p4 cell register
#define SYNC_JOBS 64             // jobs with a synchronisation mode (sync_modes.p4)
#define SYNC_RING 8              // epochs above the slowest one the clocks track (power of 2)
#define SYNC_CLOCKS 2048         // SYNC_JOBS * MAX_WORKERS: one clock per worker
#define SYNC_REACHED 512         // SYNC_JOBS * SYNC_RING
#define ATP_POOL_SIZE 4096       // aggregators of ATP's shared pool (atp.p4, registers of its own)
#define ATP_EVENTS 12            // entries of ATP's atp_events counter
#define ATP_MARKS_PER_JOB 128    // psns per job whose fall-back atp.p4 remembers (power of 2)
#define ATP_MARKS 131072         // JOB_TABLE_SIZE * ATP_MARKS_PER_JOB: cells of atp_marked
#define ATP_PS_RID 65535        // replication id of the PS's copy in an ATP job's multicast group

// Table sizes: switch-only, not part of the wire protocol.
#define JOB_TABLE_SIZE 1024
#define WORKER_TABLE_SIZE 32768
#define EPOCH_SLOT_TABLE_SIZE 2048  // two per job (JOB_TABLE_SIZE)
#define FORWARD_TABLE_SIZE 1024
#define SOURCE_TABLE_SIZE 1024    // source_guard.p4: host-facing ports, and their addresses
#define ECN_THRESHOLD 10         // egress queue depth (packets) from which ECN marks (ecn.p4)

// ---- wire code points ----
const bit<16> INC_UDP_PORT = 20050;
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> IP_PROTO_UDP = 17;

// inc_h.op: what the switch computes
const bit<8> OP_AGG_SYNC = 1;
const bit<8> OP_AGG_KV = 2;
const bit<8> OP_KV_READ = 3;
const bit<8> OP_KV_WRITE = 4;
const bit<8> OP_CONSENSUS = 5;
const bit<8> OP_RESULT = 6;
const bit<8> OP_ACK = 7;
const bit<8> OP_FALLBACK = 8;

// inc_h.flags: role and state bits
const bit<8> FLAG_RETX = 0x01;
const bit<8> FLAG_RESULT = 0x02;
const bit<8> FLAG_ACK = 0x04;
const bit<8> FLAG_COLLISION = 0x08;
const bit<8> FLAG_FALLBACK = 0x10;
const bit<8> FLAG_DRAIN = 0x20;
const bit<8> FLAG_WAIT = 0x40;
const bit<8> FLAG_RUNNING = 0x80;

// sync_modes.p4: a job's synchronisation mode (Serene)
const bit<8> SYNC_MODE_SYNC = 0;
const bit<8> SYNC_MODE_PARTIAL = 1;
const bit<8> SYNC_MODE_BOUNDED = 2;
const bit<8> SYNC_MODE_ASYNC = 3;
// async_last of a worker before its first contribution of an async period
const bit<32> ASYNC_UNSET = 0xFFFFFFFF;

// index of the inc_drops counter
const bit<8> DROP_UNKNOWN_JOB = 0;
const bit<8> DROP_UNKNOWN_WORKER = 1;
const bit<8> DROP_OUT_OF_REGION = 2;
const bit<8> DROP_BAD_SLOT_COUNT = 3;
const bit<8> DROP_STALE = 4;
const bit<8> DROP_DUPLICATE = 5;
const bit<8> DROP_OLD_EPOCH = 6;
const bit<8> DROP_FORGED_RESULT = 7;
const bit<8> DROP_METERED = 8;
const bit<8> DROP_UNPARSED_IPV4 = 9;
const bit<8> DROP_SPOOFED_SOURCE = 10;

// inc_h.epoch of a key-value reply the switch answered from its cache
const bit<32> KV_ANSWERED_BY_SWITCH = 1;

// index of ATP's atp_events counter (atp.p4): pool statistics
const bit<8> ATP_EV_CLAIMED = 0;
const bit<8> ATP_EV_ADDED = 1;
const bit<8> ATP_EV_COMPLETED = 2;
const bit<8> ATP_EV_COLLISION = 3;
const bit<8> ATP_EV_RETX_FALLBACK = 4;
const bit<8> ATP_EV_OVERFLOW = 5;
const bit<8> ATP_EV_RELEASED = 6;
const bit<8> ATP_EV_RELEASE_MISSED = 7;
const bit<8> ATP_EV_RECLAIMED = 8;
const bit<8> ATP_EV_CAPPED = 9;
const bit<8> ATP_EV_FOLLOWED = 10;
const bit<8> ATP_EV_LENT = 11;

// Serial-number arithmetic on 32-bit PSNs: psn - stored >= PSN_HALF means "older".
const bit<32> PSN_HALF = 0x80000000;

#endif  // _CONFIGURATION_P4_
