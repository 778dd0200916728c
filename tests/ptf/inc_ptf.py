"""PTF base class for ``p4src/inc.p4``: hosts, jobs, INC packets and the drop counter.

Example (a system's PTF module, e.g. ``tests/ptf/netreduce.py``)::

    class SumIsMulticast(IncTest):
        def runTest(self):
            req = NetReduceRequest(window=4, **self.hosts_for((1, 2), agg_port=3))
            job = self.admit(req, job_id=1, offset=0)
            pkts = [self.contribution(job, w, psn=0, values=[w + 1] * SLOTS) for w in (0, 1)]
            self.send(1, pkts[0])
            self.assert_nothing_out(1)                # absorbed: the switch waits for worker 1
            self.send(2, pkts[1])
            self.verify_results(job, pkts[1], values=[3] * SLOTS, bitmap=0b11)

The topology is PTF's: switch port ``p`` is PTF port ``p``, and host ``h{p}`` "sits" there
with MAC ``00:00:00:00:00:0p`` and IP ``10.0.0.p`` (Mininet's numbering, which the
controller's job defaults follow). ``setUp`` (after the pipeline push) installs plain
forwarding to every host, IPv4 ``/32`` routes and L2 entries, like a topology's
``sN-runtime.json``. Jobs of any kind are admitted by the controller's own code: the
kind's ``JobKind.install`` (``controller/jobs/job_kinds.py``), e.g.
``controller/systems/netreduce.py``.

Waiting: nothing here sleeps for readiness. A drop is awaited on the ``inc_drops`` counter;
a packet that should produce nothing is followed by a probe frame on the same port (the
switch handles a port's packets in order), and once the probe is out,
``verify_no_other_packets`` checks that nothing else came.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
from p4runtime_ptf import P4RuntimeTest
from ptf import ptfutils, testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

import controller.systems  # noqa: F401  (loads every kind)
from controller.jobs.job import Job, JobRequest, Worker, host_ip, host_mac
from controller.jobs.job_kinds import kind_of
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import table_entry
from wire.header import INC_UDP_PORT, SLOTS, DropReason, Flag, Op, aggregator_address
from wire.scapy_layers import INC

DROP_COUNTER = "IncIngress.inc_drops"
IPV4_LPM = "IncIngress.forwarder.ipv4_lpm"
L2_EXACT = "IncIngress.forwarder.l2_exact"
PROBE_ETHERTYPE = 0x88B5  # IEEE local experimental: never parsed as IPv4, switched at L2
MIN_PORTS = 5


class Host(NamedTuple):
    port: int
    mac: str
    ip: str


def host(port: int) -> Host:
    """The host attached to switch port ``port``: Mininet's ``h{port}``."""
    return Host(port, host_mac(port), host_ip(port))


def int32_sum(*vectors: Sequence[int]) -> list[int]:
    """Element-wise sum with the switch's 32-bit two's complement wrap-around."""
    total = np.sum(np.array(vectors, dtype=np.int64), axis=0)
    return [int(v) for v in total.astype(np.uint32).astype(np.int32)]


class IncTest(P4RuntimeTest):
    """A PTF test of ``p4src/inc.p4`` with plain forwarding to every host installed."""

    _probe_ids = itertools.count(1)

    def setUp(self) -> None:
        super().setUp()
        self.ports = sorted(port for _, port in testutils.ptf_ports())
        if len(self.ports) < MIN_PORTS:
            self.fail(f"the INC PTF tests need {MIN_PORTS} ports, PTF has {self.ports}")
        self.insert(self.forwarding_entries())
        self.drops_at_start = self.drops()

    def forwarding_entries(self) -> list[Any]:
        entries = []
        for p in self.ports:
            h = host(p)
            entries.append(
                table_entry(IPV4_LPM, {"hdr.ipv4.dstAddr": f"{h.ip}/32"},
                            "IncIngress.forwarder.ipv4_forward", dst_mac=h.mac, port=p)
            )  # fmt: skip
            entries.append(
                table_entry(L2_EXACT, {"hdr.ethernet.dstAddr": h.mac},
                            "IncIngress.forwarder.l2_forward", port=p)
            )  # fmt: skip
        return entries

    # -- jobs --------------------------------------------------------------------------------

    def hosts_for(self, worker_ports: Sequence[int], agg_port: int) -> dict[str, Any]:
        """The address fields of a job request (any kind) whose worker ``i`` is the host on
        ``worker_ports[i]`` and whose aggregation address is the host on ``agg_port``."""
        hosts = [host(p) for p in worker_ports]
        return {
            "workers": len(hosts),
            "worker_ports": tuple(h.port for h in hosts),
            "worker_ips": tuple(h.ip for h in hosts),
            "worker_macs": tuple(h.mac for h in hosts),
            "agg_ip": host(agg_port).ip,
            "agg_mac": host(agg_port).mac,
        }

    def admit(self, request: JobRequest, job_id: int, offset: int) -> Job:
        """Admit ``request`` as job ``job_id`` at ``offset`` of its kind's memory pool, written
        by the kind's own ``install`` (the controller's code, in its order) and removed by its
        ``uninstall`` after the test. The region needs no clearing: the pipeline is new."""
        kind = kind_of(request.kind)
        region = Region(offset, kind.region_size(request))
        job = kind.make_job(request, job_id, self.spec.device_id, region, created_at=0.0)
        self.call(kind.install(self.sw, job))
        self._undo.append(lambda: kind.uninstall(self.sw, job))
        return job

    # -- packets -----------------------------------------------------------------------------

    def inc_packet(self, src: Host, dst: Host, ident: int = 1, **inc: Any) -> Packet:
        """An INC packet from host ``src`` to host ``dst`` (UDP ``INC_UDP_PORT`` both ways,
        checksum 0 as hosts send it); ``inc`` sets INC header fields and ``values``. For every
        system: key-value and consensus messages are built here too."""
        return (
            Ether(src=src.mac, dst=dst.mac)
            / IP(src=src.ip, dst=dst.ip, id=ident & 0xFFFF, flags="DF")
            / UDP(sport=INC_UDP_PORT, dport=INC_UDP_PORT, chksum=0)
            / INC(**inc)
        )

    def contribution(
        self,
        job: Job,
        worker_id: int,
        psn: int,
        values: Sequence[int],
        /,
        **fields: Any,
    ) -> Packet:
        """Worker ``worker_id``'s packet for ``psn`` as the host side sends it: to the job's
        aggregation address, at the aggregator NetReduce addressing gives ``psn``.
        ``fields`` override INC header fields (``op``, ``flags``, ``agg_idx``, ...)."""
        w = job.worker(worker_id)
        idx, ver = aggregator_address(psn, job.region.offset, job.region.size)
        inc = dict(op=Op.AGG_SYNC, job_id=job.job_id, worker_id=worker_id, psn=psn,
                   agg_idx=idx, ver=ver, values=list(values))  # fmt: skip
        inc.update(fields)
        src, dst = Host(w.port, w.mac, w.ip), Host(0, job.agg_mac, job.agg_ip)
        return self.inc_packet(src, dst, ident=psn, **inc)

    def result_of(
        self, request: Packet, values: Sequence[int], bitmap: int, to: Worker | None = None
    ) -> Packet:
        """What the switch makes of ``request`` when it completes (or finds completed) the
        aggregation: addresses swapped, RESULT set, the sums and the contributor bitmap.
        ``to``: the multicast copy for that worker (egress ``result_dst``); None: the
        unicast answer to the sender itself."""
        res = request.copy()
        res[Ether].src, res[Ether].dst = request[Ether].dst, request[Ether].src
        res[IP].src, res[IP].dst = request[IP].dst, request[IP].src
        res[IP].ttl = 64
        del res[IP].chksum  # recomputed by the switch, and by Scapy here
        res[INC].flags = int(request[INC].flags) | Flag.RESULT
        res[INC].bitmap = bitmap
        res[INC].values = list(values)
        if to is not None:
            res[Ether].dst, res[IP].dst, res[INC].worker_id = to.mac, to.ip, to.worker_id
        return Ether(bytes(res))

    def routed(self, pkt: Packet, to_port: int) -> Packet:
        """``pkt`` as Forwarder's ``ipv4_forward`` sends it to ``host(to_port)``."""
        out = pkt.copy()
        out[Ether].src, out[Ether].dst = pkt[Ether].dst, host(to_port).mac
        out[IP].ttl = pkt[IP].ttl - 1
        del out[IP].chksum
        return Ether(bytes(out))

    # -- sending and expecting ------------------------------------------------------------------

    def send(self, port: int, *pkts: Packet | bytes) -> None:
        for pkt in pkts:
            testutils.send_packet(self, port, bytes(pkt))

    def verify_results(
        self, job: Job, completing: Packet, values: Sequence[int], bitmap: int
    ) -> None:
        """One result copy on every worker's port, each addressed to that worker, and
        nothing else."""
        pkts = [self.result_of(completing, values, bitmap, to=w) for w in job.workers]
        testutils.verify_each_packet_on_each_port(self, pkts, [w.port for w in job.workers])

    def assert_nothing_out(self, *ports: int) -> None:
        """Every packet sent so far on ``ports`` was handled, and none produced a packet.

        Per port, a probe frame follows the packets (the switch handles a port's packets in
        order) and is switched to another port; every frame that comes out before the
        probe fails the test. ``verify_no_other_packets`` then covers late replicas."""
        for port in ports:
            out = next(p for p in self.ports if p != port)
            tag = f"ptf probe {next(self._probe_ids):08d}".encode().ljust(46, b".")
            probe = Ether(src=host(port).mac, dst=host(out).mac, type=PROBE_ETHERTYPE) / Raw(tag)
            self.send(port, probe)
            while True:
                got = testutils.dp_poll(self, timeout=ptfutils.default_timeout)
                if isinstance(got, self.dataplane.PollFailure):
                    self.fail(f"probe sent on port {port} did not come out on port {out}")
                if got.port == out and bytes(got.packet) == bytes(probe):
                    break
                self.fail(
                    f"unexpected packet on port {got.port} (expected none before the probe"
                    f" sent on port {port}):\n{got.format()}"
                )
        testutils.verify_no_other_packets(self)

    # -- the drop counter -------------------------------------------------------------------

    def drops(self) -> dict[DropReason, int]:
        cells = self.counters(DROP_COUNTER)
        return {r: cells.get(int(r), 0) for r in DropReason}

    def drops_since_start(self) -> dict[DropReason, int]:
        now = self.drops()
        return {
            r: now[r] - self.drops_at_start[r]
            for r in DropReason
            if now[r] != self.drops_at_start[r]
        }

    def assert_drops(self, **expected: int) -> None:
        """Wait until ``inc_drops`` has counted ``expected`` (by reason name, e.g.
        ``UNKNOWN_JOB=2``) since ``setUp``, then check that no other reason counted."""
        want = {DropReason[name]: n for name, n in expected.items() if n}

        def reached() -> bool:
            got = self.drops_since_start()
            return all(got.get(r, 0) >= n for r, n in want.items())

        self.wait_for(f"inc_drops {want}", reached)
        self.assertEqual(self.drops_since_start(), want)

    def assert_no_drops(self) -> None:
        self.assertEqual(self.drops_since_start(), {})


def values_of(*rows: Iterable[int]) -> list[list[int]]:
    """Rows of ``SLOTS`` values (shorter rows repeat), for readable test data."""
    out = []
    for row in rows:
        r = list(row)
        out.append([r[i % len(r)] for i in range(SLOTS)])
    return out
