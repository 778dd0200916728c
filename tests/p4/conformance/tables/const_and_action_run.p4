// Const entries (ternary: the first listed entry wins), a default action with arguments
// that the control plane may change, a const default action, switch on action_run and
// if on hit/miss. Result bytes: r1 from the const table, r2 from action_run, r3 from
// hit/miss of a third table, r4 from the keyless table's default action.
#include <core.p4>
#include <v1model.p4>

header pk_t {
    bit<8> k;
    bit<8> r1;
    bit<8> r2;
    bit<8> r3;
    bit<8> r4;
}

struct headers_t { pk_t pk; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.pk);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set1(bit<8> v) { hdr.pk.r1 = v; }
    action a_one() { }
    action a_two(bit<8> x) { hdr.pk.r3 = x; }
    action set4(bit<8> v) { hdr.pk.r4 = v; }

    table consts {
        key = { hdr.pk.k: ternary; }
        actions = { set1; }
        const default_action = set1(0xDD);
        const entries = {
            0x01 &&& 0x0F: set1(1);   // listed first: wins over the next one for 0x01
            0x01: set1(2);
            0x20 &&& 0xF0: set1(3);
            _: set1(4);               // everything else with k >= 0x80
        }
    }
    table dispatch {
        key = { hdr.pk.k: exact; }
        actions = { a_one; a_two; NoAction; }
        default_action = NoAction();
    }
    table hit_tab {
        key = { hdr.pk.k: exact; }
        actions = { a_two; NoAction; }
        default_action = NoAction();
    }
    table keyless {
        actions = { set4; }
        default_action = set4(0x44);
    }
    apply {
        if (hdr.pk.k < 0x80) {
            consts.apply();
        }
        switch (dispatch.apply().action_run) {
            a_one: { hdr.pk.r2 = 1; }
            a_two: { hdr.pk.r2 = 2; }
            default: { hdr.pk.r2 = 0xFF; }
        }
        if (hit_tab.apply().miss) {
            hdr.pk.r3 = 0xEE;
        } else {
            hdr.pk.r3 = hdr.pk.r3 + 0x10;
        }
        // a keyless table only ever runs its default action: never a hit
        if (keyless.apply().hit) {
            hdr.pk.r4 = 0x99;
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
