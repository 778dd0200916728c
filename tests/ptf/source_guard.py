"""The source guard of p4src/inc.p4 (p4src/source_guard.p4): a host port lets in only its
host's IPv4 source; a port with no binding is not checked.

Ports 1..4 are bound to their hosts (``h{p}``, 10.0.0.p) by the controller's own entries
(``controller/systems/source_guard.py``, over P4Runtime); port 5 is left unbound, as a
trunk to another switch is. NetReduce job 1 has workers on ports 1 and 2, aggregation
address on port 3.

Run: ``ptf --test-dir tests/ptf -i 1@IF1 ... -i 5@IF5 --test-params "..." source_guard``
(docs/ptf.md); ``make test`` runs it through tests/test_ptf.py.
"""

from __future__ import annotations

from inc_ptf import IncTest, host, int32_sum, values_of
from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.systems.netreduce import NetReduceRequest
from controller.systems.source_guard import SourceBinding, table_entries
from wire.header import INC_UDP_PORT

BOUND_PORTS = (1, 2, 3, 4)
TRUNK = 5
PS_PORT = INC_UDP_PORT + 1  # the PS baseline's: plain UDP the switch does not parse


class SourceGuardTest(IncTest):
    def setUp(self) -> None:
        super().setUp()
        self.insert(table_entries(SourceBinding(p, host(p).ip) for p in BOUND_PORTS))

    def udp(self, port: int, src_ip: str, to: int) -> Ether:
        return (
            Ether(src=host(port).mac, dst=host(to).mac)
            / IP(src=src_ip, dst=host(to).ip)
            / UDP(sport=PS_PORT, dport=PS_PORT)
            / ("x" * 32)
        )


class HostPortsLetInOnlyTheirHostsAddresses(SourceGuardTest):
    """One class, so one pipeline push (every PTF module runs on one BMv2, whose resident
    memory reached 10-14 GB in these runs; with four classes the OOM killer stopped it on a
    shared machine), four rules in turn:

    - the host on port 4 copies host 1's address and UDP port to host 3 (the PS baseline):
      nothing comes out, SPOOFED_SOURCE counts it (the probe, not IPv4, still passes);
    - its own address is routed;
    - a trunk (port 5, unbound) carries other switches' hosts: any source passes;
    - a sum the switch completes goes out in the aggregation address's name to both
      workers' bound ports; a contribution in worker 0's name from port 4 adds nothing."""

    def runTest(self) -> None:
        self.send(4, self.udp(4, host(1).ip, to=3))
        self.assert_nothing_out(4)
        self.assert_drops(SPOOFED_SOURCE=1)

        own = self.udp(4, host(4).ip, to=3)
        self.send(4, own)
        testutils.verify_packet(self, self.routed(own, 3), 3)
        trunk = self.udp(TRUNK, host(1).ip, to=3)
        self.send(TRUNK, trunk)
        testutils.verify_packet(self, self.routed(trunk, 3), 3)
        self.assert_drops(SPOOFED_SOURCE=1)

        req = NetReduceRequest(window=4, **self.hosts_for((1, 2), agg_port=3))
        job = self.admit(req, job_id=1, offset=0)
        a, b = values_of([1, 2], [30, -4])
        forged = self.contribution(job, 0, 0, values_of([1000])[0])
        self.send(4, forged)
        self.assert_nothing_out(4)
        self.send(1, self.contribution(job, 0, 0, a))
        self.assert_nothing_out(1)
        last = self.contribution(job, 1, 0, b)
        self.send(2, last)
        self.verify_results(job, last, int32_sum(a, b), bitmap=0b11)
        self.assert_drops(SPOOFED_SOURCE=2)
