"""A worker agent tells the controller daemon how far it got (for the dashboard, /metrics).

Example::

    reporter = ProgressReporter(ControllerApi("unix:run/x/controller.sock"), job_id=1,
                                worker_id=0, read=lambda: ({"results": n}, {"epoch": e}))
    reporter.start()        # posts every `interval` seconds from a thread
    ...
    reporter.stop()         # one last report, then the thread ends

Reports are best effort: a daemon that is slow or gone never slows training down (each
post has a short timeout; failures are counted, the first one is printed once). What a
worker reports is what the switch cannot see: its retransmissions, the results it holds,
its epoch and accuracy (``controller/api/worker_reports.py`` bounds the names and sizes).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from controller.api_client import ApiError, ControllerApi

Figures = tuple[dict[str, int], dict[str, float]]  # (counters, gauges)


class ProgressReporter:
    def __init__(
        self,
        api: ControllerApi,
        job_id: int,
        worker_id: int,
        read: Callable[[], Figures],
        interval: float = 1.0,
    ) -> None:
        self.api, self.job_id, self.worker_id = api, job_id, worker_id
        self.read = read
        self.interval = interval
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="progress-report")

    def start(self) -> ProgressReporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self.report()

    def report(self) -> bool:
        counters, gauges = self.read()
        try:
            self.api.report_progress(self.job_id, self.worker_id, counters, gauges, timeout=1.0)
        except ApiError as err:
            if self.failures == 0:
                print(f"progress report to the controller failed: {err}", file=sys.stderr)
            self.failures += 1
            return False
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.report()
