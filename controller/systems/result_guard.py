"""Programs ``p4src/result_guard.p4``: which roles of a job may bring which flags in.

Example::

    entries = ps_entries(job.job_id, Op.AGG_SYNC, ps_port, Flag.RESULT | Flag.ACK)
    await sw.insert(entries)             # at admission, before the job's ``jobs`` entry
    await sw.delete(entries, strict=False)

A packet of ``AGG_SYNC``, ``AGG_KV`` or ``CONSENSUS`` that is not a contribution or request
the switch processes carries result-like flags. It passes only when a binding of its job
allows every flag it carries from its ingress port; anything else is dropped as
``FORGED_RESULT``, so a job with no entries here (NetReduce, Serene: the switch makes all
their results) admits none. ``flag_ports``: ``(job_id, op, ingress_port)`` ->
``role_port(flags)``, a role of the job on that port (an ATP PS, a leaf at the spine, an
ASK reducer, a replica), any worker id. ``flag_workers``: ``(job_id, op, worker_id,
ingress_port)`` -> ``bound_worker(flags)``, a worker of the job (an ASK mapper's cold keys,
a consensus client's request to a host sequencer).
"""

from __future__ import annotations

from collections.abc import Iterable

from finsy import P4TableEntry

from controller.jobs.job import Job
from controller.p4rt.p4runtime_client import table_entry

PREFIX = "IncIngress.result_guard."
FLAG_PORTS = PREFIX + "flag_ports"
FLAG_WORKERS = PREFIX + "flag_workers"


def port_entries(job_id: int, op: int, ports: Iterable[int], flags: int) -> list[P4TableEntry]:
    """A role of job ``job_id`` on each of ``ports`` may send ``op`` packets with ``flags``."""
    return [
        table_entry(
            FLAG_PORTS,
            {"hdr.inc.job_id": job_id, "hdr.inc.op": int(op), "standard_metadata.ingress_port": p},
            PREFIX + "role_port",
            flags=int(flags),
        )
        for p in sorted(set(ports))
    ]


def worker_entries(job: Job, op: int, flags: int) -> list[P4TableEntry]:
    """Each worker of ``job``, by id on its port, may send ``op`` packets with ``flags``."""
    return [
        table_entry(
            FLAG_WORKERS,
            {
                "hdr.inc.job_id": job.job_id,
                "hdr.inc.op": int(op),
                "hdr.inc.worker_id": w.worker_id,
                "standard_metadata.ingress_port": w.port,
            },
            PREFIX + "bound_worker",
            flags=int(flags),
        )
        for w in job.workers
    ]
