"""Serene's synchronisation modes on p4src/inc.p4 (p4src/sync_modes.p4), one test per mode
and per rule of docs/protocol.md ("Synchronisation modes"), black-box: packets in and out,
the ``sync_waits``/``sync_late`` counters and the clock registers read over P4Runtime.

Job 1 (kind ``serene``) has workers on ports 1, 2, 3 and sends to the host on port 4;
region: aggregators 8..11 (window 4). Every packet carries its epoch (training iteration).
Mode changes go through the controller's own ``controller.systems.sync_modes.swap``.
"""

from __future__ import annotations

import time

from inc_ptf import IncTest, int32_sum, values_of
from ptf import testutils

from controller.systems import sync_modes
from controller.systems.serene import SereneRequest
from controller.systems.sync_modes import Mode
from wire.header import Flag

WORKER_PORTS = (1, 2, 3)
OFFSET, SIZE = 8, 4
A, B, C = values_of([1, -2, 3], [10, 20, -30, 40], [2**31 - 1, -5, 100])


class SyncModeTest(IncTest):
    mode = "sync"

    def setUp(self) -> None:
        super().setUp()
        req = SereneRequest(window=SIZE, mode=self.mode, **self.hosts_for(WORKER_PORTS, 4))
        self.job1 = self.admit(req, 1, OFFSET)

    def contribute(self, worker_id: int, psn: int, values: list[int], epoch: int, **fields):
        pkt = self.contribution(self.job1, worker_id, psn, values, epoch=epoch, **fields)
        self.send(self.job1.worker(worker_id).port, pkt)
        return pkt

    def waits(self) -> int:
        return self.counter(sync_modes.WAITS, sync_modes.sync_slot(1))

    def late(self) -> int:
        return self.counter(sync_modes.LATE, sync_modes.sync_slot(1))

    def clocks(self) -> tuple[int, ...]:
        return self.call(sync_modes.read_clocks(self.sw, self.job1)).workers

    def admitted(self, worker_id: int, epoch: int) -> None:
        """Wait until the switch has taken a contribution that produces no packet (a switch
        that queues its ports, like p4sim, may not have when ``send`` returns)."""
        deadline = time.monotonic() + 10
        while self.clocks()[worker_id] != epoch:
            self.assertLess(time.monotonic(), deadline, f"worker {worker_id}: no epoch {epoch}")
            time.sleep(0.02)

    def _waited(self, request):
        res = self.result_of(request, list(request["INC"].values), int(request["INC"].bitmap))
        res["INC"].flags = int(request["INC"].flags) | Flag.WAIT
        return res

    def expect_wait(self, request, port: int) -> None:
        testutils.verify_packet(self, self._waited(request), port)

    def round(self, psn: int, epoch: int, rows: list[list[int]], workers=(0, 1, 2)) -> None:
        """``workers`` contribute ``psn`` of ``epoch``; the last one completes it."""
        for w in workers[:-1]:
            self.contribute(w, psn, rows[w], epoch)
        self.assert_nothing_out(*(WORKER_PORTS[w] for w in workers[:-1]))
        last = self.contribute(workers[-1], psn, rows[workers[-1]], epoch)
        bitmap = sum(1 << w for w in workers)
        self.verify_results(self.job1, last, int32_sum(*(rows[w] for w in workers)), bitmap)


class SyncRoundNeedsEveryWorker(SyncModeTest):
    """sync: two of three contributions are absorbed; the third completes the round, and
    each worker's clock is its epoch."""

    def runTest(self) -> None:
        self.round(0, 0, [A, B, C])
        self.round(1, 1, [B, C, A])
        self.assertEqual(self.clocks(), (1, 1, 1))
        self.assert_no_drops()


class PartialRoundCompletesAtQuorumAndNamesItsContributors(SyncModeTest):
    """partial 2 of 3: the round completes at the second contribution; every worker gets
    exactly the two contributors' sum, and the bitmap names them. The straggler's late
    contribution is not added: it gets the same result back by unicast, and is counted."""

    mode = "partial 2"

    def runTest(self) -> None:
        self.round(0, 0, [A, B, C], workers=(0, 2))
        late = self.contribute(1, 0, B, epoch=0)
        testutils.verify_packet(self, self.result_of(late, int32_sum(A, C), 0b101), 2)
        testutils.verify_no_other_packets(self)
        self.wait_for("sync_late 1", lambda: self.late() == 1)
        self.round(1, 1, [A, B, C], workers=(1, 0))  # any two
        self.assert_no_drops()


class BoundedStalenessTellsTheFastWorkerToWait(SyncModeTest):
    """bounded 1: a worker may start epoch e while the slowest has started e - 2. Worker 0
    runs epochs 0 and 1 alone; its epoch 2 comes back with FLAG_WAIT (not aggregated,
    counted); once the others have started epoch 1, its resent epoch 2 is admitted."""

    mode = "bounded 1"

    def runTest(self) -> None:
        self.contribute(0, 0, A, epoch=0)
        self.contribute(0, 1, A, epoch=1)
        self.assert_nothing_out(1)
        ahead = self.contribute(0, 2, A, epoch=2)
        self.expect_wait(ahead, 1)
        self.assertEqual(self.waits(), 1)
        self.assertEqual(self.clocks()[0], 1)
        self.contribute(1, 0, B, epoch=0)
        last = self.contribute(2, 0, C, epoch=0)
        self.verify_results(self.job1, last, int32_sum(A, B, C), 0b111)
        self.contribute(1, 1, B, epoch=1)
        last = self.contribute(2, 1, C, epoch=1)  # completes psn 1 too
        self.verify_results(self.job1, last, int32_sum(A, B, C), 0b111)
        self.contribute(0, 2, A, epoch=2, flags=Flag.RETX)
        self.assert_nothing_out(1)  # admitted and absorbed, not told to wait
        self.assertEqual(self.clocks(), (2, 1, 1))
        self.assertEqual(self.waits(), 1)
        self.assert_no_drops()


class AsyncAddsEachContributionOnceAndAnswersTheRunningAggregate(SyncModeTest):
    """async: no rounds. Each contribution is added to the running aggregate of its chunk
    (``bitmap``: its index in the epoch; one packet per epoch here: chunk 0 on aggregator
    8) and the sender alone gets that aggregate back (RESULT | RUNNING, its own bit); a
    repeat gets it unchanged; a packet whose predecessor psn is missing waits, and one
    skipping an epoch waits; a chunk outside the region is dropped; nobody waits for a
    slower worker, not even past the clocks' ring: worker 0 runs 10 epochs while worker 2
    sent nothing."""

    mode = "async"

    def running(self, w: int, psn: int, values: list[int], epoch: int, total: list[int], **f):
        pkt = self.contribute(w, psn, values, epoch=epoch, **f)
        res = self.result_of(pkt, total, 1 << w)
        res["INC"].flags = int(res["INC"].flags) | Flag.RUNNING
        testutils.verify_packet(self, res, WORKER_PORTS[w])

    def runTest(self) -> None:
        skip = self.contribute(0, 0, A, epoch=1)
        self.expect_wait(skip, 1)
        self.running(0, 0, A, 0, A)
        self.running(1, 0, B, 0, int32_sum(A, B))
        self.running(0, 1, A, 1, int32_sum(A, B, A))
        self.running(0, 1, A, 1, int32_sum(A, B, A), flags=Flag.RETX)  # repeat
        gap = self.contribute(1, 2, B, epoch=2)  # its psn 1 never came
        self.expect_wait(gap, 2)
        self.running(1, 1, B, 1, int32_sum(A, B, A, B))
        self.running(1, 2, B, 2, int32_sum(A, B, A, B, B))
        total = int32_sum(A, B, A, B, B)
        for e in range(2, 10):  # worker 0 alone, far past the ring (SYNC_RING epochs)
            total = int32_sum(total, A)
            self.running(0, e, A, e, total)
        self.assertEqual(self.clocks(), (9, 2, 2**32 - 1))
        self.assertEqual(self.waits(), 2)
        self.contribute(1, 3, B, epoch=3, bitmap=SIZE)  # chunk 4 of a region of 4
        self.assert_drops(OUT_OF_REGION=1)
        self.assertEqual(self.clocks(), (9, 2, 2**32 - 1))
        testutils.verify_no_other_packets(self)


class SwapIntoAsyncAndBackKeepsRoundsWhole(SyncModeTest):
    """sync -> async -> sync through the controller's swap: epoch 0 is a round of three;
    from the boundary the running aggregate starts from zero; leaving async is refused
    until every worker passed the async boundary, and the next boundary's epoch is a
    whole round of three again (its clocks counted from there)."""

    def running(self, w: int, psn: int, values: list[int], epoch: int, total: list[int], **f):
        pkt = self.contribute(w, psn, values, epoch=epoch, **f)
        res = self.result_of(pkt, total, 1 << w)
        res["INC"].flags = int(res["INC"].flags) | Flag.RUNNING
        testutils.verify_packet(self, res, WORKER_PORTS[w])

    def runTest(self) -> None:
        self.round(0, 0, [A, B, C])
        boundary = self.call(sync_modes.swap(self.sw, self.job1, Mode.parse("async", 3)))
        self.assertEqual(boundary, 1)
        self.running(0, 1, A, 1, A)
        self.running(1, 1, B, 1, int32_sum(A, B))
        with self.assertRaises(sync_modes.SwapRefused):  # worker 2 has not started epoch 1
            self.call(sync_modes.swap(self.sw, self.job1, Mode.parse("sync", 3)))
        self.running(2, 1, C, 1, int32_sum(A, B, C))
        self.running(0, 2, A, 2, int32_sum(A, B, C, A))
        boundary = self.call(sync_modes.swap(self.sw, self.job1, Mode.parse("sync", 3)))
        self.assertEqual(boundary, 3)
        self.running(1, 2, B, 2, int32_sum(A, B, C, A, B))
        early = self.contribute(0, 3, A, epoch=3)  # worker 2 is still in epoch 1
        self.assert_nothing_out(1)
        self.running(2, 2, C, 2, int32_sum(A, B, C, A, B, C))
        self.contribute(1, 3, B, epoch=3)
        self.assert_nothing_out(2)
        last = self.contribute(2, 3, C, epoch=3)
        self.verify_results(self.job1, last, int32_sum(A, B, C), 0b111)
        del early
        self.assertEqual(self.clocks(), (3, 3, 3))
        self.assert_no_drops()


class HotSwapChangesTheModeAtAnEpochBoundary(SyncModeTest):
    """sync -> partial 2 while epoch 0 runs: the controller's swap puts the boundary past
    every worker's epoch, so epoch 0's round still needs all three, and epoch 1's rounds
    complete at two. Back to sync is refused until every worker is more than the bound
    past the boundary (no packet of a partial epoch can be admitted any more), then
    epoch 4 needs all three again."""

    def runTest(self) -> None:
        self.contribute(0, 0, A, epoch=0)
        self.admitted(0, 0)  # the swap reads the clocks: worker 0 is in epoch 0
        boundary = self.call(sync_modes.swap(self.sw, self.job1, Mode.parse("partial 2", 3)))
        self.assertEqual(boundary, 1)
        self.contribute(1, 0, B, epoch=0)
        self.assert_nothing_out(1, 2)  # epoch 0 is still synchronous
        last = self.contribute(2, 0, C, epoch=0)
        self.verify_results(self.job1, last, int32_sum(A, B, C), 0b111)
        self.round(1, 1, [A, B, C], workers=(2, 0))
        with self.assertRaises(sync_modes.SwapRefused):
            self.call(sync_modes.swap(self.sw, self.job1, Mode.parse("sync", 3)))
        self.contribute(1, 1, B, epoch=1)  # late for psn 1: served, counted
        testutils.verify_packet(
            self, self.result_of(self.contribution(self.job1, 1, 1, B, epoch=1),
                                 int32_sum(A, C), 0b101), 2,
        )  # fmt: skip
        self.round(2, 2, [A, B, C], workers=(0, 1))
        self.contribute(2, 2, C, epoch=2)
        testutils.verify_packet(
            self, self.result_of(self.contribution(self.job1, 2, 2, C, epoch=2),
                                 int32_sum(A, B), 0b011), 3,
        )  # fmt: skip
        with self.assertRaises(sync_modes.SwapRefused):  # epoch 1 is within every lead
            self.call(sync_modes.swap(self.sw, self.job1, Mode.parse("sync", 3)))
        self.round(3, 3, [A, B, C], workers=(1, 2))
        self.contribute(0, 3, A, epoch=3)
        testutils.verify_packet(
            self, self.result_of(self.contribution(self.job1, 0, 3, A, epoch=3),
                                 int32_sum(B, C), 0b110), 1,
        )  # fmt: skip
        boundary = self.call(sync_modes.swap(self.sw, self.job1, Mode.parse("sync", 3)))
        self.assertEqual(boundary, 4)
        self.round(4, 4, [A, B, C])
        state = self.call(sync_modes.read_state(self.sw, 1))
        self.assertEqual(
            (str(state.before), str(state.after), state.fence), ("partial 2", "sync", False)
        )
        self.assertEqual(self.late(), 3)
        self.assert_no_drops()


class FencedEpochWaitsUntilTheSwapCompletes(SyncModeTest):
    """While the controller's fence is up, packets of the boundary epoch or later come back
    with FLAG_WAIT and touch no aggregator; earlier epochs go on."""

    def runTest(self) -> None:
        state = self.call(sync_modes.read_state(self.sw, 1))
        fenced = sync_modes.ModeState(state.slot, 3, 1, True, state.after, state.after)
        self.call(self.sw.modify([sync_modes.mode_entry(1, fenced)]))
        self.round(0, 0, [A, B, C])
        early = self.contribute(0, 1, A, epoch=1)
        self.expect_wait(early, 1)
        self.assertEqual(self.clocks(), (0, 0, 0))
        lifted = sync_modes.ModeState(state.slot, 3, 1, False, state.after, state.after)
        self.call(self.sw.modify([sync_modes.mode_entry(1, lifted)]))
        self.round(1, 1, [A, B, C])
        self.assert_no_drops()


class ForgedPacketsCannotChangeAMode(SyncModeTest):
    """Only the controller's entry sets a mode: a packet of another job's worker with any
    epoch is dropped at admission and moves no clock; a forged WAIT packet (only the switch
    makes them) is dropped as FORGED_RESULT; a far-future epoch only waits; an epoch older
    than any round the worker can need (one that could select another mode) is dropped as
    OLD_EPOCH."""

    def runTest(self) -> None:
        outsider = self.contribution(self.job1, 0, 0, A, epoch=7)
        self.send(5, outsider)  # worker 0's id from a host outside the job
        self.assert_drops(UNKNOWN_WORKER=1)
        self.contribute(1, 0, B, epoch=0, flags=Flag.WAIT)
        self.assert_drops(UNKNOWN_WORKER=1, FORGED_RESULT=1)
        self.assert_nothing_out(4)
        future = self.contribute(2, 0, C, epoch=5)
        self.expect_wait(future, 3)
        self.assertEqual(self.clocks(), (2**32 - 1,) * 3)
        self.round(0, 0, [A, B, C])  # still sync: all three, nothing of the forgeries
        self.round(1, 1, [A, B, C])
        self.contribute(0, 2, A, epoch=2**32 - 3)  # 4 epochs below its clock
        self.assert_drops(UNKNOWN_WORKER=1, FORGED_RESULT=1, OLD_EPOCH=1)
        self.assert_nothing_out(1)
        self.assertEqual(self.clocks(), (1, 1, 1))
        state = self.call(sync_modes.read_state(self.sw, 1))
        self.assertEqual(str(state.after), "sync")


class RefusedPacketMovesNoClock(SyncModeTest):
    """A packet the aggregator refuses changes no clock, though its epoch is the worker's
    next one: worker 0's psn 0 again, now claiming epoch 1, is a duplicate of its absorbed
    contribution (DROP_DUPLICATE), so worker 0 stays at epoch 0 and may still start epoch 1
    with its real packet. (The clocks are written after the aggregator.)"""

    mode = "bounded 1"

    def runTest(self) -> None:
        self.contribute(0, 0, A, epoch=0)
        self.contribute(0, 0, A, epoch=1)
        self.assert_drops(DUPLICATE=1)
        self.assert_nothing_out(1)
        self.assertEqual(self.clocks(), (0, 2**32 - 1, 2**32 - 1))
        self.contribute(0, 1, A, epoch=1)
        self.assert_nothing_out(1)
        self.assertEqual(self.clocks(), (1, 2**32 - 1, 2**32 - 1))
        self.assert_drops(DUPLICATE=1)
