// Copy-in/copy-out: an inout/in parameter is a copy of its argument, so writes the
// callee makes through the argument's own name are overwritten by the copy-out (inout)
// or unseen through the parameter (in). Shapes: a header passed to an action called
// directly, to an action through a table's action list, through a nested action, a
// struct to a function twice (two names for one variable), a header stack, a scalar.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
header e_t { bit<8> v; }
struct pair_t { bit<8> x; bit<8> y; }
struct hdrs_t { h_t h; e_t[2] s; }
struct meta_t { pair_t p; }

parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); pk.extract(hdr.s.next); pk.extract(hdr.s.next); transition accept; }
}
void swap_into(inout pair_t dst, in pair_t src) {
    dst.x = 0x77;
    dst.y = src.x;  // src is the value at the call, not the 0x77 just written
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action direct(inout h_t v) {
        hdr.h.a = 0xaa;    // lost: the copy-out of v writes the old a back
        v.b = v.a + 1;     // v.a is the value at the call
    }
    action reads_in(in h_t v) {
        hdr.h.c = 0xcc;
        hdr.h.d = v.c;     // the value at the call
    }
    action inner() { hdr.h.d = 0xdd; }
    action outer(inout h_t v) {
        inner();           // a direct write made by a nested action: also overwritten
        v.c = 0x33;
    }
    action in_table(inout e_t cell) {
        hdr.s[0].v = 0x55; // lost when cell is s[0]
        cell.v = cell.v + 2;
    }
    action stack(inout e_t[2] st) {
        hdr.s[1].v = 0x66; // lost
        st[0].v = 0x44;
    }
    action scalar(inout bit<8> x) {
        hdr.h.a = 0x99;    // lost
        x = x + 0x10;
    }
    table t {
        key = { hdr.h.a : exact; }
        actions = { in_table(hdr.s[0]); NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.a == 1) {
            direct(hdr.h);
        } else if (hdr.h.a == 2) {
            reads_in(hdr.h);
        } else if (hdr.h.a == 3) {
            outer(hdr.h);
        } else if (hdr.h.a == 4) {
            t.apply();
        } else if (hdr.h.a == 5) {
            stack(hdr.s);
        } else if (hdr.h.a == 6) {
            scalar(hdr.h.a);
        } else if (hdr.h.a == 7) {
            m.p.x = hdr.h.b;
            m.p.y = 0;
            swap_into(m.p, m.p);
            hdr.h.c = m.p.x;
            hdr.h.d = m.p.y;
        }
    }
}
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr.h); pk.emit(hdr.s); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
