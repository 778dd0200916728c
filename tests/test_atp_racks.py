"""ATP on two levels (leaf-spine), packet by packet on three in-process p4sim switches.

Each switch's role for the job is table configuration written by the controller's own code
(``controller.systems.atp.Atp.install``): leaf A (workers 0, 1 on ports 1, 2, uplink port 3), leaf B
(workers 2, 3 on ports 1, 2, uplink 3), spine (leaf A on port 1, leaf B on port 2, the PS on
port 3). The test carries every packet a switch sends on to the next hop (uplink, downlink,
PS) and drives ``hosts.atp.ps`` with what reaches the PS, so each worker's result is checked
against the sum of all four workers' values.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest

from controller.jobs.job import host_ip, host_mac
from controller.jobs.memory_manager import Region
from controller.p4rt.p4runtime_client import Pipeline, SwitchConnection, SwitchSpec
from controller.systems.atp import Atp, AtpRequest
from hosts.atp.ps import AtpAggregator, AtpJobSpec
from p4sim.switch import Switch
from topologies.local_switch import LocalSwitch, compile_pipeline
from wire.framing import encapsulate
from wire.header import SLOTS, AtpEvent, Flag, Header, atp_index, pack, unpack

INC_P4 = Path(__file__).resolve().parents[1] / "p4src" / "inc.p4"
JOB = 9
PS_HOST = 5  # the PS is host h5: 10.0.0.5
UPLINK = 3
RACKS = {0: (0, 1), 1: (2, 3)}  # rack -> its workers' job-wide ids


def mac(n: int) -> bytes:
    return bytes.fromhex(host_mac(n).replace(":", ""))


def ip(n: int) -> bytes:
    return socket.inet_aton(host_ip(n))


class Racks:
    """Leaves, spine and PS; ``send`` carries packets hop by hop until they reach hosts."""

    def __init__(self, leaves: list[Switch], spine: Switch, pool: Region) -> None:
        self.leaves, self.spine, self.pool = leaves, spine, pool
        self.ps = AtpAggregator({JOB: AtpJobSpec(4, host_ip(1))})
        self.results: dict[int, dict[int, np.ndarray]] = {w: {} for w in range(4)}

    def worker_packet(self, w: int, psn: int, values: np.ndarray, flags: int = 0) -> None:
        rack, port = w // 2, w % 2 + 1
        h = Header(job_id=JOB, worker_id=w, psn=psn, flags=flags,
                   agg_idx=atp_index(JOB, psn, self.pool.offset, self.pool.size))  # fmt: skip
        frame = encapsulate(pack(h, values), mac(w + 1), mac(PS_HOST), ip(w + 1), ip(PS_HOST))
        self._at_leaf(rack, port, frame)

    def _at_leaf(self, rack: int, port: int, frame: bytes) -> None:
        for out_port, data in self.leaves[rack].send(port, frame):
            if out_port == UPLINK:
                self._at_spine(rack + 1, data)
            else:  # a result copy for worker (out_port - 1) of this rack
                h, v = unpack(data[42:])
                assert h.flags & Flag.RESULT and h.worker_id == RACKS[rack][out_port - 1]
                self.results[h.worker_id].setdefault(h.psn, v)

    def _at_spine(self, port: int, frame: bytes) -> None:
        for out_port, data in self.spine.send(port, frame):
            if out_port == UPLINK:  # to the PS; its answers come back in on the same port
                for payload, _ in self.ps.process(*unpack(data[42:])):
                    back = encapsulate(payload, mac(PS_HOST), mac(1), ip(PS_HOST), ip(1))
                    self._at_spine(UPLINK, back)
            else:
                self._at_leaf(out_port - 1, UPLINK, data)

    def events(self, sw: Switch) -> dict[str, int]:
        return {e.name: sw.counter_read("atp_events", int(e))[0] for e in AtpEvent}


def install(address: str, files: object, job: object) -> None:
    async def run() -> None:
        pipeline = Pipeline.from_files(files.p4info, files.device_config)  # type: ignore[attr-defined]
        async with SwitchConnection(SwitchSpec(0, address), pipeline) as conn:
            await Atp().install(conn, job)  # type: ignore[arg-type]

    asyncio.run(run())


@pytest.fixture(params=[64, 2], ids=["roomy-pool", "tiny-pool"])
def racks(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Racks]:
    files = compile_pipeline(INC_P4, tmp_path)
    pool = Region(0, request.param)
    kind = Atp()
    with ExitStack() as stack:
        leaves = []
        for rack, ids in RACKS.items():
            local = stack.enter_context(LocalSwitch(device_id=0))
            req = AtpRequest(
                workers=2, window=8, pool_size=pool.size, ps_port=UPLINK, role="leaf",
                up_id=rack, first_worker=ids[0], all_workers=4, wire_job_id=JOB,
                worker_ports=[1, 2],
                worker_ips=[host_ip(i + 1) for i in ids],
                worker_macs=[host_mac(i + 1) for i in ids],
                agg_ip=host_ip(PS_HOST), agg_mac=host_mac(PS_HOST),
            )  # fmt: skip
            install(local.address, files, kind.make_job(req, JOB, 0, pool, 0))
            leaves.append(local.server.switch)
        local = stack.enter_context(LocalSwitch(device_id=0))
        req = AtpRequest(
            workers=2, window=8, pool_size=pool.size, ps_port=UPLINK, role="spine",
            all_workers=4, worker_ports=[1, 2], worker_ips=[host_ip(1), host_ip(3)],
            worker_macs=[host_mac(1), host_mac(3)],
            agg_ip=host_ip(PS_HOST), agg_mac=host_mac(PS_HOST),
        )  # fmt: skip
        install(local.address, files, kind.make_job(req, JOB, 0, pool, 0))
        spine = local.server.switch
        # The spine forwards what it does not consume (fallbacks) to the PS by its address.
        key = {"hdr.ipv4.dstAddr": (int.from_bytes(ip(PS_HOST)), 32)}
        params = {"dst_mac": int.from_bytes(mac(PS_HOST)), "port": UPLINK}
        spine.table_add("ipv4_lpm", key, "ipv4_forward", params)
        yield Racks(leaves, spine, pool)


def vals(w: int, psn: int) -> np.ndarray:
    return np.random.default_rng((w, psn)).integers(-(2**24), 2**24, SLOTS).astype(np.int32)


def test_every_worker_gets_the_sum_of_both_racks_through_leaves_spine_and_ps(
    racks: Racks,
) -> None:
    psns = range(8)
    for w in range(4):  # a window each, worker after worker: psns overlap in the pool
        for psn in psns:
            racks.worker_packet(w, psn, vals(w, psn))
    # Whatever the pool left unfinished (collisions hold aggregators) the workers resend.
    for psn in psns:
        for w in range(4):
            if psn not in racks.results[w]:
                racks.worker_packet(w, psn, vals(w, psn), Flag.RETX)
    for w in range(4):
        assert sorted(racks.results[w]) == list(psns), w
        for psn in psns:
            want = sum(vals(v, psn).astype(np.int64) for v in range(4)).astype(np.int32)
            assert np.array_equal(racks.results[w][psn], want), (w, psn)
    spine, leaf = racks.events(racks.spine), racks.events(racks.leaves[0])
    assert spine["COMPLETED"] > 0 and leaf["COMPLETED"] > 0
    if racks.pool.size == 2:
        assert leaf["COLLISION"] > 0
    else:
        # Roomy pool: every psn was summed by the leaves and the spine, and released.
        assert spine["COMPLETED"] == len(psns) and spine["RELEASED"] == len(psns)
        assert leaf["RELEASED"] == len(psns) and racks.ps.stats.aggregates == len(psns)


def test_a_job_over_two_racks_never_collides_with_itself_window_after_window(
    racks: Racks,
) -> None:
    """The workers' windows as the worker keeps them (the range's size, here 64 or 2):
    every worker sends a window, then the next once its results are in. No switch ever
    finds the job's own use in the way: no collision, no fallback, every sum exact."""
    window = min(racks.pool.size, 8)
    psns = range(4 * window)
    for first in range(0, len(psns), window):
        for w in range(4):
            for psn in range(first, first + window):
                racks.worker_packet(w, psn, vals(w, psn))
        assert all(set(range(first, first + window)) <= set(racks.results[w]) for w in range(4))
    for w in range(4):
        for psn in psns:
            want = sum(vals(v, psn).astype(np.int64) for v in range(4)).astype(np.int32)
            assert np.array_equal(racks.results[w][psn], want), (w, psn)
    for sw in (racks.spine, *racks.leaves):
        ev = racks.events(sw)
        assert ev["COMPLETED"] == len(psns) == ev["RELEASED"], ev
        assert ev["COLLISION"] == ev["FOLLOWED"] == ev["RETX_FALLBACK"] == 0, ev


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--racks", "1"], "--racks needs at least 2 racks"),
        (["--bits", "40"], "--bits must be"),
        (["--bench", "--delay-ms", "-1"], "--delay-ms must be in"),
        (["--bench", "--bw-mbps", "0"], "--bw-mbps must be in"),
    ],
)
def test_the_experiments_bad_arguments_get_a_one_line_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from topologies.atp.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args", [["--method", "switch", "--window", "8"], ["--method", "ps", "--window", "-2"]]
)
def test_vector_job_window_is_only_for_host_methods(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A switch method's window is bound by the job's switch memory: no override."""
    from hosts.vector_job import main

    base = ["--controller", "unix:/nonexistent", "--job-id", "1", "--worker-id", "0"]
    with pytest.raises(SystemExit) as e:
        main([*base, "--out", "/tmp/unused", *args])
    assert e.value.code == 2
    assert "--window: a positive count, for --method ps or ring only" in capsys.readouterr().err


def test_vector_job_barrier_holds_every_worker_until_all_are_ready(tmp_path: Path) -> None:
    """The bench's concurrent jobs: no worker passes the barrier before the last arrives;
    one waiting for a worker that never comes gives up at its bound."""
    import threading
    import time

    from hosts.vector_job import wait_barrier

    passed: list[float] = []

    def arrive_late() -> None:
        time.sleep(0.2)
        wait_barrier(str(tmp_path / "b"), 2, "1.1")

    late = threading.Thread(target=arrive_late)
    late.start()
    t0 = time.monotonic()
    wait_barrier(str(tmp_path / "b"), 2, "1.0")
    passed.append(time.monotonic() - t0)
    late.join()
    assert passed[0] >= 0.15
    t0 = time.monotonic()
    wait_barrier(str(tmp_path / "c"), 2, "1.0", limit_s=0.1)
    assert 0.1 <= time.monotonic() - t0 < 2.0
