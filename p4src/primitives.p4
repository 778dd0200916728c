// primitives.p4: the switch primitives every class is built from (docs/library.md, "One set
// of switch primitives"). A class keeps its own registers and tables (their names are what
// the controller reads and programs over P4Runtime); what the classes do alike is here:
//
//   register pool, one array per slot   SLOT_REGISTERS, PER_SLOT (aggregator.p4, atp.p4)
//   compare-and-claim, seen bits        USE_REGISTERS, USE_STATE, LOAD_USE, STORE_USE
//                                       (aggregator.p4, atp.p4)
//   region bound check                  RegionGuard (job_region.p4, kv_cache.p4, ask.p4,
//                                       consensus.p4)
//   refusal, with a DROP_* reason       Refuse (every class; IncIngress's drop_and_count()
//                                       then counts the packet in inc_drops and job_drops)
//   return to the sender                TurnAround, ReturnToSender (aggregator.p4,
//                                       kv_cache.p4, sync_modes.p4, ask.p4)
//
// They are macros and stateless controls, not P4 functions or actions with inout
// parameters, so that every back end (the Python one, the native C one, p4c) runs them.
#ifndef _PRIMITIVES_P4_
#define _PRIMITIVES_P4_

// ---- register pool: one register array per value slot ----
// A pool of aggregators keeps slot vNN of its cells in register array R_NN (a pipeline may
// access each array once per packet, hence one array per slot). SLOT_REGISTERS declares the
// INC_SLOTS arrays of SIZE cells; PER_SLOT(M, R) expands M(vNN, R_NN) for every slot, M a
// macro of (packet field, register) that reads, adds or writes one slot.
#define SLOT_REGISTERS(R, SIZE) \
    register<bit<32>>(SIZE) R##_00; \
    register<bit<32>>(SIZE) R##_01; \
    register<bit<32>>(SIZE) R##_02; \
    register<bit<32>>(SIZE) R##_03; \
    register<bit<32>>(SIZE) R##_04; \
    register<bit<32>>(SIZE) R##_05; \
    register<bit<32>>(SIZE) R##_06; \
    register<bit<32>>(SIZE) R##_07; \
    register<bit<32>>(SIZE) R##_08; \
    register<bit<32>>(SIZE) R##_09; \
    register<bit<32>>(SIZE) R##_10; \
    register<bit<32>>(SIZE) R##_11; \
    register<bit<32>>(SIZE) R##_12; \
    register<bit<32>>(SIZE) R##_13; \
    register<bit<32>>(SIZE) R##_14; \
    register<bit<32>>(SIZE) R##_15; \
    register<bit<32>>(SIZE) R##_16; \
    register<bit<32>>(SIZE) R##_17; \
    register<bit<32>>(SIZE) R##_18; \
    register<bit<32>>(SIZE) R##_19; \
    register<bit<32>>(SIZE) R##_20; \
    register<bit<32>>(SIZE) R##_21; \
    register<bit<32>>(SIZE) R##_22; \
    register<bit<32>>(SIZE) R##_23; \
    register<bit<32>>(SIZE) R##_24; \
    register<bit<32>>(SIZE) R##_25; \
    register<bit<32>>(SIZE) R##_26; \
    register<bit<32>>(SIZE) R##_27; \
    register<bit<32>>(SIZE) R##_28; \
    register<bit<32>>(SIZE) R##_29; \
    register<bit<32>>(SIZE) R##_30; \
    register<bit<32>>(SIZE) R##_31;

#define PER_SLOT(M, R) \
    M(v00, R##_00) \
    M(v01, R##_01) \
    M(v02, R##_02) \
    M(v03, R##_03) \
    M(v04, R##_04) \
    M(v05, R##_05) \
    M(v06, R##_06) \
    M(v07, R##_07) \
    M(v08, R##_08) \
    M(v09, R##_09) \
    M(v10, R##_10) \
    M(v11, R##_11) \
    M(v12, R##_12) \
    M(v13, R##_13) \
    M(v14, R##_14) \
    M(v15, R##_15) \
    M(v16, R##_16) \
    M(v17, R##_17) \
    M(v18, R##_18) \
    M(v19, R##_19) \
    M(v20, R##_20) \
    M(v21, R##_21) \
    M(v22, R##_22) \
    M(v23, R##_23) \
    M(v24, R##_24) \
    M(v25, R##_25) \
    M(v26, R##_26) \
    M(v27, R##_27) \
    M(v28, R##_28) \
    M(v29, R##_29) \
    M(v30, R##_30) \
    M(v31, R##_31)

// ---- compare-and-claim, seen bits: the use a pool cell holds ----
// A cell of an aggregating pool (NetReduce's aggregator copies, ATP's aggregators) is
// tagged with the use it holds, (job, psn), and carries its seen bits: the bitmap of the
// contributors so far and their count. USE_REGISTERS(P, SIZE) declares the registers
// P_job, P_psn, P_bitmap and P_count; USE_STATE the variables LOAD_USE(P, I) reads cell I
// into (st_job, st_psn, st_bitmap, st_count), which the class compares with the packet's
// (job, psn) and its worker's bit; STORE_USE(P, I) claims cell I for the packet's
// (job, psn) with the seen bits in st_bitmap and st_count.
#define USE_REGISTERS(P, SIZE) \
    register<bit<16>>(SIZE) P##_job; \
    register<bit<32>>(SIZE) P##_psn; \
    register<bit<32>>(SIZE) P##_bitmap; \
    register<bit<8>>(SIZE) P##_count;

#define USE_STATE \
    bit<16> st_job; \
    bit<32> st_psn; \
    bit<32> st_bitmap; \
    bit<8>  st_count;

#define LOAD_USE(P, I) \
    P##_job.read(st_job, I); \
    P##_psn.read(st_psn, I); \
    P##_bitmap.read(st_bitmap, I); \
    P##_count.read(st_count, I);

#define STORE_USE(P, I) \
    P##_job.write(I, hdr.inc.job_id); \
    P##_psn.write(I, hdr.inc.psn); \
    P##_bitmap.write(I, st_bitmap); \
    P##_count.write(I, st_count);

// ---- refusal ----
// Mark the packet refused with a DROP_* reason: it goes no further, and IncIngress drops
// it and counts it per switch and per job (drop_and_count()).
control Refuse(inout inc_metadata_t meta, in bit<8> reason) {
    apply {
        meta.drop = 1;
        meta.drop_reason = reason;
    }
}

// ---- register pool access by region ----
// A job owns cells [offset, offset + size) of a pool of `pool` cells; refuse (as
// DROP_OUT_OF_REGION) an index outside them. Unsigned wrap-around makes idx < offset fail
// the first test too; the second guards the registers against a region set past the pool.
control RegionGuard(inout inc_metadata_t meta, in bit<32> idx, in bit<32> offset,
                    in bit<32> size, in bit<32> pool) {
    apply {
        if (idx - offset >= size || idx >= pool) {
            meta.drop = 1;
            meta.drop_reason = DROP_OUT_OF_REGION;
        }
    }
}

// ---- return ----
// Turn the packet around: it comes from the address it was sent to and goes to its sender
// (Ethernet and IPv4 addresses swapped, a fresh TTL), with `flag` (FLAG_RESULT, FLAG_ACK,
// FLAG_WAIT) set. The packet changed, so its UDP checksum is cleared (0: none, legal in
// IPv4). Where it goes is the caller's choice: a multicast group, or ReturnToSender.
control TurnAround(inout headers_t hdr, in bit<8> flag) {
    apply {
        bit<48> mac = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = mac;
        bit<32> ip = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = hdr.ipv4.srcAddr;
        hdr.ipv4.srcAddr = ip;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        hdr.inc.flags = hdr.inc.flags | flag;
    }
}

// TurnAround, out of the port the packet came in on (unicast back to its sender).
control ReturnToSender(inout headers_t hdr, inout standard_metadata_t standard_metadata,
                       in bit<8> flag) {
    TurnAround() turn_around;

    apply {
        turn_around.apply(hdr, flag);
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
}

#endif  // _PRIMITIVES_P4_
