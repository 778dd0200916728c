"""The CPU budget's measurement (topologies/host_cpu.py): counters over a pass's span only,
the request socket's queue and drops as the kernel reports them."""

from __future__ import annotations

import os
import socket
import time

import pytest

from topologies.host_cpu import HostCpuError, Sampler, task_times, udp_queue


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
