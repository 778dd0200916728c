// Header validity and control flow: setValid/setInvalid decide what is emitted, header
// assignment copies validity and fields, stack push_front/pop_front by 2, exit ends
// ingress early (egress still runs), a return inside an action body leaves the action.
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> mode;
    bit<8> trace;
}
header a_t { bit<16> v; }
header b_t { bit<16> v; }
header s_t { bit<8> v; }

struct headers_t {
    op_t   op;
    a_t    a;
    b_t    b;
    a_t    a_copy;
    s_t[4] s;
}
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.op);
        pkt.extract(hdr.a);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action early(bit<8> t) {
        hdr.op.trace = t;
        if (t == 1) {
            return;
        }
        hdr.op.trace = 0xFF;
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.op.mode == 1) {
            // b becomes valid and is emitted after a; a's copy is valid too
            hdr.b.setValid();
            hdr.b.v = hdr.a.v + 1;
            hdr.a_copy = hdr.a;
        } else if (hdr.op.mode == 2) {
            // a invalid: not emitted; copying an invalid header makes the copy invalid
            hdr.a.setInvalid();
            hdr.a_copy = hdr.a;
        } else if (hdr.op.mode == 3) {
            // [x, y, -, -] -> [-, -, x, y], then the two new elements made valid
            hdr.s.push_front(2);
            hdr.s[0].setValid();
            hdr.s[0].v = 0xA0;
            hdr.s[1].setValid();
            hdr.s[1].v = 0xA1;
        } else if (hdr.op.mode == 4) {
            // [x, y] -> [] : both popped
            hdr.s.pop_front(2);
        } else if (hdr.op.mode == 5) {
            hdr.op.trace = 0x50;
            exit;
        } else if (hdr.op.mode == 6) {
            early(1);
        } else if (hdr.op.mode == 7) {
            early(2);
        }
        hdr.op.trace = hdr.op.trace + 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.op.trace = hdr.op.trace | 0x80;
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.op);
        pkt.emit(hdr.a);
        pkt.emit(hdr.b);
        pkt.emit(hdr.a_copy);
        pkt.emit(hdr.s);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
