"""Batched socket I/O (recvmmsg/sendmmsg) on a datagram socket pair: no root needed."""

import socket

import pytest

from p4sim import batch_io

pytestmark = pytest.mark.skipif(not batch_io.AVAILABLE, reason="recvmmsg/sendmmsg: Linux only")


@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def test_frames_sent_in_batches_arrive_whole_and_in_order(pair):
    a, b = pair
    frames = [bytes([i % 256]) * (1 + i) for i in range(150)]  # more than one batch each way
    tx = batch_io.Sender(a.fileno(), batch=64, size=2048)
    rx = batch_io.Receiver(b.fileno(), batch=32, size=2048)
    assert tx.send(frames) == (150, sum(len(f) for f in frames))
    got: list[bytes] = []
    while len(got) < len(frames):
        batch = rx.receive()
        assert batch, "frames were lost"
        assert len(batch) <= 32
        got += batch
    assert got == frames
    assert rx.receive() == []


def test_a_frame_longer_than_a_slot_is_dropped_and_counted(pair):
    a, b = pair
    a.send(b"x" * 100)
    a.send(b"ok")
    rx = batch_io.Receiver(b.fileno(), batch=8, size=64)
    assert rx.receive() == [b"ok"]
    assert rx.truncated == 1
