// Header stacks and range keys in the shapes the native back end covers, for the
// differential test (tests/test_native.py): a stack parsed with .next/.last until a
// bottom-of-stack bit (StackOutOfBounds past 4), then, by ctl.op, push_front, pop_front,
// writes and reads at a run-time index (out of range: writes lost, reads an invalid
// zeroed header), .last and lastIndex in a control, setValid at a run-time index, and a
// table with a range key and a ternary key. The deparser emits the whole stack.
#include <core.p4>
#include <v1model.p4>

header ctl_h {
    bit<8> op;
    bit<8> idx;
    bit<8> n;
    bit<8> hit;
    bit<16> port;
}
header item_h {
    bit<8> bos;
    bit<8> val;
}
struct headers_t {
    ctl_h ctl;
    item_h[4] items;
}
struct meta_t {
    bit<8> i;
}

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.ctl);
        transition items;
    }
    state items {
        pk.extract(hdr.items.next);
        transition select(hdr.items.last.bos) {
            0: items;
            default: accept;
        }
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action band(bit<8> tag, bit<9> port) {
        hdr.ctl.hit = tag;
        sm.egress_spec = port;
    }
    table by_port {
        key = {
            hdr.ctl.port: range;
            hdr.ctl.op: ternary;
        }
        actions = { band; NoAction; }
        default_action = band(0xEE, 1);
    }
    apply {
        meta.i = hdr.ctl.idx;
        if (hdr.ctl.op == 1) {
            hdr.items.push_front(1);
            hdr.items[0].setValid();
            hdr.items[0].val = 0xAA;
        } else if (hdr.ctl.op == 2) {
            hdr.items.pop_front(2);
        } else if (hdr.ctl.op == 3) {
            hdr.items[meta.i].val = 0x55;
        } else if (hdr.ctl.op == 4) {
            hdr.ctl.n = hdr.items[meta.i].val;
            if (!hdr.items[meta.i].isValid()) {
                hdr.ctl.n = hdr.ctl.n | 0x80;
            }
        } else if (hdr.ctl.op == 5) {
            hdr.items.pop_front(4);
            hdr.items.last.val = 0x77;
            hdr.ctl.n = (bit<8>)hdr.items.lastIndex;
        } else if (hdr.ctl.op == 6) {
            hdr.items[meta.i].setValid();
            hdr.items[meta.i].val = hdr.items.last.val + 1;
            hdr.ctl.n = (bit<8>)hdr.items.nextIndex;
        }
        by_port.apply();
        if (sm.parser_error == error.StackOutOfBounds) {
            hdr.ctl.n = 0xF0;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers_t hdr) {
    apply {
        pk.emit(hdr);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
