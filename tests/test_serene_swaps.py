"""Mode swaps of a serene job that meet each other, a cancel, or late packets of older
modes: every round is aggregated under exactly one mode (S1 in docs/protocol.md), in-process
(daemon -> P4Runtime -> p4sim, packets fed into the switch's ports)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api_client import ApiError, ControllerApi
from controller.daemon import ControllerDaemon
from controller.jobs.job_kinds import parse_request
from controller.systems import sync_modes
from tests.test_controller_daemon import http, start_daemon
from tests.test_serene_control import send
from topologies.local_switch import LocalSwitch, PipelineFiles
from wire.header import SLOTS, Flag, unpack


@pytest.fixture
def daemon(switch: LocalSwitch, files: PipelineFiles, tmp_path: Path) -> Iterator[ControllerDaemon]:
    d = start_daemon(switch, files, tmp_path / "controller.db")
    yield d
    d.stop()


def serene(api: ControllerApi, mode: str, workers: int = 3) -> int:
    body = {"kind": "serene", "workers": workers, "window": 4, "mode": mode}
    return int(api.submit(body)["job_id"])


def test_two_mode_changes_at_once_are_one_swap_and_one_refusal(daemon: ControllerDaemon) -> None:
    """Both requests arrive together: one applies, the other is refused (409), so no
    epoch can be aggregated under both new modes."""
    api = ControllerApi(daemon.url)
    for _ in range(3):  # a fresh job each time: each pair meets at the same state
        job = serene(api, "sync")
        gate = threading.Barrier(2)
        answers: dict[str, tuple[int, dict[str, Any]]] = {}

        def ask(
            mode: str, job: int = job, gate: threading.Barrier = gate, answers: Any = answers
        ) -> None:
            gate.wait()
            answers[mode] = http("POST", f"{daemon.url}/jobs/{job}/mode", {"mode": mode})

        threads = [threading.Thread(target=ask, args=(m,)) for m in ("partial 2", "bounded 2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(code for code, _ in answers.values())
        assert codes == [200, 409], answers
        won = next(m for m, (code, _) in answers.items() if code == 200)
        state = api.sync_state(job)
        assert (state["before"], state["mode"], state["fence"]) == ("sync", won, False)
        assert api.job(job)["params"]["mode"] == won  # what a switch restart re-installs


def test_a_cancel_and_resubmit_during_a_swap_never_gets_the_old_jobs_mode(
    daemon: ControllerDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap of job 1 is between its fence and its final write when job 1 is cancelled
    and a new job takes id 1: the new job's entry must be its own (2 workers, sync)."""
    api = ControllerApi(daemon.url)
    old = serene(api, "partial 2", workers=3)
    assert daemon.manager is not None
    manager = daemon.manager
    read_clocks = sync_modes.read_clocks
    calls = {"n": 0}
    replaced = threading.Event()

    async def cancel_and_resubmit() -> None:
        await manager.cancel(old)
        await manager.submit(parse_request({"kind": "serene", "workers": 2, "window": 4}))
        replaced.set()

    async def racing_read_clocks(sw: Any, job: Any) -> sync_modes.Clocks:
        calls["n"] += 1
        if calls["n"] == 2:  # the fence is written: a cancel and a re-submit come in
            task = asyncio.ensure_future(cancel_and_resubmit())
            await asyncio.wait({task}, timeout=1.0)  # blocked there if the swap holds a lock
        return await read_clocks(sw, job)

    monkeypatch.setattr(sync_modes, "read_clocks", racing_read_clocks)
    code, _ = http("POST", f"{daemon.url}/jobs/{old}/mode", {"mode": "bounded 1"})
    assert code in (200, 404)  # applied to the old job, or found it gone
    assert replaced.wait(30)
    monkeypatch.setattr(sync_modes, "read_clocks", read_clocks)
    new = api.job(old)
    assert new["n_workers"] == 2
    state = api.sync_state(old)
    assert (state["before"], state["mode"], state["fence"]) == ("sync", "sync", False)
    assert state["clocks"] == [2**32 - 1] * 2


def test_a_late_contribution_of_a_partial_round_is_not_added_after_two_later_swaps(
    daemon: ControllerDaemon, switch: LocalSwitch
) -> None:
    """Epoch 0 is partial 2: workers 0 and 2 complete it, worker 1's packet comes late and
    is served the result. Then bounded 1 from epoch 1. A second swap must not forget that
    epoch 0 was partial: a delayed duplicate of worker 1's late packet judged under bounded
    (quorum 3) would be added, and the round would complete a second time with all three."""
    api = ControllerApi(daemon.url)
    job = serene(api, "partial 2")
    cfgs = [api.worker_config(job, w) for w in range(3)]
    send(switch, cfgs[0], 0, 0)
    assert len(send(switch, cfgs[2], 0, 0)) == 3  # complete at two: 1 + 3
    late = send(switch, cfgs[1], 0, 0)
    assert len(late) == 1 and unpack(late[0][1][42:])[1].tolist() == [4] * SLOTS
    assert api.set_mode(job, "bounded 1")["boundary_epoch"] == 1
    swapped = False
    for epoch in range(1, 6):
        for cfg in cfgs:
            send(switch, cfg, epoch, epoch)
        try:
            api.set_mode(job, "sync" if epoch % 2 else "bounded 1")
            swapped = True
        except ApiError as err:
            assert "in progress" in str(err)
            continue
        duplicate = send(switch, cfgs[1], 0, 0)  # the late packet again, delayed
        for _, frame in duplicate:
            header, values = unpack(frame[42:])
            assert header.flags & Flag.RESULT and header.bitmap == 0b101, header
            assert values.tolist() == [4] * SLOTS
        break
    assert swapped
