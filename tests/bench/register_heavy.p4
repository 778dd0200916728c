/* Benchmark program: 32 register read-modify-writes per packet (the figure BMv2 is
 * compared on). Every UDP packet adds its 32 payload words into 32 register arrays at
 * the index carried in the first word, then leaves through port 2. */
#include <core.p4>
#include <v1model.p4>

header ethernet_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
header words_h {
    bit<32> index;
    bit<32> w0;  bit<32> w1;  bit<32> w2;  bit<32> w3;  bit<32> w4;  bit<32> w5;
    bit<32> w6;  bit<32> w7;  bit<32> w8;  bit<32> w9;  bit<32> w10; bit<32> w11;
    bit<32> w12; bit<32> w13; bit<32> w14; bit<32> w15; bit<32> w16; bit<32> w17;
    bit<32> w18; bit<32> w19; bit<32> w20; bit<32> w21; bit<32> w22; bit<32> w23;
    bit<32> w24; bit<32> w25; bit<32> w26; bit<32> w27; bit<32> w28; bit<32> w29;
    bit<32> w30; bit<32> w31;
}
struct headers_t { ethernet_h ethernet; words_h words; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.words);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

#define RMW(N) r##N.read(v, i); v = v + hdr.words.w##N; r##N.write(i, v); hdr.words.w##N = v;

control RhIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(1024) r0;  register<bit<32>>(1024) r1;  register<bit<32>>(1024) r2;
    register<bit<32>>(1024) r3;  register<bit<32>>(1024) r4;  register<bit<32>>(1024) r5;
    register<bit<32>>(1024) r6;  register<bit<32>>(1024) r7;  register<bit<32>>(1024) r8;
    register<bit<32>>(1024) r9;  register<bit<32>>(1024) r10; register<bit<32>>(1024) r11;
    register<bit<32>>(1024) r12; register<bit<32>>(1024) r13; register<bit<32>>(1024) r14;
    register<bit<32>>(1024) r15; register<bit<32>>(1024) r16; register<bit<32>>(1024) r17;
    register<bit<32>>(1024) r18; register<bit<32>>(1024) r19; register<bit<32>>(1024) r20;
    register<bit<32>>(1024) r21; register<bit<32>>(1024) r22; register<bit<32>>(1024) r23;
    register<bit<32>>(1024) r24; register<bit<32>>(1024) r25; register<bit<32>>(1024) r26;
    register<bit<32>>(1024) r27; register<bit<32>>(1024) r28; register<bit<32>>(1024) r29;
    register<bit<32>>(1024) r30; register<bit<32>>(1024) r31;
    apply {
        bit<32> i = hdr.words.index & 1023;
        bit<32> v;
        RMW(0)  RMW(1)  RMW(2)  RMW(3)  RMW(4)  RMW(5)  RMW(6)  RMW(7)
        RMW(8)  RMW(9)  RMW(10) RMW(11) RMW(12) RMW(13) RMW(14) RMW(15)
        RMW(16) RMW(17) RMW(18) RMW(19) RMW(20) RMW(21) RMW(22) RMW(23)
        RMW(24) RMW(25) RMW(26) RMW(27) RMW(28) RMW(29) RMW(30) RMW(31)
        sm.egress_spec = 2;
    }
}

control RhEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}
control NoCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.words); }
}

V1Switch(P(), NoVerify(), RhIngress(), RhEgress(), NoCompute(), D()) main;
