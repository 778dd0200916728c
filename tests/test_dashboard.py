"""The live dashboard and /metrics, against a daemon with a running job.

The daemon runs in-process against p4sim's P4Runtime server; the job's four workers are
played by a thread that feeds their contributions into the switch's ports (worker 3 lags
two rounds behind: the straggler) and reports their progress over the API, as
hosts/transport/progress_report.py does. The dashboard is loaded by headless Chromium (Debian's
``chromium``, installed by ``make test``); /metrics is parsed with the Prometheus client's
own parser and compared with the switch's counters read over P4Runtime."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from finsy import P4CounterEntry, P4DirectCounterEntry
from prometheus_client.parser import text_string_to_metric_families

from controller.api_client import ControllerApi
from controller.daemon import ControllerDaemon, DaemonConfig
from controller.p4rt.p4runtime_client import SwitchConnection, SwitchSpec
from controller.systems import job_region
from controller.systems.inc_drops import INC_DROPS, JOB_DROPS
from tests.test_controller_daemon import contribution
from topologies.local_switch import LocalSwitch, PipelineFiles
from wire.header import DROP_STRIDE, SLOTS, DropReason

RESULTS = Path(__file__).resolve().parent.parent / "results"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def daemon(switch: LocalSwitch, files: PipelineFiles, tmp_path: Path) -> Iterator[ControllerDaemon]:
    d = ControllerDaemon(
        DaemonConfig(
            switches=(SwitchSpec(0, switch.address),),
            p4info=files.p4info,
            device_config=files.device_config,
            db=tmp_path / "controller.db",
            listen=("127.0.0.1", 0),
            pool_size=128,
            stats_interval=0.5,
        )
    )
    d.start()
    yield d
    d.stop()


class Workers:
    """Four workers of one job, fed into the switch round by round; worker 3 lags."""

    LAG = 2

    def __init__(self, switch: LocalSwitch, api: ControllerApi, job: dict[str, Any]) -> None:
        self.switch, self.api, self.job = switch, api, job
        self.cfgs = [api.worker_config(job["job_id"], w) for w in range(job["n_workers"])]
        self.sent = [0] * len(self.cfgs)
        self.results = 0

    def round(self, psn: int) -> None:
        ones = np.ones(SLOTS, dtype=np.int32)
        for cfg in self.cfgs:
            p = psn - self.LAG if cfg["worker_id"] == 3 else psn
            if p < 0:
                continue
            out = self.switch.send(cfg["switch_port"], contribution(cfg, p, ones))
            self.sent[cfg["worker_id"]] += 1
            self.results += len(out)

    def report(self) -> None:
        for w, n in enumerate(self.sent):
            self.api.report_progress(
                self.job["job_id"], w, {"sent": n, "retransmissions": w}, {"epoch": 1.0}
            )

    def forge(self) -> None:
        """A packet in the name of a job that does not exist: dropped and counted."""
        ones = np.ones(SLOTS, dtype=np.int32)
        self.switch.send(1, contribution({**self.cfgs[0], "job_id": 999}, 0, ones))

    def run(self, stop: threading.Event) -> None:
        psn = 0
        while not stop.is_set():
            self.round(psn)
            psn += 1
            if psn % 20 == 0:
                self.report()
            if psn % 10 == 0:
                self.forge()
            stop.wait(0.02)


@pytest.fixture
def running_job(
    daemon: ControllerDaemon, switch: LocalSwitch
) -> Iterator[tuple[dict[str, Any], Workers]]:
    api = ControllerApi(daemon.url)
    api.submit({"workers": 2, "window": 16, "name": "idle", "worker_ports": [5, 6]})
    job = api.submit({"workers": 4, "window": 8, "name": "mlp"})
    workers = Workers(switch, api, job)
    stop = threading.Event()
    thread = threading.Thread(target=workers.run, args=(stop,), daemon=True)
    thread.start()
    yield job, workers
    stop.set()
    thread.join(10)


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed: `make test` (scripts/bootstrap.sh --test) does it")
    return path


def test_dashboard_shows_the_running_job_and_its_figures_move(
    daemon: ControllerDaemon, running_job: tuple[dict[str, Any], Workers], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    job, _ = running_job
    jid = job["job_id"]
    packets = f'[data-job="{jid}"] .figure[data-figure="packets"]'
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(daemon.url + "/")
            page.wait_for_selector(packets, timeout=20_000)
            updates, first = page.evaluate(
                "s => [window.dashboardUpdates, Number(document.querySelector(s).dataset.value)]",
                packets,
            )
            page.wait_for_function(
                "([sel, v]) => Number(document.querySelector(sel).dataset.value) > v",
                arg=[packets, first],
                timeout=20_000,
            )
            # Rates need two samples; the straggler shows once progress has been read.
            page.wait_for_selector(f'[data-job="{jid}"] tr.straggler[data-worker="3"]')
            page.wait_for_function(
                f"document.querySelector('{packets} .value').textContent.includes('/s')"
            )
            assert page.evaluate("window.dashboardUpdates") > updates
            text = page.inner_text("body")
            assert f"job {jid} · mlp" in text and "netreduce" in text
            assert "synchronous, quorum 4 of 4" in text
            assert page.locator('[data-pool="0/agg"] .seg').count() == 2  # both jobs
            assert page.locator("[data-job]").count() == 2
            # Per-job drops: the reasons that happened, or one "drops 0" box, never nine zeros.
            job_drops = page.locator(f'[data-job="{jid}"] [data-figure^="drops"]')
            n_drops = job_drops.count()
            shown = [job_drops.nth(i).get_attribute("data-figure") for i in range(n_drops)]
            assert shown == ["drops"] or all(f != "drops" for f in shown), shown
            assert len(shown) >= 1
            page.wait_for_function(  # forged packets: dropped, counted, shown
                """() => Number(document.querySelector(
                    '[data-switch="0"] [data-drop="unknown_job"] td.num').textContent) > 0"""
            )
            assert "admitted" in page.inner_text("#events")
            RESULTS.mkdir(exist_ok=True)
            page.screenshot(path=str(RESULTS / "dashboard.png"), full_page=True)
        finally:
            browser.close()
    assert (RESULTS / "dashboard.png").stat().st_size > 10_000


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def read_switch(switch: LocalSwitch, job: dict[str, Any]) -> dict[str, Any]:
    """The switch's own counters, read by a second (backup) P4Runtime client."""

    async def read() -> dict[str, Any]:
        async with SwitchConnection(SwitchSpec(0, switch.address, election_id=1)) as conn:
            drops = await conn.read(P4CounterEntry(INC_DROPS))
            # Every cell of the per-job drop counter: the backup reads it all, unlike the
            # daemon, which asks for the cells of its jobs only.
            job_drops = await conn.read(P4CounterEntry(JOB_DROPS))
            jobs = await conn.read(
                P4DirectCounterEntry(table_entry=job_region.job_key(job["job_id"]))
            )
            workers = await conn.read(
                P4DirectCounterEntry(table_entry=job_region.P4TableEntry(job_region.WORKERS))
            )
        return {
            "drops": {e.index: e.data.packet_count for e in drops},
            "job_drops": {e.index: e.data.packet_count for e in job_drops if e.data.packet_count},
            "job": (jobs[0].data.packet_count, jobs[0].data.byte_count),
            "workers": {
                e.table_entry.match["worker_id"]: e.data.packet_count
                for e in workers
                if e.table_entry.match["job_id"] == job["job_id"]
            },
        }

    return asyncio.run(read())


def test_metrics_match_the_switch_counters_read_over_p4runtime(
    daemon: ControllerDaemon, switch: LocalSwitch
) -> None:
    api = ControllerApi(daemon.url)
    job = api.submit({"workers": 4, "window": 8, "name": "mlp"})
    workers = Workers(switch, api, job)
    for psn in range(10):
        workers.round(psn)
    ones = np.ones(SLOTS, dtype=np.int32)
    cfg = workers.cfgs[0]
    forged = [
        (1, contribution({**cfg, "job_id": 999}, 0, ones)),  # unknown job
        (2, contribution(cfg, 11, ones)),  # worker 0's id on worker 1's port
        (1, contribution({**cfg, "region_size": 100}, 50, ones)),  # outside its region
        (1, contribution(cfg, 10, ones)),  # contribution...
        (1, contribution(cfg, 10, ones)),  # ...sent twice: a duplicate
    ]
    for port, frame in forged:
        switch.send(port, frame)
    workers.report()

    metrics = scrape(daemon.url)
    own = read_switch(switch, job)

    def m(metric: str, **labels: Any) -> float:
        return metrics[(metric, frozenset((k, str(v)) for k, v in labels.items()))]

    expected = {
        DropReason.UNKNOWN_JOB: 1,
        DropReason.UNKNOWN_WORKER: 1,
        DropReason.OUT_OF_REGION: 1,
        DropReason.DUPLICATE: 1,
        DropReason.STALE: 0,
        DropReason.BAD_SLOT_COUNT: 0,
    }
    for reason, n in expected.items():
        assert (
            m("inc_drops_total", device=0, reason=reason.name.lower()) == own["drops"][reason] == n
        )
    jid, base = job["job_id"], {"job": job["job_id"], "kind": "netreduce", "device": 0}
    # Per job: the three packets that named this job; the unknown job's under job 999.
    mine = {DropReason.UNKNOWN_WORKER, DropReason.OUT_OF_REGION, DropReason.DUPLICATE}
    assert own["job_drops"] == {jid * DROP_STRIDE + r: 1 for r in mine} | {
        999 * DROP_STRIDE + DropReason.UNKNOWN_JOB: 1
    }
    for reason in DropReason:
        name = f"inc_job_drops_{reason.name.lower()}_total"
        assert m(name, **base, worker="") == (1 if reason in mine else 0)
    assert (
        m("inc_job_packets_total", **base, worker=""),
        m("inc_job_bytes_total", **base, worker=""),
    ) == own["job"]
    # The job's entry also admitted the packet on the wrong port (the workers table refused
    # it), the one outside the region, and the duplicate with its original.
    assert own["job"][0] == sum(workers.sent) + 4
    for w in range(4):
        assert m("inc_job_progress_total", **base, worker=w) == own["workers"][w]
        assert m("inc_job_sent_total", **base, worker=w) == workers.sent[w]
    assert own["workers"][3] == own["workers"][0] - Workers.LAG - 3
    assert m("inc_job_worker_lag", job=jid, worker=3) == Workers.LAG + 3
    assert m("inc_job_info", job=jid, name="mlp", kind="netreduce", device=0) == 1
    assert m("inc_pool_job_units", device=0, pool="agg", job=jid) == 8
    assert m("inc_pool_free_units", device=0, pool="agg") == 128 - 8
    assert m("inc_switch_primary", device=0, name="s0") == 1


def test_a_worker_agents_progress_reports_reach_the_live_view(
    daemon: ControllerDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    from hosts.transport.progress_report import ProgressReporter

    api = ControllerApi(daemon.url)
    job = api.submit({"workers": 2, "window": 4})
    results = {"n": 0}

    def read() -> tuple[dict[str, int], dict[str, float]]:
        results["n"] += 5
        return {"results": results["n"], "retransmissions": 1}, {"epoch": 2.0}

    reporter = ProgressReporter(api, job["job_id"], 1, read, interval=0.05).start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        view = next(j for j in stats(daemon.url)["jobs"] if j["job_id"] == job["job_id"])
        figures = view["worker_stats"][1]["figures"]
        if figures.get("results", {}).get("value", 0) >= 10:
            break
        time.sleep(0.05)
    reporter.stop()
    assert figures["epoch"] == {**figures["epoch"], "value": 2.0, "counter": False}
    assert view["worker_stats"][0]["figures"].keys() == {"progress"}  # nothing reported
    assert {"name": "retransmissions", "value": 1}.items() <= next(
        f for f in view["figures"] if f["name"] == "retransmissions"
    ).items()
    assert reporter.failures == 0

    # A daemon that is gone costs one line on stderr and never an exception.
    gone = ProgressReporter(ControllerApi("unix:/nonexistent.sock"), 1, 0, read)
    assert gone.report() is False and gone.report() is False
    assert gone.failures == 2 and capsys.readouterr().err.count("\n") == 1


def stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/stats", timeout=30) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]
