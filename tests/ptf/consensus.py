"""The consensus sequencer on p4src/inc.p4 (docs/protocol.md, "Consensus"): a client's
request gets the group's next sequence number and session and is multicast to every
replica; requests of unknown clients or jobs are dropped and take no number.

Job 2: client 0 on port 1, replicas on ports 2, 3, 4; port 5 is a host outside the job.
"""

from __future__ import annotations

from inc_ptf import IncTest, host
from ptf import testutils
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from controller.systems import consensus
from controller.systems.consensus import ConsensusRequest
from wire.header import SLOTS, Flag, Op
from wire.scapy_layers import INC

CLIENT, REPLICAS, OUTSIDER = 1, (2, 3, 4), 5
GROUP_MAC = "01:00:5e:64:00:02"  # 239.100.0.2, the job's group address


class SequencerTest(IncTest):
    def setUp(self) -> None:
        super().setUp()
        fields = self.hosts_for((CLIENT,), agg_port=REPLICAS[0])
        fields.pop("agg_ip"), fields.pop("agg_mac")
        hosts = [host(p) for p in REPLICAS]
        req = ConsensusRequest(kind="consensus", replica_ports=REPLICAS,
                               replica_ips=tuple(h.ip for h in hosts),
                               replica_macs=tuple(h.mac for h in hosts), **fields)  # fmt: skip
        self.job = self.admit(req, job_id=2, offset=3)
        entry = self.call(self.sw.read(consensus.group_key(2)))[0]
        self.session = int(entry.action.args["session_number"])

    def request(self, psn: int, src: int = CLIENT, **inc):
        fields = dict(op=Op.CONSENSUS, job_id=2, worker_id=0, psn=psn, values=[psn] * SLOTS)
        fields.update(inc)
        pkt = self.inc_packet(host(src), host(REPLICAS[0]), ident=psn, **fields)
        pkt[Ether].dst = GROUP_MAC
        pkt["IP"].dst = consensus.group_address(2)
        return Ether(bytes(pkt))

    def sequenced(self, pkt, seq: int):
        out = pkt.copy()
        out[INC].agg_idx = seq
        out[INC].epoch = self.session
        out[UDP].chksum = 0
        return Ether(bytes(out))


class RequestsAreNumberedAndMulticastToEveryReplica(SequencerTest):
    def runTest(self) -> None:
        for seq, psn in enumerate((10, 11, 10), start=1):  # a retransmission is numbered again
            pkt = self.request(psn)
            self.send(CLIENT, pkt)
            want = self.sequenced(pkt, seq)
            testutils.verify_each_packet_on_each_port(self, [want] * 3, list(REPLICAS))
        self.assertEqual(self.register(consensus.CONS_SEQ, 3), 3)
        self.assert_no_drops()


class ForeignRequestsAreDroppedAndTakeNoNumber(SequencerTest):
    """The client's id from another port, an unknown job, and a short packet are dropped;
    the next real request still gets number 1."""

    def runTest(self) -> None:
        self.send(OUTSIDER, self.request(1, src=OUTSIDER))
        self.send(CLIENT, self.request(2, job_id=9))
        self.send(CLIENT, bytes(self.request(3))[:-8])
        self.assert_drops(UNKNOWN_WORKER=1, UNKNOWN_JOB=1, BAD_SLOT_COUNT=1)
        pkt = self.request(4)
        self.send(CLIENT, pkt)
        testutils.verify_each_packet_on_each_port(
            self, [self.sequenced(pkt, 1)] * 3, list(REPLICAS)
        )


class RepliesAndHostSequencedTrafficAreForwarded(SequencerTest):
    """Replies (RESULT) and the host-only baseline's requests (FALLBACK) are not numbered."""

    def runTest(self) -> None:
        reply = self.inc_packet(host(REPLICAS[0]), host(CLIENT), op=Op.CONSENSUS,
                                flags=Flag.RESULT, job_id=2, values=[0] * SLOTS)  # fmt: skip
        self.send(REPLICAS[0], reply)
        testutils.verify_packet(self, self.routed(reply, CLIENT), CLIENT)
        fallback = self.inc_packet(host(CLIENT), host(REPLICAS[0]), op=Op.CONSENSUS,
                                   flags=Flag.FALLBACK, job_id=2, values=[0] * SLOTS)  # fmt: skip
        self.send(CLIENT, fallback)
        testutils.verify_packet(self, self.routed(fallback, REPLICAS[0]), REPLICAS[0])
        self.assertEqual(self.register(consensus.CONS_SEQ, 3), 0)
        self.assert_no_drops()
