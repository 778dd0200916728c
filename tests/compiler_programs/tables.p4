/* Tables: every match kind, const entries with priorities, default actions,
 * hit/miss and switch on action_run. Results are written into res_t. */
#include <core.p4>
#include <v1model.p4>

header req_t {
    bit<8> a;
    bit<16> b;
    bit<32> ip;
    bit<8> c;
}

header res_t {
    bit<8> exact_v;
    bit<8> lpm_v;
    bit<8> tern_v;
    bit<8> const_v;
    bit<8> sw_v;
    bit<8> hit_flags;
}

struct headers_t {
    req_t req;
    res_t res;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.req);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_exact(bit<8> v) { hdr.res.exact_v = v; }
    action set_lpm(bit<8> v) { hdr.res.lpm_v = v; }
    action set_tern(bit<8> v) { hdr.res.tern_v = v; }
    action set_const(bit<8> v) { hdr.res.const_v = v; }
    action miss_default() { hdr.res.exact_v = 0xEE; }
    action a1() { hdr.res.sw_v = 1; }
    action a2() { hdr.res.sw_v = 2; }

    table t_exact {
        key = { hdr.req.a: exact; hdr.req.b: exact; }
        actions = { set_exact; miss_default; }
        default_action = miss_default();
    }
    table t_lpm {
        key = { hdr.req.ip: lpm @name("ip_addr"); }
        actions = { set_lpm; NoAction; }
        default_action = set_lpm(0x77);
    }
    table t_tern {
        key = {
            hdr.req.a: ternary;
            hdr.req.b: range;
            hdr.req.c: optional;
        }
        actions = { set_tern; }
    }
    table t_const {
        key = { hdr.req.a: ternary; }
        actions = { set_const; }
        const entries = {
            0x10 &&& 0xF0: set_const(1);
            0x11: set_const(2);
            _: set_const(3);
        }
    }
    table t_sw {
        key = { hdr.req.c: exact; }
        actions = { a1; a2; NoAction; }
        const default_action = NoAction();
        const entries = {
            1: a1();
            2: a2();
        }
    }
    apply {
        hdr.res.setValid();
        bit<8> flags = 0;
        if (t_exact.apply().hit) {
            flags = flags | 1;
        }
        if (!t_lpm.apply().miss) {
            flags = flags | 2;
        }
        t_tern.apply();
        t_const.apply();
        switch (t_sw.apply().action_run) {
            a1: { flags = flags | 4; }
            a2: { flags = flags | 8; }
            default: { flags = flags | 16; }
        }
        hdr.res.hit_flags = flags;
        sm.egress_spec = 1;
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Dep(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.res); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;
