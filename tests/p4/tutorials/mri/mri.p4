// Multi-hop route inspection: IPv4 packets carrying the MRI option (option number 31)
// collect, at every hop, the switch id and the queue depth in a header stack inside the
// option. The egress pushes a new record on top and grows the option, the IPv4 header
// length and the total length; the header checksum covers the options too.
#include <core.p4>
#include <v1model.p4>

const bit<5> MRI_OPTION = 31;
#define MAX_HOPS 3

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

header ipv4_option_h {
    bit<1> copyFlag;
    bit<2> optClass;
    bit<5> option;
    bit<8> optionLength;
}

header mri_h {
    bit<16> count;
}

header swtrace_h {
    bit<32> swid;
    bit<32> qdepth;
}

struct headers_t {
    ethernet_h          ethernet;
    ipv4_h              ipv4;
    ipv4_option_h       ipv4_option;
    mri_h               mri;
    swtrace_h[MAX_HOPS] swtraces;
}

struct meta_t {
    bit<16> remaining;
}

parser MriParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl) {
            5: accept;
            default: parse_option;
        }
    }
    state parse_option {
        pkt.extract(hdr.ipv4_option);
        transition select(hdr.ipv4_option.option) {
            MRI_OPTION: parse_mri;
            default: accept;
        }
    }
    state parse_mri {
        pkt.extract(hdr.mri);
        meta.remaining = hdr.mri.count;
        transition select(meta.remaining) {
            0: accept;
            default: parse_swtrace;
        }
    }
    state parse_swtrace {
        pkt.extract(hdr.swtraces.next);
        meta.remaining = meta.remaining - 1;
        transition select(meta.remaining) {
            0: accept;
            default: parse_swtrace;
        }
    }
}

control MriVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MriIngress(inout headers_t hdr, inout meta_t meta,
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
        }
    }
}

control MriEgress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t smeta) {
    action add_swtrace(bit<32> swid) {
        hdr.mri.count = hdr.mri.count + 1;
        hdr.swtraces.push_front(1);
        // push_front leaves the new element invalid: make it valid before filling it.
        hdr.swtraces[0].setValid();
        hdr.swtraces[0].swid = swid;
        hdr.swtraces[0].qdepth = (bit<32>) smeta.deq_qdepth;
        hdr.ipv4.ihl = hdr.ipv4.ihl + 2;
        hdr.ipv4_option.optionLength = hdr.ipv4_option.optionLength + 8;
        hdr.ipv4.totalLen = hdr.ipv4.totalLen + 8;
    }
    table swtrace {
        actions = { add_swtrace; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (hdr.mri.isValid()) {
            swtrace.apply();
        }
    }
}

control MriCompute(inout headers_t hdr, inout meta_t meta) {
    apply {
        // Fields of invalid headers are left out of the sum (BMv2 skips them), so the
        // one list covers every number of records.
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr,
              hdr.ipv4_option.copyFlag, hdr.ipv4_option.optClass, hdr.ipv4_option.option,
              hdr.ipv4_option.optionLength, hdr.mri.count,
              hdr.swtraces[0].swid, hdr.swtraces[0].qdepth,
              hdr.swtraces[1].swid, hdr.swtraces[1].qdepth,
              hdr.swtraces[2].swid, hdr.swtraces[2].qdepth },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control MriDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_option);
        pkt.emit(hdr.mri);
        pkt.emit(hdr.swtraces);
    }
}

V1Switch(MriParser(), MriVerify(), MriIngress(), MriEgress(), MriCompute(),
         MriDeparser()) main;
