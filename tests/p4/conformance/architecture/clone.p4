// clone I2E and E2E. The I2E copy is the packet as received (ingress changes are not in
// it); the E2E copy carries the egress changes of the original and runs egress again.
// Egress counts its passes in 'stage' and records instance_type (1 = I2E, 2 = E2E).
#include <core.p4>
#include <v1model.p4>

header pk_t {
    bit<8> mode;
    bit<8> itype;
    bit<8> stage;
    bit<8> mark;
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
    apply {
        sm.egress_spec = 1;
        if (hdr.pk.mode == 1) {
            clone(CloneType.I2E, 5);
            hdr.pk.mark = 0x11;
        } else if (hdr.pk.mode == 4) {
            // session 7 points at multicast group 9 (mirroring_add_mc)
            clone(CloneType.I2E, 7);
        } else if (hdr.pk.mode == 3) {
            // cloning to a session that was never configured sends nothing extra
            clone(CloneType.I2E, 9);
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.pk.mode == 2 && sm.instance_type == 0) {
            clone(CloneType.E2E, 6);
            hdr.pk.mark = 0x22;
        }
        hdr.pk.itype = (bit<8>) sm.instance_type;
        hdr.pk.stage = hdr.pk.stage + 1;
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
