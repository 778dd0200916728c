"""One module per system, paired by name with the ``p4src/`` control it programs.

Job kinds (each registers itself with ``controller.jobs.job_kinds`` as it loads):
``netreduce`` (synchronous all-reduce over ``aggregator.p4``), ``atp`` (``atp.p4``),
``ask`` (``ask.p4``), ``serene`` (``sync_modes.p4`` over netreduce), ``kv_cache``
(``kv_cache.p4``), ``consensus`` (``consensus.p4``).

Controls the kinds share: ``aggregator``, ``job_region``, ``result_rewrite``,
``job_meter``, ``sync_modes`` (each with its ``.p4``), ``inc_drops`` (``inc.p4``'s drop
counters), and ``sync_policy`` (Serene's mode policies, applied through the API). Not per
job: ``source_guard`` (``source_guard.p4``: each host port's IPv4 sources, written from the
topology with the forwarding).

Importing this package loads (and so registers) every kind: the job manager and whatever
else needs all kinds import ``controller.systems``.
"""

from controller.systems import ask, atp, consensus, kv_cache, netreduce, serene

__all__ = ["ask", "atp", "consensus", "kv_cache", "netreduce", "serene"]
