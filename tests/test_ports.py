"""p4sim's ports on real veth interfaces (root)."""

import os
import socket
import subprocess
import threading
import time

import pytest

from p4sim.ports import PortSet, open_raw_socket

pytestmark = pytest.mark.root


@pytest.fixture
def veth_pair():
    a, b = f"p4t{os.getpid() % 10000}a", f"p4t{os.getpid() % 10000}b"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        for n in (a, b):
            subprocess.run(["ip", "link", "set", n, "up"], check=True)
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{n}.disable_ipv6=1"], check=False)
        yield a, b
    finally:
        subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)


def _frame(tag: bytes) -> bytes:
    return b"\x02" * 6 + b"\x04" * 6 + b"\x88\xb5" + tag.ljust(50, b"\0")


def _recv(sock: socket.socket, timeout: float = 3.0) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data, addr = sock.recvfrom(4096)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        if addr[2] != 4:  # not our own outgoing frame
            return data
    raise AssertionError("no frame received")


def test_frames_go_through_the_process_function_and_out_of_the_egress_port(veth_pair, tmp_path):
    switch_side, host_side = veth_pair
    seen = []

    def reflect(port, data):
        seen.append((port, data))
        return [(port, data[:14] + b"reply" + data[19:])]

    ports = PortSet({7: switch_side}, pcap_dir=tmp_path)
    t = threading.Thread(target=ports.serve, args=(reflect,), daemon=True)
    t.start()
    host = open_raw_socket(host_side)
    try:
        host.send(_frame(b"hello"))
        got = _recv(host)
    finally:
        ports.stop()
        t.join(5)
        ports.close()
        host.close()
    assert seen and seen[0][0] == 7 and seen[0][1].startswith(_frame(b"hello")[:19])
    assert got[14:19] == b"reply"
    assert ports.ports[7].counters.rx_packets >= 1 and ports.ports[7].counters.tx_packets == 1
    pcap_in = (tmp_path / f"{switch_side}_in.pcap").read_bytes()
    assert len(pcap_in) > 24 and b"hello" in pcap_in


def test_pipeline_exception_drops_the_packet_and_keeps_serving(veth_pair):
    switch_side, host_side = veth_pair
    calls = []

    def flaky(port, data):
        calls.append(data)
        if b"boom" in data:
            raise RuntimeError("bug in the pipeline")
        return [(port, data)]

    ports = PortSet({1: switch_side})
    t = threading.Thread(target=ports.serve, args=(flaky,), daemon=True)
    t.start()
    host = open_raw_socket(host_side)
    try:
        host.send(_frame(b"boom"))
        host.send(_frame(b"fine"))
        got = _recv(host)
    finally:
        ports.stop()
        t.join(5)
        ports.close()
        host.close()
    assert b"fine" in got
    assert t.is_alive() is False


def test_unknown_interface_is_a_clear_error():
    with pytest.raises(OSError, match="cannot open interface 'nope0'"):
        PortSet({1: "nope0"})


def test_a_burst_comes_back_complete_and_in_order_and_own_frames_are_not_read_back(veth_pair):
    switch_side, host_side = veth_pair
    ports = PortSet({3: switch_side})
    t = threading.Thread(target=ports.serve, args=(lambda port, data: [(port, data)],))
    t.start()
    host = open_raw_socket(host_side)
    host.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    n = 300
    try:
        for i in range(n):
            host.send(_frame(b"n%05d" % i))
        got = [_recv(host)[14:20] for _ in range(n)]
    finally:
        ports.stop()
        t.join(5)
        ports.close()
        host.close()
    assert got == [b"n%05d" % i for i in range(n)]
    # the frames p4sim sent on the same interface were not received again as input
    assert ports.ports[3].counters.rx_packets == n
    assert ports.ports[3].counters.tx_packets == n


def test_a_burst_into_a_slow_link_waits_in_its_queue_instead_of_being_refused(veth_pair):
    # A frame stays charged to the switch's socket until the shaped link carried it: the
    # socket's send buffer must hold what the link's queue holds (p4sim.ports.SOCKET_BUFFER).
    switch_side, host_side = veth_pair
    subprocess.run(
        ["tc", "qdisc", "add", "dev", switch_side, "root", "tbf", "rate", "10mbit",
         "burst", "1600", "limit", "2000000"],
        check=True,
    )  # fmt: skip
    ports = PortSet({1: switch_side})
    host = open_raw_socket(host_side)
    n = 400  # 231 KB of 578-byte frames: more than a default send buffer holds in flight
    try:
        taken = [ports.transmit(1, _frame(b"s%05d" % i).ljust(578, b"\0")) for i in range(n)]
        got = [_recv(host)[14:20] for _ in range(n)]
    finally:
        ports.close()
        host.close()
    assert all(taken) and ports.ports[1].counters.tx_errors == 0
    assert got == [b"s%05d" % i for i in range(n)]
