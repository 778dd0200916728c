// P4_16 v1.2.5 loops: C-style `for` with break/continue (continue still runs the update),
// several init/update parts, compound updates, and `for (T x in ...)` over an inclusive
// range, a signed range, a list expression and a header stack.
#include <core.p4>
#include <v1model.p4>

header in_h { bit<8> n; bit<8> op; }
header out_h { bit<8> r0; bit<8> r1; bit<8> r2; bit<8> r3; }
header item_h { bit<8> v; }
struct hdrs_t { in_h i; item_h[3] items; out_h o; }
struct meta_t {}

parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.i); pk.extract(h.items.next); pk.extract(h.items.next);
                  pk.extract(h.items.next); pk.extract(h.o); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }

// first index (1-based) whose item equals `want`, 0 when absent: `return` inside a loop
bit<8> find(in item_h[3] items, in bit<8> want) {
    for (bit<8> k in 0 .. 2) {
        if (items[k].v == want) { return k + 1; }
    }
    return 0;
}

control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    action odd_sum_until_break() {
        // sum of odd i below n, stopping at 9; `continue` must not skip `i = i + 1`
        h.o.r0 = 0;
        for (bit<8> i = 0; i < h.i.n; i = i + 1) {
            if (i == 9) { break; }
            if (i & 1 == 0) { continue; }
            h.o.r0 = h.o.r0 + i;
        }
    }
    apply {
        sm.egress_spec = 1;
        if (h.i.op == 0) {
            odd_sum_until_break();
            // two counters, compound update; the inner break leaves only the inner loop
            bit<8> pairs = 0;
            bit<8> a;
            bit<8> b;
            for (a = 0, b = 10; a < b; a = a + 1, b -= 1) {
                for (bit<8> j = 0; ; j = j + 1) {
                    if (j == 2) { break; }
                    pairs = pairs + 1;
                }
            }
            h.o.r1 = pairs;
            h.o.r2 = a;
            h.o.r3 = b;
        } else if (h.i.op == 1) {
            h.o.r0 = 0;
            for (bit<8> x in 1 .. h.i.n) { h.o.r0 = h.o.r0 + x; }  // both bounds included
            h.o.r1 = 0;
            for (int<8> s in -2 .. 1) { h.o.r1 = h.o.r1 + (bit<8>)s; }  // -2-1+0+1 = -2
            h.o.r2 = 0;
            for (bit<8> y in {3, 5, 7}) { h.o.r2 = h.o.r2 * 10 + y; }  // 357 mod 256
            h.o.r3 = 0;
            for (item_h it in h.items) {
                it.v = 0;  // a copy: the stack is unchanged
                h.o.r3 = h.o.r3 + 1;
            }
        } else {
            h.o.r0 = find(h.items, h.i.n);
            h.o.r1 = h.items[0].v;
        }
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
