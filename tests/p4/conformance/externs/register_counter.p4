// Registers and counters. Each packet names a slot; the register slot is incremented
// and its new value written into the packet; an indexed packets-and-bytes counter and a
// direct counter on a table count the packet.
#include <core.p4>
#include <v1model.p4>

header pk_t {
    bit<8>  idx;
    bit<32> value;
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
    register<bit<32>>(4) slots;
    counter(4, CounterType.packets_and_bytes) per_slot;
    direct_counter(CounterType.packets) fwd_hits;

    action fwd(bit<9> port) {
        sm.egress_spec = port;
        fwd_hits.count();
    }
    table fwd_out {
        key = { hdr.pk.idx: exact; }
        actions = { fwd; }
        default_action = fwd(1);
        counters = fwd_hits;
    }
    apply {
        bit<32> v;
        slots.read(v, (bit<32>) hdr.pk.idx);
        v = v + 1;
        slots.write((bit<32>) hdr.pk.idx, v);
        hdr.pk.value = v;
        if (hdr.pk.idx < 4) {
            per_slot.count((bit<32>) hdr.pk.idx);
        }
        fwd_out.apply();
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pk); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
