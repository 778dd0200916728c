"""ATP on p4src/inc.p4: the shared pool, results multicast by the switch, fallback to the PS.

Black-box, one test per behaviour of docs/protocol.md ("ATP"): packets in on PTF ports,
packets out, ``inc_drops`` read over P4Runtime. ATP job 1 has workers on ports 1, 2, 3 and
job 2 on port 5; both address the ATP pool range [0, 2) and have their PS on port 4.

Run: ``ptf --test-dir tests/ptf -i 1@IF1 ... -i 5@IF5 --test-params "..." atp`` (docs/ptf.md);
``make test`` runs it through tests/test_ptf.py.
"""

from __future__ import annotations

from inc_ptf import IncTest, host, int32_sum, values_of
from ptf import testutils
from scapy.layers.l2 import Ether

from controller.systems.atp import AtpRequest
from wire.header import DropReason, Flag, atp_index
from wire.scapy_layers import INC

PS_PORT = 4
POOL = 2
A, B, C = values_of([1, -2, 3], [10, 20, -30, 40], [7, 8, 9])


class AtpTest(IncTest):
    """ATP jobs 1 (ports 1..3) and 2 (port 5) in pool range [0, 2), PS on port 4."""

    def setUp(self) -> None:
        super().setUp()
        self.job1 = self.atp(1, (1, 2, 3))
        self.job2 = self.atp(2, (5,))

    def atp(self, job_id: int, ports: tuple[int, ...]):
        request = AtpRequest(
            window=8, pool_size=POOL, ps_port=PS_PORT, **self.hosts_for(ports, PS_PORT)
        )
        return self.admit(request, job_id, 0)

    def packet(self, job, worker_id: int, psn: int, values: list[int], **fields):
        idx = atp_index(job.job_id, psn, job.region.offset, job.region.size)
        fields = {"agg_idx": idx, "ver": 0} | fields
        return self.contribution(job, worker_id, psn, values, **fields)

    def to_ps(self, pkt, values: list[int], bitmap: int, flags: int = 0):
        """``pkt`` as the switch sends it to the PS: values, bitmap and flags set."""
        out = pkt.copy()
        out[INC].values, out[INC].bitmap = list(values), bitmap
        out[INC].flags = int(pkt[INC].flags) | flags
        return Ether(bytes(out))

    def ps_result(self, job, psn: int, values: list[int], **fields):
        idx = atp_index(job.job_id, psn, job.region.offset, job.region.size)
        inc = dict(job_id=job.job_id, psn=psn, agg_idx=idx, flags=Flag.RESULT,
                   bitmap=(1 << job.n_workers) - 1, values=list(values)) | fields  # fmt: skip
        return self.inc_packet(host(PS_PORT), host(job.workers[0].port), **inc)

    def direct(self, job, last, values: list[int]):
        """What the switch sends when ``last`` completes a sum: the result to every worker
        from the PS's address, and to the PS as it came; (packets, ports)."""
        out = []
        for w in job.workers:
            c = last.copy()
            c[Ether].dst, c["IP"].src, c["IP"].dst = w.mac, host(PS_PORT).ip, w.ip
            c[INC].worker_id = w.worker_id
            out.append(c)
        out.append(last.copy())
        for c in out:
            c[INC].values, c[INC].bitmap = list(values), (1 << job.n_workers) - 1
            c[INC].flags = Flag.RESULT
            del c["IP"].chksum
        return [Ether(bytes(c)) for c in out], [*(w.port for w in job.workers), PS_PORT]

    def copies(self, job, result):
        """The multicast copies of ``result``, one per worker, addressed by egress."""
        out = []
        for w in job.workers:
            c = result.copy()
            c[Ether].dst, c["IP"].dst, c[INC].worker_id = w.mac, w.ip, w.worker_id
            del c["IP"].chksum
            out.append(Ether(bytes(c)))
        return out


class CompletedAggregateGoesToEveryWorkerAndThePs(AtpTest):
    """The last contribution makes the sum the result: multicast to the job's workers from
    the PS's address, and to the PS, with every worker's bit; the PS's ACK ends at the
    switch. A result the PS sends (a psn it summed) reaches the workers, not the PS."""

    def runTest(self) -> None:
        self.send(1, self.packet(self.job1, 0, 0, A))
        self.send(2, self.packet(self.job1, 1, 0, B))
        self.assert_nothing_out(1, 2)
        last = self.packet(self.job1, 2, 0, C)
        self.send(3, last)
        total = int32_sum(A, B, C)
        testutils.verify_each_packet_on_each_port(self, *self.direct(self.job1, last, total))
        self.send(PS_PORT, self.ps_result(self.job1, 0, [], flags=Flag.ACK))
        self.assert_nothing_out(1, 2, 3, PS_PORT)
        result = self.ps_result(self.job1, 1, total)
        self.send(PS_PORT, result)
        testutils.verify_each_packet_on_each_port(self, self.copies(self.job1, result), [1, 2, 3])
        self.assert_nothing_out(PS_PORT)
        self.assert_no_drops()


class CollidingPacketFallsBackToThePsUnaggregated(AtpTest):
    """A packet whose aggregator holds another job's use goes to the PS with
    COLLISION|FALLBACK and its own values; the holder is not disturbed."""

    def runTest(self) -> None:
        j2_psn = next(q for q in range(64) if atp_index(2, q, 0, POOL) == atp_index(1, 0, 0, POOL))
        self.send(1, self.packet(self.job1, 0, 0, A))
        mine = self.packet(self.job2, 0, j2_psn, B)
        self.send(5, mine)
        want = self.to_ps(mine, B, 0b1, Flag.COLLISION | Flag.FALLBACK)
        testutils.verify_packet(self, want, PS_PORT)
        self.send(2, self.packet(self.job1, 1, 0, B))
        last = self.packet(self.job1, 2, 0, C)
        self.send(3, last)
        total = int32_sum(A, B, C)
        testutils.verify_each_packet_on_each_port(self, *self.direct(self.job1, last, total))


class ResultFromAPortNotTowardsThePsIsDropped(AtpTest):
    """A worker (or any host) cannot inject a result of an ATP job: FORGED_RESULT."""

    def runTest(self) -> None:
        forged = self.ps_result(self.job1, 0, A)
        self.send(5, forged)
        self.send(1, forged)
        self.assert_drops(FORGED_RESULT=2)
        self.assert_nothing_out(1, 5)


class IndexThatIsNotTheJobsHashIsDropped(AtpTest):
    """The switch recomputes Hash(job, psn) % size + offset: another index is OUT_OF_REGION."""

    def runTest(self) -> None:
        right = atp_index(1, 3, 0, POOL)
        self.send(1, self.packet(self.job1, 0, 3, A, agg_idx=(right + 1) % POOL))
        self.assert_drops(OUT_OF_REGION=1)
        self.assert_nothing_out(1)


class PacketsBeyondTheJobsMeterAreDroppedAndCounted(AtpTest):
    """Job 3 (its one worker on port 5, like job 2's; pool range [100, 164) of its own),
    metered at 1 packet/s with a burst of 2: the first two packets go on (each completes
    an aggregation of the one-worker job); of the next four, sent at once, at least three
    find no token: dropped as METERED. Job 1, not metered, still aggregates."""

    def runTest(self) -> None:
        request = AtpRequest(window=8, pool_offset=100, pool_size=64, ps_port=PS_PORT,
                             meter_pps=1, meter_burst=2,
                             **self.hosts_for((5,), PS_PORT))  # fmt: skip
        job3 = self.admit(request, 3, 0)
        sent = [self.packet(job3, 0, psn, A) for psn in range(6)]
        for pkt in sent[:2]:
            self.send(5, pkt)
            testutils.verify_each_packet_on_each_port(self, *self.direct(job3, pkt, A))
        for pkt in sent[2:]:
            self.send(5, pkt)
        metered = DropReason.METERED
        self.wait_for("METERED >= 3", lambda: self.drops_since_start().get(metered, 0) >= 3)
        self.assertEqual(set(self.drops_since_start()), {metered})
        self.send(1, self.packet(self.job1, 0, 9, A))
        self.send(2, self.packet(self.job1, 1, 9, B))
        last = self.packet(self.job1, 2, 9, C)
        self.send(3, last)
        total = int32_sum(A, B, C)
        testutils.verify_each_packet_on_each_port(self, *self.direct(self.job1, last, total))
