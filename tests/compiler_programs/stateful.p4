/* Registers, counters, direct counters, meters, hash and digest. */
#include <core.p4>
#include <v1model.p4>

header req_t {
    bit<8> op;
    bit<8> idx;
    bit<32> val;
}

header res_t {
    bit<32> old;
    bit<32> now;
    bit<16> h16;
    bit<32> h32;
    bit<8> color;
}

struct headers_t {
    req_t req;
    res_t res;
}

struct learn_t {
    bit<8> idx;
    bit<32> val;
}

struct meta_t {
    bit<32> tmp;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.req);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) acc;
    register<bit<32>>(32) many;
    counter(8, CounterType.packets_and_bytes) pkts;
    meter(4, MeterType.packets) m;
    direct_counter(CounterType.packets_and_bytes) dc;

    action count_it() { dc.count(); }
    table t_dc {
        key = { hdr.req.op: exact; }
        actions = { count_it; NoAction; }
        counters = dc;
        default_action = NoAction();
    }
    apply {
        hdr.res.setValid();
        bit<32> cur;
        acc.read(cur, (bit<32>)hdr.req.idx);
        hdr.res.old = cur;
        cur = cur + hdr.req.val;
        acc.write((bit<32>)hdr.req.idx, cur);
        hdr.res.now = cur;
        pkts.count((bit<32>)hdr.req.idx);
        m.execute_meter((bit<32>)0, hdr.res.color);
        hash(hdr.res.h16, HashAlgorithm.crc16, 16w0, { hdr.req.idx, hdr.req.val }, 32w65536);
        hash(hdr.res.h32, HashAlgorithm.crc32, 32w0, { hdr.req.idx, hdr.req.val }, 64w0x100000000);
        if (hdr.req.op == 1) {
            digest<learn_t>(1, { hdr.req.idx, hdr.req.val });
        }
        if (hdr.req.op == 2) {
            // 32 read-modify-writes (the performance benchmark)
            bit<32> x;
            many.read(x, 0); many.write(0, x + 1);
            many.read(x, 1); many.write(1, x + 1);
            many.read(x, 2); many.write(2, x + 1);
            many.read(x, 3); many.write(3, x + 1);
            many.read(x, 4); many.write(4, x + 1);
            many.read(x, 5); many.write(5, x + 1);
            many.read(x, 6); many.write(6, x + 1);
            many.read(x, 7); many.write(7, x + 1);
            many.read(x, 8); many.write(8, x + 1);
            many.read(x, 9); many.write(9, x + 1);
            many.read(x, 10); many.write(10, x + 1);
            many.read(x, 11); many.write(11, x + 1);
            many.read(x, 12); many.write(12, x + 1);
            many.read(x, 13); many.write(13, x + 1);
            many.read(x, 14); many.write(14, x + 1);
            many.read(x, 15); many.write(15, x + 1);
            many.read(x, 16); many.write(16, x + 1);
            many.read(x, 17); many.write(17, x + 1);
            many.read(x, 18); many.write(18, x + 1);
            many.read(x, 19); many.write(19, x + 1);
            many.read(x, 20); many.write(20, x + 1);
            many.read(x, 21); many.write(21, x + 1);
            many.read(x, 22); many.write(22, x + 1);
            many.read(x, 23); many.write(23, x + 1);
            many.read(x, 24); many.write(24, x + 1);
            many.read(x, 25); many.write(25, x + 1);
            many.read(x, 26); many.write(26, x + 1);
            many.read(x, 27); many.write(27, x + 1);
            many.read(x, 28); many.write(28, x + 1);
            many.read(x, 29); many.write(29, x + 1);
            many.read(x, 30); many.write(30, x + 1);
            many.read(x, 31); many.write(31, x + 1);
        }
        t_dc.apply();
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
