"""The ``p4.v1.P4Runtime`` gRPC service of p4sim.

Example::

    srv = P4RuntimeServer(device_id=1, address="127.0.0.1:9559", cpu_port=255,
                          packet_sink=lambda port, data: ports.transmit(port, data))
    srv.start()
    outs = srv.inject(1, frame)    # packet loop: a frame from port 1 (PacketIn/digests handled)
    srv.stop()

The switch may be absent until a client sends SetForwardingPipelineConfig, whose
``p4_device_config`` is p4sim's source bundle (see ``p4sim.p4info.SourceBundle``); a switch
loaded at start-up (``switch=``) is served with P4Info generated from its program.  All
control-plane state is touched under one lock, shared by the gRPC handlers; the packet path
(``inject``) takes only the switch's own lock, once per packet.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from finsy.proto import U128, p4r, p4r_grpc

from p4sim.p4runtime.arbitration import Arbiter, Stream
from p4sim.p4runtime.codec import decode_int, encode_int, encode_width
from p4sim.p4runtime.digests import DigestLists
from p4sim.p4runtime.entities import read_entity, write_entity
from p4sim.p4runtime.errors import P4RTError, abort_with_status, batch_status, code_number
from p4sim.p4runtime.pipeline import (
    Pipeline,
    SwitchFactory,
    build_pipeline,
    load_switch_from_device_config,
)
from p4sim.p4runtime.target import Target

log = logging.getLogger("p4sim.p4runtime")

P4RUNTIME_API_VERSION = "1.4.0"
_READ_CHUNK = 500  # entities per ReadResponse
PacketSink = Callable[[int, bytes], object]  # return value ignored (PortSet.transmit: bool)


@dataclass(frozen=True)
class TLSConfig:
    """Server certificate and key (PEM files), as simple_switch_grpc's
    ``--grpc-server-cert``/``--grpc-server-key``; ``ca_file`` (``--grpc-server-cacert``)
    verifies client certificates, required when ``client_auth``
    (``--grpc-server-with-client-auth``)."""

    cert_file: str
    key_file: str
    ca_file: str | None = None
    client_auth: bool = False


class P4RuntimeServer:
    """P4Runtime server for one p4sim device (see the module docstring)."""

    def __init__(
        self,
        switch_factory: SwitchFactory | None = None,
        device_id: int = 1,
        address: str = "0.0.0.0:9559",
        cpu_port: int | None = None,
        tls: TLSConfig | None = None,
        switch: Any = None,
        packet_sink: PacketSink | None = None,
        max_workers: int = 32,
        p4info: Any = None,
        device_config: bytes = b"",
    ) -> None:
        self.factory = switch_factory or load_switch_from_device_config
        self.device_id = device_id
        self.address = address
        self.cpu_port = cpu_port
        self.tls = tls
        self.packet_sink = packet_sink
        self.max_workers = max_workers
        self.lock = threading.RLock()  # guards the switch and the pipeline state
        self.arbiter = Arbiter(device_id)
        self.pipeline: Pipeline | None = None
        self.saved: Pipeline | None = None
        self.port: int | None = None
        self._server: grpc.Server | None = None
        self.digest_lists = DigestLists()
        if switch is not None:
            self.pipeline = _initial_pipeline(switch, p4info, device_config)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> int:
        """Start serving; returns the bound TCP port (useful with ``address="...:0"``)."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.max_workers))
        p4r_grpc.add_P4RuntimeServicer_to_server(_Servicer(self), server)
        if self.tls is None:
            self.port = server.add_insecure_port(self.address)
        else:
            self.port = server.add_secure_port(self.address, _credentials(self.tls))
        if not self.port:
            raise OSError(f"cannot listen for gRPC on {self.address}")
        server.start()
        self._server = server
        log.info("P4Runtime server listening on %s (device id %d)", self.address, self.device_id)
        return self.port

    def stop(self, grace: float | None = 0.5) -> None:
        if self._server is not None:
            for s in list(self.arbiter.streams):
                s.send(None)
            self._server.stop(grace).wait()
            self._server = None

    def wait(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()

    @property
    def switch(self) -> Any:
        """The switch currently forwarding packets (None before a pipeline is set)."""
        return self.pipeline.target.switch if self.pipeline else None

    # -- packet path -------------------------------------------------------------------

    def inject(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Run one packet arriving on ``port``; packets for the CPU port become PacketIn
        messages and new digests DigestList messages; the other outputs are returned."""
        # No server lock per packet: one read of the pipeline (a SetForwardingPipelineConfig
        # racing with it only means this packet runs on the pipeline it found); the
        # switch's own lock, taken once, covers the packet and its digests.
        pipe = self.pipeline
        if pipe is None:
            return []
        outs, digests = pipe.target.process(port, data)
        if self.cpu_port is None and not digests:
            return outs
        return self._deliver(pipe, outs, digests)

    def release(self) -> tuple[list[tuple[int, bytes]], float | None]:
        """Queued packets whose departure time has come (those for the CPU port become
        PacketIn), and the seconds until the next departure (None: nothing queued)."""
        pipe = self.pipeline
        if pipe is None:
            return [], None
        sw = pipe.target.switch
        if not sw.tm.active and not len(sw.tm):
            return [], None  # no queue rate anywhere: nothing ever waits
        with sw.lock:
            outs = sw.pipeline.release()
            nxt = sw.pipeline.next_departure_us()
            delay = None if nxt is None else max(0, nxt - sw.pipeline.now_us()) / 1e6
        if outs and self.cpu_port is not None:
            outs = self._deliver(pipe, outs, [])
        return outs, delay

    def _deliver(
        self, pipe: Pipeline, outs: list[tuple[int, bytes]], digests: list
    ) -> list[tuple[int, bytes]]:
        rest = []
        for out_port, pkt in outs:
            if self.cpu_port is not None and out_port == self.cpu_port:
                self._packet_in(pipe, pkt)
            else:
                rest.append((out_port, pkt))
        if digests:
            self._digest_lists(pipe, digests)
        return rest

    def _packet_in(self, pipe: Pipeline, pkt: bytes) -> None:
        msg = p4r.StreamMessageResponse()
        hdr = pipe.index.packet_in
        payload = pkt
        if hdr is not None:
            total = sum(m.bitwidth for m in hdr.metadata)
            nbytes = (total + 7) // 8
            if len(pkt) >= nbytes:
                bits = int.from_bytes(pkt[:nbytes], "big") >> (nbytes * 8 - total)
                shift = total
                for m in hdr.metadata:
                    shift -= m.bitwidth
                    value = (bits >> shift) & ((1 << m.bitwidth) - 1)
                    msg.packet.metadata.add(metadata_id=m.id, value=encode_int(value))
                payload = pkt[nbytes:]
        msg.packet.payload = payload
        primary = self.arbiter.primary_stream()
        if primary is not None:
            primary.send(msg)

    def _digest_lists(self, pipe: Pipeline, digests: list[tuple[str, tuple]]) -> None:
        primary = self.arbiter.primary_stream()
        for name, values in digests:
            info = _digest_info(pipe, name)
            cfg = pipe.digest_config.get(info.preamble.id) if info is not None else None
            if info is None or cfg is None or primary is None:
                continue  # not configured by the controller: dropped, as on BMv2
            msg = self.digest_lists.make(info.preamble.id, values, cfg)
            if msg is not None:
                primary.send(msg)

    def packet_out(self, stream: Stream, po: p4r.PacketOut) -> None:
        """Send a PacketOut's payload into the switch as if it came from the CPU port."""
        with self.lock:
            pipe = self.pipeline
        if pipe is None:
            raise P4RTError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "no forwarding pipeline config set for this device",
            )
        if self.cpu_port is None:
            raise P4RTError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "PacketOut needs a CPU port (start p4sim with --cpu-port)",
            )
        data = _packet_out_header(pipe, po) + bytes(po.payload)
        for port, pkt in self.inject(self.cpu_port, data):
            if self.packet_sink is not None:
                self.packet_sink(port, pkt)

    # -- pipeline config -----------------------------------------------------------------

    def set_pipeline(self, req: p4r.SetForwardingPipelineConfigRequest) -> None:
        A = p4r.SetForwardingPipelineConfigRequest
        action = req.action
        if action == A.COMMIT:
            with self.lock:
                if self.saved is None:
                    raise P4RTError(
                        grpc.StatusCode.FAILED_PRECONDITION,
                        "COMMIT without a config saved by VERIFY_AND_SAVE",
                    )
                self.pipeline, self.saved = self.saved, None
            _wake_native(self.pipeline)
            return
        if action not in (A.VERIFY, A.VERIFY_AND_SAVE, A.VERIFY_AND_COMMIT, A.RECONCILE_AND_COMMIT):
            raise P4RTError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"unsupported SetForwardingPipelineConfig action {action}",
            )
        current = self.pipeline
        reuse = None
        if (
            action == A.RECONCILE_AND_COMMIT
            and current is not None
            and current.device_config == bytes(req.config.p4_device_config)
        ):
            reuse = current.target  # same program: keep every piece of forwarding state
        new = build_pipeline(req.config, self.factory, reuse)  # compiles outside the lock
        if action == A.VERIFY:
            return
        with self.lock:
            if action == A.VERIFY_AND_SAVE:
                self.saved = new
                return
            if reuse is not None and current is not None:
                new.digest_config = current.digest_config
                new.mc_meta, new.clone_bytes = current.mc_meta, current.clone_bytes
                new.entry_meta = current.entry_meta
            elif action == A.RECONCILE_AND_COMMIT and current is not None:
                _carry_state(current, new)
            self.pipeline, self.saved = new, None
        _wake_native(new)

    def require_pipeline(self) -> Pipeline:
        pipe = self.pipeline
        if pipe is None:
            raise P4RTError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "no forwarding pipeline config set for this device "
                "(send SetForwardingPipelineConfig)",
            )
        return pipe

    def check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise P4RTError(
                grpc.StatusCode.NOT_FOUND,
                f"device id {device_id} does not exist (this is {self.device_id})",
            )

    def check_primary(self, req: Any) -> None:
        if req.role:
            raise P4RTError(grpc.StatusCode.UNIMPLEMENTED, "only the default role is supported")
        eid = U128.decode(req.election_id) if req.HasField("election_id") else None
        if eid is None or not self.arbiter.is_primary_election_id(eid):
            raise P4RTError(
                grpc.StatusCode.PERMISSION_DENIED, f"election id {eid} is not the primary client's"
            )


def _initial_pipeline(switch: Any, p4info: Any, device_config: bytes) -> Pipeline:
    from p4sim.p4info import build_p4info

    target = Target(switch)
    if p4info is None:
        p4info = build_p4info(target.info)
    pipe = Pipeline(p4info=p4info, device_config=device_config, cookie=0, target=target)
    pipe.verify()
    return pipe


def _digest_info(pipe: Pipeline, name: str) -> Any:
    info = pipe.index.digest_by_name.get(name)
    if info is None:
        for d in pipe.p4info.digests:
            if d.preamble.name.endswith("." + name) or name.endswith("." + d.preamble.name):
                return d
    return info


def _packet_out_header(pipe: Pipeline, po: p4r.PacketOut) -> bytes:
    hdr = pipe.index.packet_out
    if hdr is None:
        return b""
    given = {}
    known = {m.id: m for m in hdr.metadata}
    for md in po.metadata:
        m = known.get(md.metadata_id)
        if m is None:
            raise P4RTError(
                grpc.StatusCode.INVALID_ARGUMENT, f"packet_out has no metadata id {md.metadata_id}"
            )
        given[m.id] = decode_int(md.value, m.bitwidth, f"packet_out metadata {m.name}")
    bits, total = 0, 0
    for m in hdr.metadata:
        bits = (bits << m.bitwidth) | given.get(m.id, 0)
        total += m.bitwidth
    pad = (-total) % 8
    return encode_width(bits << pad, total + pad)


def _wake_native(pipe: Pipeline) -> None:
    """A new pipeline is installed: the native back end's C packet loop, which may be
    serving the old one, goes back to Python to pick the new one up."""
    notify = getattr(getattr(pipe.target.switch, "pipeline", None), "notify", None)
    if notify is not None:
        notify()


def _carry_state(old: Pipeline, new: Pipeline) -> None:
    """RECONCILE_AND_COMMIT with a new program: keep what still fits (table entries of
    tables and actions that still exist, multicast groups, clone sessions)."""
    for t in old.target.info.tables:
        try:
            dst = new.target.table(t.name)
            src = old.target.table(t.name)
        except P4RTError:
            continue
        for e in src.entries():
            try:
                dst.add(type(e)(e.matches, e.action, tuple(e.args), e.priority))
            except Exception:  # the entry no longer fits the new table: dropped
                log.info("reconcile: dropped an entry of table %s", t.name)
    pre_old, pre_new = old.target.pre, new.target.pre
    for gid in pre_old.groups():
        pre_new.mc_group_set(gid, pre_old.replicas(gid))
    for s in pre_old.clone_sessions():
        pre_new.clone_session_set(
            s.session_id, list(s.replicas), s.class_of_service, s.truncate_bytes
        )
    new.mc_meta, new.clone_bytes = dict(old.mc_meta), dict(old.clone_bytes)


def _credentials(tls: TLSConfig) -> grpc.ServerCredentials:
    with open(tls.key_file, "rb") as f:
        key = f.read()
    with open(tls.cert_file, "rb") as f:
        cert = f.read()
    if tls.client_auth and not tls.ca_file:
        raise ValueError("TLS client authentication needs a CA certificate file")
    ca = None
    if tls.ca_file:
        with open(tls.ca_file, "rb") as f:
            ca = f.read()
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=tls.client_auth
    )


# ------------------------------------------------------------------------ the service


class _BatchFailed(Exception):
    """Some updates of a Write failed; carries the google.rpc.Status to return."""

    def __init__(self, status: Any) -> None:
        super().__init__(status.message)
        self.status = status


def _guarded(method: Callable) -> Callable:
    """Turn P4RTError into its status and any other exception into INTERNAL (logged):
    a malformed request never takes the server down."""

    def wrapper(self: _Servicer, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except _BatchFailed as failed:
            status = failed.status
        except P4RTError as err:
            status = None
            code, message = err.code, err.message
        except Exception as err:
            log.exception("%s failed", method.__name__)
            status = None
            code, message = grpc.StatusCode.INTERNAL, f"{type(err).__name__}: {err}"
        # Abort outside the handlers above: grpc's abort raises a bare Exception.
        if status is not None:
            abort_with_status(context, status)
        context.abort(code, message)

    wrapper.__name__ = method.__name__
    return wrapper


class _Servicer(p4r_grpc.P4RuntimeServicer):
    def __init__(self, server: P4RuntimeServer) -> None:
        self.srv = server

    @_guarded
    def Capabilities(self, request: Any, context: Any) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    @_guarded
    def SetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        self.srv.check_device(request.device_id)
        self.srv.check_primary(request)
        self.srv.set_pipeline(request)
        return p4r.SetForwardingPipelineConfigResponse()

    @_guarded
    def GetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        self.srv.check_device(request.device_id)
        pipe = self.srv.require_pipeline()
        R = p4r.GetForwardingPipelineConfigRequest
        resp = p4r.GetForwardingPipelineConfigResponse()
        cfg = resp.config
        cfg.cookie.cookie = pipe.cookie
        if request.response_type in (R.ALL, R.P4INFO_AND_COOKIE):
            cfg.p4info.CopyFrom(pipe.p4info)
        if request.response_type in (R.ALL, R.DEVICE_CONFIG_AND_COOKIE):
            cfg.p4_device_config = pipe.device_config
        return resp

    @_guarded
    def Write(self, request: Any, context: Any) -> Any:
        srv = self.srv
        srv.check_device(request.device_id)
        srv.check_primary(request)
        pipe = srv.require_pipeline()
        if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
            raise P4RTError(
                grpc.StatusCode.UNIMPLEMENTED, "p4sim supports only CONTINUE_ON_ERROR atomicity"
            )
        errors: list[P4RTError | None] = []
        with srv.lock:
            pipe = srv.require_pipeline()  # again, under the lock: it may have been replaced
            for upd in request.updates:
                errors.append(_apply(pipe, upd))
        if any(e is not None for e in errors):
            raise _BatchFailed(batch_status(errors))
        return p4r.WriteResponse()

    def Read(self, request: Any, context: Any) -> Iterator[p4r.ReadResponse]:
        try:
            self.srv.check_device(request.device_id)
            with self.srv.lock:
                pipe = self.srv.require_pipeline()
                found = [e for ent in request.entities for e in read_entity(pipe, ent)]
        except P4RTError as err:
            context.abort(err.code, err.message)
        except Exception as err:
            log.exception("Read failed")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(err).__name__}: {err}")
        for i in range(0, max(len(found), 1), _READ_CHUNK):
            yield p4r.ReadResponse(entities=found[i : i + _READ_CHUNK])

    def StreamChannel(self, request_iterator: Any, context: Any) -> Iterator[Any]:
        stream = Stream(peer=context.peer(), alive=context.is_active)
        reader = threading.Thread(
            target=self._read_stream, args=(stream, request_iterator), daemon=True
        )
        reader.start()
        context.add_callback(lambda: stream.send(None))
        while True:
            msg = stream.out.get()
            if msg is None:
                break
            yield msg
        self.srv.arbiter.leave(stream)
        if stream.abort is not None:
            context.abort(stream.abort.code, stream.abort.message)

    def _read_stream(self, stream: Stream, requests: Any) -> None:
        try:
            for req in requests:
                if not self._stream_message(stream, req):
                    break
        except grpc.RpcError:
            pass  # the client went away
        except Exception:
            log.exception("StreamChannel reader failed")
        finally:
            self.srv.arbiter.leave(stream)
            stream.send(None)

    def _stream_message(self, stream: Stream, req: p4r.StreamMessageRequest) -> bool:
        kind = req.WhichOneof("update")
        try:
            if kind == "arbitration":
                self.srv.arbiter.join(stream, req.arbitration)
            elif kind == "packet":
                self._check_stream_primary(stream)
                self.srv.packet_out(stream, req.packet)
            elif kind == "digest_ack":
                self.srv.digest_lists.ack(req.digest_ack.digest_id, req.digest_ack.list_id)
            else:
                raise P4RTError(grpc.StatusCode.UNIMPLEMENTED, f"stream message {kind}")
        except P4RTError as err:
            if kind == "arbitration":
                stream.abort = err
                return False
            stream.send(_stream_error(err, req))
        except Exception as err:
            log.exception("StreamChannel message failed")
            stream.send(_stream_error(P4RTError(grpc.StatusCode.INTERNAL, str(err)), req))
        return True

    def _check_stream_primary(self, stream: Stream) -> None:
        if not stream.arbitrated:
            raise P4RTError(
                grpc.StatusCode.FAILED_PRECONDITION, "send a MasterArbitrationUpdate first"
            )
        if self.srv.arbiter.primary_stream() is not stream:
            raise P4RTError(
                grpc.StatusCode.PERMISSION_DENIED, "only the primary client may send packets"
            )


def _apply(pipe: Pipeline, upd: p4r.Update) -> P4RTError | None:
    try:
        write_entity(pipe, upd.type, upd.entity)
        return None
    except P4RTError as err:
        return err
    except Exception as err:
        log.exception("Write update failed")
        return P4RTError(grpc.StatusCode.INTERNAL, f"{type(err).__name__}: {err}")


def _stream_error(err: P4RTError, req: p4r.StreamMessageRequest) -> p4r.StreamMessageResponse:
    msg = p4r.StreamMessageResponse()
    msg.error.canonical_code = code_number(err.code)
    msg.error.message = err.message
    if req.WhichOneof("update") == "packet":
        msg.error.packet_out.packet_out.CopyFrom(req.packet)
    return msg


def program_args(
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
    log: Any = None,
    tm: Any = None,
    backend: str = "python",
    target: str = "bmv2",
) -> dict[str, Any]:
    """``switch=``, ``p4info=`` and ``device_config=`` for a P4RuntimeServer that starts
    with ``path`` loaded (P4Error on a bad program) on ``backend`` (python or native);
    ``target`` as ``Switch.from_file``'s.

    Example::

        srv = P4RuntimeServer(device_id=0, cpu_port=255, **program_args("basic.p4"))
    """
    from p4sim.p4info import build_p4info, bundle_sources, program_info_for_file
    from p4sim.switch import Switch

    sw = Switch.from_file(
        path,
        include_dirs=tuple(include_dirs),
        defines=dict(defines or {}),
        log=log,
        tm=tm,
        backend=backend,
        target=target,
    )
    return {
        "switch": sw,
        "p4info": build_p4info(program_info_for_file(sw, path, include_dirs, defines)),
        "device_config": bundle_sources(path, include_dirs, defines, target).to_bytes(),
    }


def serve_forever(server: P4RuntimeServer, ports: Any = None) -> None:
    """Start ``server`` and block: with ``ports`` (a ``p4sim.ports.PortSet``) run the
    packet loop through ``server.inject`` (PacketOut packets leave through
    ``ports.transmit``) until ``ports.stop()``; else until the server stops.  Ctrl-C
    stops both.

    Example::

        ports = PortSet({1: "s1-eth1", 2: "s1-eth2"})
        srv = P4RuntimeServer(device_id=0, cpu_port=255, packet_sink=ports.transmit)
        serve_forever(srv, ports)
    """
    if ports is not None and server.packet_sink is None:
        server.packet_sink = ports.transmit
    server.start()
    try:
        if ports is not None:
            ports.serve(server.inject)
        else:
            server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


__all__ = [
    "P4RUNTIME_API_VERSION",
    "P4RuntimeServer",
    "TLSConfig",
    "program_args",
    "serve_forever",
]
