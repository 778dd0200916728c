"""The native back end's packet loop in C (p4sim/native/backend.py NativeLoop) on real
veth interfaces (root): frames in order and as the Python back end makes them, the
control plane's changes seen by the very next packet, the ports' counters kept."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from p4sim.ports import PortSet, open_raw_socket
from tests.bench.programs import CASES

pytestmark = pytest.mark.root


@pytest.fixture
def veths() -> Iterator[dict[int, tuple[str, str]]]:
    tag = f"n{os.getpid() % 10000}"
    pairs = {p: (f"{tag}s{p}", f"{tag}h{p}") for p in (1, 2)}
    try:
        for a, b in pairs.values():
            subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
            for n in (a, b):
                subprocess.run(["ip", "link", "set", n, "up"], check=True)
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{n}.disable_ipv6=1"], check=False)
        yield pairs
    finally:
        for a, _ in pairs.values():
            subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)


def _recv(sock: socket.socket, timeout: float = 3.0) -> bytes | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data, addr = sock.recvfrom(4096)
        except BlockingIOError:
            time.sleep(0.002)
            continue
        if addr[2] != 4:  # not our own outgoing frame
            return data
    return None


def test_native_loop_forwards_in_order_and_sees_table_changes_at_once(veths) -> None:
    case = CASES["basic IPv4 forwarding"]
    sw = case.switch(backend="native")
    assert sw.backend == "native", sw.backend_notice
    reference = case.switch()
    frames = [case.frames(1)[0][1][:-4] + i.to_bytes(4, "big") for i in range(200)]
    expected = [reference.send(1, f)[0][1] for f in frames]
    ports = PortSet({p: s for p, (s, _) in veths.items()})
    served = threading.Thread(
        target=ports.serve, args=(lambda port, data: [],), kwargs={"native": lambda: sw}
    )
    served.start()
    tx, rx = open_raw_socket(veths[1][1]), open_raw_socket(veths[2][1])
    try:
        for f in frames:
            tx.send(f)
        got = [_recv(rx) for _ in frames]
        assert got == expected  # every frame, in order, as the Python back end makes it
        # the route goes: the next frame is dropped (the C loop laid the change out first)
        (entry,) = sw.table_entries("ipv4_route")
        sw.table_delete("ipv4_route", entry.handle)
        tx.send(frames[0])
        assert _recv(rx, timeout=0.5) is None
        sw.table_add("ipv4_route", {"hdr.ipv4.dst_addr": (0x0A000202, 32)}, "forward",
                     {"next_hop_mac": 0x080000000200, "port": 2})  # fmt: skip
        tx.send(frames[1])
        assert _recv(rx) == expected[1]
    finally:
        ports.stop()
        served.join(5)
        ports.close()
        tx.close()
        rx.close()
    assert not served.is_alive()
    c1, c2 = ports.ports[1].counters, ports.ports[2].counters
    assert (c1.rx_packets, c2.tx_packets) == (len(frames) + 2, len(frames) + 1)
    assert c2.tx_bytes == sum(map(len, expected)) + len(expected[1])


def test_with_udp_gso_a_run_of_like_frames_leaves_as_one_and_cuts_back_into_them(
    veths, monkeypatch
) -> None:
    """P4SIM_UDP_GSO=1: frames of one UDP flow to one port leave as one frame with
    segmentation offload; cut at the first frame's payload length they are the frames the
    pipeline made, in order (but for the fields the cut rewrites), and the counters count
    frames, not runs."""
    from p4sim.batch_io import Sender
    from p4sim.native.backend import UDP_GSO_ENV

    monkeypatch.setenv(UDP_GSO_ENV, "1")
    case = CASES["basic IPv4 forwarding"]
    sw = case.switch(backend="native")
    reference = case.switch()
    frames = [case.frames(1)[0][1][:-4] + i.to_bytes(4, "big") for i in range(64)]
    expected = [reference.send(1, f)[0][1] for f in frames]
    ports = PortSet({p: s for p, (s, _) in veths.items()})
    served = threading.Thread(
        target=ports.serve, args=(lambda port, data: [],), kwargs={"native": lambda: sw}
    )
    tx, rx = open_raw_socket(veths[1][1]), open_raw_socket(veths[2][1])
    seg = len(expected[0]) - 42
    got: list[bytes] = []
    longest = 0
    try:
        Sender(tx.fileno(), batch=64).send(frames)  # queued before the loop runs: one batch
        served.start()
        deadline = time.monotonic() + 5
        while len(got) < len(frames) and time.monotonic() < deadline:
            try:
                g, addr = rx.recvfrom(65536)
            except BlockingIOError:
                time.sleep(0.002)
                continue
            if addr[2] == 4:
                continue
            e = expected[len(got)]
            assert (g[:16], g[20:24], g[26:38]) == (e[:16], e[20:24], e[26:38])
            payload = g[42 : 14 + int.from_bytes(g[16:18], "big")]
            longest = max(longest, len(payload) // seg)
            got += [g[:42] + payload[i : i + seg] for i in range(0, len(payload), seg)]
    finally:
        ports.stop()
        if served.is_alive():
            served.join(5)
        ports.close()
        tx.close()
        rx.close()
    assert [g[42:] for g in got] == [e[42:] for e in expected]
    assert longest > 1  # runs did leave as one frame
    assert ports.ports[2].counters.tx_packets == len(frames)
