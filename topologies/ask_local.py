"""An ASK job on one machine: mappers and reducer around a p4sim switch in this process.

Example::

    with AskBench(mappers=2, rows=64, window=8) as bench:
        out = bench.run([words_of_mapper0, words_of_mapper1])   # iterables of (key, value)
        assert out.result == Counter(...)

The switch is p4sim running ``p4src/inc.p4``; the job is admitted by the controller's own
code (``controller.systems.ask.Ask.install`` over P4Runtime), forwarding is installed as a
topology's runtime file would. Frames go through ``Switch.send`` directly, so a run needs
no root, no Mininet and no sockets: this is what the exactness tests and the switch-side
benchmark use (``topologies/ask.py`` runs the same hosts over real links). Time is virtual
(one round = ``ROUND`` seconds of the hosts' clocks), so timeouts do not depend on the
machine's speed.

Impairment (``Impairment``): each frame any host sends is dropped, duplicated or held
back and delivered after later frames (reordered) with the given probabilities, from a
seeded RNG. Epochs: every ``swap_every`` rounds the reducer moves the mappers to the next
epoch and, once they all moved, drains the copy they left (``hosts/ask/reducer.py``).
"""

from __future__ import annotations

import asyncio
import random
import socket
import tempfile
import time
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.jobs.job import Job, host_ip, host_mac
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import Pipeline, SwitchConnection, SwitchSpec
from controller.systems.ask import Ask, AskRequest, layout_of, reducer_id
from hosts.ask.mapper import MapperConfig, MapperFlow
from hosts.ask.reducer import Reducer
from hosts.ask.wire import parse
from topologies.local_switch import LocalSwitch, compile_pipeline
from wire.framing import decapsulate, encapsulate
from wire.header import ProtocolError

INC_P4 = Path(__file__).resolve().parents[1] / "p4src" / "inc.p4"
ROUND = 0.01  # virtual seconds per round


@dataclass(frozen=True)
class Impairment:
    loss: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0
    seed: int = 1


@dataclass
class RunResult:
    result: dict[Hashable, int]
    rounds: int
    seconds: float  # wall clock of the run
    frames: int  # frames the switch processed
    epochs: int
    mapper_stats: list[Any] = field(default_factory=list)
    reducer_stats: Any = None
    reducer_bytes: int = 0  # bytes of frames the switch sent to the reducer's port
    impaired: dict[str, int] = field(default_factory=dict)  # frames lost, duplicated, held back


def _mac(port: int) -> bytes:
    return bytes.fromhex(host_mac(port).replace(":", ""))


def _ip(port: int) -> bytes:
    return socket.inet_aton(host_ip(port))


class AskBench:
    """One switch with one ASK job: mappers on ports 1..M, the reducer on port M+1."""

    def __init__(
        self, mappers: int, rows: int = 64, window: int = 8, job_id: int = 1, offset: int = 0,
        partitions: int | None = None, build_dir: Path | None = None,
    ) -> None:  # fmt: skip
        self.n = mappers
        self.req = AskRequest(workers=mappers, rows=rows, window=window, partitions=partitions)
        self.kind = Ask()
        self.job: Job = self.kind.make_job(self.req, job_id, 0, Region(offset, rows), 0.0)
        self._tmp = tempfile.TemporaryDirectory(prefix="ask-")
        self.build = build_dir or Path(self._tmp.name)
        self.local = LocalSwitch(device_id=0)

    def __enter__(self) -> AskBench:
        files = compile_pipeline(INC_P4, self.build)
        self.local.start()

        async def install() -> None:
            pipeline = Pipeline.from_files(files.p4info, files.device_config)
            async with SwitchConnection(SwitchSpec(0, self.local.address), pipeline) as conn:
                await self.kind.clear(conn, self.job.region)
                await self.kind.install(conn, self.job)

        self._files = files
        asyncio.run(install())
        self._runs = 0
        self.sw = self.local.server.switch
        for p in range(1, self.n + 2):
            dst_mac, dst_ip = int.from_bytes(_mac(p)), int.from_bytes(_ip(p))
            self.sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (dst_ip, 32)}, "ipv4_forward",
                              {"dst_mac": dst_mac, "port": p})  # fmt: skip
        return self

    def __exit__(self, *exc: object) -> None:
        self.local.stop()
        self._tmp.cleanup()

    def clear(self) -> None:
        """The job's rows and seen entries as after admission (psns may start again)."""

        async def clear() -> None:
            pipeline = Pipeline.from_files(self._files.p4info, self._files.device_config)
            async with SwitchConnection(SwitchSpec(0, self.local.address), pipeline) as conn:
                await self.kind.clear(conn, self.job.region)

        asyncio.run(clear())

    def mapper_config(self, w: int, **kw: Any) -> MapperConfig:
        lay = layout_of(self.job, w)
        return MapperConfig(
            job_id=self.job.job_id, flow=w, part_base=lay.part_base, part_size=lay.part_size,
            window=lay.window, **kw,
        )  # fmt: skip

    def run(
        self,
        inputs: list[Iterable[tuple[Hashable, int]]] | list[Iterable[Mapping[Hashable, int]]],
        impair: Impairment = Impairment(),
        swap_every: int = 0,
        chunked: bool = False,
        max_rounds: int = 200_000,
        **mapper_kw: Any,
    ) -> RunResult:
        """Send each mapper's input (pairs, or with ``chunked`` an iterable of count maps)
        through the switch and return the reducer's exact result."""
        if self._runs:
            self.clear()
        self._runs += 1
        rng = random.Random(impair.seed)
        mappers = [MapperFlow(self.mapper_config(w, **mapper_kw)) for w in range(self.n)]
        red = Reducer(self.job.job_id, reducer_id(self.job), range(self.job.region.offset,
                      self.job.region.end))  # fmt: skip
        rport = self.n + 1
        for m, inp in zip(mappers, inputs, strict=True):
            for item in inp:
                if chunked and isinstance(item, tuple):  # (keys, values) columns
                    m.add_columns(*item)
                elif chunked:
                    m.add_counts(item)  # type: ignore[arg-type]
                else:
                    k, v = item  # type: ignore[misc]
                    m.add(k, v)  # type: ignore[arg-type]
            m.flush()
        held: list[tuple[int, bytes]] = []
        frames = 0
        reducer_bytes = 0
        epoch, moving, epochs = 1, False, 1

        impaired = {"lost": 0, "duplicated": 0, "reordered": 0}

        def emit(port: int, frame: bytes, out: list[tuple[int, bytes]]) -> None:
            r = rng.random()
            if r < impair.loss:
                impaired["lost"] += 1
                return
            if r < impair.loss + impair.reorder:
                impaired["reordered"] += 1
                held.append((port, frame))
                return
            out.append((port, frame))
            if rng.random() < impair.dup:
                impaired["duplicated"] += 1
                out.append((port, frame))

        start = time.perf_counter()
        rounds = 0
        finished = final = False
        while not finished:
            rounds += 1
            if rounds > max_rounds:
                raise RuntimeError(f"ASK run did not finish in {max_rounds} rounds")
            now = rounds * ROUND
            queue: list[tuple[int, bytes]] = []
            for w, m in enumerate(mappers):
                for payload in m.to_send(now):
                    emit(w + 1, encapsulate(payload, _mac(w + 1), _mac(rport), _ip(w + 1),
                                            _ip(rport)), queue)  # fmt: skip
            for payload in red.drain_requests(now):
                emit(rport, encapsulate(payload, _mac(rport), _mac(rport), _ip(rport), _ip(rport)),
                     queue)  # fmt: skip
            if held and (rng.random() < 0.5 or not queue):
                queue.append(held.pop(rng.randrange(len(held))))
            while queue:
                port, frame = queue.pop(0)
                frames += 1
                for out_port, data in self.sw.send(port, frame):
                    view = decapsulate(data)
                    if view is None:
                        continue
                    payload = bytes(view)
                    try:
                        h = parse(payload)[0]
                    except ProtocolError:
                        continue
                    if out_port == rport:
                        reducer_bytes += len(data)
                        ack = red.on_packet(payload)
                        if ack is not None:
                            dst = h.worker_id + 1
                            emit(rport, encapsulate(ack, _mac(rport), _mac(dst), _ip(rport),
                                                    _ip(dst)), queue)  # fmt: skip
                    elif 1 <= out_port <= self.n:
                        mappers[out_port - 1].on_ack(h)
            # epochs: swap on schedule; at the end, move everyone on and drain the last one
            done_sending = all(m.idle for m in mappers)
            if moving and all(m.moved for m in mappers):
                moving = False
                red.start_drain(epoch - 1)
            elif not moving and not red.draining:
                if done_sending and not held:
                    if final:  # the last epoch is drained
                        finished = True
                    else:  # move everyone on so that the last epoch can be drained
                        final, epoch, moving = True, epoch + 1, True
                        for m in mappers:
                            m.start_epoch(epoch)
                elif swap_every and rounds % swap_every == 0:
                    epoch, epochs, moving = epoch + 1, epochs + 1, True
                    for m in mappers:
                        m.start_epoch(epoch)
        seconds = time.perf_counter() - start
        vocabs = [m.vocab for m in mappers]
        result = red.result(vocabs, lambda fps: [m.counts_for(fps) for m in mappers])
        return RunResult(
            result=result, rounds=rounds, seconds=seconds, frames=frames, epochs=epochs,
            mapper_stats=[m.stats for m in mappers], reducer_stats=red.stats,
            reducer_bytes=reducer_bytes, impaired=impaired,
        )  # fmt: skip


def chunks(words: Iterable[Hashable], size: int) -> Iterator[dict[Hashable, int]]:
    """Counts of consecutive chunks of ``size`` words (a bounded map-side combine)."""
    buf: dict[Hashable, int] = {}
    n = 0
    for w in words:
        buf[w] = buf.get(w, 0) + 1
        n += 1
        if n == size:
            yield buf
            buf, n = {}, 0
    if buf:
        yield buf
