"""The impairment relay between two network namespaces (root): frames really cross it."""

import os
import subprocess
import sys

import pytest

from topologies.impair_relay import Impairment, netem_args

pytestmark = pytest.mark.root

SENDER = r"""
import socket, struct, time, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[1])):
    s.sendto(struct.pack('!Id', i, time.monotonic()), ('10.9.0.2', 9999))
    if i % 20 == 0:
        time.sleep(0.002)
"""
RECEIVER = r"""
import socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (p4sim.ports): loses nothing late
s.bind(('10.9.0.2', 9999))
s.settimeout(2.0)
print('ready', flush=True)
seen = []
try:
    while True:
        i, sent = struct.unpack('!Id', s.recv(64))
        seen.append(f'{i},{time.monotonic() - sent:.6f}')
except socket.timeout:
    pass
print(' '.join(seen))
"""


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


@pytest.fixture
def three_namespaces():
    tag = f"ir{os.getpid() % 100000}"
    left, mid, right = f"{tag}l", f"{tag}m", f"{tag}r"
    try:
        for ns in (left, mid, right):
            _sh("ip", "netns", "add", ns)
        _sh(
            "ip",
            "link",
            "add",
            "name",
            "hx",
            "netns",
            left,
            "type",
            "veth",
            "peer",
            "name",
            "ra",
            "netns",
            mid,
        )
        _sh(
            "ip",
            "link",
            "add",
            "name",
            "rb",
            "netns",
            mid,
            "type",
            "veth",
            "peer",
            "name",
            "hy",
            "netns",
            right,
        )
        for ns, dev, addr in ((left, "hx", "10.9.0.1/24"), (right, "hy", "10.9.0.2/24")):
            _sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
        for ns, devs in ((left, ["hx", "lo"]), (mid, ["ra", "rb", "lo"]), (right, ["hy", "lo"])):
            for dev in devs:
                _sh("ip", "-n", ns, "link", "set", "dev", dev, "up")
        # Checksum offload would leave partial UDP checksums in the relayed frames.
        for ns, dev in ((left, "hx"), (right, "hy")):
            _sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off")
        # Static neighbours: ARP must not be subject to the impairment under test.
        for ns, dev, ip, peer_ns, peer_dev in (
            (left, "hx", "10.9.0.2", right, "hy"),
            (right, "hy", "10.9.0.1", left, "hx"),
        ):
            mac = subprocess.run(
                ["ip", "-n", peer_ns, "-br", "link", "show", peer_dev],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()[2]
            _sh("ip", "-n", ns, "neigh", "add", ip, "lladdr", mac, "dev", dev)
        yield left, mid, right
    finally:
        for ns in (left, mid, right):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def _run_through_relay(namespaces, imp: Impairment, n: int) -> list[int]:
    return [i for i, _ in _through_relay(namespaces, imp, n)]


def _through_relay(namespaces, imp: Impairment, n: int) -> list[tuple[int, float]]:
    """Datagrams 0..n-1 from left to right across the relay: (number, seconds on the way)
    in arrival order (CLOCK_MONOTONIC is one clock in every namespace)."""
    left, mid, right = namespaces
    relay = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            mid,
            sys.executable,
            "-m",
            "topologies.impair_relay",
            "ra",
            "rb",
            "--loss",
            str(imp.loss),
            "--dup",
            str(imp.dup),
            "--reorder",
            str(imp.reorder),
            "--seed",
            str(imp.seed),
            "--delay-ms",
            str(imp.delay_s * 1000),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert relay.stdout is not None and "ready" in relay.stdout.readline()
        receiver = subprocess.Popen(
            ["ip", "netns", "exec", right, sys.executable, "-c", RECEIVER],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
        subprocess.run(
            ["ip", "netns", "exec", left, sys.executable, "-c", SENDER, str(n)], check=True
        )
        out, _ = receiver.communicate(timeout=30)
    finally:
        relay.terminate()
        relay.wait(10)
    pairs = [x.split(",") for x in out.split()]
    return [(int(i), float(t)) for i, t in pairs]


def test_clean_relay_delivers_every_datagram_in_order(three_namespaces):
    seen = _run_through_relay(three_namespaces, Impairment(), 500)
    assert seen == list(range(500))


def test_relay_loses_duplicates_and_reorders_at_the_configured_rates(three_namespaces):
    n = 2000
    seen = _run_through_relay(
        three_namespaces, Impairment(loss=0.10, dup=0.05, reorder=0.05, seed=3), n
    )
    distinct = set(seen)
    lost = n - len(distinct)
    dups = len(seen) - len(distinct)
    inversions = sum(1 for a, b in zip(seen, seen[1:], strict=False) if b < a)
    assert 0.05 * n < lost < 0.15 * n
    assert 0.02 * n < dups < 0.09 * n
    assert inversions > 0.01 * n


def test_delay_holds_every_frame_for_at_least_the_delay_and_keeps_the_order(three_namespaces):
    seen = _through_relay(three_namespaces, Impairment(delay_s=0.04), 300)
    assert [i for i, _ in seen] == list(range(300))
    assert min(t for _, t in seen) >= 0.04  # a lower bound: no load makes a frame early


def test_netem_equivalent_arguments():
    assert netem_args(Impairment(loss=0.05, dup=0.01)) == ["netem", "loss", "5%", "duplicate", "1%"]
    assert netem_args(Impairment(delay_s=0.01)) == ["netem", "delay", "10ms"]


def test_probabilities_outside_zero_one_are_rejected():
    with pytest.raises(ValueError, match="loss must be a probability"):
        Impairment(loss=1.5)
    with pytest.raises(ValueError, match="delay must be in"):
        Impairment(delay_s=-0.001)
