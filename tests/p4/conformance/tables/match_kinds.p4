// One table per match kind (exact, lpm, ternary, range, optional); each writes its own
// result byte, 0xEE on a miss (default action).
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8>  e;
    bit<32> ip;
    bit<8>  t;
    bit<8>  r;
    bit<8>  o;
    bit<8>  r_exact;
    bit<8>  r_lpm;
    bit<8>  r_tern;
    bit<8>  r_range;
    bit<8>  r_opt;
}

struct headers_t { in_t pk; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.pk);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action act_e(bit<8> v) { hdr.pk.r_exact = v; }
    action act_l(bit<8> v) { hdr.pk.r_lpm = v; }
    action act_t(bit<8> v) { hdr.pk.r_tern = v; }
    action act_r(bit<8> v) { hdr.pk.r_range = v; }
    action act_o(bit<8> v) { hdr.pk.r_opt = v; }

    table t_exact {
        key = { hdr.pk.e: exact; }
        actions = { act_e; }
        default_action = act_e(0xEE);
    }
    table t_lpm {
        key = { hdr.pk.ip: lpm; }
        actions = { act_l; }
        default_action = act_l(0xEE);
    }
    table t_tern {
        key = { hdr.pk.t: ternary; }
        actions = { act_t; }
        default_action = act_t(0xEE);
    }
    table t_range {
        key = { hdr.pk.r: range; }
        actions = { act_r; }
        default_action = act_r(0xEE);
    }
    table t_opt {
        key = {
            hdr.pk.e: exact;
            hdr.pk.o: optional;
        }
        actions = { act_o; }
        default_action = act_o(0xEE);
    }
    apply {
        t_exact.apply();
        t_lpm.apply();
        t_tern.apply();
        t_range.apply();
        t_opt.apply();
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
