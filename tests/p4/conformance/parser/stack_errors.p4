// Header stacks parsed with .next/.last until a bottom-of-stack bit, and parser errors
// that reach ingress: StackOutOfBounds (a 4th element for a 3-element stack),
// PacketTooShort (truncated element) and NoMatch (a select without default).
// Ingress puts a result header in front: error code (1/2/3, 0 = none) and the number
// of valid stack elements.
#include <core.p4>
#include <v1model.p4>

header res_t {
    bit<8> err;
    bit<8> count;
}
header item_t {
    bit<1> bos;
    bit<15> val;
}

struct headers_t {
    res_t     res;
    item_t[3] items;
}
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.items.next);
        transition select(hdr.items.last.bos, hdr.items.last.val) {
            (1, 0x7FFF): reject_me;
            (1, _): accept;
            (0, _): start;
        }
    }
    state reject_me {
        // no default: every value fails with NoMatch
        transition select(hdr.items.last.val) {
            0: accept;
        }
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.res.setValid();
        if (sm.parser_error == error.StackOutOfBounds) {
            hdr.res.err = 1;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.res.err = 2;
        } else if (sm.parser_error == error.NoMatch) {
            hdr.res.err = 3;
        } else {
            hdr.res.err = 0;
        }
        hdr.res.count = 0;
        if (hdr.items[0].isValid()) { hdr.res.count = hdr.res.count + 1; }
        if (hdr.items[1].isValid()) { hdr.res.count = hdr.res.count + 1; }
        if (hdr.items[2].isValid()) { hdr.res.count = hdr.res.count + 1; }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.res);
        pkt.emit(hdr.items);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
