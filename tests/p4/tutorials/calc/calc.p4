// Calculator: an Ethernet frame of type 0x1234 carrying 'P' '4' version 1, an operator
// byte and two 32-bit operands is answered on the port it came from, with the result
// filled in and the MAC addresses swapped. Anything else is dropped.
#include <core.p4>
#include <v1model.p4>

const bit<16> CALC_ETYPE = 0x1234;
const bit<8>  CALC_P     = 0x50;   // 'P'
const bit<8>  CALC_4     = 0x34;   // '4'
const bit<8>  CALC_VER   = 0x01;

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header calc_h {
    bit<8>  p;
    bit<8>  four;
    bit<8>  ver;
    bit<8>  op;
    bit<32> operand_a;
    bit<32> operand_b;
    bit<32> res;
}

struct headers_t {
    ethernet_h ethernet;
    calc_h     calc;
}

struct meta_t { }

parser CalcParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            CALC_ETYPE: check_calc;
            default: accept;
        }
    }
    state check_calc {
        // Only a well-formed P4calc preamble makes the header valid.
        transition select(pkt.lookahead<bit<24>>()) {
            CALC_P ++ CALC_4 ++ CALC_VER: parse_calc;
            default: accept;
        }
    }
    state parse_calc {
        pkt.extract(hdr.calc);
        transition accept;
    }
}

control CalcVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control CalcIngress(inout headers_t hdr, inout meta_t meta,
                    inout standard_metadata_t smeta) {
    action reply(bit<32> result) {
        hdr.calc.res = result;
        bit<48> tmp = hdr.ethernet.dst;
        hdr.ethernet.dst = hdr.ethernet.src;
        hdr.ethernet.src = tmp;
        smeta.egress_spec = smeta.ingress_port;
    }
    action op_add() { reply(hdr.calc.operand_a + hdr.calc.operand_b); }
    action op_sub() { reply(hdr.calc.operand_a - hdr.calc.operand_b); }
    action op_and() { reply(hdr.calc.operand_a & hdr.calc.operand_b); }
    action op_or()  { reply(hdr.calc.operand_a | hdr.calc.operand_b); }
    action op_xor() { reply(hdr.calc.operand_a ^ hdr.calc.operand_b); }
    action op_drop() { mark_to_drop(smeta); }

    table calculate {
        key = { hdr.calc.op: exact; }
        actions = { op_add; op_sub; op_and; op_or; op_xor; op_drop; }
        const default_action = op_drop();
        const entries = {
            0x2b: op_add();   // '+'
            0x2d: op_sub();   // '-'
            0x26: op_and();   // '&'
            0x7c: op_or();    // '|'
            0x5e: op_xor();   // '^'
        }
    }
    apply {
        if (hdr.calc.isValid()) {
            calculate.apply();
        } else {
            op_drop();
        }
    }
}

control CalcEgress(inout headers_t hdr, inout meta_t meta,
                   inout standard_metadata_t smeta) {
    apply { }
}

control CalcCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control CalcDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.calc);
    }
}

V1Switch(CalcParser(), CalcVerify(), CalcIngress(), CalcEgress(), CalcCompute(),
         CalcDeparser()) main;
