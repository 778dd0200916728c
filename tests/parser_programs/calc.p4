/* A calculator protocol: parse "P4" + version + op + operands, compute, reply. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }

const bit<16> CALC_ETYPE = 0x1234;
const bit<8>  CALC_P     = 0x50;   // 'P'
const bit<8>  CALC_4     = 0x34;   // '4'
const bit<8>  CALC_VER   = 0x01;
const bit<8>  OP_PLUS    = 0x2b;   // '+'
const bit<8>  OP_MINUS   = 0x2d;   // '-'
const bit<8>  OP_AND     = 0x26;   // '&'
const bit<8>  OP_OR      = 0x7c;   // '|'
const bit<8>  OP_CARET   = 0x5e;   // '^'

header calc_t {
    bit<8>  p;
    bit<8>  four;
    bit<8>  ver;
    bit<8>  op;
    bit<32> operand_a;
    bit<32> operand_b;
    bit<32> res;
}

struct headers { ethernet_t ethernet; calc_t calc; }
struct metadata { }

parser CalcParser(packet_in packet, out headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            CALC_ETYPE: check_calc;
            default: accept;
        }
    }
    state check_calc {
        transition select(packet.lookahead<calc_t>().p,
                          packet.lookahead<calc_t>().four,
                          packet.lookahead<calc_t>().ver) {
            (CALC_P, CALC_4, CALC_VER): parse_calc;
            default: accept;
        }
    }
    state parse_calc {
        packet.extract(hdr.calc);
        transition accept;
    }
}

control CalcVerify(inout headers hdr, inout metadata meta) { apply { } }

control CalcIngress(inout headers hdr, inout metadata meta,
                    inout standard_metadata_t standard_metadata) {
    action send_back(bit<32> result) {
        bit<48> tmp = hdr.ethernet.dstAddr;
        hdr.calc.res = result;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = tmp;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
    action operation_add()  { send_back(hdr.calc.operand_a + hdr.calc.operand_b); }
    action operation_sub()  { send_back(hdr.calc.operand_a - hdr.calc.operand_b); }
    action operation_and()  { send_back(hdr.calc.operand_a & hdr.calc.operand_b); }
    action operation_or()   { send_back(hdr.calc.operand_a | hdr.calc.operand_b); }
    action operation_xor()  { send_back(hdr.calc.operand_a ^ hdr.calc.operand_b); }
    action operation_drop() { mark_to_drop(standard_metadata); }

    table calculate {
        key = { hdr.calc.op: exact; }
        actions = {
            operation_add; operation_sub; operation_and;
            operation_or; operation_xor; operation_drop;
        }
        const default_action = operation_drop();
        const entries = {
            OP_PLUS : operation_add();
            OP_MINUS: operation_sub();
            OP_AND  : operation_and();
            OP_OR   : operation_or();
            OP_CARET: operation_xor();
        }
    }

    apply {
        if (hdr.calc.isValid()) {
            calculate.apply();
        } else {
            operation_drop();
        }
    }
}

control CalcEgress(inout headers hdr, inout metadata meta,
                   inout standard_metadata_t standard_metadata) { apply { } }
control CalcChecksum(inout headers hdr, inout metadata meta) { apply { } }
control CalcDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.calc);
    }
}

V1Switch(CalcParser(), CalcVerify(), CalcIngress(), CalcEgress(), CalcChecksum(),
         CalcDeparser()) main;
