// source_guard.p4: the switch is the trust anchor for IPv4 source addresses, as an access
// switch's "IP source guard" (BCP 38 at the edge): on a port that faces hosts, only the
// addresses of the hosts on that port may enter.
//
// Every IPv4 packet that arrives on a port in `source_ports` (a host-facing port the
// topology bound) passes only when `source_addrs` holds (that port, a prefix of its source
// address); otherwise it is dropped and counted, DROP_SPOOFED_SOURCE, before anything else
// reads it. So a host on another port that copies a member's IP (and UDP port) exactly
// reaches nobody, on any path: INC, and the plain UDP the switch does not parse (the PS and
// ring baselines, the host-only key-value path, the agents' control ports).
//
// A port with no `source_ports` entry is not checked: the ports between switches (a leaf's
// trunk carries every host of its rack and the sums the leaf made), and every port of a
// topology that binds none (the tutorials' runtime files, tests that program ports by
// hand). Packets the switch makes itself (multicast copies, clones, answers it turns around)
// leave by egress and enter the next switch on a trunk, so they are never checked here.
// Frames that are not IPv4 (ARP) are not checked: this program forwards them only by exact
// destination MAC (forwarder.p4, l2_exact), and routes IPv4 by destination address, so no
// ARP answer moves another host's traffic (docs/protocol.md, "What spoofing can and cannot
// do").
// Filled from the topology (each host's port and address): topologies/experiment.py via
// controller/systems/source_guard.py, installed by the controller with the forwarding.
#ifndef _SOURCE_GUARD_P4_
#define _SOURCE_GUARD_P4_

control SourceGuard(inout headers_t hdr,
                    inout inc_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    Refuse() refuse;

    action host_port() {}    // the port faces hosts: its sources are checked
    action host_source() {}  // a source the port's hosts may use

    table source_ports {
        key = { standard_metadata.ingress_port: exact; }
        actions = { host_port; @defaultonly NoAction; }
        default_action = NoAction();
        size = SOURCE_TABLE_SIZE;
    }

    table source_addrs {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ipv4.srcAddr: lpm;
        }
        actions = { host_source; @defaultonly NoAction; }
        default_action = NoAction();
        size = SOURCE_TABLE_SIZE;
    }

    apply {
        // an unbound port costs one lookup; a bound one two
        if (hdr.ipv4.isValid()) {
            if (source_ports.apply().hit) {
                if (source_addrs.apply().miss) {
                    refuse.apply(meta, DROP_SPOOFED_SOURCE);
                }
            }
        }
    }
}

#endif  // _SOURCE_GUARD_P4_
