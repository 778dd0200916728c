"""A region clear (up to minutes over P4Runtime on a large region) holds no lock that other
jobs need: while one job's region is being cleared, the daemon serves the others (issue
26, case 7). In-process: daemon -> P4Runtime -> p4sim, the clear held open by an event."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from controller.api_client import ControllerApi
from controller.jobs.job import Region
from controller.jobs.job_kinds import kind_of
from controller.jobs.store import JobStore
from controller.p4rt.p4runtime_client import SwitchConnection, SwitchSpec
from controller.systems.aggregator import AGG_JOB, copy_range
from tests.test_controller_daemon import observe
from tests.test_scheduled_jobs import start, submit
from topologies.local_switch import LocalSwitch, PipelineFiles

WAIT_S = 30.0  # only a bound for a failing run: every wait below ends on an event


class HeldClear:
    """Replaces the netreduce kind's ``clear``: a clear of ``region`` tells ``entered`` and
    goes on only once ``release`` is set; every other clear runs as before."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.region: Region | None = None
        self.entered = threading.Event()
        self.release = threading.Event()
        kind = type(kind_of("netreduce"))
        original = kind.clear

        async def clear(kind_self: Any, sw: SwitchConnection, region: Region) -> None:
            if region == self.region:
                self.entered.set()
                await asyncio.get_running_loop().run_in_executor(None, self.release.wait)
            await original(kind_self, sw, region)

        monkeypatch.setattr(kind, "clear", clear)


def in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except Exception as err:  # the test reports it
            out["error"] = err

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_another_jobs_epoch_request_is_answered_while_a_cancelled_region_is_cleared(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldClear(monkeypatch)
    daemon = start(switch, files, tmp_path, pool=64, policy="fifo")
    api = ControllerApi(daemon.url)
    try:
        scheduled = submit(api, [3, 4], **{"class": "be", "epochs": 3})
        plain = int(api.submit({"workers": 2, "window": 8, "worker_ports": [1, 2]})["job_id"])
        region = api.job(plain)["region"]
        held.region = Region(offset=int(region["offset"]), size=int(region["size"]))
        cancel, cancelled = in_thread(lambda: api.cancel(plain))
        assert held.entered.wait(WAIT_S), "the cancel never cleared the region"
        asked, answer = in_thread(lambda: api.epoch(scheduled, 0, 0))
        asked.join(WAIT_S)
        assert "value" in answer, f"the epoch request was not answered during the clear: {answer}"
        assert cancel.is_alive() and not held.release.is_set()  # the clear was still held
        assert answer["value"]["epoch"] == 0
        # meanwhile the job being cleared is gone for the API, and its id is not reused
        assert plain not in [j["job_id"] for j in api.jobs()]
        other = int(api.submit({"workers": 2, "window": 4, "worker_ports": [5, 6]})["job_id"])
        assert other != plain
        owners = {s["job_id"] for s in api.memory()[0]["segments"]}
        assert plain in owners  # its memory is held until the clear ends
        held.release.set()
        cancel.join(WAIT_S)
        assert "value" in cancelled, cancelled
        owners = {s["job_id"] for s in api.memory()[0]["segments"]}
        assert plain not in owners
    finally:
        held.release.set()
        daemon.stop()


def held_regions(api: ControllerApi, job: int) -> list[Region]:
    return [
        Region(int(s["offset"]), int(s["size"]))
        for s in api.memory()[0]["segments"]
        if s["job_id"] == job
    ]


def test_an_epoch_request_is_answered_while_the_scheduler_clears_a_cancelled_jobs_memory(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory the scheduler takes back from a cancelled scheduled job is cleared after
    the daemon's lock is given back: the other job's epoch request is answered meanwhile,
    and the memory stays held (nobody is given it uncleared) until the clear ends."""
    held = HeldClear(monkeypatch)
    daemon = start(switch, files, tmp_path, pool=64, policy="fifo")
    api = ControllerApi(daemon.url)
    try:
        first = submit(api, [1, 2], **{"class": "be", "epochs": 3})
        other = submit(api, [3, 4], **{"class": "be", "epochs": 3})
        region = api.job(first)["region"]
        held.region = Region(offset=int(region["offset"]), size=int(region["size"]))
        assert held.region.size > 0
        cancel, cancelled = in_thread(lambda: api.cancel(first))
        assert held.entered.wait(WAIT_S), "the cancel never cleared the job's memory"
        asked, answer = in_thread(lambda: api.epoch(other, 0, 0))
        asked.join(WAIT_S)
        assert "value" in answer, f"the epoch request was not answered during the clear: {answer}"
        assert cancel.is_alive() and not held.release.is_set()  # the clear was still held
        assert answer["value"]["epoch"] == 0
        assert first not in [j["job_id"] for j in api.jobs()]
        assert held_regions(api, first) == [held.region]  # held until cleared
        mine = Region(answer["value"]["region_offset"], answer["value"]["region_size"])
        assert mine.end <= held.region.offset or held.region.end <= mine.offset
        held.release.set()
        cancel.join(WAIT_S)
        assert "value" in cancelled, cancelled
        assert held_regions(api, first) == []
    finally:
        held.release.set()
        daemon.stop()


def test_an_epoch_request_is_answered_while_a_scheduled_jobs_admission_clears_its_region(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduled job's new region is cleared after the lock is given back: another
    job's epoch request is answered meanwhile, a re-plan does not move the region being
    cleared, and its id is not given to another job."""
    held = HeldClear(monkeypatch)
    daemon = start(switch, files, tmp_path, pool=64, policy="fifo")
    api = ControllerApi(daemon.url)
    try:
        running = submit(api, [1, 2], **{"class": "be", "epochs": 3})
        start_of_free = max(r.end for r in held_regions(api, running))
        # the next job goes right after it (fifo, best fit: the one free block)
        held.region = Region(start_of_free, 12)
        admit, admitted = in_thread(lambda: submit(api, [3, 4], **{"class": "be", "epochs": 3}))
        assert held.entered.wait(WAIT_S), "the admission never cleared the new job's region"
        asked, answer = in_thread(lambda: api.epoch(running, 0, 0))
        asked.join(WAIT_S)
        assert "value" in answer, f"the epoch request was not answered during the clear: {answer}"
        assert admit.is_alive() and not held.release.is_set()
        third = submit(api, [5, 6], **{"class": "be", "epochs": 3})  # a re-plan meanwhile
        assert held.region in [Region(s["offset"], s["size"]) for s in api.memory()[0]["segments"]]
        held.release.set()
        admit.join(WAIT_S)
        assert "value" in admitted, admitted
        new = admitted["value"]
        assert new not in (running, third)
        region = api.job(new)["region"]
        assert Region(int(region["offset"]), int(region["size"])) == held.region
    finally:
        held.release.set()
        daemon.stop()


def test_an_epoch_request_is_answered_while_memory_a_job_switched_away_from_is_cleared(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deadline job makes EDF shrink a running job; once both its workers start the next
    epoch, the memory it no longer uses is cleared after the lock is given back: the
    deadline job's epoch request is answered meanwhile, and that memory is given to it
    only once cleared."""
    held = HeldClear(monkeypatch)
    daemon = start(switch, files, tmp_path, pool=12, policy="edf")
    api = ControllerApi(daemon.url)
    try:
        running = submit(api, [1, 2], **{"class": "be", "epochs": 10})
        for w in (0, 1):
            assert api.epoch(running, w, 0)["region_size"] == 12
        need = {"class": "md", "epochs": 4, "deadline_s": 30, "model_bytes": 1_500_000}
        urgent = submit(api, [3, 4], **need)
        kept = api.job(running)["region"]
        assert 0 < kept["size"] < 12, kept  # shrunk from its next epoch on
        held.region = Region(kept["offset"] + kept["size"], 12 - kept["size"])
        api.epoch(running, 0, 1)
        switched, _ = in_thread(lambda: api.epoch(running, 1, 1))
        assert held.entered.wait(WAIT_S), "the memory switched away from was never cleared"
        asked, answer = in_thread(lambda: api.epoch(urgent, 0, 0))
        asked.join(WAIT_S)
        assert "value" in answer, f"the epoch request was not answered during the clear: {answer}"
        assert switched.is_alive() and not held.release.is_set()
        assert answer["value"]["region_size"] == 0  # the memory is not given uncleared
        held.release.set()
        switched.join(WAIT_S)
        for w in (0, 1):
            r = api.epoch(urgent, w, 0, wait=5)
        assert (r["region_offset"], r["region_size"]) == (held.region.offset, held.region.size)
    finally:
        held.release.set()
        daemon.stop()


def test_a_clear_cut_short_keeps_the_memory_held_until_a_later_request_clears_it(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request clearing a cancelled scheduled job's memory is itself cancelled in the
    middle of the clear (as when the daemon stops): the memory stays held, never given
    uncleared, and the next request that clears memory clears and frees it."""
    held = HeldClear(monkeypatch)
    daemon = start(switch, files, tmp_path, pool=64, policy="fifo")
    api = ControllerApi(daemon.url)
    try:
        first = submit(api, [1, 2], **{"class": "be", "epochs": 3})
        other = submit(api, [3, 4], **{"class": "be", "epochs": 3})
        region = api.job(first)["region"]
        held.region = Region(offset=int(region["offset"]), size=int(region["size"]))
        manager = daemon.manager
        assert manager is not None

        async def cancel_cut_short() -> bool:
            request = asyncio.ensure_future(manager.cancel(first))
            loop = asyncio.get_running_loop()
            entered = await loop.run_in_executor(None, held.entered.wait, WAIT_S)
            request.cancel()  # the request ends in the middle of its clear
            try:
                await request
            except asyncio.CancelledError:
                return entered
            return False

        assert daemon.call(cancel_cut_short()), "the cancel's clear was not cut short"
        assert held_regions(api, first) == [held.region]  # still held: not cleared yet
        held.region = None  # the next clear runs at once
        held.release.set()
        api.epoch(other, 0, 0)  # a request that clears what is waiting
        assert held_regions(api, first) == []
    finally:
        held.release.set()
        daemon.stop()


def test_memory_a_stopped_daemon_left_uncleared_is_cleared_by_its_next_run(
    switch: LocalSwitch, files: PipelineFiles, tmp_path: Path
) -> None:
    """A daemon stopped between taking memory back from a scheduled job and clearing it
    leaves the memory in its store (as ``_hold_for_clearing`` writes it): the next run
    holds it again, clears it on the switch before anyone is given it, and frees it."""
    daemon = start(switch, files, tmp_path, pool=64, policy="fifo")
    api = ControllerApi(daemon.url)
    try:
        job = submit(api, [1, 2], **{"class": "be", "epochs": 3})
        r = api.job(job)["region"]
        region = Region(int(r["offset"]), int(r["size"]))
        api.cancel(job)
    finally:
        daemon.stop()
    cells = copy_range(region)

    async def dirty() -> None:  # what the job's packets left there, and the store's row
        async with SwitchConnection(SwitchSpec(0, switch.address, election_id=20)) as conn:
            await conn.fill_register(AGG_JOB, cells, job)

    asyncio.run(dirty())
    store = JobStore(tmp_path / "controller.db")
    store.add_clearing(0, "netreduce", job, [region])
    store.close()
    daemon = start(switch, files, tmp_path, pool=64, policy="fifo")
    api = ControllerApi(daemon.url)
    try:
        assert set(observe(switch, (AGG_JOB, cells))) == {0}  # cleared at start
        assert held_regions(api, job) == []  # and free
        store = JobStore(tmp_path / "controller.db")
        assert store.clearings() == []
        store.close()
    finally:
        daemon.stop()
