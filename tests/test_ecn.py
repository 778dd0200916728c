"""ECN (RFC 3168) on ATP's path: the switch marks, the worker halves its window.

- ``p4src/ecn.p4`` on the in-process switch with an egress queue of 1000 packets/s on port
  2 and a virtual clock: a burst of ECN-capable packets builds the queue, and those that
  find it ``ECN_THRESHOLD`` (configuration.p4) or more deep leave marked CE; packets that are not
  ECN-capable are never marked.
- ``hosts/atp/worker.py`` against ATP's PS on loopback whose results all arrive marked CE
  (the PS's socket sends CE, standing in for a congested switch): the worker halves its
  window (``ecn_cuts``) and the sum stays exact; unmarked, it never cuts.
"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from hosts.atp.ps import AtpJobSpec, AtpParameterServer
from hosts.atp.worker import AtpClient
from p4sim.switch import Switch
from p4sim.v1model.traffic_manager import TrafficManager
from tests.test_p4src_constants import p4_constants
from topologies.experiment import host_ip, host_mac

ROOT = Path(__file__).resolve().parents[1]
THRESHOLD = p4_constants()["ECN_THRESHOLD"]


def udp_frame(tos: int, ident: int) -> bytes:
    """A UDP datagram from h1 to h2 with the TOS byte ``tos`` (IPv4 checksum left 0: the
    switch recomputes it)."""
    payload = bytes(64)
    udp = (5000).to_bytes(2, "big") * 2 + (8 + len(payload)).to_bytes(2, "big") + bytes(2)
    total = 20 + len(udp) + len(payload)
    ip = bytes(
        [0x45, tos, *total.to_bytes(2, "big"), *ident.to_bytes(2, "big"), 0, 0, 64, 17, 0, 0]
    )
    ip += socket.inet_aton(host_ip(1)) + socket.inet_aton(host_ip(2))
    eth = bytes.fromhex(host_mac(2).replace(":", "")) + bytes.fromhex(host_mac(1).replace(":", ""))
    return eth + b"\x08\x00" + ip + udp + payload


def test_the_switch_marks_ecn_capable_packets_that_find_a_deep_queue() -> None:
    sw = Switch.from_file(str(ROOT / "p4src/inc.p4"), tm=TrafficManager())
    now = [1000]
    sw.pipeline.clock = lambda: now[0]
    dst_mac = int.from_bytes(bytes.fromhex(host_mac(2).replace(":", "")))
    dst_ip = int.from_bytes(socket.inet_aton(host_ip(2)))
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (dst_ip, 32)}, "ipv4_forward",
                 {"dst_mac": dst_mac, "port": 2})  # fmt: skip
    sw.set_queue_rate(1000, port=2)
    out = []
    for i in range(30):  # at one instant: the queue grows by one per packet
        out += sw.send(1, udp_frame(0b10 if i % 2 == 0 else 0, i))
    now[0] += 1_000_000
    out += sw.release()
    assert len(out) == 30 and {p for p, _ in out} == {2}
    tos = {int.from_bytes(f[18:20], "big"): f[15] for _, f in out}  # by IP id
    for i in range(30):
        if i % 2:
            assert tos[i] == 0, i  # not ECN-capable: never marked
        else:
            # The first packet leaves at once; packet i found the i - 1 after it queued.
            assert tos[i] == (0b11 if i - 1 >= THRESHOLD else 0b10), (i, tos[i])


def run_worker(mark: bool, backend: str) -> tuple[AtpClient, np.ndarray]:
    c = AtpClient(5, 0, 1, 0, 64, 16, dest=("127.0.0.1", 9), bind=("127.0.0.1", 0), backend=backend)
    spec = AtpJobSpec(1, "127.0.0.1", result_port=c.endpoint.address[1])
    ps = AtpParameterServer({5: spec}, bind=("127.0.0.1", 0))
    if mark:  # every result leaves the PS marked CE, as a congested switch would mark it
        ps.endpoint._sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0b11)  # type: ignore[attr-defined]
    ps.start()
    c.dest = ps.address
    data = np.arange(32 * 200, dtype=np.int32)
    try:
        return c, c.allreduce_int(data)
    finally:
        c.close()
        ps.stop()


@pytest.mark.parametrize("backend", ["native", "python"])
def test_a_worker_halves_its_window_on_results_marked_ce(backend: str) -> None:
    marked, got = run_worker(mark=True, backend=backend)
    assert got.tolist() == list(range(32 * 200))
    assert marked.stats.ecn_cuts >= 1 and marked.stats.window_cuts >= 1
    assert marked.endpoint.stats.ce_marked > 0
    plain, got = run_worker(mark=False, backend=backend)
    assert got.tolist() == list(range(32 * 200))
    assert plain.stats.ecn_cuts == 0
