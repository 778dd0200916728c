"""NetReduce on p4src/inc.p4: admission, aggregation, result delivery, forwarding.

One test per behaviour of docs/protocol.md ("Job state in the switch", "Aggregator state
machine"), black-box: packets in on PTF ports, packets out, the ``inc_drops`` counter read
over P4Runtime. Job 1 has workers on ports 1, 2, 3 and sends to the host on port 4 (its
aggregation address); port 5 is a host outside the job. Region: aggregators 8..11
(window 4), so psn p uses aggregator 8 + p % 4, copy (p / 4) % 2.

Run: ``ptf --test-dir tests/ptf -i 1@IF1 ... -i 5@IF5 --test-params "..." netreduce``
(docs/ptf.md); ``make test`` runs it through tests/test_ptf.py.
"""

from __future__ import annotations

from inc_ptf import IncTest, host, int32_sum, values_of
from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from controller.systems.netreduce import NetReduceRequest
from wire.header import AGG_POOL_SIZE, SLOTS, DropReason, Flag, Op

WORKER_PORTS = (1, 2, 3)
OUTSIDER_PORT = 5
OFFSET, SIZE = 8, 4
A, B, C = values_of([1, -2, 3], [10, 20, -30, 40], [2**31 - 1, -5, 100])


class NetReduceTest(IncTest):
    """Job 1 admitted; ``contribute`` sends worker packets from their own ports."""

    def setUp(self) -> None:
        super().setUp()
        self.job1 = self.netreduce(1, WORKER_PORTS, agg_port=4, offset=OFFSET)

    def netreduce(self, job_id: int, ports: tuple[int, ...], agg_port: int, offset: int):
        request = NetReduceRequest(window=SIZE, **self.hosts_for(ports, agg_port))
        return self.admit(request, job_id, offset)

    def contribute(self, worker_id: int, psn: int, values: list[int], /, **fields):
        pkt = self.contribution(self.job1, worker_id, psn, values, **fields)
        self.send(self.job1.worker(worker_id).port, pkt)
        return pkt

    def complete(self, psn: int, rows: list[list[int]]) -> None:
        """All three workers contribute ``psn``; the result reaches all of them."""
        self.contribute(0, psn, rows[0])
        self.contribute(1, psn, rows[1])
        self.assert_nothing_out(1, 2)
        last = self.contribute(2, psn, rows[2])
        self.verify_results(self.job1, last, int32_sum(*rows), bitmap=0b111)


# -- admission -------------------------------------------------------------------------------


class UnknownJobIsDroppedAndCounted(NetReduceTest):
    """A job id the switch does not know is dropped as UNKNOWN_JOB."""

    def runTest(self) -> None:
        self.contribute(0, 0, A, job_id=2)
        self.contribute(1, 0, A, job_id=0)
        self.assert_drops(UNKNOWN_JOB=2)
        self.assert_nothing_out(1, 2)


class UnknownWorkerIsDroppedAndCounted(NetReduceTest):
    """A worker id outside the job is dropped as UNKNOWN_WORKER."""

    def runTest(self) -> None:
        self.contribute(0, 0, A, worker_id=3)
        self.contribute(0, 0, A, worker_id=255)
        self.assert_drops(UNKNOWN_WORKER=2)
        self.assert_nothing_out(1)


class WorkerOnWrongPortIsDroppedAndCounted(NetReduceTest):
    """(job, worker, ingress port) must match: worker 0's id from worker 1's port or from a
    host outside the job is dropped, and does not count towards worker 0's contribution."""

    def runTest(self) -> None:
        forged = self.contribution(self.job1, 0, 0, A)
        self.send(2, forged)
        self.send(OUTSIDER_PORT, forged)
        self.assert_drops(UNKNOWN_WORKER=2)
        self.assert_nothing_out(2, OUTSIDER_PORT)
        self.complete(0, [B, B, C])  # worker 0's real B, not the forged A, is in the sum
        self.assert_drops(UNKNOWN_WORKER=2)


class IndexOutsideTheRegionIsDroppedAndCounted(NetReduceTest):
    """agg_idx below, at the end of, or beyond the job's region, or beyond the pool, is
    dropped as OUT_OF_REGION; the neighbouring job's aggregator it aimed at is untouched."""

    def runTest(self) -> None:
        neighbour = self.netreduce(2, (4, 5), agg_port=1, offset=OFFSET + SIZE)
        for idx in (OFFSET - 1, OFFSET + SIZE, AGG_POOL_SIZE, 2**32 - 1):
            self.contribute(0, 0, A, agg_idx=idx)
        self.assert_drops(OUT_OF_REGION=4)
        self.assert_nothing_out(1)
        # Job 2's first aggregator (index OFFSET + SIZE, copy 0) sums only job 2's values.
        first = self.contribution(neighbour, 0, 0, B)
        self.send(4, first)
        self.assert_nothing_out(4)
        last = self.contribution(neighbour, 1, 0, C)
        self.send(5, last)
        self.verify_results(neighbour, last, int32_sum(B, C), bitmap=0b11)


class WrongSlotCountIsDroppedAndCounted(NetReduceTest):
    """Only packets with exactly K slots are aggregated; other counts, and a K-slot header
    on a truncated payload, are dropped as BAD_SLOT_COUNT."""

    def runTest(self) -> None:
        self.contribute(0, 0, A[: SLOTS - 1])
        self.contribute(0, 0, A + [7])
        self.contribute(0, 0, [])
        truncated = bytes(self.contribution(self.job1, 0, 0, A))[: -4 * (SLOTS // 2)]
        self.send(1, truncated)
        self.assert_drops(BAD_SLOT_COUNT=4)
        self.assert_nothing_out(1)


# -- aggregation and results -------------------------------------------------------------------


class AggregationCompletesAndResultIsMulticastToEveryWorker(NetReduceTest):
    """Contributions are absorbed until the last worker's arrives; then every worker gets
    the int32 sums (with wrap-around), addressed to its own MAC, IP and worker id, from the
    aggregation address, with RESULT set and the contributor bitmap."""

    def runTest(self) -> None:
        self.complete(0, [A, B, C])
        self.complete(1, [C, A, B])  # the next aggregator of the region, independent
        self.assert_no_drops()


class LostResultIsServedAgainByUnicast(NetReduceTest):
    """A worker that lost the result sends its packet again (RETX): the switch answers it
    alone, by unicast, with the stored sums; nothing is added twice."""

    def runTest(self) -> None:
        self.complete(0, [A, B, C])
        again = self.contribute(1, 0, B, flags=Flag.RETX)
        testutils.verify_packet(self, self.result_of(again, int32_sum(A, B, C), 0b111), 2)
        testutils.verify_no_other_packets(self)
        self.assert_no_drops()


class LostResultIsServedAgainFromShadowCopy(NetReduceTest):
    """psn p and p + S share an aggregator in its two copies: after p + S completed, a
    late request for p is still answered from the other copy (switch memory = 2 x window)."""

    def runTest(self) -> None:
        self.complete(0, [A, B, C])
        self.complete(SIZE, [C, C, C])  # same aggregator, copy 1
        late = self.contribute(2, 0, C, flags=Flag.RETX)
        testutils.verify_packet(self, self.result_of(late, int32_sum(A, B, C), 0b111), 3)
        newer = self.contribute(0, SIZE, C, flags=Flag.RETX)
        testutils.verify_packet(self, self.result_of(newer, int32_sum(C, C, C), 0b111), 1)
        testutils.verify_no_other_packets(self)
        self.assert_no_drops()


class DuplicateContributionIsDroppedAndCounted(NetReduceTest):
    """A contribution repeated while the aggregation is in progress is dropped as DUPLICATE
    and added once."""

    def runTest(self) -> None:
        self.contribute(0, 0, A)
        self.contribute(0, 0, A, flags=Flag.RETX)
        self.assert_drops(DUPLICATE=1)
        self.contribute(1, 0, B)
        self.assert_nothing_out(1, 2)
        last = self.contribute(2, 0, C)
        self.verify_results(self.job1, last, int32_sum(A, B, C), bitmap=0b111)
        self.assert_drops(DUPLICATE=1)


class StalePacketIsDroppedAndCounted(NetReduceTest):
    """Once a copy holds psn p + 2S, a delayed packet of p is STALE: dropped, no answer."""

    def runTest(self) -> None:
        self.complete(0, [A, B, C])
        self.complete(SIZE, [A, A, A])
        self.complete(2 * SIZE, [B, B, B])  # copy 0 of the aggregator again
        self.contribute(1, 0, B, flags=Flag.RETX)
        self.assert_drops(STALE=1)
        self.assert_nothing_out(2)


# -- everything else is forwarded ----------------------------------------------------------------


class NonIncTrafficIsForwarded(NetReduceTest):
    """Plain IPv4 is routed by ipv4_lpm (MAC rewrite, TTL - 1), other frames are switched
    at L2 unchanged, frames for unknown MACs are dropped; inc_drops counts none of it."""

    def runTest(self) -> None:
        h1, h5 = host(1), host(5)
        udp = (
            Ether(src=h1.mac, dst=host(4).mac)
            / IP(src=h1.ip, dst=h5.ip, ttl=9)
            / UDP(sport=1234, dport=5678)
        )
        self.send(1, udp)
        testutils.verify_packet(self, self.routed(udp, 5), 5)
        arp = Ether(src=h1.mac, dst=host(3).mac) / ARP(
            op=2, hwsrc=h1.mac, psrc=h1.ip, pdst=host(3).ip
        )
        self.send(1, arp)
        testutils.verify_packet(self, arp, 3)
        unknown = Ether(src=h1.mac, dst="02:00:00:00:00:99") / ARP(
            op=1, hwsrc=h1.mac, psrc=h1.ip, pdst="10.0.0.99"
        )
        self.send(1, unknown)
        self.assert_nothing_out(1)
        self.assert_no_drops()


# Ops with a path of their own in inc.p4 (their jobs' admission drops them for a NetReduce job).
OWN_PATH = (Op.AGG_SYNC, Op.AGG_KV, Op.KV_READ, Op.KV_WRITE, Op.CONSENSUS)


class ReservedOpsAreForwardedFlaggedPacketsWithoutABindingDropped(NetReduceTest):
    """INC packets of an op reserved for other systems go to their IPv4 destination; a
    FALLBACK of job 1, or a RESULT or ACK of a job this switch does not serve, has no
    binding that allows it (docs/protocol.md, "Isolation"): dropped as FORGED_RESULT. None
    touches the aggregator it names."""

    def runTest(self) -> None:
        passing = [self.contribution(self.job1, 0, 0, A, op=op) for op in Op if op not in OWN_PATH]
        for pkt in passing:
            self.send(1, pkt)
            testutils.verify_packet(self, self.routed(pkt, 4), 4)
        self.send(
            1,
            self.contribution(self.job1, 0, 0, A, flags=Flag.FALLBACK),
            self.contribution(self.job1, 0, 0, A, job_id=9, flags=Flag.RESULT),
            self.contribution(self.job1, 0, 0, A, job_id=9, flags=Flag.ACK),
        )
        testutils.verify_no_other_packets(self)
        self.assert_drops(FORGED_RESULT=3)
        # Had any of them been added, this aggregation would not complete with these sums.
        self.complete(0, [B, B, C])
        self.assert_drops(FORGED_RESULT=3)


class ResultOrAckOfTheJobEnteringItsSwitchIsForged(NetReduceTest):
    """The switch makes job 1's results itself: a RESULT or ACK naming job 1 that enters it,
    from a worker's port or an outsider's, is dropped (FORGED_RESULT) and reaches nobody."""

    def runTest(self) -> None:
        for port in (1, OUTSIDER_PORT):
            for flags in (Flag.RESULT, Flag.ACK, Flag.RESULT | Flag.RETX):
                self.send(port, self.contribution(self.job1, 0, 0, A, flags=flags))
        self.assert_nothing_out(1, OUTSIDER_PORT)
        self.assert_drops(FORGED_RESULT=6)
        self.complete(0, [A, B, C])


class PacketsBeyondTheJobsMeterAreDroppedAndCounted(NetReduceTest):
    """Job 2 (one worker, on the outsider's port), metered at 1 packet/s with a burst of 2:
    its first two packets complete their aggregations (the result comes back); of the next
    four, sent at once, at least three find no token: dropped as METERED, no result. Job 1,
    not metered, still aggregates."""

    def runTest(self) -> None:
        request = NetReduceRequest(window=SIZE, meter_pps=1, meter_burst=2,
                                   **self.hosts_for((OUTSIDER_PORT,), 4))  # fmt: skip
        job2 = self.admit(request, 2, 40)
        for psn in range(2):
            pkt = self.contribution(job2, 0, psn, A)
            self.send(OUTSIDER_PORT, pkt)
            self.verify_results(job2, pkt, A, bitmap=0b1)
        for psn in range(2, 6):
            self.send(OUTSIDER_PORT, self.contribution(job2, 0, psn, A))
        metered = DropReason.METERED
        self.wait_for("METERED >= 3", lambda: self.drops_since_start().get(metered, 0) >= 3)
        self.assertEqual(set(self.drops_since_start()), {metered})
        self.complete(0, [A, B, C])
