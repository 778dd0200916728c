/* Language features: unions, sub-parsers and sub-controls, functions, enums, struct
 * copies, stack push/pop, exit, return, action calls with inout arguments, switch on
 * values, @name, sizeInBits.  `req.op` selects a test; results go to `out_t`. */
#include <core.p4>
#include <v1model.p4>

enum bit<8> Op {
    UNION_A = 1,
    UNION_B = 2,
    FUNC = 3,
    COPY = 4,
    STACK = 5,
    EXIT = 6,
    RET = 7,
    INOUT = 8,
    SWITCH = 9,
    SUB = 10
}

enum Color { RED, GREEN }

header req_t {
    Op op;
    bit<8> arg;
}

header a_t { bit<8> a; }
header b_t { bit<16> b; }

header_union ab_t {
    a_t a;
    b_t b;
}

header out_t {
    bit<8> r1;
    bit<8> r2;
    bit<8> r3;
    bit<8> r4;
}

header item_t { bit<8> v; }

struct inner_t {
    bit<8> x;
    bit<8> y;
}

struct headers_t {
    req_t req;
    ab_t ab;
    out_t out;
    item_t[3] items;
}

struct meta_t {
    inner_t in1;
    inner_t in2;
    Color color;
}

typedef bit<8> byte_t;
const byte_t FORTY = 40;

bit<8> max8(in bit<8> a, in bit<8> b) {
    if (a > b) {
        return a;
    }
    return b;
}

void bump(inout bit<8> v, in bit<8> by) {
    v = v + by;
}

parser Sub(packet_in pkt, inout headers_t hdr) {
    state start {
        transition select(hdr.req.op) {
            Op.UNION_A: pa;
            Op.UNION_B: pb;
            default: accept;
        }
    }
    state pa {
        pkt.extract(hdr.ab.a);
        transition accept;
    }
    state pb {
        pkt.extract(hdr.ab.b);
        transition accept;
    }
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    Sub() sub;
    state start {
        pkt.extract(hdr.req);
        sub.apply(pkt, hdr);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Adder(inout bit<8> v, in bit<8> k) {
    action add_k() { v = v + k; }
    table t {
        key = { k: exact; }
        actions = { add_k; NoAction; }
        default_action = add_k();
    }
    apply { t.apply(); }
}

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Adder() adder1;
    Adder() adder2;
    bit<8> scratch = 5;
    const bit<8> SEVEN = 7;

    @name("renamed_action") action twice(inout bit<8> v) { v = v * 2; }
    action set_r4(bit<8> x) { hdr.out.r4 = x; }
    @name(".global_table") table named_t {
        key = { hdr.ab.a.isValid(): exact; }
        actions = { set_r4; NoAction; }
    }

    apply {
        hdr.out.setValid();
        sm.egress_spec = 1;
        named_t.apply();
        if (hdr.req.op == Op.UNION_A || hdr.req.op == Op.UNION_B) {
            hdr.out.r1 = hdr.ab.a.isValid() ? 8w1 : 8w0;
            hdr.out.r2 = hdr.ab.b.isValid() ? 8w1 : 8w0;
            hdr.out.r3 = hdr.ab.isValid() ? 8w1 : 8w0;
            hdr.ab.b.setValid();
            hdr.out.r4 = hdr.ab.a.isValid() ? 8w1 : 8w0;
            hdr.ab.b.setInvalid();
        } else if (hdr.req.op == Op.FUNC) {
            hdr.out.r1 = max8(hdr.req.arg, FORTY);
            bit<8> v = hdr.req.arg;
            bump(v, SEVEN);
            hdr.out.r2 = v;
            hdr.out.r3 = (bit<8>)sizeInBits(inner_t);
        } else if (hdr.req.op == Op.COPY) {
            meta.in1 = { hdr.req.arg, 2 };
            meta.in2 = meta.in1;
            meta.in1.x = 99;
            hdr.out.r1 = meta.in2.x;
            hdr.out.r2 = meta.in1.x;
            meta.in2 = { x = 3, y = 4 };
            hdr.out.r3 = meta.in2.x + meta.in2.y;
            meta.color = Color.GREEN;
            hdr.out.r4 = (meta.color == Color.GREEN) ? 8w1 : 8w0;
        } else if (hdr.req.op == Op.STACK) {
            hdr.items[0].setValid();
            hdr.items[0].v = 1;
            hdr.items.push_front(1);
            hdr.items[0].setValid();
            hdr.items[0].v = 2;
            hdr.out.r1 = hdr.items[1].v;
            hdr.out.r2 = hdr.items[2].isValid() ? 8w1 : 8w0;
            hdr.items.pop_front(1);
            hdr.out.r3 = hdr.items[0].v;
            hdr.out.r4 = hdr.items[1].isValid() ? 8w1 : 8w0;
            hdr.items[0].setInvalid();
        } else if (hdr.req.op == Op.EXIT) {
            hdr.out.r1 = 1;
            exit;
        } else if (hdr.req.op == Op.RET) {
            hdr.out.r1 = 2;
            return;
        } else if (hdr.req.op == Op.INOUT) {
            bit<8> v = hdr.req.arg;
            twice(v);
            hdr.out.r1 = v;
            scratch = scratch + 1;
            hdr.out.r2 = scratch;
        } else if (hdr.req.op == Op.SWITCH) {
            switch (hdr.req.arg) {
                1: { hdr.out.r1 = 10; }
                2:
                3: { hdr.out.r1 = 23; }
                default: { hdr.out.r1 = 99; }
            }
        } else if (hdr.req.op == Op.SUB) {
            bit<8> v = 1;
            adder1.apply(v, 10);
            adder2.apply(v, 20);
            hdr.out.r1 = v;
        }
        hdr.out.r4 = hdr.out.r4 | 0x80;
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Dep(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.out);
        pkt.emit(hdr.ab);
        pkt.emit(hdr.items);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;
