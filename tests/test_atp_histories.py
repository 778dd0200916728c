"""Generated histories of scheduled ATP jobs: submits, cancels (ids reused lowest first),
re-plans still pending when a job ends, epochs that apply them, and uses of the pool,
complete or left partial. Every piece the switch sends a PS must be the exact sum of the
contributions, of the job now holding the id, that its bitmap names, each at most once;
a complete use's pieces name both workers; after a cancel the pool holds nothing of the
id (docs/protocol.md, ATP, A2 and A5; issue 26, case 3). In-process: daemon -> P4Runtime
-> p4sim, packets fed into the switch's ports, seeded."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from controller.api_client import ControllerApi
from controller.jobs.sizing import AGGREGATOR_BYTES
from tests.test_atp_reuse import COMMON, PS_PORT, reclaim_gap
from tests.test_scheduled_jobs import IP, MAC, RTT_S, start, submit
from topologies.local_switch import LocalSwitch, PipelineFiles
from wire.framing import encapsulate
from wire.header import ATP_POOL_SIZE, SLOTS, Flag, Header, atp_index, pack, unpack

PAIRS = ((1, 2), (3, 4))  # the worker ports of at most two jobs at once
STEPS = 150
MD_EPOCHS = 6
PSNS = 16  # every job uses psns 0..PSNS-1 (in order), as the job before it with its id did


@dataclass
class Live:
    """One job holding an id: its worker ports, its epoch and region, what it sent."""

    job_id: int
    ports: tuple[int, int]
    epoch: int = -1
    region: tuple[int, int] = (0, 0)  # (offset, size) of its current epoch
    next_psn: int = 0
    used: set[tuple[int, int]] = field(default_factory=set)  # regions it sent uses under
    sent: dict[int, dict[int, int]] = field(default_factory=dict)  # psn -> worker -> value
    pieces: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # psn -> (bm, v)
    whole: set[int] = field(default_factory=set)  # psns whose sum the switch completed


def throughput(aggregators: int) -> float:
    """The rate (bytes/s) at which a job wants ``aggregators`` at the tests' RTT."""
    return aggregators * AGGREGATOR_BYTES / RTT_S


def held(switch: LocalSwitch, job_id: int) -> int:
    """Aggregators of the pool that hold a use of ``job_id`` (count != 0)."""
    tags = switch.server.switch.extern("IncIngress.atp.atp_job").values
    counts = switch.server.switch.extern("IncIngress.atp.atp_count").values
    return sum(1 for t, c in zip(tags, counts, strict=True) if t == job_id and c != 0)


class History:
    def __init__(self, switch: LocalSwitch, api: ControllerApi, seed: int) -> None:
        self.switch, self.api, self.rng = switch, api, random.Random(seed)
        self.live: dict[int, Live] = {}
        self.log: list[str] = []  # the history so far, for a failure's message

    def fail(self, why: str) -> None:
        raise AssertionError(f"{why}\nhistory:\n  " + "\n  ".join(self.log))

    # -- operations ----------------------------------------------------------------------

    def submit(self) -> None:
        used = {j.ports for j in self.live.values()}
        ports = next(p for p in PAIRS if p not in used)
        want = self.rng.choice([ATP_POOL_SIZE, ATP_POOL_SIZE // 2, 3 * ATP_POOL_SIZE // 4])
        fields: dict[str, Any] = {"class": "be", "epochs": 10**6, "throughput": throughput(want)}
        if self.live and self.rng.random() < 0.7:  # a deadline job: EDF shrinks the other
            mb = self.rng.choice([1, 2, 3]) * 10**6 * AGGREGATOR_BYTES  # needs 400..1200
            fields = {"class": "md", "epochs": MD_EPOCHS, "deadline_s": 10, "model_bytes": mb}
        job = submit(self.api, list(ports), **COMMON, **fields)
        if job in self.live:
            self.fail(f"job id {job} given while job {job} runs")
        lowest = min(set(range(1, 100)) - set(self.live))
        if job != lowest:
            self.fail(f"job id {job} given, not the lowest free one, {lowest}")
        self.live[job] = Live(job, ports)
        if held(self.switch, job):
            self.fail(f"job {job} admitted while the pool holds uses of its id")
        size = f"model {fields['model_bytes']} B" if "model_bytes" in fields else f"want {want}"
        self.log.append(f"submit {job} {fields['class']} {size} on ports {ports}")

    def next_epoch(self, live: Live) -> None:
        e = live.epoch + 1
        replies = [self.api.epoch(live.job_id, w, e) for w in (0, 1)]
        if replies[0]["done"]:  # its last epoch: the job ends, its memory goes back
            self.check_whole(live)
            del self.live[live.job_id]
            self.log.append(f"done {live.job_id}")
            if held(self.switch, live.job_id):
                self.fail(f"job {live.job_id} done: the pool still holds uses of its id")
            return
        if replies[0]["wait"]:  # a layout change waits for both workers: ask again
            replies[0] = self.api.epoch(live.job_id, 0, e)
        assert not replies[1]["wait"] or replies[1]["region_size"] == 0, replies
        live.epoch = e
        live.region = (replies[0]["region_offset"], replies[0]["region_size"])
        self.log.append(f"epoch {live.job_id} {e}: region {live.region}")
        if live.region[1] and reclaim_gap(self.switch, live.job_id) < live.region[1]:
            self.fail(f"job {live.job_id}: reclaim gap below its window {live.region[1]}")

    def use(self, live: Live) -> None:
        """Worker 0 sends the next psn; worker 1 too, unless the use is left partial."""
        psn = live.next_psn
        live.next_psn += 1
        live.used.add(live.region)
        workers = [0, 1] if self.rng.random() < 0.6 else [0]
        live.sent[psn] = {}
        for w in workers:
            value = self.rng.randrange(1, 1000)
            live.sent[psn][w] = value
            for port, frame in self.send(live, w, psn, value):
                if port == PS_PORT:
                    self.piece(frame)
                elif port in live.ports:
                    self.result(live, frame)
                else:
                    self.fail(f"job {live.job_id} psn {psn}: a packet out of port {port}")
        self.log.append(f"use {live.job_id} psn {psn} by {workers}: {live.sent[psn]}")

    def send(self, live: Live, w: int, psn: int, value: int) -> list[tuple[int, bytes]]:
        offset, size = live.region
        idx = atp_index(live.job_id, psn, offset, size)
        h = Header(job_id=live.job_id, worker_id=w, psn=psn, agg_idx=idx, epoch=live.epoch)
        port = live.ports[w]
        values = np.full(SLOTS, value, dtype=np.int32)
        frame = encapsulate(pack(h, values), MAC(port), MAC(PS_PORT), IP(port), IP(PS_PORT))
        return self.switch.server.switch.send(port, frame)

    def result(self, live: Live, frame: bytes) -> None:
        """A result the switch multicast to a worker: the sum of both workers' values."""
        h, values = unpack(frame[42:])
        sent = live.sent.get(h.psn, {})
        if h.job_id != live.job_id or not h.flags & Flag.RESULT or len(sent) != 2:
            self.fail(f"job {live.job_id}: to a worker, {h} (psn sent by {sorted(sent)})")
        elif values.tolist() != [sum(sent.values())] * SLOTS:
            self.fail(f"job {live.job_id} psn {h.psn}: result {values[0]} to a worker")

    def piece(self, frame: bytes) -> None:
        """A piece reaching the PS: the exact sum of what its bitmap's workers sent; a
        RESULT is the sum the switch completed (again when the aggregator is taken over)."""
        h, values = unpack(frame[42:])
        live = self.live.get(h.job_id)
        if live is None or h.psn not in live.sent:
            self.fail(f"a piece of job {h.job_id} psn {h.psn} that no live job sent")
            return
        named = [w for w in (0, 1) if h.bitmap >> w & 1]
        sent = live.sent[h.psn]
        if h.flags & Flag.FALLBACK and len(named) != 1:
            self.fail(f"job {h.job_id} psn {h.psn}: a fallback naming {named}")
        if any(w not in sent for w in named):
            self.fail(f"job {h.job_id} psn {h.psn}: a piece names {named}, sent {sent}")
        want = sum(sent[w] for w in named)
        if values.tolist() != [want] * SLOTS:
            self.fail(f"job {h.job_id} psn {h.psn}: piece {named} sums {values[0]}, not {want}")
        if h.flags & Flag.RESULT:
            live.whole.add(h.psn)
        else:
            live.pieces.setdefault(h.psn, []).append((h.bitmap, int(values[0])))

    def cancel(self, live: Live) -> None:
        self.check_whole(live)
        target = self.api.job(live.job_id)["region"]
        start, end = target["offset"], target["offset"] + target["size"]
        outside = [r for r in live.used if not start <= r[0] <= r[0] + r[1] <= end]
        self.api.cancel(live.job_id)
        del self.live[live.job_id]
        self.log.append(
            f"cancel {live.job_id}" + f" (used {outside}, outside its target)" * bool(outside)
        )
        if held(self.switch, live.job_id):
            self.fail(f"job {live.job_id} cancelled: the pool still holds uses of its id")

    def check_whole(self, live: Live) -> None:
        """Each worker's contribution reached the PS once; a complete use reached it whole."""
        for psn, sent in live.sent.items():
            bitmaps = [bm for bm, _ in live.pieces.get(psn, [])]
            union = 0
            for bm in bitmaps:
                if union & bm:
                    self.fail(f"job {live.job_id} psn {psn}: a worker in two pieces {bitmaps}")
                union |= bm
            if psn in live.whole and bitmaps:
                self.fail(f"job {live.job_id} psn {psn}: summed in the switch and in pieces")
            if len(sent) == 2 and union != 0b11 and psn not in live.whole:
                self.fail(f"job {live.job_id} psn {psn}: complete, pieces {bitmaps} only")

    # -- the generator -------------------------------------------------------------------

    def step(self) -> None:
        live = list(self.live.values())
        choices = ["submit"] * 2 * (len(live) < len(PAIRS))
        running = [j for j in live if j.epoch >= 0 and j.region[1] and j.next_psn < PSNS]
        choices += ["epoch"] * 3 * bool(live) + ["use"] * 8 * bool(running)
        choices += ["cancel"] * bool(live)
        op = self.rng.choice(choices)
        if op == "submit":
            self.submit()
        elif op == "epoch":
            self.next_epoch(self.rng.choice(live))
        elif op == "use":
            self.use(self.rng.choice(running))
        else:
            self.cancel(self.rng.choice(live))


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_cancelled_and_resubmitted_scheduled_atp_jobs_never_see_the_old_jobs_uses(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path, seed: int
) -> None:
    daemon = start(switch, files, tmp_path, pool=16, policy="edf",
                   line_rate=throughput(ATP_POOL_SIZE))  # fmt: skip
    api = ControllerApi(daemon.url)
    try:
        history = History(switch, api, seed)
        for _ in range(STEPS):
            history.step()
        for live in list(history.live.values()):
            history.cancel(live)
        # what the history must have done to say anything: ids reused, a job cancelled
        # with uses sent under a region its re-planned target no longer covers
        submits = [line.split()[1] for line in history.log if line.startswith("submit")]
        assert len(submits) > len(set(submits)), history.log
        assert any("outside its target" in line for line in history.log), history.log
    finally:
        daemon.stop()
