// resubmit and recirculate with preserved metadata. A resubmitted packet restarts
// ingress from the packet as received (ingress changes are lost) with instance_type 6;
// a recirculated packet restarts from the deparsed egress output with instance_type 4.
// Only the fields of the named field list survive; other metadata is reset to 0.
#include <core.p4>
#include <v1model.p4>

header pk_t {
    bit<8> mode;
    bit<8> passes;
    bit<8> itype;
    bit<8> kept;
    bit<8> not_kept;
}

struct headers_t { pk_t pk; }
struct meta_t {
    @field_list(1) bit<8> kept_resub;
    @field_list(2) bit<8> kept_recirc;
    bit<8> not_kept;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.pk);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 0) {
            if (hdr.pk.mode == 1) {
                meta.kept_resub = 0xA1;
                meta.not_kept = 0xB1;
                hdr.pk.passes = hdr.pk.passes + 0x40;   // lost: resubmit uses the input
                resubmit_preserving_field_list(1);
            }
            sm.egress_spec = 2;
        } else {
            hdr.pk.itype = (bit<8>) sm.instance_type;
            hdr.pk.kept = (sm.instance_type == 6) ? meta.kept_resub : meta.kept_recirc;
            hdr.pk.not_kept = meta.not_kept;
            hdr.pk.passes = hdr.pk.passes + 1;
            sm.egress_spec = 1;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.pk.mode == 2 && sm.instance_type == 0) {
            meta.kept_recirc = 0xC2;
            meta.not_kept = 0xD2;
            hdr.pk.passes = hdr.pk.passes + 0x10;     // kept: recirculation re-parses this
            recirculate_preserving_field_list(2);
        }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
