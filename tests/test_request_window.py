"""The pipelined clients' request window (``hosts/transport/request_window.py``) against a
responder on 127.0.0.1 that answers most requests at once (a cache's hits) and one in
EVERY after SLOW seconds (a miss queued at a server): the resend timeout follows the round
trips that ``timed`` accepts, so a client that times only the slow answers resends none of
them, and one that times every answer resends slow ones into the queue."""

from __future__ import annotations

import heapq
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from hosts.transport.request_window import RequestWindow

SLOW = 0.3  # seconds: 6x the window's least timeout (rto 0.05), under its most (1 s)
EVERY = 16
COUNT = 10 * EVERY


def is_slow(i: int) -> bool:
    return i % EVERY == EVERY - 1


@pytest.fixture
def responder() -> Iterator[tuple[str, int]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.01)
    stop = threading.Event()

    def serve() -> None:
        due: list[tuple[float, bytes, tuple[str, int]]] = []
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(2048)
                i = struct.unpack_from("!I", data, 8)[0]
                heapq.heappush(due, (time.monotonic() + (SLOW if is_slow(i) else 0.0), data, addr))
            except TimeoutError:
                pass
            while due and due[0][0] <= time.monotonic():
                _, data, addr = heapq.heappop(due)
                sock.sendto(data, addr)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield sock.getsockname()
    finally:
        stop.set()
        t.join()
        sock.close()


def run_window(dest: tuple[str, int], timed_slow_only: bool) -> RequestWindow:
    payloads = [bytes(8) + struct.pack("!I", i) for i in range(COUNT)]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    win = RequestWindow(sock, payloads, dest, 0, lambda i, data: True, window=4, rto=0.05,
                        timed=is_slow if timed_slow_only else None)  # fmt: skip
    try:
        win.run(stop_at=time.monotonic() + 30)
    finally:
        sock.close()
    assert win.done().all()
    return win


def test_a_timeout_from_the_slow_answers_alone_resends_none_of_them(responder) -> None:
    assert run_window(responder, timed_slow_only=True).retransmissions == 0


def test_a_timeout_from_every_answer_resends_the_slow_ones(responder) -> None:
    # the fast answers' round trips keep the timeout under SLOW: slow requests are resent
    assert run_window(responder, timed_slow_only=False).retransmissions >= 3
