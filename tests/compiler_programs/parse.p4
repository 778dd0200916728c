/* Parser features: select on tuples with masks/ranges/value sets, header stacks,
 * varbit, lookahead, verify, custom errors; results reported in a res_t header. */
#include <core.p4>
#include <v1model.p4>

error { BadValue }

header top_t {
    bit<8> kind;
    bit<8> x;
}

header label_t {
    bit<7> v;
    bit<1> bos;
}

header len_t {
    bit<8> len;
}

header opt_t {
    varbit<64> data;
}

header one_t {
    bit<8> v;
}

header res_t {
    bit<8> path;
    bit<8> err;
    bit<8> nlabels;
    bit<8> extra;
}

struct headers_t {
    res_t res;
    top_t top;
    label_t[3] labels;
    len_t len;
    opt_t opt;
    one_t one;
}

struct meta_t {
    bit<8> path;
    bit<8> peek;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    value_set<bit<8>>(4) pvs;

    state start {
        pkt.extract(hdr.top);
        transition select(hdr.top.kind, hdr.top.x) {
            (1, _): parse_labels;
            (2, 0x00 &&& 0xF0): parse_var;
            (3, 0x10 .. 0x1F): in_range;
            (4, _): peek;
            (5, _): check_pvs;
            (6, _): bad;
            default: reject;
        }
    }
    state parse_labels {
        meta.path = 1;
        pkt.extract(hdr.labels.next);
        transition select(hdr.labels.last.bos) {
            1: accept;
            default: parse_labels;
        }
    }
    state parse_var {
        meta.path = 2;
        pkt.extract(hdr.len);
        pkt.extract(hdr.opt, (bit<32>)hdr.len.len * 8);
        transition accept;
    }
    state in_range {
        meta.path = 3;
        transition accept;
    }
    state peek {
        meta.path = 4;
        meta.peek = pkt.lookahead<bit<8>>();
        pkt.extract(hdr.one);
        transition accept;
    }
    state check_pvs {
        transition select(hdr.top.x) {
            pvs: pvs_hit;
            default: accept;
        }
    }
    state pvs_hit {
        meta.path = 5;
        transition accept;
    }
    state bad {
        meta.path = 6;
        verify(hdr.top.x == 0, error.BadValue);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.res.setValid();
        hdr.res.path = meta.path;
        hdr.res.extra = meta.peek;
        hdr.res.nlabels = (bit<8>)hdr.labels.nextIndex;
        if (sm.parser_error == error.NoError) {
            hdr.res.err = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.res.err = 1;
        } else if (sm.parser_error == error.NoMatch) {
            hdr.res.err = 2;
        } else if (sm.parser_error == error.StackOutOfBounds) {
            hdr.res.err = 3;
        } else if (sm.parser_error == error.HeaderTooShort) {
            hdr.res.err = 4;
        } else if (sm.parser_error == error.BadValue) {
            hdr.res.err = 5;
        } else {
            hdr.res.err = 99;
        }
        sm.egress_spec = 2;
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Dep(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.res);
        pkt.emit(hdr.top);
        pkt.emit(hdr.labels);
        pkt.emit(hdr.len);
        pkt.emit(hdr.opt);
        pkt.emit(hdr.one);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;
