"""ASK on p4src/inc.p4: key-value tuples absorbed, passed on, seen bits, drains, admission.

One test per rule of docs/protocol.md ("Key-value aggregation (ASK)"), black-box: packets
in on PTF ports, packets out, the ``inc_drops`` counter. Job 1 (kind ``ask``): mappers on
ports 1 and 2, the reducer (flow 2) on port 4, rows 0..7 of the ASK pool, one partition,
window 4. Epoch 1 throughout (copy 1).
"""

from __future__ import annotations

from inc_ptf import IncTest, host
from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.systems.ask import AskRequest
from wire.header import ASK_TUPLES, Flag, Op
from wire.scapy_layers import INC

ROWS, ROW = 8, 3
REDUCER_PORT = 4
KEY_A, KEY_B = 0x1111_0005, 0x2222_0005  # both in column 5
COL = KEY_A % ASK_TUPLES


def slots(tuples: dict[int, tuple[int, int]]) -> list[int]:
    """32 slot values: column j -> (key, value)."""
    out = [0] * (2 * ASK_TUPLES)
    for j, (k, v) in tuples.items():
        out[2 * j], out[2 * j + 1] = k, v
    return out


def signed(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


class AskTest(IncTest):
    def setUp(self) -> None:
        super().setUp()
        req = AskRequest(
            rows=ROWS, window=4, partitions=1, reducer_port=REDUCER_PORT,
            **self.hosts_for((1, 2), agg_port=REDUCER_PORT),
        )  # fmt: skip
        self.job = self.admit(req, job_id=1, offset=0)

    def tuples(self, worker: int, psn: int, tuples: dict[int, tuple[int, int]], **f: int):
        w = self.job.worker(worker)
        inc = dict(op=Op.AGG_KV, job_id=1, worker_id=worker, psn=psn, agg_idx=ROW, epoch=1,
                   values=[signed(v) for v in slots(tuples)])  # fmt: skip
        inc.update(f)
        return self.inc_packet(host(w.port), host(REDUCER_PORT), ident=psn, **inc)

    def ack_of(self, pkt):
        """The switch's ACK: addresses and ports swapped, ACK set, no slots."""
        res = (
            Ether(src=pkt[Ether].dst, dst=pkt[Ether].src)
            / IP(src=pkt[IP].dst, dst=pkt[IP].src, id=pkt[IP].id, flags="DF", ttl=64)
            / UDP(sport=pkt[UDP].dport, dport=pkt[UDP].sport, chksum=0)
            / INC(
                op=Op.AGG_KV,
                flags=Flag.ACK,
                job_id=1,
                worker_id=pkt[INC].worker_id,
                psn=pkt[INC].psn,
                agg_idx=ROW,
                epoch=1,
                ver=0,
                values=[],
            )  # fmt: skip
        )
        return Ether(bytes(res))

    def drain(self, row: int = ROW, worker: int = 2, port: int = REDUCER_PORT):
        inc = dict(op=Op.AGG_KV, flags=Flag.DRAIN, job_id=1, worker_id=worker, agg_idx=row,
                   epoch=1, values=[0] * (2 * ASK_TUPLES))  # fmt: skip
        return self.inc_packet(host(port), host(1), **inc)

    def drained(self, req, tuples: dict[int, tuple[int, int]]):
        res = req.copy()
        res[Ether].src, res[Ether].dst = req[Ether].dst, req[Ether].src
        res[IP].src, res[IP].dst = req[IP].dst, req[IP].src
        res[IP].ttl = 64
        del res[IP].chksum
        res[INC].flags = Flag.DRAIN | Flag.RESULT
        res[INC].values = [signed(v) for v in slots(tuples)]
        return Ether(bytes(res))


class AbsorbedTuplesAreAcknowledgedByTheSwitch(AskTest):
    """Tuples that all find their cell (empty or same key) never reach the reducer: the
    mapper gets an ACK without slots; a drain returns the sums."""

    def runTest(self) -> None:
        first = self.tuples(0, 0, {COL: (KEY_A, 5), 7: (0x77, -2)})
        self.send(1, first)
        testutils.verify_packet(self, self.ack_of(first), 1)
        second = self.tuples(1, 0, {COL: (KEY_A, 10)})
        self.send(2, second)
        testutils.verify_packet(self, self.ack_of(second), 2)
        self.assert_nothing_out(REDUCER_PORT)
        req = self.drain()
        self.send(REDUCER_PORT, req)
        testutils.verify_packet(self, self.drained(req, {COL: (KEY_A, 15), 7: (0x77, -2)}), 4)
        self.assert_no_drops()


class ADuplicateAbsorbsNothing(AskTest):
    """A repeated psn (retransmission, duplicate) is answered as the original, not added."""

    def runTest(self) -> None:
        pkt = self.tuples(0, 0, {COL: (KEY_A, 5)})
        self.send(1, pkt, pkt)
        testutils.verify_packet(self, self.ack_of(pkt), 1)
        testutils.verify_packet(self, self.ack_of(pkt), 1)
        req = self.drain()
        self.send(REDUCER_PORT, req)
        testutils.verify_packet(self, self.drained(req, {COL: (KEY_A, 5)}), REDUCER_PORT)


class AnotherKeysTuplePassesToTheReducer(AskTest):
    """A cell held by another key is never merged: that tuple travels on to the reducer,
    the absorbed ones are zeroed in the packet."""

    def runTest(self) -> None:
        self.send(1, self.tuples(0, 0, {COL: (KEY_A, 5)}))
        testutils.verify_packet(self, self.ack_of(self.tuples(0, 0, {COL: (KEY_A, 5)})), 1)
        pkt = self.tuples(0, 1, {COL: (KEY_B, 7), 2: (0x42, 1)})
        self.send(1, pkt)
        out = self.tuples(0, 1, {COL: (KEY_B, 7)})
        out = self.routed(out, REDUCER_PORT)
        testutils.verify_packet(self, out, REDUCER_PORT)
        self.assert_nothing_out(1)


class ForgedFlowsAreDroppedAndCounted(AskTest):
    """A mapper's flow from another port, a mapper's drain, and a row outside the job are
    dropped (UNKNOWN_WORKER twice, OUT_OF_REGION) and write nothing."""

    def runTest(self) -> None:
        self.send(3, self.tuples(0, 0, {COL: (KEY_A, 5)}))
        self.send(1, self.drain(worker=0, port=1))
        self.send(1, self.tuples(0, 1, {COL: (KEY_A, 5)}, agg_idx=ROWS))
        self.assert_nothing_out(1, 2, 3, REDUCER_PORT)
        self.assert_drops(UNKNOWN_WORKER=2, OUT_OF_REGION=1)
        req = self.drain()
        self.send(REDUCER_PORT, req)
        testutils.verify_packet(self, self.drained(req, {}), REDUCER_PORT)
