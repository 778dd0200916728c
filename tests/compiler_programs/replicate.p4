/* Multicast, clone (I2E/E2E), resubmit and recirculate with preserved metadata,
 * truncate. `req.op` selects the behaviour; `rep` reports what each copy saw. */
#include <core.p4>
#include <v1model.p4>

header req_t {
    bit<8> op;
    bit<8> arg;
}

header rep_t {
    bit<8> marker;
    bit<32> instance_type;
    bit<16> rid;
    bit<8> passes;
    bit<8> kept;
    bit<8> lost;
}

struct headers_t {
    rep_t rep;
    req_t req;
}

struct meta_t {
    @field_list(1)
    bit<8> passes;
    @field_list(1, 2)
    bit<8> kept;
    bit<8> lost;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        transition select(pkt.lookahead<bit<8>>()) {
            0xFF: parse_rep;
            default: parse_req;
        }
    }
    state parse_rep {
        pkt.extract(hdr.rep);
        transition parse_req;
    }
    state parse_req {
        pkt.extract(hdr.req);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.req.op == 1) {
            sm.mcast_grp = (bit<16>)hdr.req.arg;
        } else if (hdr.req.op == 2) {
            meta.kept = 42;
            meta.lost = 7;
            clone_preserving_field_list(CloneType.I2E, 5, 2);
        } else if (hdr.req.op == 4) {
            if (meta.passes < hdr.req.arg) {
                meta.passes = meta.passes + 1;
                meta.kept = 9;
                meta.lost = 9;
                resubmit_preserving_field_list(1);
            }
        } else if (hdr.req.op == 6) {
            mark_to_drop(sm);
        } else if (hdr.req.op == 7) {
            resubmit_preserving_field_list(1);   /* forever: cut by the pass limit */
        }
        hdr.rep.setValid();
        hdr.rep.marker = 0xFF;
        hdr.rep.instance_type = sm.instance_type;
        hdr.rep.passes = meta.passes;
        hdr.rep.kept = meta.kept;
        hdr.rep.lost = meta.lost;
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.rep.setValid();
        hdr.rep.marker = 0xFF;
        hdr.rep.rid = sm.egress_rid;
        if (sm.instance_type == 1) {
            hdr.rep.instance_type = sm.instance_type;
            hdr.rep.kept = meta.kept;
            hdr.rep.lost = meta.lost;
        }
        if (hdr.req.op == 3 && sm.instance_type == 0) {
            meta.kept = 43;
            clone_preserving_field_list(CloneType.E2E, 5, 2);
        }
        if (sm.instance_type == 2) {
            hdr.rep.instance_type = sm.instance_type;
            hdr.rep.kept = meta.kept;
        }
        if (hdr.req.op == 5 && sm.instance_type == 0) {
            meta.passes = 1;
            meta.kept = 11;
            hdr.req.op = 0;
            recirculate_preserving_field_list(1);
        }
        if (hdr.req.op == 8) {
            truncate(3);
        }
        if (hdr.req.op == 9) {
            mark_to_drop(sm);
        }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Dep(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.rep);
        pkt.emit(hdr.req);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;
