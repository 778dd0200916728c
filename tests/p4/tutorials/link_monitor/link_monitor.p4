// Link monitoring: every packet leaving a port adds its length to that port's byte
// counter (a register). A probe (etherType 0x0812) carries a hop count, a stack of
// per-hop records and, after them, the list of output ports still to visit. The switch
// sends the probe out of the first listed port (and removes it from the list), then in
// egress pushes a record with its id, the port, the bytes sent on the port since the
// last probe, the time of the last probe and now; the port's counter restarts at 0.
#include <core.p4>
#include <v1model.p4>

#define MAX_HOPS 4
#define MAX_PORTS 8

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  tos;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header probe_h {
    bit<8> hop_cnt;
}

header probe_data_h {
    bit<1>  bos;
    bit<7>  swid;
    bit<8>  port;
    bit<32> byte_cnt;
    bit<48> last_time;
    bit<48> cur_time;
}

header probe_fwd_h {
    bit<8> egress_spec;
}

struct headers_t {
    ethernet_h             ethernet;
    probe_h                probe;
    probe_data_h[MAX_HOPS] probe_data;
    probe_fwd_h            probe_fwd;
    ipv4_h                 ipv4;
}

struct meta_t {
    bit<8> remaining;
}

parser LmParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            0x0812: parse_probe;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        meta.remaining = hdr.probe.hop_cnt;
        transition select(hdr.probe.hop_cnt) {
            0: parse_probe_fwd;
            default: parse_probe_data;
        }
    }
    state parse_probe_data {
        pkt.extract(hdr.probe_data.next);
        transition select(hdr.probe_data.last.bos) {
            1: parse_probe_fwd;
            default: parse_probe_data;
        }
    }
    state parse_probe_fwd {
        // Only this hop's port is parsed; later hops stay in the payload.
        pkt.extract(hdr.probe_fwd);
        transition accept;
    }
}

control LmVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control LmIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t smeta) {
    action drop() {
        mark_to_drop(smeta);
    }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        smeta.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        } else if (hdr.probe_fwd.isValid()) {
            smeta.egress_spec = (bit<9>) hdr.probe_fwd.egress_spec;
            hdr.probe_fwd.setInvalid();
            hdr.probe.hop_cnt = hdr.probe.hop_cnt + 1;
        } else {
            drop();
        }
    }
}

control LmEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t smeta) {
    register<bit<32>>(MAX_PORTS) byte_cnt_reg;
    register<bit<48>>(MAX_PORTS) last_time_reg;

    action set_swid(bit<7> swid) {
        hdr.probe_data[0].swid = swid;
    }
    table swid {
        actions = { set_swid; NoAction; }
        default_action = NoAction();
    }
    apply {
        bit<32> byte_cnt;
        bit<48> last_time;
        bit<32> port = (bit<32>) smeta.egress_port;
        byte_cnt_reg.read(byte_cnt, port);
        if (hdr.probe.isValid()) {
            last_time_reg.read(last_time, port);
            hdr.probe_data.push_front(1);
            hdr.probe_data[0].setValid();
            hdr.probe_data[0].bos = (hdr.probe.hop_cnt == 1) ? 1w1 : 1w0;
            hdr.probe_data[0].swid = 0;
            swid.apply();
            hdr.probe_data[0].port = (bit<8>) smeta.egress_port;
            hdr.probe_data[0].byte_cnt = byte_cnt;
            hdr.probe_data[0].last_time = last_time;
            hdr.probe_data[0].cur_time = smeta.egress_global_timestamp;
            byte_cnt_reg.write(port, 0);
            last_time_reg.write(port, smeta.egress_global_timestamp);
        } else {
            byte_cnt_reg.write(port, byte_cnt + smeta.packet_length);
        }
    }
}

control LmCompute(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control LmDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
        pkt.emit(hdr.probe_data);
        pkt.emit(hdr.probe_fwd);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(LmParser(), LmVerify(), LmIngress(), LmEgress(), LmCompute(), LmDeparser()) main;
