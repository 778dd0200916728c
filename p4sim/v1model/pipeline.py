"""The v1model pipeline as BMv2 ``simple_switch`` runs it.

Example::

    pipe = Pipeline(program.instantiate(ctx), pre, ctx)
    pipe.process(0, packet_bytes)      # -> [(egress_port, bytes), ...]

Order: parser → verifyChecksum → ingress → traffic manager → egress → computeChecksum →
deparser. At the end of ingress, in BMv2's order: ingress-to-egress clone, resubmit,
multicast (``mcast_grp != 0``), drop (``egress_spec == 511``), unicast. At the end of
egress: egress-to-egress clone, drop, deparse, recirculate or output (with truncation).

A parser error does not drop the packet: ``parser_error`` is set and ingress runs, as in
BMv2. Resubmit/recirculate/clone chains are cut after ``max_passes`` passes so that a
buggy program cannot loop forever.

Between ingress and egress the traffic manager (``traffic_manager.py``) holds packets for
ports with a queue rate; they run egress when ``release()`` finds their departure time
come (``process`` releases what is due too). Ports without a rate skip the queues.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from p4sim.compiler.program import Instance
from p4sim.compiler.rt import Ctx, ExitSignal, PacketIn, PacketOut, ParserErr
from p4sim.runtime.pre import PacketReplicationEngine
from p4sim.v1model.traffic_manager import TrafficManager

DROP_PORT = 511
NORMAL, INGRESS_CLONE, EGRESS_CLONE, COALESCED, RECIRC, REPLICATION, RESUBMIT = range(7)


@dataclass
class _Ingress:
    data: bytes
    port: int
    itype: int
    preserved: tuple[int, tuple] | None
    passes: int


@dataclass
class _Egress:
    hdr: Any
    meta: Any
    sm: Any
    payload: bytes
    port: int
    passes: int
    truncate: int = 0
    queued: bool = False  # came out of a traffic-manager queue (its metadata are set)


class Pipeline:
    """Runs packets through one instance of a compiled program."""

    def __init__(
        self,
        inst: Instance,
        pre: PacketReplicationEngine,
        ctx: Ctx,
        log: Callable[[str], None] | None = None,
        max_passes: int = 32,
        tm: TrafficManager | None = None,
    ) -> None:
        self.inst = inst
        self.tm = tm if tm is not None else TrafficManager()
        self.pre = pre
        self.ctx = ctx
        self.log = log
        self.max_passes = max_passes
        self.t0 = time.monotonic_ns()
        f = inst.fns
        self.parser, self.verify, self.ingress = f["parser"], f["verify_checksum"], f["ingress"]
        self.egress, self.compute, self.deparser = (
            f["egress"],
            f["compute_checksum"],
            f["deparser"],
        )
        self.fl_save, self.fl_restore = f["fl_save"], f["fl_restore"]
        self.H, self.M, self.S = inst.hdr_cls, inst.meta_cls, inst.sm_cls
        self._qmeta = hasattr(self.S(), "enq_timestamp")  # the program sees queueing data
        self.clock: Callable[[], int] = self._monotonic_us

    def _monotonic_us(self) -> int:
        return (time.monotonic_ns() - self.t0) // 1000

    def now_us(self) -> int:
        """Microseconds since the switch started (the timestamps' clock; tests may set
        ``clock`` to a function of their own)."""
        return self.clock()

    def _log(self, msg: str) -> None:
        if self.log is not None:
            self.log(msg)

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Run one packet and everything it spawns to completion."""
        out: list[tuple[int, bytes]] = []
        ing: deque[_Ingress] = deque([_Ingress(bytes(data), port, NORMAL, None, 0)])
        eg: deque[_Egress] = deque()
        self._run(ing, eg, out)
        if self.tm.active:
            self._release(out)
        return out

    def release(self) -> list[tuple[int, bytes]]:
        """Run egress for the queued packets whose departure time has come."""
        out: list[tuple[int, bytes]] = []
        if len(self.tm):
            self._release(out)
        return out

    def next_departure_us(self) -> int | None:
        """Switch-clock microseconds of the next queued departure, or None."""
        t = self.tm.next_departure()
        return None if t is None else int(t + 0.999)

    def _run(self, ing: deque, eg: deque, out: list[tuple[int, bytes]]) -> None:
        tm = self.tm
        while ing or eg:
            while ing:
                self.run_ingress(ing.popleft(), ing, eg)
            if eg:
                job = eg.popleft()
                if tm.active and tm.shaped(job.port):
                    self.enqueue(job)
                else:
                    self.run_egress(job, ing, eg, out)

    def enqueue(self, job: _Egress) -> None:
        sm, now = job.sm, self.now_us()
        depth = self.tm.enqueue(job, job.port, getattr(sm, "priority", 0), now)
        if depth is None:
            self._log(f"Egress queue of port {job.port} full: packet dropped")
            return
        job.queued = True
        if hasattr(sm, "enq_qdepth"):
            sm.enq_timestamp = now & 0xFFFFFFFF
            sm.enq_qdepth = depth & 0x7FFFF

    def _release(self, out: list[tuple[int, bytes]]) -> None:
        while True:
            now = self.now_us()
            got = self.tm.dequeue(now)
            if got is None:
                return
            job, _, depth = got
            sm = job.sm
            if hasattr(sm, "deq_qdepth"):
                sm.deq_timedelta = (now - sm.enq_timestamp) & 0xFFFFFFFF
                sm.deq_qdepth = depth & 0x7FFFF
            ing: deque[_Ingress] = deque()
            eg: deque[_Egress] = deque()
            self.run_egress(job, ing, eg, out)
            self._run(ing, eg, out)

    # -- ingress ------------------------------------------------------------------

    def parse(self, data: bytes, hdr: Any, meta: Any, sm: Any) -> PacketIn:
        """Run the parser; a parser error is recorded in ``sm.parser_error`` and the packet
        goes on (v1model), with what was not parsed left in the returned PacketIn."""
        pk = PacketIn(data)
        try:
            self.parser(pk, hdr, meta, sm)
        except ParserErr as err:
            if err.error is not None:
                sm.parser_error = err.error
            if self.log is not None:
                self._log(f"Parser stopped: error {err.error or 'reject'}")
        return pk

    def run_ingress(self, job: _Ingress, ing: deque, eg: deque) -> None:
        ctx = self.ctx
        sm, hdr, meta = self.S(), self.H(), self.M()
        now = self.now_us()
        sm.ingress_port = job.port
        sm.packet_length = len(job.data)
        sm.instance_type = job.itype
        sm.ingress_global_timestamp = now
        if job.preserved is not None:
            self.fl_restore(job.preserved[0], meta, job.preserved[1])
        ctx.sm, ctx.now = sm, now
        ctx.reset_requests()
        if self.log is not None:
            self._log(
                f"Processing packet received on port {job.port} "
                f"(instance type {job.itype}, {len(job.data)} bytes)"
            )
        pk = self.parse(job.data, hdr, meta, sm)
        payload = pk.remaining()
        ctx.payload = payload
        try:
            self.verify(hdr, meta)
        except ExitSignal:
            pass
        try:
            self.ingress(hdr, meta, sm)
        except ExitSignal:
            pass
        if ctx.clone is not None:
            self.clone_i2e(job, meta, ctx.clone, eg)
        if ctx.digest is not None:
            ctx.digests.append(ctx.digest)
        if ctx.resubmit is not None:
            if job.passes + 1 > self.max_passes:
                self._log("Dropping packet: too many resubmit/recirculate passes")
                return
            vals = self.fl_save(ctx.resubmit, meta)
            self._log("Resubmitting packet")
            ing.append(_Ingress(job.data, job.port, RESUBMIT, (ctx.resubmit, vals), job.passes + 1))
            return
        if sm.mcast_grp != 0:
            reps = self.pre.replicas(sm.mcast_grp)
            if self.log is not None:
                self._log(f"Multicast group {sm.mcast_grp}: {len(reps)} replica(s)")
            for p, rid in reps:
                h2, m2, s2 = hdr.copy(), meta.copy(), sm.copy()
                s2.egress_rid = rid
                s2.instance_type = REPLICATION
                eg.append(_Egress(h2, m2, s2, payload, p, job.passes))
            return
        if sm.egress_spec == DROP_PORT:
            self._log("Dropping packet at the end of ingress")
            return
        if self.log is not None:
            self._log(f"Egress port is {sm.egress_spec}")
        # truncate() in ingress applies when the packet leaves (a packet register in BMv2)
        eg.append(_Egress(hdr, meta, sm, payload, sm.egress_spec, job.passes, ctx.truncate))

    def clone_i2e(self, job: _Ingress, meta: Any, req: tuple[int, int], eg: deque) -> None:
        """The clone is the packet as received, parsed again (as BMv2 does), with fresh
        metadata except the preserved field list."""
        sid, fl = req
        sess = self.pre.clone_session(sid)
        if sess is None:
            if self.log is not None:
                self._log(f"Clone session {sid} is not configured: no clone")
            return
        vals = self.fl_save(fl, meta) if fl else ()
        ctx = self.ctx
        saved_sm = ctx.sm
        for p, rid in self.pre.clone_replicas(sid):
            h2, m2, s2 = self.H(), self.M(), self.S()
            s2.ingress_port = job.port
            s2.packet_length = len(job.data)
            ctx.sm = s2
            pk = self.parse(job.data, h2, m2, s2)
            if fl:
                self.fl_restore(fl, m2, vals)
            s2.instance_type = INGRESS_CLONE
            s2.egress_rid = rid
            if self.log is not None:
                self._log(f"Cloning packet at ingress to port {p} (session {sid})")
            eg.append(_Egress(h2, m2, s2, pk.remaining(), p, job.passes, sess.truncate_bytes))
        ctx.sm = saved_sm

    # -- egress -------------------------------------------------------------------

    def run_egress(self, job: _Egress, ing: deque, eg: deque, out: list[tuple[int, bytes]]) -> None:
        ctx = self.ctx
        sm, hdr, meta = job.sm, job.hdr, job.meta
        now = self.now_us()
        sm.egress_port = job.port
        sm.egress_spec = 0  # BMv2 clears it so that a drop in egress can be seen
        sm.egress_global_timestamp = now
        if self._qmeta and not job.queued:  # no queue on this port: an idle BMv2 queue's
            sm.enq_timestamp = now & 0xFFFFFFFF
        ctx.sm, ctx.now, ctx.payload = sm, now, job.payload
        ctx.reset_requests()
        if self.log is not None:
            self._log(f"Egress processing on port {job.port}")
        try:
            self.egress(hdr, meta, sm)
        except ExitSignal:
            pass
        if ctx.clone is not None:
            self.clone_e2e(job, ctx.clone, eg)
        if sm.egress_spec == DROP_PORT:
            self._log("Dropping packet at the end of egress")
            return
        try:
            self.compute(hdr, meta)
        except ExitSignal:
            pass
        po = PacketOut()
        self.deparser(po, hdr)
        data = po.bytes() + job.payload
        if ctx.recirc is not None:
            if job.passes + 1 > self.max_passes:
                self._log("Dropping packet: too many resubmit/recirculate passes")
                return
            vals = self.fl_save(ctx.recirc, meta)
            self._log("Recirculating packet")
            ing.append(_Ingress(data, sm.ingress_port, RECIRC, (ctx.recirc, vals), job.passes + 1))
            return
        cut = ctx.truncate or job.truncate
        if cut:
            data = data[:cut]
        if self.log is not None:
            self._log(f"Transmitting packet of {len(data)} bytes on port {job.port}")
        out.append((job.port, data))

    def clone_e2e(self, job: _Egress, req: tuple[int, int], eg: deque) -> None:
        """The clone carries the headers as egress left them, fresh metadata."""
        sid, fl = req
        sess = self.pre.clone_session(sid)
        if sess is None:
            if self.log is not None:
                self._log(f"Clone session {sid} is not configured: no clone")
            return
        if job.passes + 1 > self.max_passes:
            self._log("Dropping egress clone: too many passes")
            return
        vals = self.fl_save(fl, job.meta) if fl else ()
        for p, rid in self.pre.clone_replicas(sid):
            m2, s2 = self.M(), self.S()
            if fl:
                self.fl_restore(fl, m2, vals)
            s2.instance_type = EGRESS_CLONE
            s2.ingress_port = job.sm.ingress_port
            s2.packet_length = job.sm.packet_length
            s2.egress_rid = rid
            if self.log is not None:
                self._log(f"Cloning packet at egress to port {p} (session {sid})")
            eg.append(
                _Egress(job.hdr.copy(), m2, s2, job.payload, p, job.passes + 1, sess.truncate_bytes)
            )
