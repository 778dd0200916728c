"""One P4Runtime client layer for every part of the controller (p4sim and BMv2 alike).

Example::

    spec = SwitchSpec(device_id=0, address="127.0.0.1:9559")
    pipe = Pipeline.from_files("build/inc.p4info.txtpb", "build/inc.p4sim")
    async with SwitchConnection(spec, pipe) as sw:          # connect, primary, push pipeline
        await sw.insert([table_entry("jobs", {"hdr.inc.job_id": 5}, "set_region",
                                     offset=0, size=64, quorum=4, mcast_grp=5,
                                     slot_count=32)])
        print(await sw.read(P4TableEntry("jobs")))
        await sw.write_register("agg_job", 10, 0)

Built on finsy: its ``P4Client`` (gRPC channel and stream), ``P4Schema`` (P4Info names to
ids, Python values to canonical bytestrings) and entity classes (``P4TableEntry``,
``P4MulticastGroupEntry``, ``P4RegisterEntry``...). We drive the session ourselves instead
of using ``finsy.Switch`` so that the controller decides when a pipeline is pushed (only
when the switch's cookie differs, which keeps a running switch's state across controller
restarts) and so that one error type, :class:`SwitchError`, reaches the callers.

Registers: p4sim serves RegisterEntry over P4Runtime. BMv2's ``simple_switch_grpc`` rejects
register access over P4Runtime, so a spec with ``thrift_port`` uses BMv2's Thrift runtime
interface through the ``simple_switch_CLI`` program instead (see ``controller.p4rt.registers``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import grpc
from finsy import (
    P4ClientError,
    P4CloneSessionEntry,
    P4CounterEntry,
    P4DigestEntry,
    P4DigestList,
    P4MulticastGroupEntry,
    P4PacketIn,
    P4PacketOut,
    P4RegisterEntry,
    P4Schema,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
    p4entity,
)
from finsy.grpcutil import GRPCStatusCode
from finsy.p4client import P4Client
from finsy.proto import U128, p4i, p4r

from controller.p4rt.registers import CLI, RegisterAccess, ThriftRegisters, thrift_cli_available
from controller.p4rt.switch_error import SwitchError

log = logging.getLogger("controller.p4runtime")

WRITE_CHUNK = 1000  # updates per WriteRequest: bounded message size, steady progress
RPC_TIMEOUT = 30.0
# A pipeline push: a software switch compiles the program before it answers (p4sim parses
# and compiles inc.p4, ~12 s on a loaded 2-core machine), past finsy's 10 s RPC deadline.
PIPELINE_TIMEOUT = 120.0


@dataclass(frozen=True)
class SwitchSpec:
    """Where a switch is and how we talk to it.

    >>> SwitchSpec.parse("0@127.0.0.1:9559").address
    '127.0.0.1:9559'
    """

    device_id: int
    address: str
    name: str = ""
    election_id: int = 10
    thrift_port: int | None = None  # BMv2 only: registers through simple_switch_CLI

    @property
    def label(self) -> str:
        return self.name or f"s{self.device_id}"

    @classmethod
    def parse(cls, text: str) -> SwitchSpec:
        """``ID@HOST:PORT[,thrift=PORT][,name=NAME][,election=N]`` (command lines)."""
        head, *opts = text.split(",")
        dev, sep, address = head.partition("@")
        if not sep or not dev.isdigit() or ":" not in address:
            raise ValueError(
                f"switch {text!r}: expected DEVICE_ID@HOST:PORT, e.g. 0@127.0.0.1:9559"
            )
        kw: dict[str, Any] = {}
        for opt in opts:
            key, _, val = opt.partition("=")
            if key == "thrift" and val.isdigit():
                kw["thrift_port"] = int(val)
            elif key == "name" and val:
                kw["name"] = val
            elif key == "election" and val.isdigit() and int(val) > 0:
                kw["election_id"] = int(val)
            else:
                raise ValueError(
                    f"switch {text!r}: bad option {opt!r} (thrift=PORT, name=N, election=N)"
                )
        return cls(device_id=int(dev), address=address, **kw)


@dataclass(frozen=True)
class Pipeline:
    """A P4Info and the target's device config (p4sim source bundle or BMv2 JSON)."""

    p4info: p4i.P4Info
    device_config: bytes = b""

    @classmethod
    def from_files(cls, p4info: str | Path, device_config: str | Path | None = None) -> Pipeline:
        """Read a P4Info (text ``.txtpb`` or binary) and the device config file."""
        info = _read_p4info(Path(p4info))
        blob = Path(device_config).read_bytes() if device_config else b""
        return cls(info, blob)


def _read_p4info(path: Path) -> p4i.P4Info:
    from google.protobuf import text_format

    try:
        data = path.read_bytes()
    except OSError as err:
        raise SwitchError(f"{path}: {err.strerror}") from None
    info = p4i.P4Info()
    try:
        text_format.Parse(data.decode("utf-8"), info)
    except (UnicodeDecodeError, text_format.ParseError):
        try:
            info.ParseFromString(data)
        except Exception:
            raise SwitchError(f"{path}: neither text nor binary P4Info") from None
    return info


def table_entry(
    table: str,
    match: dict[str, Any] | None,
    action: str,
    priority: int = 0,
    **params: Any,
) -> P4TableEntry:
    """A table entry from names and Python values (ints, "10.0.0.1", "00:00:00:00:00:01",
    lpm "10.0.0.0/8", ternary "0x0a/&0xff"); finsy encodes them as canonical bytestrings."""
    return P4TableEntry(
        table,
        match=P4TableMatch(match or {}),
        action=P4TableAction(action, **params),
        priority=priority,
    )


def default_action(table: str, action: str, **params: Any) -> P4TableEntry:
    return P4TableEntry(table, action=P4TableAction(action, **params), is_default_action=True)


UpdateType: TypeAlias = p4r.Update.Type.ValueType


def _encode(entity: Any, schema: P4Schema, where: str) -> p4r.Entity:
    """finsy's encoding, with names or values the P4Info does not know as a SwitchError."""
    if isinstance(entity, p4r.Entity):
        return entity
    try:
        return entity.encode(schema)
    except (ValueError, KeyError, TypeError) as err:
        raise SwitchError(f"{where}: cannot encode {entity!r}: {err}") from None


class SwitchConnection:
    """A P4Runtime session with one switch: primary client, pipeline, reads and writes."""

    def __init__(self, spec: SwitchSpec, pipeline: Pipeline | None = None) -> None:
        self.spec = spec
        self.pipeline = pipeline
        self.schema = P4Schema(pipeline.p4info, pipeline.device_config) if pipeline else P4Schema()
        self.is_primary = False
        self.primary_id = 0
        self.pipeline_pushed = False
        self._client: P4Client | None = None
        self._reader: asyncio.Task[None] | None = None
        self._packets: asyncio.Queue[P4PacketIn] = asyncio.Queue(1000)
        self._digests: dict[str, asyncio.Queue[P4DigestList]] = {}
        self._acks: set[asyncio.Task[None]] = set()  # digest acks in flight (keep references)
        self._send_lock = asyncio.Lock()  # one stream write at a time (see connect)
        self.registers: RegisterAccess = self._register_access()

    def _register_access(self) -> RegisterAccess:
        if self.spec.thrift_port is not None:
            if thrift_cli_available():
                host = self.spec.address.rsplit(":", 1)[0]
                return ThriftRegisters(host, self.spec.thrift_port)
            log.warning(
                "%s: thrift port given but %s is not on PATH: registers go over"
                " P4Runtime, which BMv2 refuses",
                self._where(),
                CLI,
            )
        return _P4RuntimeRegisters(self)

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> SwitchConnection:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self, timeout: float = 10.0, force_pipeline: bool = False) -> None:
        """Open the channel, become primary (or backup) and make sure the pipeline is ours."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        held_until = loop.time() + min(timeout, HELD_ID_WAIT_S)
        delay = 0.05
        while True:
            self._client = P4Client(self.spec.address, wait_for_ready=False)
            # gRPC allows one write at a time on a stream: PacketOuts and digest acks (sent
            # from their own tasks) must not overlap, or the write fails with INTERNAL.
            self._send_lock = asyncio.Lock()
            await self._client.open(schema=None)
            try:
                await asyncio.wait_for(self._arbitrate(), max(deadline - loop.time(), 0.1))
                break
            except (TimeoutError, P4ClientError, OSError) as err:
                await self.close()
                # Our own previous stream with this election id may not be gone from the
                # switch yet (BMv2 frees the id only once it sees that stream end): retry.
                if _election_id_held(err) and loop.time() + delay < held_until:
                    await asyncio.sleep(delay)
                    delay = min(2 * delay, 0.5)
                    continue
                raise SwitchError(f"{self._where()}: cannot connect: {_describe(err)}") from None
        self._reader = asyncio.create_task(self._read_stream(), name=f"p4rt-{self.spec.label}")
        try:
            await self._fetch_version()
            if self.pipeline is not None and self.is_primary:
                await self.set_pipeline(self.pipeline, force=force_pipeline)
            elif self.pipeline is None:
                await self._adopt_switch_p4info()
        except BaseException:
            await self.close()
            raise

    @property
    def connected(self) -> bool:
        """True while the stream is open (a restarted switch closes it)."""
        return self._client is not None and self._reader is not None and not self._reader.done()

    async def reconnect(self, timeout: float = 10.0) -> None:
        """Close and connect again (pipeline pushed if the switch lost it)."""
        await self.close()
        await self.connect(timeout)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
            self._reader = None
        if self._client is not None:
            await self._client.close()
            self._client = None
        self.is_primary = False

    async def _send(self, msg: p4r.StreamMessageRequest) -> None:
        """Write one stream message; writes are serialised (see ``connect``)."""
        assert self._client is not None
        async with self._send_lock:
            await self._client.send(msg)

    def _where(self) -> str:
        return f"switch {self.spec.label} ({self.spec.address}, device {self.spec.device_id})"

    async def _arbitrate(self) -> None:
        assert self._client is not None
        msg = p4r.StreamMessageRequest(
            arbitration=p4r.MasterArbitrationUpdate(
                device_id=self.spec.device_id, election_id=U128.encode(self.spec.election_id)
            )
        )
        await self._send(msg)
        while True:
            reply = await self._client.receive()
            if reply.WhichOneof("update") == "arbitration":
                self._on_arbitration(reply.arbitration)
                return
            log.debug("%s: stream message before arbitration: %s", self._where(), reply)

    def _on_arbitration(self, arb: p4r.MasterArbitrationUpdate) -> None:
        self.primary_id = U128.decode(arb.election_id)
        self.is_primary = arb.status.code == 0 and self.primary_id == self.spec.election_id
        log.info(
            "%s: %s (primary election id %d)",
            self._where(),
            "primary" if self.is_primary else "backup",
            self.primary_id,
        )

    async def _read_stream(self) -> None:
        assert self._client is not None
        while True:
            try:
                msg = await self._client.receive()
            except (P4ClientError, RuntimeError) as err:
                log.warning("%s: stream closed: %s", self._where(), _describe(err))
                self.is_primary = False
                return
            self._dispatch(msg)

    def _dispatch(self, msg: p4r.StreamMessageResponse) -> None:
        kind = msg.WhichOneof("update")
        if kind == "arbitration":
            self._on_arbitration(msg.arbitration)
        elif kind == "packet":
            pkt = p4entity.decode_stream(msg, self.schema)
            if not self._packets.full():
                self._packets.put_nowait(pkt)
        elif kind == "digest":
            self._on_digest(msg)
        elif kind == "error":
            log.error(
                "%s: stream error %s: %s",
                self._where(),
                GRPCStatusCode(msg.error.canonical_code).name,
                msg.error.message,
            )

    def _on_digest(self, msg: p4r.StreamMessageResponse) -> None:
        try:
            digest: P4DigestList = p4entity.decode_stream(msg, self.schema)
        except (ValueError, KeyError) as err:
            log.warning("%s: undecodable digest: %s", self._where(), err)
            return
        queue = self._digests.get(digest.digest_id)
        if queue is not None and not queue.full():
            queue.put_nowait(digest)
        ack = digest.ack().encode_update(self.schema)
        if self._client is not None:
            task = asyncio.create_task(self._send(ack))
            self._acks.add(task)
            task.add_done_callback(self._acks.discard)

    async def _fetch_version(self) -> None:
        try:
            reply = await self._request(p4r.CapabilitiesRequest())
        except SwitchError:
            return  # an old server: keep finsy's default version
        from finsy import P4RuntimeVersion

        self.schema.set_p4runtime_version(P4RuntimeVersion.parse(reply.p4runtime_api_version))

    async def _adopt_switch_p4info(self) -> None:
        """No pipeline of our own: use the switch's P4Info for names."""
        cfg = await self.get_pipeline_config(
            p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE
        )
        if cfg is not None and cfg.HasField("p4info"):
            version = self.schema.p4runtime_version
            self.schema = P4Schema(cfg.p4info)
            self.schema.set_p4runtime_version(version)

    # -- requests ---------------------------------------------------------------------

    async def _request(self, msg: Any) -> Any:
        if self._client is None:
            raise SwitchError(f"{self._where()}: not connected")
        if isinstance(msg, (p4r.WriteRequest, p4r.SetForwardingPipelineConfigRequest)):
            msg.election_id.CopyFrom(U128.encode(self.spec.election_id))
        name = type(msg).__name__[:-7]
        timeout = (
            PIPELINE_TIMEOUT
            if isinstance(msg, p4r.SetForwardingPipelineConfigRequest)
            else RPC_TIMEOUT
        )
        try:
            return await getattr(self._stub(), name)(msg, timeout=timeout)
        except grpc.RpcError as ex:
            raise self._rpc_error(name, ex, msg, timeout) from None

    def _stub(self) -> Any:
        """The gRPC stub under finsy's client: finsy's ``request`` and ``request_iter``
        fix a 10 s deadline for every RPC, which a loaded software switch can pass on a
        large Read or Write; our calls carry RPC_TIMEOUT (PIPELINE_TIMEOUT for a push)."""
        stub = self._client._stub if self._client is not None else None
        if stub is None:
            raise SwitchError(f"{self._where()}: not connected")
        return stub

    def _rpc_error(self, name: str, ex: grpc.RpcError, msg: Any, timeout: float) -> SwitchError:
        if ex.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return SwitchError(
                f"{self._where()}: {name} timed out after {timeout:g} s",
                GRPCStatusCode.DEADLINE_EXCEEDED,
            )
        return _switch_error(self._where(), name, P4ClientError(ex, f"{name}Request", msg=msg))

    async def get_pipeline_config(
        self, response_type: p4r.GetForwardingPipelineConfigRequest.ResponseType.ValueType
    ) -> p4r.ForwardingPipelineConfig | None:
        """The switch's pipeline, or None when it has none yet."""
        req = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.spec.device_id, response_type=response_type
        )
        try:
            reply = await self._request(req)
        except SwitchError as err:
            if err.code == GRPCStatusCode.FAILED_PRECONDITION:
                return None
            raise
        return reply.config

    async def set_pipeline(self, pipeline: Pipeline, force: bool = False) -> bool:
        """Push ``pipeline`` unless the switch already runs it (same cookie); True if pushed."""
        self.pipeline = pipeline
        version = self.schema.p4runtime_version
        self.schema = P4Schema(pipeline.p4info, pipeline.device_config)
        self.schema.set_p4runtime_version(version)
        cookie = self.schema.p4cookie
        if not force:
            cfg = await self.get_pipeline_config(p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
            if cfg is not None and cfg.cookie.cookie == cookie:
                log.info("%s: pipeline already installed (cookie %#x)", self._where(), cookie)
                self.pipeline_pushed = False
                return False
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.spec.device_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=self.schema.get_pipeline_config(),
        )
        await self._request(req)
        log.info("%s: pipeline installed (cookie %#x)", self._where(), cookie)
        self.pipeline_pushed = True
        return True

    async def write_updates(self, updates: Sequence[p4r.Update]) -> None:
        """One WriteRequest (CONTINUE_ON_ERROR: the switch applies every update it can)."""
        await self._request(p4r.WriteRequest(device_id=self.spec.device_id, updates=updates))

    async def insert(self, entities: Iterable[Any]) -> None:
        await self._write(p4r.Update.INSERT, entities)

    async def modify(self, entities: Iterable[Any]) -> None:
        await self._write(p4r.Update.MODIFY, entities)

    async def delete(self, entities: Iterable[Any], strict: bool = True) -> None:
        """Delete; with ``strict=False`` entities that are already gone are not an error."""
        try:
            await self._write(p4r.Update.DELETE, entities)
        except SwitchError as err:
            if strict or not err.only(GRPCStatusCode.NOT_FOUND):
                raise

    async def upsert(self, entities: Iterable[Any]) -> None:
        """Insert, and modify the entities that already exist (idempotent installs)."""
        ents = list(entities)
        try:
            await self._write(p4r.Update.INSERT, ents)
        except SwitchError as err:
            if not err.only(GRPCStatusCode.ALREADY_EXISTS):
                raise
            await self._write(p4r.Update.MODIFY, [ents[i] for i in sorted(err.details)])

    async def _write(self, kind: UpdateType, entities: Iterable[Any]) -> None:
        where = self._where()
        updates = [p4r.Update(type=kind, entity=_encode(e, self.schema, where)) for e in entities]
        for i in range(0, len(updates), WRITE_CHUNK):
            try:
                await self.write_updates(updates[i : i + WRITE_CHUNK])
            except SwitchError as err:
                # Later chunks are not sent; indices refer to the whole list.
                err.details = {i + k: v for k, v in err.details.items()}
                raise

    async def read(self, entity: Any) -> list[Any]:
        """All entities matching ``entity`` (finsy wildcards: ``P4TableEntry("jobs")``)."""
        return await self.read_many([entity])

    async def read_many(self, entities: Sequence[Any]) -> list[Any]:
        """All entities matching any of ``entities``, in one ReadRequest (one round trip)."""
        if self._client is None:
            raise SwitchError(f"{self._where()}: not connected")
        ents = [_encode(e, self.schema, self._where()) for e in entities]
        req = p4r.ReadRequest(device_id=self.spec.device_id, entities=ents)
        out: list[Any] = []
        try:
            async for reply in self._stub().Read(req, timeout=RPC_TIMEOUT):
                out.extend(p4entity.decode_entity(e, self.schema) for e in reply.entities)
        except grpc.RpcError as ex:
            raise self._rpc_error("Read", ex, req, RPC_TIMEOUT) from None
        return out

    # -- typed helpers ----------------------------------------------------------------

    async def add_table_entry(
        self, table: str, match: dict[str, Any], action: str, priority: int = 0, **params: Any
    ) -> None:
        await self.insert([table_entry(table, match, action, priority, **params)])

    async def set_default_action(self, table: str, action: str, **params: Any) -> None:
        await self.modify([default_action(table, action, **params)])

    async def set_multicast_group(self, group_id: int, replicas: Sequence[tuple[int, int]]) -> None:
        """Create or replace a multicast group; replicas are (egress port, instance/rid)."""
        await self.upsert([P4MulticastGroupEntry(group_id, replicas=tuple(replicas))])

    async def delete_multicast_group(self, group_id: int, strict: bool = False) -> None:
        await self.delete([P4MulticastGroupEntry(group_id)], strict=strict)

    async def set_clone_session(
        self,
        session_id: int,
        replicas: Sequence[tuple[int, int]],
        class_of_service: int = 0,
        packet_length_bytes: int = 0,
    ) -> None:
        entry = P4CloneSessionEntry(
            session_id,
            replicas=tuple(replicas),
            class_of_service=class_of_service,
            packet_length_bytes=packet_length_bytes,
        )
        await self.upsert([entry])

    async def read_counter(self, name: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """``{index: (packets, bytes)}`` of an indirect counter (all cells when no index)."""
        got = await self.read(P4CounterEntry(name, index=index))
        return {e.index: (e.packet_count, e.byte_count) for e in got if e.index is not None}

    async def read_register(self, name: str, index: int) -> int:
        return await self.registers.read(self.register_name(name), index)

    async def write_register(self, name: str, index: int, value: int) -> None:
        await self.registers.write(self.register_name(name), index, value)

    async def fill_register(self, name: str, indices: range, value: int) -> None:
        """Write ``value`` to every cell of ``indices`` (one batched request on P4Runtime)."""
        await self.registers.fill(self.register_name(name), indices, value)

    def register_name(self, name: str) -> str:
        """The fully qualified P4Info name of a register given by any unique alias (BMv2's
        Thrift interface knows registers by that name only)."""
        try:
            return str(self.schema.registers[name].name)
        except (KeyError, ValueError):
            raise SwitchError(f"{self._where()}: the P4Info has no register {name!r}") from None

    async def packet_out(self, payload: bytes, **metadata: Any) -> None:
        """Send a PacketOut; metadata by the ``packet_out`` header's field names, fields not
        given (padding) are 0."""
        if self._client is None:
            raise SwitchError(f"{self._where()}: not connected")
        header = self.schema.controller_packet_metadata.get("packet_out")
        fields = {m.name: 0 for m in header.metadata} if header is not None else {}
        try:
            msg = P4PacketOut(payload, **(fields | metadata)).encode_update(self.schema)
        except (ValueError, KeyError) as err:
            raise SwitchError(f"{self._where()}: bad PacketOut: {err}") from None
        await self._send(msg)

    async def packets(self) -> AsyncIterator[P4PacketIn]:
        """PacketIn messages as they arrive."""
        while True:
            yield await self._packets.get()

    async def subscribe_digest(
        self, name: str, max_list_size: int = 1, max_timeout_ns: int = 0, ack_timeout_ns: int = 0
    ) -> None:
        """Ask the switch to send digest ``name`` (read them with :meth:`digests`)."""
        self._digests.setdefault(name, asyncio.Queue(1000))
        entry = P4DigestEntry(
            name,
            max_list_size=max_list_size,
            max_timeout_ns=max_timeout_ns,
            ack_timeout_ns=ack_timeout_ns,
        )
        await self.upsert([entry])

    async def digests(self, name: str) -> AsyncIterator[P4DigestList]:
        queue = self._digests.setdefault(name, asyncio.Queue(1000))
        while True:
            yield await queue.get()


class _P4RuntimeRegisters:
    """Registers over P4Runtime RegisterEntry (p4sim; not BMv2's simple_switch_grpc)."""

    def __init__(self, conn: SwitchConnection) -> None:
        self.conn = conn

    async def read(self, name: str, index: int) -> int:
        got = await self.conn.read(P4RegisterEntry(name, index=index))
        if not got or got[0].data is None:
            raise SwitchError(f"{self.conn._where()}: register {name}[{index}] not returned")
        return int(got[0].data)

    async def write(self, name: str, index: int, value: int) -> None:
        await self.conn.modify([P4RegisterEntry(name, index=index, data=value)])

    async def fill(self, name: str, indices: range, value: int) -> None:
        await self.conn.modify(P4RegisterEntry(name, index=i, data=value) for i in indices)

    async def read_all(self, name: str) -> dict[int, int]:
        got = await self.conn.read(P4RegisterEntry(name))
        return {int(e.index): int(e.data or 0) for e in got if e.index is not None}


class SwitchSet:
    """Several switches at once, by device id; connects and closes them concurrently.

    >>> # async with SwitchSet([SwitchSpec(0, "10.0.0.1:9559"), ...], pipeline) as switches:
    >>> #     await switches[0].insert(...)
    """

    def __init__(
        self,
        specs: Iterable[SwitchSpec],
        pipeline: Pipeline | None = None,
        pipelines: dict[int, Pipeline] | None = None,
    ) -> None:
        self.connections: dict[int, SwitchConnection] = {}
        for spec in specs:
            if spec.device_id in self.connections:
                raise ValueError(f"device id {spec.device_id} given twice")
            pipe = (pipelines or {}).get(spec.device_id, pipeline)
            self.connections[spec.device_id] = SwitchConnection(spec, pipe)

    def __getitem__(self, device_id: int) -> SwitchConnection:
        try:
            return self.connections[device_id]
        except KeyError:
            raise SwitchError(f"no switch with device id {device_id}") from None

    def __iter__(self) -> Any:
        return iter(self.connections.values())

    def __len__(self) -> int:
        return len(self.connections)

    async def connect(self, force_pipeline: bool = False) -> None:
        conns = list(self.connections.values())
        results = await asyncio.gather(
            *(c.connect(force_pipeline=force_pipeline) for c in conns), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.close()
            raise errors[0]

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections.values()))

    async def __aenter__(self) -> SwitchSet:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


#: How long connect() waits for the switch to free an election id that our own previous
#: stream held (a client really using the id is refused after that).
HELD_ID_WAIT_S = 2.0


def _election_id_held(err: BaseException) -> bool:
    """The switch refused our election id as still used by another stream."""
    return (
        isinstance(err, P4ClientError)
        and err.code.name == "INVALID_ARGUMENT"
        and "already" in err.message.lower()
    )


def _describe(err: BaseException) -> str:
    if isinstance(err, P4ClientError):
        return f"{err.code.name}: {err.message}"
    if isinstance(err, TimeoutError):
        return "timed out (is the switch running and listening for P4Runtime there?)"
    return str(err) or type(err).__name__


def _switch_error(where: str, operation: str, err: P4ClientError) -> SwitchError:
    parts = [f"{where}: {operation} failed: {err.code.name}: {err.message}"]
    for i, detail in sorted(err.details.items()):
        parts.append(f"  update {i}: {detail.canonical_code.name}: {detail.message}")
    details = {i: d.canonical_code for i, d in err.details.items()}
    return SwitchError("\n".join(parts), err.code, details)


__all__ = [
    "Pipeline",
    "SwitchConnection",
    "SwitchError",
    "SwitchSet",
    "SwitchSpec",
    "default_action",
    "table_entry",
]
