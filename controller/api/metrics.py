"""Prometheus exposition of a live sample (``GET /metrics``), with the official client.

Example::

    text = render(await stats.sample())    # bytes in the text format, version 0.0.4

Families (labels in brackets):

- ``inc_switch_connected``, ``inc_switch_primary`` [device, name]: 1 or 0.
- ``inc_drops_total`` [device, reason]: the switch's ``inc_drops`` counter, read now.
- ``inc_pool_units``, ``inc_pool_free_units`` [device, pool]; ``inc_pool_job_units``
  [device, pool, job]: switch memory per pool and who holds it.
- ``inc_job_info`` [job, name, kind, device] (always 1), ``inc_job_workers`` [job].
- ``inc_job_<figure>_total`` (counters) and ``inc_job_<figure>`` (gauges) [job, kind,
  device, worker (empty for a figure of the whole job)]: every live figure of every kind
  (``controller/jobs/figures.py``), e.g. ``inc_job_packets_total``, ``inc_job_progress_total``.
- ``inc_job_worker_lag`` [job, worker]: the leader's ``progress`` minus the worker's.

Each scrape reads the switches afresh, so the values are the switch's counters at that
moment, not a cached copy.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller.api.live_stats import Sample
from controller.jobs.figures import PROGRESS, Figure

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render(sample: Sample) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SampleCollector(sample))
    return generate_latest(registry)


class _SampleCollector(Collector):
    def __init__(self, sample: Sample) -> None:
        self.sample = sample

    def collect(self) -> Iterator[Metric]:
        yield from self._switches()
        yield from self._memory()
        yield from self._jobs()

    def _switches(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "inc_switch_connected",
            "the controller's P4Runtime stream is up",
            labels=["device", "name"],
        )
        primary = GaugeMetricFamily(
            "inc_switch_primary", "the controller is the primary client", labels=["device", "name"]
        )
        drops = CounterMetricFamily(
            "inc_drops",
            "packets the switch dropped, by reason (its inc_drops counter)",
            labels=["device", "reason"],
        )
        for s in self.sample.switches:
            labels = [str(s.device_id), s.name]
            up.add_metric(labels, 1.0 if s.connected else 0.0)
            primary.add_metric(labels, 1.0 if s.primary else 0.0)
            for reason, n in (s.drops or {}).items():
                drops.add_metric([str(s.device_id), reason], n)
        yield from (up, primary, drops)

    def _memory(self) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "inc_pool_units", "size of the memory pool", labels=["device", "pool"]
        )
        free = GaugeMetricFamily(
            "inc_pool_free_units", "units of the pool no job holds", labels=["device", "pool"]
        )
        held = GaugeMetricFamily(
            "inc_pool_job_units", "units a job holds", labels=["device", "pool", "job"]
        )
        for sw in self.sample.memory:
            dev = str(sw["device_id"])
            for pool, view in sw["pools"].items():
                size.add_metric([dev, pool], view["pool_size"])
                free.add_metric([dev, pool], view["free"])
                for seg in view["segments"]:
                    if seg["job_id"] is not None:
                        held.add_metric([dev, pool, str(seg["job_id"])], seg["size"])
        yield from (size, free, held)

    def _jobs(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "inc_job_info", "admitted jobs (always 1)", labels=["job", "name", "kind", "device"]
        )
        workers = GaugeMetricFamily("inc_job_workers", "workers of the job", labels=["job"])
        lag = GaugeMetricFamily(
            "inc_job_worker_lag",
            "how far the worker is behind the job's leader, in progress units",
            labels=["job", "worker"],
        )
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for s in self.sample.jobs:
            job = s.job
            jid = str(job.job_id)
            info.add_metric([jid, job.name, job.kind, str(job.device_id)], 1.0)
            workers.add_metric([jid], job.n_workers)
            base = [jid, job.kind, str(job.device_id)]
            for f in s.stats.figures:
                fam = families.get(f.metric_name)
                if fam is None:
                    fam = families[f.metric_name] = _family(f)
                fam.add_metric(base + ["" if f.worker is None else str(f.worker)], f.value)
            progress = {f.worker: f.value for f in s.stats.figures if f.name == PROGRESS}
            lead = max(progress.values(), default=0)
            for w, v in sorted(progress.items(), key=lambda kv: kv[0] or 0):
                lag.add_metric([jid, str(w)], lead - v)
        yield from (info, workers, lag, *families.values())


def _family(f: Figure) -> CounterMetricFamily | GaugeMetricFamily:
    # Every figure family has the worker label; job-level figures leave it empty, which
    # Prometheus treats as absent, so one name may carry both without clashing.
    labels = ["job", "kind", "device", "worker"]
    if f.counter:
        return CounterMetricFamily(f.metric_name, f.help, labels=labels)
    return GaugeMetricFamily(f.metric_name, f.help, labels=labels)
