// A serializable enum as an action's parameter (table entry data), stored into bit<8>
// and enum-typed fields and compared, as the tutorials' flowcache solution does, for the
// native back end's differential test (tests/test_native_language.py).
#include <core.p4>
#include <v1model.p4>

enum bit<8> Reason_t {
    UNKNOWN = 1,
    EXPIRED = 2,
    BAD_OPCODE = 3
}

header h_t {
    bit<8>   key;
    bit<8>   raw;
    Reason_t reason;
    bit<8>   expired;
}
struct hdrs_t { h_t h; }
struct meta_t { Reason_t reason; }

parser P(packet_in pk, out hdrs_t hd, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hd.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hd, inout meta_t m, inout standard_metadata_t sm) {
    action punt(Reason_t reason) {
        m.reason = reason;
        hd.h.raw = (bit<8>)reason;
        hd.h.reason = reason;
        hd.h.expired = reason == Reason_t.EXPIRED ? 8w1 : 8w0;
    }
    table t {
        key = { hd.h.key: exact; }
        actions = { punt; NoAction; }
        default_action = punt(Reason_t.UNKNOWN);
    }
    apply {
        t.apply();
        sm.egress_spec = 1;
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
