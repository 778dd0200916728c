"""Consensus jobs: a replicated log whose requests the switch sequences (``p4src/consensus.p4``).

Example:
    >>> req = ConsensusRequest(kind="consensus", workers=1)
    >>> [r["ip"] for r in req.replica_specs()], Consensus().region_size(req)
    (['10.0.0.2', '10.0.0.3', '10.0.0.4'], 1)
    >>> group_address(5)
    '239.100.0.5'

A job has ``workers`` clients and ``replicas`` replica hosts (default: the 3 hosts after
the clients, ``h{N+1}..``). It takes one sequencer counter (pool ``seq``,
``CONS_GROUPS`` counters) and a multicast group (id = job id) holding the replicas' ports.
Clients send requests to the job's group address (``group_address``: an IPv4 multicast
address the replicas join), the switch stamps sequence number and session and multicasts
them (docs/protocol.md, "Consensus").

Session numbers: every install (admission, or re-install after a switch restart lost the
counter) writes a new session number, a stamp (``controller/jobs/stamps.py``: the count of
the controller's starts, kept in its SQLite store, and a count within this start), so
sequence numbers restarting at 1 always come with a newer session (in serial-number order,
``wire/serial.py``), across restarts of the controller too, whatever its clock does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from finsy import P4TableEntry, P4TableMatch
from pydantic import Field, model_validator

from controller.jobs.figures import Figure, JobStats
from controller.jobs.job import Ipv4, Job, JobRequest, Mac, Port, host_ip, host_mac
from controller.jobs.job_kinds import JobKind, register
from controller.jobs.memory_manager import Region
from controller.jobs.stamps import STAMPS
from controller.p4rt.p4runtime_client import SwitchConnection, table_entry
from controller.systems import result_guard
from wire.header import CONS_GROUPS, SLOTS, Flag, Op

SEQ_POOL = "seq"
PREFIX = "IncIngress.sequencer."
CONS_GROUPS_TABLE = PREFIX + "cons_groups"
CONS_CLIENTS = PREFIX + "cons_clients"
CONS_SEQ = PREFIX + "cons_seq"
MAX_REPLICAS = 7


def group_address(job_id: int) -> str:
    """The job's IPv4 multicast address (239.100.0.0/16, administratively scoped)."""
    return f"239.100.{job_id >> 8}.{job_id & 0xFF}"


def session_number() -> int:
    return STAMPS.next()


class ConsensusRequest(JobRequest):
    """A replicated log: ``workers`` clients, ``replicas`` replicas (replica 0 leads)."""

    kind: Literal["consensus"] = "consensus"
    replicas: Annotated[int, Field(strict=True, ge=3, le=MAX_REPLICAS)] = 3
    replica_ports: Annotated[tuple[Port, ...], Field(max_length=MAX_REPLICAS)] = ()
    replica_ips: Annotated[tuple[Ipv4, ...], Field(max_length=MAX_REPLICAS)] = ()
    replica_macs: Annotated[tuple[Mac, ...], Field(max_length=MAX_REPLICAS)] = ()

    @model_validator(mode="after")
    def _replicas_agree(self) -> ConsensusRequest:
        for key in ("replica_ports", "replica_ips", "replica_macs"):
            values = getattr(self, key)
            if values and len(values) != self.replicas:
                raise ValueError(f"{key} lists {len(values)} values for {self.replicas} replicas")
        ports = [r["port"] for r in self.replica_specs()]
        clients = [w.port for w in self.worker_specs()]
        if len(set(ports)) != len(ports) or set(ports) & set(clients):
            raise ValueError("replicas and clients need switch ports of their own")
        return self

    def replica_specs(self) -> list[dict[str, Any]]:
        n = self.workers
        return [
            {
                "id": i,
                "port": self.replica_ports[i] if self.replica_ports else n + 1 + i,
                "ip": self.replica_ips[i] if self.replica_ips else host_ip(n + 1 + i),
                "mac": self.replica_macs[i] if self.replica_macs else host_mac(n + 1 + i),
            }
            for i in range(self.replicas)
        ]


class Consensus(JobKind):
    name = "consensus"
    request = ConsensusRequest
    pool = SEQ_POOL
    pool_units = CONS_GROUPS

    def region_size(self, req: JobRequest) -> int:
        return 1

    def make_job(
        self, req: JobRequest, job_id: int, device_id: int, region: Region, created_at: float
    ) -> Job:
        assert isinstance(req, ConsensusRequest)
        replicas = req.replica_specs()
        return Job(
            job_id=job_id,
            name=req.name or f"log{job_id}",
            device_id=device_id,
            window=0,
            slots=SLOTS,
            region=region,
            quorum=len(replicas) // 2 + 1,
            mcast_grp=job_id,
            agg_ip=group_address(job_id),
            agg_mac=replicas[0]["mac"],
            workers=tuple(req.worker_specs()),
            created_at=created_at,
            kind=self.name,
            params={"replicas": replicas, "group_ip": group_address(job_id), "leader": 0},
        )

    async def clear(self, sw: SwitchConnection, region: Region) -> None:
        await sw.fill_register(CONS_SEQ, range(region.offset, region.end), 0)

    async def install(self, sw: SwitchConnection, job: Job, idempotent: bool = False) -> None:
        replicas = [(r["port"], r["id"] + 1) for r in job.params["replicas"]]
        await sw.set_multicast_group(job.mcast_grp, replicas)
        write = sw.upsert if idempotent else sw.insert
        await write(client_entries(job))
        await write(flag_entries(job))
        await write([group_entry(job, session_number())])

    async def uninstall(self, sw: SwitchConnection, job: Job) -> None:
        await sw.delete([group_key(job.job_id)], strict=False)
        await sw.delete(client_entries(job), strict=False)
        await sw.delete(flag_entries(job), strict=False)
        await sw.delete_multicast_group(job.mcast_grp, strict=False)

    async def installed(self, sw: SwitchConnection, job: Job) -> bool:
        return bool(await sw.read(group_key(job.job_id)))

    async def live_stats(self, sw: SwitchConnection, job: Job) -> JobStats:
        seq = await sw.read_register(CONS_SEQ, job.region.offset)
        figures = (Figure("sequenced", seq, "requests the switch numbered in this session"),)
        return JobStats(figures, {"replicas": f"{len(job.params['replicas'])}, leader by view"})

    def worker_config(self, job: Job, worker_id: int, switch_address: str) -> dict[str, Any]:
        return super().worker_config(job, worker_id, switch_address) | {
            "group_ip": job.params["group_ip"]
        }


def flag_entries(job: Job) -> list[P4TableEntry]:
    """``result_guard.p4``: replicas reply to clients (``RESULT``) and, as a host sequencer's
    leader, pass requests on (``FALLBACK``); a client sends to a host sequencer
    (``FALLBACK``). Nobody else brings a flagged ``CONSENSUS`` packet in."""
    replicas = [int(r["port"]) for r in job.params["replicas"]]
    return result_guard.port_entries(
        job.job_id, Op.CONSENSUS, replicas, Flag.RESULT | Flag.FALLBACK
    ) + result_guard.worker_entries(job, Op.CONSENSUS, Flag.FALLBACK)


def group_entry(job: Job, session: int) -> P4TableEntry:
    return table_entry(
        CONS_GROUPS_TABLE,
        {"hdr.inc.job_id": job.job_id},
        PREFIX + "set_group",
        seq_index=job.region.offset,
        session_number=session,
        mcast_grp=job.mcast_grp,
    )


def group_key(job_id: int) -> P4TableEntry:
    return P4TableEntry(CONS_GROUPS_TABLE, match=P4TableMatch({"hdr.inc.job_id": job_id}))


def client_entries(job: Job) -> list[P4TableEntry]:
    return [
        table_entry(
            CONS_CLIENTS,
            {
                "hdr.inc.job_id": job.job_id,
                "hdr.inc.worker_id": w.worker_id,
                "standard_metadata.ingress_port": w.port,
            },
            "NoAction",
        )
        for w in job.workers
    ]


register(Consensus())
