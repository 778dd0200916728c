/*
 * p4sim: declarations of the v1model architecture.
 *
 * Written for p4sim from the v1model documentation (p4lang/behavioral-model
 * docs/simple_switch.md) and the P4_16 specification. Programs pull it in with
 * `#include <v1model.p4>`. Names, parameter directions and type parameters are
 * the ones v1model programs use, so they compile unchanged against this file.
 *
 * Versions: define V1MODEL_VERSION before the #include to pick one.
 *   20180101 (the default): counter, meter and register take `bit<32>` indices
 *            and `register<T>` has one type parameter: `register<bit<32>>(16) r;`
 *   20200408: the index type becomes a type parameter (`register<bit<32>, bit<4>>`,
 *            `counter<bit<8>>`, `meter<bit<8>>`) and `PortId_t` is declared.
 */

#ifndef P4SIM_V1MODEL_P4
#define P4SIM_V1MODEL_P4
/* the guard macro p4c's own header defines: programs test it with #ifdef */
#define _V1_MODEL_P4_

#include "core.p4"

#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif

/* Match kinds v1model adds to exact/ternary/lpm. */
match_kind {
    range,      /* lo <= key <= hi */
    optional,   /* exact value, or "don't care" */
    selector    /* key fields hashed by an action_selector */
}

/* Lets the compiler (and p4sim) see which version a program was written for. */
const bit<32> __v1model_version = V1MODEL_VERSION;

#if V1MODEL_VERSION >= 20200408
typedef bit<9> PortId_t;
#define P4SIM_PORT_T PortId_t
#else
#define P4SIM_PORT_T bit<9>
#endif

/* Per-packet intrinsic metadata of simple_switch. The @alias annotations name
 * the BMv2 metadata fields these are bound to. */
@metadata @name("standard_metadata")
struct standard_metadata_t {
    P4SIM_PORT_T ingress_port;      /* port the packet arrived on */
    P4SIM_PORT_T egress_spec;       /* set in ingress: output port (511 = drop) */
    P4SIM_PORT_T egress_port;       /* in egress: the port the packet leaves on */
    bit<32> instance_type;          /* normal, clone, resubmit, recirculate, replica */
    bit<32> packet_length;          /* bytes, as received */

    @alias("queueing_metadata.enq_timestamp")
    bit<32> enq_timestamp;          /* microseconds, when queued */
    @alias("queueing_metadata.enq_qdepth")
    bit<19> enq_qdepth;             /* queue depth when queued */
    @alias("queueing_metadata.deq_timedelta")
    bit<32> deq_timedelta;          /* microseconds spent queued */
    @alias("queueing_metadata.deq_qdepth")
    bit<19> deq_qdepth;             /* queue depth when dequeued */

    @alias("intrinsic_metadata.ingress_global_timestamp")
    bit<48> ingress_global_timestamp;   /* microseconds, start of ingress */
    @alias("intrinsic_metadata.egress_global_timestamp")
    bit<48> egress_global_timestamp;    /* microseconds, start of egress */
    @alias("intrinsic_metadata.mcast_grp")
    bit<16> mcast_grp;              /* set in ingress: multicast group, 0 = none */
    @alias("intrinsic_metadata.egress_rid")
    bit<16> egress_rid;             /* replication id of a multicast copy */

    bit<1>  checksum_error;         /* 1 when verify_checksum found a bad checksum */
    error   parser_error;           /* the parser's error, NoError when it accepted */

    @alias("intrinsic_metadata.priority")
    bit<3>  priority;               /* queue priority */
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* An array of `size` counters; count(i) adds this packet to counter i
 * (an index >= size counts nothing). */
#if V1MODEL_VERSION >= 20200408
extern counter<I> {
    counter(bit<32> size, CounterType type);
    void count(in I index);
}
#else
extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}
#endif

/* One counter per entry of the table whose `counters` property names it;
 * entries count on every hit, whether or not the action calls count(). */
extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

/* Colours written by the meters' `result` parameter. */
#define V1MODEL_METER_COLOR_GREEN  0
#define V1MODEL_METER_COLOR_YELLOW 1
#define V1MODEL_METER_COLOR_RED    2

/* An array of `size` two-rate three-colour meters (RFC 2698). */
#if V1MODEL_VERSION >= 20200408
extern meter<I> {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in I index, out T result);
}
#else
extern meter {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in bit<32> index, out T result);
}
#endif

/* One meter per entry of the table whose `meters` property names it; read()
 * is only meaningful in an action run by that table. */
extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

/* An array of `size` values of type T that persist across packets. */
#if V1MODEL_VERSION >= 20200408
extern register<T, I> {
    register(bit<32> size);
    @noSideEffects
    void read(out T result, in I index);
    void write(in I index, in T value);
}
#else
extern register<T> {
    register(bit<32> size);
    @noSideEffects
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}
#endif

/* A table `implementation` whose entries point at shared action members. */
extern action_profile {
    action_profile(bit<32> size);
}

/* result := a random value in lo..hi (both included). */
extern void random<T>(out T result, in T lo, in T hi);

/* Send `data` to the control plane; a named struct type names the digest. */
extern void digest<T>(in bit<32> receiver, in T data);

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

/* Old form without arguments; the standard_metadata form below is preferred. */
@deprecated("mark_to_drop() is deprecated: call mark_to_drop(standard_metadata)")
extern void mark_to_drop();

/* Set egress_spec to the drop port and mcast_grp to 0. */
@pure
extern void mark_to_drop(inout standard_metadata_t standard_metadata);

/* result := base + (H(data) % max), or base when max is 0. */
@pure
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

/* A table `implementation` choosing a group member by hashing the selector keys. */
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

enum CloneType {
    I2E,    /* clone at the end of ingress */
    E2E     /* clone at the end of egress */
}

@deprecated("Checksum16 is deprecated: use verify_checksum/update_checksum")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

/* In VerifyChecksum: when `condition` holds and the checksum of `data` (a list
 * of fields) differs from `checksum`, set standard_metadata.checksum_error. */
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum,
                                  HashAlgorithm algo);

/* In ComputeChecksum: when `condition` holds, checksum := checksum of `data`. */
@pure
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum,
                                  HashAlgorithm algo);

/* As above, with the unparsed payload appended to `data`. */
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum,
                                               HashAlgorithm algo);
@noSideEffects
extern void update_checksum_with_payload<T, O>(in bool condition, in T data,
                                               inout O checksum, HashAlgorithm algo);

/* Make a copy of the packet for clone session `session`. */
extern void clone(in CloneType type, in bit<32> session);

/* Resubmit / recirculate / clone keeping the user metadata fields annotated
 * with @field_list(index). */
@deprecated("resubmit(data) is deprecated: use resubmit_preserving_field_list")
extern void resubmit<T>(in T data);
extern void resubmit_preserving_field_list(bit<8> index);

@deprecated("recirculate(data) is deprecated: use recirculate_preserving_field_list")
extern void recirculate<T>(in T data);
extern void recirculate_preserving_field_list(bit<8> index);

@deprecated("clone3 is deprecated: use clone_preserving_field_list")
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);

/* Keep at most `length` bytes of the packet when it is sent. */
extern void truncate(in bit<32> length);

/* Checks for testing and verification tools; simple_switch stops on a failed
 * assert when built with assertions enabled. */
extern void assert(in bool check);
extern void assume(in bool check);

/* Print a message to the switch log; "{}" in `msg` is replaced by the fields
 * of `data` in order. */
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

/* The programmable blocks of the pipeline, in the order packets go through them.
 * H: a struct of headers, header stacks and header unions; M: a struct. */
parser Parser<H, M>(packet_in b,
                    out H parsedHdr,
                    inout M meta,
                    inout standard_metadata_t standard_metadata);

control VerifyChecksum<H, M>(inout H hdr, inout M meta);

@pipeline
control Ingress<H, M>(inout H hdr,
                      inout M meta,
                      inout standard_metadata_t standard_metadata);

@pipeline
control Egress<H, M>(inout H hdr,
                     inout M meta,
                     inout standard_metadata_t standard_metadata);

control ComputeChecksum<H, M>(inout H hdr, inout M meta);

@deparser
control Deparser<H>(packet_out b, in H hdr);

/* The top-level package: `V1Switch(MyParser(), ..., MyDeparser()) main;` */
package V1Switch<H, M>(Parser<H, M> p,
                       VerifyChecksum<H, M> vr,
                       Ingress<H, M> ig,
                       Egress<H, M> eg,
                       ComputeChecksum<H, M> ck,
                       Deparser<H> dep);

#undef P4SIM_PORT_T

#endif /* P4SIM_V1MODEL_P4 */
