/* More features: runtime stack indexes, lastIndex, checksum_error, tuples, enum switch,
 * keyless tables, entry priorities, bool action data, functions with out parameters,
 * header copies and list assignment to headers. Results in out_t. */
#include <core.p4>
#include <v1model.p4>

enum Kind { ONE, TWO, THREE }

header req_t {
    bit<8> op;
    bit<8> i;
    bit<16> csum;
}

header v_t { bit<8> v; }

header out_t {
    bit<8> r1;
    bit<8> r2;
    bit<8> r3;
    bit<8> r4;
}

struct headers_t {
    req_t req;
    v_t[4] vs;
    out_t out;
    v_t extra;
}

struct meta_t {
    Kind kind;
    bit<8> i;
}

bit<8> split(in bit<16> x, out bit<8> lo) {
    lo = x[7:0];
    return x[15:8];
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.req);
        transition parse_v;
    }
    state parse_v {
        pkt.extract(hdr.vs.next);
        transition select(hdr.vs.lastIndex) {
            2: accept;
            default: parse_v;
        }
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(true, { hdr.req.op, hdr.req.i }, hdr.req.csum, HashAlgorithm.csum16);
    }
}

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_flag(bool b, bit<8> x) {
        hdr.out.r3 = b ? x : 8w0;
    }
    table keyless {
        actions = { set_flag; }
        default_action = set_flag(true, 5);
    }
    action pick(bit<8> x) { hdr.out.r4 = x; }
    table prio {
        key = { hdr.req.i: ternary; }
        actions = { pick; }
        const entries = {
            priority = 10: 0x00 &&& 0x00: pick(1);
            priority = 20: 0x02 &&& 0x0F: pick(2);
        }
    }
    apply {
        hdr.out.setValid();
        sm.egress_spec = 1;
        if (hdr.req.op == 1) {
            // runtime index into a stack, and the stack's last element
            hdr.out.r1 = hdr.vs[hdr.req.i].v;
            hdr.vs[hdr.req.i].v = 0xEE;
            hdr.out.r2 = hdr.vs.last.v;
        } else if (hdr.req.op == 2) {
            hdr.out.r1 = (bit<8>)sm.checksum_error;
        } else if (hdr.req.op == 3) {
            tuple<bit<8>, bit<16>> t = { 7, 0x1234 };
            hdr.out.r1 = t[0];
            hdr.out.r2 = t[1][15:8];
            bit<8> lo;
            hdr.out.r3 = split(0xABCD, lo);
            hdr.out.r4 = lo;
        } else if (hdr.req.op == 4) {
            meta.kind = hdr.req.i == 0 ? Kind.ONE : (hdr.req.i == 1 ? Kind.TWO : Kind.THREE);
            switch (meta.kind) {
                Kind.ONE: { hdr.out.r1 = 1; }
                Kind.TWO: { hdr.out.r1 = 2; }
                default: { hdr.out.r1 = 3; }
            }
        } else if (hdr.req.op == 5) {
            keyless.apply();
            prio.apply();
        } else if (hdr.req.op == 6) {
            hdr.extra = hdr.vs[0];
            hdr.extra.v = hdr.extra.v + 1;
            hdr.out.r1 = hdr.vs[0].v;
            hdr.out.r2 = hdr.extra == hdr.vs[0] ? 8w1 : 8w0;
            hdr.vs[1] = { 0x55 };
            hdr.vs[3] = { 0x66 };
            hdr.out.r3 = hdr.vs[3].isValid() ? 8w1 : 8w0;
        }
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Dep(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.out);
        pkt.emit(hdr.vs);
        pkt.emit(hdr.extra);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;
