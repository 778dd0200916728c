// An unconfigured meter colours every packet GREEN (0); random() with equal bounds is
// that bound; a digest sent to the control plane leaves the packet unchanged; a direct
// meter on a table reads GREEN as well.
#include <core.p4>
#include <v1model.p4>

header pk_t {
    bit<8>  key;
    bit<32> color;
    bit<8>  direct_color;
    bit<16> rnd;
    bit<8>  rnd_range_ok;
}

struct learn_t {
    bit<8>  key;
    bit<9>  port;
}

struct headers_t { pk_t pk; }
struct meta_t { bit<8> dcolor; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.pk);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    meter(8, MeterType.bytes) m;
    direct_meter<bit<8>>(MeterType.packets) dm;

    action read_dm() {
        dm.read(meta.dcolor);
    }
    table metered {
        key = { hdr.pk.key: exact; }
        actions = { read_dm; NoAction; }
        default_action = NoAction();
        meters = dm;
    }
    apply {
        m.execute_meter((bit<32>) hdr.pk.key, hdr.pk.color);
        meta.dcolor = 0xEE;
        metered.apply();
        hdr.pk.direct_color = meta.dcolor;
        random(hdr.pk.rnd, 16w0x1234, 16w0x1234);
        bit<8> r;
        random(r, 8w10, 8w20);
        hdr.pk.rnd_range_ok = (r >= 10 && r <= 20) ? 8w1 : 8w0;
        digest<learn_t>(1, { hdr.pk.key, sm.ingress_port });
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
