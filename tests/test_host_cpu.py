"""The CPU budget's measurement (topologies/host_cpu.py): counters over a pass's span only,
the request socket's queue and drops as the kernel reports them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from topologies.host_cpu import HostCpuError, Sampler, realtime, task_times, udp_queue


def test_a_pass_counts_only_what_was_used_between_its_ends():
    s = Sampler(None)
    s.watch("leader", os.getpid())
    w = s.watched["leader"]
    # idle until t=10, then 0.05 CPU-seconds per second until t=20, idle again
    for t, used in ((0.0, 1.0), (10.0, 1.0), (20.0, 1.5), (30.0, 1.5)):
        w.times.append(t)
        w.values.append({"cpu_s": used, "wait_s": 0.0, "queue": 100.0 * (10 <= t <= 20)})
    got = s.between("leader", 10.0, 20.0)
    assert got["cpu_s"] == pytest.approx(0.5) and got["queue"] == pytest.approx(100.0)
    assert s.between("leader", 12.0, 14.0)["cpu_s"] == pytest.approx(0.1)
    # the whole run against the pass's span would have shown 150 % of the budget
    assert s.between("leader", 0.0, 30.0)["cpu_s"] / 10.0 == pytest.approx(0.05)


def test_a_process_with_fewer_than_two_samples_is_an_error_not_a_zero():
    s = Sampler(None)
    s.watch("gone", os.getpid())
    with pytest.raises(HostCpuError, match="fewer than two samples"):
        s.between("gone", 0.0, 1.0)


def test_the_socket_queue_and_the_cpu_time_of_this_process_are_read():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        port = rx.getsockname()[1]
        assert udp_queue(os.getpid(), port) == (0, 0)
        for _ in range(3):
            tx.sendto(b"x" * 152, ("127.0.0.1", port))
        deadline = time.monotonic() + 5.0  # a busy machine may leave delivery to ksoftirqd
        while udp_queue(os.getpid(), port)[0] < 3 * 152 and time.monotonic() < deadline:
            time.sleep(0.01)
        queued, dropped = udp_queue(os.getpid(), port)
        assert queued >= 3 * 152 and dropped == 0
    finally:
        rx.close()
        tx.close()
    run, wait = task_times(os.getpid())
    assert run > 0 and wait >= 0


def test_sampling_in_a_thread_brackets_the_pass():
    with Sampler(None, every=0.01) as s:
        s.watch("me", os.getpid())
        sum(range(200_000))
    w = s.watched["me"]
    assert len(w.times) >= 1 and w.values[-1]["cpu_s"] >= w.values[0]["cpu_s"]


@pytest.mark.root
def test_a_switch_process_gets_realtime_priority_on_every_thread_and_keeps_it_for_new_ones():
    code = ("import threading, time, os; e = threading.Event(); "
            "threading.Thread(target=e.wait, daemon=True).start(); print('up', flush=True); "
            "input(); t = threading.Thread(target=e.wait, daemon=True); t.start(); "
            "print(os.sched_getscheduler(t.native_id), flush=True)")  # fmt: skip
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert p.stdout is not None and p.stdin is not None
        assert p.stdout.readline().strip() == "up"
        realtime(p.pid)
        tids = os.listdir(f"/proc/{p.pid}/task")
        assert len(tids) >= 2
        assert {os.sched_getscheduler(int(t)) for t in tids} == {os.SCHED_FIFO}
        p.stdin.write("\n")
        p.stdin.flush()
        assert int(p.stdout.readline()) == os.SCHED_FIFO  # a thread started afterwards
    finally:
        p.kill()
        p.wait()


def test_a_refused_realtime_priority_is_a_clear_error():
    # 100 is beyond SCHED_FIFO's 1-99 for anyone; without root, any priority is refused
    with pytest.raises(HostCpuError, match="cannot run process .* at realtime priority"):
        realtime(os.getpid(), priority=100)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
