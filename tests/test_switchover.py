"""Switch-over of a job's region at an epoch boundary: the protocol's rules, and a job whose
region shrinks, grows and moves while it runs on p4src/inc.p4 (p4sim in process), with
results bit-exact under loss, duplication and reordering."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.jobs.memory_manager import Region
from controller.sched.switchover import SlotConfig, Switchover, SwitchoverError
from hosts.netreduce.allreduce import AllReduceClient
from hosts.transport.udp import Endpoint
from tests.test_allreduce_hosts import LOCAL, SwitchBridge, impaired, int_vectors, wrapped_sum
from tests.worker_threads import run_threads
from wire.header import DropReason

A, B, C = (SlotConfig(Region(0, 8), 2), SlotConfig(Region(0, 4), 2), SlotConfig(Region(8, 6), 2))
PAUSED = SlotConfig(None, 2)


def test_an_epochs_layout_is_fixed_by_the_first_worker_to_ask() -> None:
    s = Switchover([0, 1], A)
    assert s.ask(0, 0).config == A
    s.retarget(B)
    assert s.ask(1, 0).config == A  # epoch 0 was fixed before the change
    assert s.ask(1, 1).config == B
    s.retarget(C)
    assert s.ask(0, 1).config == B


def test_a_new_layout_is_written_to_the_idle_slot_before_anyone_uses_it() -> None:
    s = Switchover([0, 1], A)
    s.ask(0, 0), s.ask(1, 0)
    s.retarget(C)
    a = s.ask(1, 1)
    assert a.writes == [(1, C)] and s.slots == [A, C]
    assert s.regions() == [A.region, C.region]  # epoch 0 stragglers may still use A
    assert s.ask(0, 1).writes == [(0, C)]
    assert s.regions() == [C.region]


def test_a_worker_cannot_start_an_epoch_before_everyone_finished_the_previous_one() -> None:
    s = Switchover([0, 1], A)
    s.ask(0, 0)
    with pytest.raises(SwitchoverError, match="unfinished"):
        s.ask(0, 1)  # worker 1 has not even started epoch 0
    s.ask(1, 0)
    s.ask(0, 1)
    with pytest.raises(SwitchoverError, match="unfinished"):
        s.ask(0, 2)
    with pytest.raises(SwitchoverError, match="already started"):
        s.ask(0, 0)
    with pytest.raises(SwitchoverError, match="no worker 7"):
        s.ask(7, 0)


def test_workers_told_to_wait_get_the_memory_that_comes_later_for_the_same_epoch() -> None:
    s = Switchover([0, 1], A)
    s.ask(0, 0), s.ask(1, 0)
    s.retarget(PAUSED)
    assert s.ask(0, 1).config == PAUSED
    s.retarget(B)
    assert s.ask(1, 1).config == B  # nobody sent epoch 1 under "paused": fixed again
    assert s.ask(0, 1).config == B


def test_a_paused_jobs_memory_is_no_longer_named_once_everyone_waits() -> None:
    s = Switchover([0, 1], A)
    s.ask(0, 0), s.ask(1, 0)
    s.retarget(PAUSED)
    s.ask(0, 1)
    assert s.regions() == [A.region]  # worker 1 may still retransmit epoch 0
    s.ask(1, 1)
    assert s.regions() == []


def test_a_changed_layout_is_used_only_once_every_worker_has_left_the_old_one() -> None:
    s = Switchover([0, 1], A)
    s.ask(0, 0), s.ask(1, 0)
    s.retarget(C)
    assert s.ask(0, 1).wait  # worker 1 may still need a result held in A
    assert not s.ask(1, 1).wait  # the last one in: everybody goes
    assert not s.ask(0, 1).wait
    s.retarget(C)
    assert not s.ask(0, 2).wait  # same layout: no barrier


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 4),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("retarget"), st.sampled_from([A, B, C, PAUSED])),
            st.tuples(st.just("ask"), st.integers(0, 3)),
        ),
        max_size=80,
    ),
)
def test_every_running_epoch_is_served_by_its_own_slot_and_all_workers_agree(n, steps) -> None:
    s = Switchover(range(n), A)
    epoch_of = dict.fromkeys(range(n), -1)
    sending: dict[int, bool] = dict.fromkeys(range(n), True)  # told to go (epoch -1: done)
    told: dict[int, SlotConfig] = {}  # epoch -> the running layout workers were given
    for op, arg in steps:
        if op == "retarget":
            s.retarget(arg)
            continue
        w = arg % n
        e = epoch_of[w]
        if not sending[w]:
            nxt = e  # waiting: asks again
        elif all(epoch_of[v] > e or (epoch_of[v] == e and sending[v]) for v in range(n)):
            nxt = e + 1  # synchronous all-reduce: epoch e completes once all sent it
        else:
            continue
        answer = s.ask(w, nxt)
        epoch_of[w], sending[w] = nxt, not answer.wait
        if answer.wait:
            continue
        assert told.setdefault(nxt, answer.config) == answer.config, "workers disagree"
        last = max((x for x in told if x < nxt), default=None)
        if last is not None and told[last].region != answer.config.region:
            assert s.lo >= nxt, "a new layout went live while someone was in the old one"
        for live in {epoch_of[v] for v in range(n) if sending[v] and epoch_of[v] >= 0}:
            assert s.slots[live % 2] == told[live], f"epoch {live} is not served by its slot"


# -- on the switch program ---------------------------------------------------------------


class SlotController:
    """The controller's part for one job on an in-process p4sim: epoch slots as
    ``JobManager`` writes them (before the answer goes back to the worker)."""

    def __init__(self, bridge: SwitchBridge, job_id: int, n: int, config: SlotConfig) -> None:
        self.sw, self.job_id = bridge.switch, job_id
        self.lock = threading.Condition()
        self.so = Switchover(range(n), config)
        self.handles = [
            self.sw.table_add(
                "epoch_slots",
                {"hdr.inc.job_id": job_id, "meta.epoch_slot": slot},
                "set_slot",
                self._params(config),
            )
            for slot in (0, 1)
        ]
        self.plan: dict[int, SlotConfig] = {}  # epoch -> target set when it is first asked

    @staticmethod
    def _params(c: SlotConfig) -> dict[str, int]:
        r = c.region or Region(0, 0)
        return {"offset": r.offset, "size": r.size, "quorum": c.quorum}

    def ask(self, worker: int, epoch: int) -> SlotConfig:
        with self.lock:
            while True:
                if epoch in self.plan and epoch > self.so.hi:
                    self.so.retarget(self.plan[epoch])
                answer = self.so.ask(worker, epoch)
                for slot, cfg in answer.writes:
                    params = self._params(cfg)
                    self.sw.table_modify("epoch_slots", self.handles[slot], "set_slot", params)
                self.lock.notify_all()
                if not answer.wait:
                    return answer.config
                assert self.lock.wait(30), f"worker {worker} waited for epoch {epoch} too long"


@pytest.mark.parametrize("impair", [(0.0, 0.0, 0.0), (0.03, 0.03, 0.05)])
def test_a_region_resized_and_moved_mid_job_keeps_every_result_bit_exact(impair) -> None:
    n, job = 3, 5
    bridge = SwitchBridge(n, offset=0, size=0, impair=impair)  # the slots give the region
    ctl = SlotController(bridge, job, n, SlotConfig(Region(0, 8), n))
    # Epoch -> new layout: shrink in place, grow in place, move away, move back overlapping.
    ctl.plan = {
        1: SlotConfig(Region(0, 3), n),
        2: SlotConfig(Region(0, 12), n),
        3: SlotConfig(Region(20, 5), n),
        4: SlotConfig(Region(18, 16), n),
    }
    epochs = 6
    retransmitted = [0] * n
    calls = [int_vectors(n, 32 * 37, seed=100 + e) for e in range(epochs)]  # 37 packets each
    try:

        def worker(w: int) -> list[np.ndarray]:
            ep = impaired(*impair, seed=w) if any(impair) else Endpoint(LOCAL)
            out: list[np.ndarray] = []
            with AllReduceClient(
                job, w, n, 0, 8, 8, dest=bridge.ports[w].address, endpoint=ep, timeout=0.03
            ) as c:
                for e in range(epochs):
                    cfg = ctl.ask(w, e)
                    assert cfg.region is not None
                    c.set_layout(e, cfg.region.offset, cfg.region.size)
                    out.append(c.allreduce_int(calls[e][w]))
                retransmitted[w] = c.stats.retransmissions
            return out

        results = run_threads(n, worker)
    finally:
        bridge.stop()
    for e in range(epochs):
        for w in range(n):
            np.testing.assert_array_equal(results[w][e], wrapped_sum(calls[e]))  # type: ignore[index]
    out_of_region = bridge.switch.counter_read("inc_drops", DropReason.OUT_OF_REGION)[0]
    if not any(impair):
        # A first transmission is always checked against its own epoch's layout; only a
        # retransmission of an epoch everybody finished may meet the next layout's slot.
        assert out_of_region <= sum(retransmitted)
    assert ctl.so.slots == [SlotConfig(Region(18, 16), n)] * 2
