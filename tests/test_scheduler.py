"""The switch memory scheduler: memory manager resizing, the seed's models, the policies
(EDF, FIFO, RR, MLFQ) and the simulator that drives them. Unit and property tests, no switch."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.jobs.memory_manager import MemoryManager, Region, _union
from controller.jobs.sizing import (
    AGGREGATOR_BYTES,
    Network,
    Profile,
    epoch_time,
    job_time,
    memory_for,
    memory_to_finish,
    throughput,
)
from controller.sched.policies import Edf, Fifo, Mlfq, RoundRobin, make_policy
from controller.sched.sched_sim import TraceJob, poisson_trace, simulate
from controller.sched.scheduler import JobClass, SchedJob, Scheduler

NET = Network(rtt_s=1e-3, line_rate=64 * AGGREGATOR_BYTES / 1e-3)  # line rate at 64 aggregators


def _held(mm: MemoryManager) -> list[tuple[Region, object]]:
    out: list[tuple[Region, object]] = []
    for owner in mm.holders():
        cur = mm.region_of(owner)
        out += [(r, owner) for r in _union([*([cur] if cur else []), *mm.retiring_of(owner)])]
    return out


def _assert_disjoint_and_in_pool(mm: MemoryManager) -> None:
    held = sorted(_held(mm), key=lambda x: x[0].offset)
    for (a, oa), (b, ob) in zip(held, held[1:], strict=False):
        assert a.end <= b.offset, f"{oa} {a} overlaps {ob} {b}"
    assert all(0 <= r.offset and r.end <= mm.pool_size for r, _ in held)
    assert sum(r.size for r, _ in held) + mm.free_total() == mm.pool_size


# -- memory manager -------------------------------------------------------------------


def test_shrink_keeps_the_offset_and_holds_the_tail_until_released() -> None:
    mm = MemoryManager(32)
    mm.resize("a", 16)
    mm.resize("b", 8)
    assert mm.resize("a", 4) == Region(0, 4)
    assert mm.retiring_of("a") == [Region(4, 12)]
    assert mm.resize("c", 12) is None or mm.region_of("c") != Region(4, 12)  # tail not free
    assert mm.release("a") == [Region(4, 12)]
    assert mm.free_total() == 32 - 4 - 8 - (mm.region_of("c") or Region(0, 0)).size


def test_grow_moves_to_a_free_block_when_the_neighbour_is_taken() -> None:
    mm = MemoryManager(32)
    mm.resize("a", 4)  # [0, 4)
    mm.resize("b", 4)  # [4, 8)
    new = mm.resize("a", 10)
    assert new == Region(8, 10)
    assert mm.retiring_of("a") == [Region(0, 4)]
    _assert_disjoint_and_in_pool(mm)


def test_release_keeps_memory_the_switch_may_still_use() -> None:
    mm = MemoryManager(16)
    mm.resize("a", 8)
    mm.resize("a", 2)
    assert mm.release("a", keep=[Region(0, 6)]) == [Region(6, 2)]
    assert mm.retiring_of("a") == [Region(2, 4)]
    assert mm.release("a") == [Region(2, 4)]


def test_growing_without_room_keeps_what_the_job_has() -> None:
    mm = MemoryManager(8)
    mm.resize("a", 4)
    mm.resize("b", 4)
    assert mm.resize("a", 6) == Region(0, 4)
    assert mm.retiring_of("a") == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from("resize release free".split()), st.integers(0, 5), st.integers(0, 40)
        ),
        max_size=60,
    )
)
def test_no_two_owners_ever_share_memory_and_the_pool_is_never_exceeded(ops) -> None:
    mm = MemoryManager(64)
    for op, owner, size in ops:
        if op == "resize":
            before = mm.region_of(owner)
            got = mm.resize(owner, size)
            assert got is None or got.size <= max(size, before.size if before else 0)
            if before is not None and size <= before.size:
                assert got is None if size == 0 else got == Region(before.offset, size)
        elif op == "release":
            mm.release(owner)
            assert mm.retiring_of(owner) == []
        elif owner in mm.holders():
            mm.free(owner)
            assert owner not in mm.holders()
        _assert_disjoint_and_in_pool(mm)


# -- the seed's models ----------------------------------------------------------------


def test_memory_is_throughput_times_rtt_and_throughput_stops_at_line_rate() -> None:
    net = Network(rtt_s=2e-3, line_rate=1e6)
    want = memory_for(net.line_rate, net.rtt_s)
    assert want == math.ceil(1e6 * 2e-3 / AGGREGATOR_BYTES)
    assert throughput(want, net) == 1e6
    assert throughput(2 * want, net) == 1e6
    assert throughput(10, net) == pytest.approx(10 * AGGREGATOR_BYTES / 2e-3)


def test_job_time_is_epochs_times_compute_plus_model_over_throughput() -> None:
    p = Profile(epochs=7, model_bytes=10 * AGGREGATOR_BYTES - 5, compute_s=0.5)
    assert job_time(p, 100.0 * AGGREGATOR_BYTES) == pytest.approx(7 * (0.5 + 10 / 100))


@given(
    epochs=st.integers(1, 500),
    packets=st.integers(1, 10_000),
    compute=st.floats(0, 1),
    slack=st.floats(0.05, 50),
)
def test_the_memory_needed_for_a_deadline_meets_it_and_one_less_does_not(
    epochs: int, packets: int, compute: float, slack: float
) -> None:
    p = Profile(epochs, packets * AGGREGATOR_BYTES, compute)
    time_left = job_time(p, NET.line_rate) * slack
    need = memory_to_finish(p, epochs, time_left, NET)
    if need is None:
        assert job_time(p, NET.line_rate) > time_left * (1 - 1e-9)
        return
    assert job_time(p, throughput(need, NET)) <= time_left * (1 + 1e-9)
    if need > 1:
        assert job_time(p, throughput(need - 1, NET)) > time_left


# -- policies -------------------------------------------------------------------------


def _job(
    jid: int,
    cls: str = "be",
    epochs: int = 10,
    packets: int = 100,
    compute: float = 0.01,
    arrival: float = 0.0,
    deadline: float | None = None,
    net: Network = NET,
) -> SchedJob:
    return SchedJob(
        jid,
        JobClass(cls),
        Profile(epochs, packets * AGGREGATOR_BYTES, compute),
        arrival=arrival,
        network=net,
        deadline=deadline,
    )


job_specs = st.lists(
    st.tuples(
        st.sampled_from(["md", "be"]),
        st.integers(1, 50),  # epochs
        st.integers(1, 2000),  # packets per epoch
        st.floats(0, 0.05),  # compute
        st.floats(0, 10),  # arrival
        st.floats(0.2, 20),  # deadline slack over the time alone at line rate
    ),
    min_size=1,
    max_size=12,
)


def _jobs(specs) -> list[SchedJob]:
    out = []
    for i, (cls, ep, pk, comp, arr, slack) in enumerate(specs, start=1):
        alone = _job(i, "be", ep, pk, comp).time_left(64)
        deadline = arr + slack * alone if cls == "md" else None
        out.append(_job(i, cls, ep, pk, comp, arrival=arr, deadline=deadline))
    return out


@settings(max_examples=150, deadline=None)
@given(
    specs=job_specs, pool=st.integers(1, 300), policy=st.sampled_from(["edf", "fifo", "rr", "mlfq"])
)
def test_every_policy_places_disjoint_regions_within_the_pool(specs, pool, policy) -> None:
    sched = Scheduler(make_policy(policy, quantum=1.0), MemoryManager(pool))
    for j in _jobs(specs):
        sched.add(j)
    now = 10.0
    sched.replan(now)
    _assert_disjoint_and_in_pool(sched.memory)
    for j in sched.jobs.values():
        assert j.memory <= j.want()
        assert (sched.memory.region_of(j.job_id) or Region(0, 0)).size == j.memory
    # Work conserving: memory is left over only when every job has what it can use.
    if sched.memory.free_total() > 0:
        assert all(j.memory == j.want() for j in sched.jobs.values())


@settings(max_examples=200, deadline=None)
@given(specs=job_specs, pool=st.integers(1, 300))
def test_edf_serves_deadline_jobs_before_best_effort_ones(specs, pool) -> None:
    sched = Scheduler(Edf(), MemoryManager(pool))
    jobs = _jobs(specs)
    for j in jobs:
        sched.add(j)
    now = 10.0
    sched.replan(now)
    # Walk MD jobs in deadline order as EDF does: each whose need fits what is left gets it.
    left = pool
    for j in sorted(
        (j for j in jobs if j.job_class == JobClass.MD),
        key=lambda j: (j.deadline, j.arrival, j.job_id),
    ):
        need = memory_to_finish(j.profile, j.epochs_left, j.deadline - now, j.effective)
        if need is not None and need <= left:
            assert j.memory >= need, f"MD job {j.job_id} got {j.memory} < need {need}"
            left -= need
            # ...and that memory meets its deadline by the model.
            assert now + j.time_left() <= j.deadline * (1 + 1e-9)
    # A BE job holds memory only out of what the served MD jobs left.
    be = sum(j.memory for j in jobs if j.job_class == JobClass.BE)
    assert be <= left


def test_edf_gives_an_infeasible_deadline_job_only_leftover_memory() -> None:
    # The hopeless job is the shorter one, so it also comes first for the leftover.
    hopeless = _job(1, "md", epochs=5, packets=1000, deadline=0.001)
    urgent = _job(2, "md", epochs=100, packets=1000, deadline=100.0)
    plan = dict(Edf().plan(0.0, [hopeless, urgent], capacity=64))
    assert plan[2] == urgent.need(0.0)
    assert plan[1] == 64 - plan[2]


def test_edf_does_not_take_leftover_memory_from_a_running_job_for_a_shorter_one() -> None:
    long = _job(1, "be", epochs=50)
    long.memory = 40  # running with what the pool had left
    short = _job(2, "be", epochs=5)
    plan = dict(Edf().plan(0.0, [long, short], capacity=64))
    assert plan == {1: 40, 2: 24}
    # ...but a deadline comes first: an MD job's need is taken from it.
    md = _job(3, "md", epochs=50, packets=1000, deadline=2.0)
    plan = dict(Edf().plan(0.0, [long, short, md], capacity=64))
    assert plan == {3: md.need(0.0), 1: 64 - md.need(0.0), 2: 0} and plan[3] == 34


def test_edf_sizes_a_deadline_job_for_the_epoch_it_still_runs_under_its_old_layout() -> None:
    md = _job(1, "md", epochs=50, packets=1000, deadline=3.0)
    md.memory = 8
    at_boundary = md.need(0.0)
    # Half an epoch left at 8 aggregators (slow): the new region starts only after it.
    md.to_boundary = (0.5, 0.5 * epoch_time(md.profile, md.rate()))
    later = md.need(0.0)
    assert later is not None and at_boundary is not None and later > at_boundary
    want = memory_to_finish(md.profile, 49.5, 3.0 - md.to_boundary[1], md.effective)
    assert (at_boundary, later) == (20, 21) and later == want


def test_a_job_without_its_own_rtt_is_sized_with_the_rtt_measured_on_its_switch() -> None:
    sched = Scheduler(Fifo(), MemoryManager(64))
    guess = Network(rtt_s=8e-3, line_rate=NET.line_rate)  # the daemon's --rtt-ms: far off
    a, b = _job(1, net=guess), _job(2, net=guess)
    sched.add(a)
    sched.add(b)
    assert a.want() == b.want() == 64 * 8  # sized for an 8 ms path: each wants it all
    sched.update(1, rtt_s=1e-3)
    assert a.rtt_measured and not b.rtt_measured
    assert a.want() == b.want() == 64  # b, queued, has not measured: the switch's RTT
    sched.update(2, rtt_s=2e-3)
    sched.update(1, rtt_s=1e-3)
    assert b.network.rtt_s == 2e-3  # its own measurement, not another job's
    c = _job(3, net=guess)
    sched.add(c)
    assert c.network.rtt_s == 1e-3  # a newcomer starts from the latest measurement


def test_fifo_serves_in_arrival_order() -> None:
    jobs = [_job(1, arrival=5.0), _job(2, arrival=1.0), _job(3, arrival=3.0)]
    assert Fifo().plan(6.0, jobs, capacity=100) == [(2, 64), (3, 36), (1, 0)]


def test_round_robin_rotates_who_holds_memory_every_quantum() -> None:
    rr = RoundRobin(quantum=10.0)
    jobs = [_job(i, arrival=float(i)) for i in (1, 2, 3)]
    first = rr.plan(0.0, jobs, capacity=64)
    assert [jid for jid, size in first if size] == [1]
    for j in jobs:
        j.memory = dict(first)[j.job_id]
    assert rr.next_decision(0.0, jobs) == 10.0
    assert [jid for jid, size in rr.plan(5.0, jobs, 64) if size] == [1]  # mid-quantum: same
    assert [jid for jid, size in rr.plan(10.0, jobs, 64) if size] == [2]
    assert [jid for jid, size in rr.plan(20.0, jobs, 64) if size] == [3]
    assert [jid for jid, size in rr.plan(30.0, jobs, 64) if size] == [1]


def test_mlfq_demotes_a_job_once_its_service_passes_the_level_threshold() -> None:
    mlfq = Mlfq(quantum=10.0, factor=4.0, levels=3)
    old = _job(1, arrival=0.0)
    new = _job(2, arrival=1.0)
    old.attained = 10.0  # used up level 0
    assert [jid for jid, size in mlfq.plan(20.0, [old, new], 64) if size] == [2]
    new.memory = 64
    new.attained = 3.0
    assert mlfq.next_decision(20.0, [old, new]) == pytest.approx(27.0)


def test_scheduler_shares_only_what_fixed_regions_leave() -> None:
    mm = MemoryManager(100)
    mm.allocate("pinned", 40)
    sched = Scheduler(Fifo(), mm)
    sched.add(_job(1))
    sched.add(_job(2))
    sched.replan(0.0)
    assert sched.capacity() == 60
    assert sum(j.memory for j in sched.jobs.values()) == 60
    _assert_disjoint_and_in_pool(mm)


def test_a_shrunk_jobs_old_memory_is_given_to_others_only_after_release() -> None:
    sched = Scheduler(Edf(), MemoryManager(64))
    be = _job(1, "be", epochs=5)  # shorter than the MD job: keeps what EDF leaves over
    sched.add(be)
    sched.replan(0.0)
    assert be.memory == 64
    md = _job(2, "md", epochs=10, packets=1000, deadline=1.0)
    sched.add(md)
    changes = {c.job_id: c for c in sched.replan(0.0)}
    assert md.memory == 0 and be.memory < 64  # the BE job shrank, its tail is retiring
    assert changes[1].new == Region(0, be.memory)
    sched.memory.release(1)
    sched.replan(0.0)
    assert md.memory == md.need(0.0)


# -- simulator ------------------------------------------------------------------------


def test_simulated_job_alone_finishes_when_the_model_says() -> None:
    tj = TraceJob(2.0, "md", "x", 1000 * AGGREGATOR_BYTES, 0.01, 50, deadline_s=100.0)
    out = simulate([tj], "edf", pool=64, net=NET)
    alone = job_time(tj.profile, NET.line_rate)
    assert out.jobs[0].finish == pytest.approx(2.0 + alone)
    assert out.jobs[0].met


def test_simulated_change_mid_epoch_takes_effect_at_the_epoch_boundary() -> None:
    # One epoch of the big job takes 0.5 s alone at line rate (64 aggregators, 1 ms RTT).
    big = TraceJob(0.0, "be", "x", 4000 * AGGREGATOR_BYTES, 0.5, 4)
    small = TraceJob(0.25, "md", "x", 64 * AGGREGATOR_BYTES, 0.0, 1, deadline_s=10.0)
    per_epoch = epoch_time(big.profile, NET.line_rate)
    out = simulate([big, small], "edf", pool=64, net=NET)
    now_ = simulate([big, small], "edf", pool=64, net=NET, switchover=False)
    # The MD job waits for the big job's first epoch to end before it gets any memory
    # (the pool is all the big job's), then needs 1 ms at line rate.
    md = out.jobs[1]
    assert md.finish > per_epoch
    assert md.finish < now_.jobs[1].finish + per_epoch
    assert now_.jobs[1].finish < per_epoch  # without switch-over it ran at once


def test_simulator_uses_each_jobs_own_rtt() -> None:
    slow = TraceJob(0.0, "be", "x", 1000 * AGGREGATOR_BYTES, 0.0, 10, rtt_s=4e-3)
    fast = TraceJob(0.0, "be", "x", 1000 * AGGREGATOR_BYTES, 0.0, 10)
    pool = 64  # line rate at 64 aggregators with 1 ms; a 4 ms path would want 256
    out = simulate([slow, fast], "fifo", pool=pool, net=NET)
    # slow arrived first and takes the whole pool: a quarter of the line rate for 4 ms.
    assert out.jobs[0].jct == pytest.approx(job_time(slow.profile, NET.line_rate / 4))
    assert out.jobs[1].jct == pytest.approx(out.jobs[0].jct + job_time(fast.profile, NET.line_rate))


def test_simulated_edf_meets_deadlines_that_fifo_misses() -> None:
    # A long BE job arrives first; FIFO gives it the pool, EDF reserves for the MD job.
    big = TraceJob(0.0, "be", "x", 1000 * AGGREGATOR_BYTES, 0.0, 500)
    md = TraceJob(0.1, "md", "x", 1000 * AGGREGATOR_BYTES, 0.0, 50, deadline_s=2.0)
    fifo = simulate([big, md], "fifo", pool=64, net=NET)
    edf = simulate([big, md], "edf", pool=64, net=NET)
    assert fifo.deadline_ratio == 0.0
    assert edf.deadline_ratio == 1.0


@pytest.mark.parametrize("policy", ["edf", "fifo", "rr", "mlfq"])
def test_every_policy_finishes_every_job_of_a_trace(policy: str) -> None:
    trace = poisson_trace(40, load=1.2, seed=7, pool=4096)
    out = simulate(trace, policy, pool=4096)
    assert sorted(f.job_id for f in out.jobs) == list(range(1, 41))
    for f, tj in zip(out.jobs, trace, strict=True):
        assert f.finish >= tj.arrival + job_time(tj.profile, 12.5e9) * (1 - 1e-9)


def test_headline_says_where_edf_misses_the_goal() -> None:
    from controller.sched.sched_sim import headline

    def row(load, policy, met, jct):
        return {"load": load, "policy": policy, "deadline_ratio": met, "avg_jct": jct}

    rows = [row(1.0, "edf", 0.9, 100.0), row(1.0, "fifo", 0.8, 120.0), row(1.0, "mlfq", 0.85, 99.0)]
    rows += [row(2.0, "edf", 0.9, 100.0), row(2.0, "fifo", 0.95, 150.0)]
    rows += [row(3.0, "edf", 0.9, 100.0), row(3.0, "rr", 0.9, 100.0)]
    goal = {h["load"]: h["goal"] for h in headline(rows)}
    assert goal == {1.0: False, 2.0: False, 3.0: True}  # lower JCT; more deadlines; a tie


def test_a_job_being_admitted_keeps_its_region_through_a_replan_until_released() -> None:
    """While a new job's region is cleared (``Scheduler.admitting``), a re-plan that would
    shrink or move it leaves it where it is; afterwards the plan applies."""
    s = Scheduler(make_policy("fifo"), MemoryManager(pool_size=64))
    first = SchedJob(1, JobClass.BE, Profile(10, 12_800, 0.1), arrival=1.0, network=NET)
    s.add(first)
    s.replan(now=1.0)
    given = s.memory.region_of(1)
    assert given == Region(0, 64)
    s.admitting.add(1)
    earlier = SchedJob(2, JobClass.BE, Profile(10, 12_800, 0.1), arrival=0.0, network=NET)
    s.add(earlier)  # fifo: arrived first, so it is given the memory first
    s.replan(now=2.0)
    assert s.memory.region_of(1) == given
    s.admitting.discard(1)
    s.replan(now=3.0)
    assert s.memory.region_of(1) is None  # its memory retiring, then free for job 2
    s.memory.release(1)
    s.replan(now=4.0)
    assert s.memory.region_of(2) == given
