// Evaluation order with side effects: a run-time stack index on the left of `=` is
// computed before the right side's call changes it; `&&`, `||` and `?:` skip the side
// effects of operands they do not evaluate.
#include <core.p4>
#include <v1model.p4>

header idx_h { bit<1> i; bit<7> rest; }
header cell_h { bit<8> v; }
header flags_h { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct hdrs_t { idx_h idx; cell_h[2] cells; flags_h f; }
struct meta_t {}

bit<8> reset_index(inout bit<1> i) {
    i = 0;
    return 0x99;
}
bool mark(inout bit<8> x) {
    x = 0xee;
    return true;
}
bit<8> mark_value(inout bit<8> x) {
    x = 0xee;
    return 3;
}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(h.idx);
        pk.extract(h.cells.next);
        pk.extract(h.cells.next);
        pk.extract(h.f);
        transition accept;
    }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.cells[h.idx.i].v = reset_index(h.idx.i);
        bool t = true || mark(h.f.a);
        bool u = false && mark(h.f.b);
        h.f.c = (h.f.c == 0) ? 8w5 : mark_value(h.f.d);
        if (t && !u) {
            h.idx.rest = 1;
        }
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
