"""The P4Runtime server over real gRPC on localhost, driven with finsy's generated stubs."""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from finsy.proto import U128, p4d, p4i, p4r, p4r_grpc, rpc_status

from p4sim.p4info import (
    build_p4info,
    bundle_sources,
    jenkins_one_at_a_time,
    program_info_for_file,
    read_device_config,
)
from p4sim.p4runtime.server import P4RuntimeServer
from p4sim.switch import Switch

CPU_PORT = 64
PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>

#define CPU_PORT 64

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> pad; }
@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> pad; }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct headers { packet_in_t packet_in; packet_out_t packet_out; ethernet_t eth; }
struct learn_t { bit<48> src; bit<9> port; }
struct metadata { bit<2> color; bit<1> vs_hit; }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) special;
    state start {
        transition select(sm.ingress_port) { CPU_PORT: parse_po; default: parse_eth; }
    }
    state parse_po { pkt.extract(hdr.packet_out); transition parse_eth; }
    state parse_eth {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) { special: mark; default: accept; }
    }
    state mark { meta.vs_hit = 1; transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(64, CounterType.packets_and_bytes) port_pkts;
    meter(16, MeterType.bytes) port_meter;
    register<bit<32>>(8) seen;
    direct_counter(CounterType.packets_and_bytes) fwd_counter;
    direct_meter<bit<2>>(MeterType.packets) acl_meter;
    action drop() { mark_to_drop(sm); }
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action to_cpu() { sm.egress_spec = CPU_PORT; }
    action mcast(bit<16> grp) { sm.mcast_grp = grp; }
    action set_color() { acl_meter.read(meta.color); }
    table fwd_t {
        key = { hdr.eth.dst: exact; }
        actions = { fwd; drop; to_cpu; mcast; }
        default_action = drop();
        counters = fwd_counter;
        size = 4;
    }
    table acl {
        key = { hdr.eth.src: ternary; hdr.eth.etype: range; sm.ingress_port: optional; }
        actions = { set_color; NoAction; }
        meters = acl_meter;
        default_action = NoAction();
    }
    table route {
        key = { hdr.eth.dst: lpm; }
        actions = { fwd; @defaultonly NoAction; }
        default_action = NoAction();
    }
    table const_t {
        key = { hdr.eth.etype: exact; }
        actions = { NoAction; drop; }
        const entries = { 0x0bad : drop(); }
    }
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            port_pkts.count((bit<32>) sm.ingress_port);
            seen.write((bit<32>) sm.ingress_port & 7, 32w1);
            acl.apply();
            route.apply();
            fwd_t.apply();
            const_t.apply();
            if (hdr.eth.etype == 0x1234) {
                digest<learn_t>(1, {hdr.eth.src, sm.ingress_port});
            }
            if (meta.vs_hit == 1) {
                sm.egress_spec = 9;
            }
            if (sm.egress_spec == CPU_PORT) {
                hdr.packet_in.setValid();
                hdr.packet_in.ingress_port = sm.ingress_port;
            }
        }
    }
}
control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.packet_in); pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""

MAC_A = 0x0000000000AA
MAC_B = 0x0000000000BB


def frame(
    dst: int, src: int = 0x111111111111, etype: int = 0x0800, body: bytes = b"x" * 20
) -> bytes:
    return dst.to_bytes(6, "big") + src.to_bytes(6, "big") + etype.to_bytes(2, "big") + body


# ------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, p4i.P4Info, object]:
    """(device config, P4Info, compiled program) of PROGRAM, built once."""
    d = tmp_path_factory.mktemp("prog")
    path = d / "prog.p4"
    path.write_text(PROGRAM)
    sw = Switch.from_file(str(path))
    p4info = build_p4info(program_info_for_file(sw, str(path)))
    return bundle_sources(str(path)).to_bytes(), p4info, sw.program


class Harness:
    def __init__(self, program: tuple[bytes, p4i.P4Info, object]) -> None:
        self.device_config, self.p4info, compiled = program
        self.sent: list[tuple[int, bytes]] = []
        self.built = 0

        def factory(cfg: bytes) -> Switch:
            read_device_config(cfg)  # must still be a valid bundle
            self.built += 1
            return Switch(compiled)

        self.server = P4RuntimeServer(
            switch_factory=factory,
            device_id=1,
            address="127.0.0.1:0",
            cpu_port=CPU_PORT,
            packet_sink=lambda port, data: self.sent.append((port, data)),
        )
        self.port = self.server.start()
        self.clients: list[Client] = []
        self.ids = {p.name: p.id for p in _all_preambles(self.p4info)}

    def client(self, election_id: int | None = None) -> Client:
        c = Client(self.port)
        self.clients.append(c)
        if election_id is not None:
            c.arbitrate(election_id)
        return c

    def close(self) -> None:
        for c in self.clients:
            c.close()
        self.server.stop(0)

    def set_pipeline(self, c: Client, action: int = 0) -> None:
        c.stub.SetForwardingPipelineConfig(self.pipeline_request(c, action))

    def pipeline_request(self, c: Client, action: int = 0) -> Any:
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=1,
            election_id=U128.encode(c.election_id),
            action=action or p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        req.config.p4info.CopyFrom(self.p4info)
        req.config.p4_device_config = self.device_config
        req.config.cookie.cookie = 42
        return req

    def table(self, name: str) -> p4i.Table:
        return next(t for t in self.p4info.tables if t.preamble.name == name)


def _all_preambles(p4info: p4i.P4Info) -> Iterator[p4i.Preamble]:
    for kind in (
        "tables",
        "actions",
        "counters",
        "direct_counters",
        "meters",
        "direct_meters",
        "registers",
        "digests",
        "controller_packet_metadata",
    ):
        for item in getattr(p4info, kind):
            yield item.preamble


class Client:
    """A P4Runtime client on its own channel with an open StreamChannel."""

    def __init__(self, port: int) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self.requests: queue.Queue = queue.Queue()
        self.inbox: queue.Queue = queue.Queue()
        self.election_id = 0
        self.stream = self.stub.StreamChannel(iter(self.requests.get, None))
        self.error: grpc.RpcError | None = None
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            for msg in self.stream:
                self.inbox.put(msg)
        except grpc.RpcError as err:
            self.error = err
        self.inbox.put(None)

    def arbitrate(self, election_id: int, device_id: int = 1) -> None:
        self.election_id = election_id
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.CopyFrom(U128.encode(election_id))
        self.requests.put(req)

    def next(self, kind: str, timeout: float = 5.0) -> object:
        while True:
            msg = self.inbox.get(timeout=timeout)
            assert msg is not None, f"stream closed while waiting for {kind}: {self.error}"
            if msg.WhichOneof("update") == kind:
                return getattr(msg, kind)

    def write(self, *updates: p4r.Update, election_id: int | None = None) -> None:
        eid = self.election_id if election_id is None else election_id
        req = p4r.WriteRequest(device_id=1, election_id=U128.encode(eid), updates=updates)
        self.stub.Write(req)

    def read(self, *entities: p4r.Entity) -> list[p4r.Entity]:
        req = p4r.ReadRequest(device_id=1, entities=entities)
        return [e for resp in self.stub.Read(req) for e in resp.entities]

    def close(self) -> None:
        self.requests.put(None)
        self.channel.close()


@pytest.fixture
def h(program: tuple[bytes, p4i.P4Info, object]) -> Iterator[Harness]:
    harness = Harness(program)
    yield harness
    harness.close()


@pytest.fixture
def ready(h: Harness) -> tuple[Harness, Client]:
    """A harness with a primary client and the pipeline set."""
    c = h.client(election_id=10)
    assert c.next("arbitration").status.code == 0
    h.set_pipeline(c)
    return h, c


# -------------------------------------------------------------------------- helpers


def u(kind: int, **entity: object) -> p4r.Update:
    return p4r.Update(type=kind, entity=p4r.Entity(**entity))


INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


def fwd_entry(
    h: Harness, dst: int, action: str = "Ing.fwd", port: int | None = 2
) -> p4r.TableEntry:
    te = p4r.TableEntry(table_id=h.ids["Ing.fwd_t"])
    te.match.add(field_id=1).exact.value = dst.to_bytes(6, "big")
    te.action.action.action_id = h.ids[action]
    if port is not None:
        te.action.action.params.add(param_id=1, value=port.to_bytes(2, "big"))
    return te


def write_error(excinfo: pytest.ExceptionInfo) -> tuple[grpc.StatusCode, list[p4r.Error]]:
    """Top-level code and the per-update p4.v1.Error list of a failed Write."""
    err = excinfo.value
    details = []
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            st = rpc_status.Status()
            st.ParseFromString(value)
            for any_msg in st.details:
                e = p4r.Error()
                any_msg.Unpack(e)
                details.append(e)
    return err.code(), details


def codes(details: list[p4r.Error]) -> list[str]:
    return [
        grpc.StatusCode.OK.name if d.canonical_code == 0 else _name(d.canonical_code)
        for d in details
    ]


def _name(number: int) -> str:
    return next(c.name for c in grpc.StatusCode if c.value[0] == number)


# ---------------------------------------------------------------------------- tests


def test_capabilities_reports_api_version(h: Harness) -> None:
    c = h.client()
    resp = c.stub.Capabilities(p4r.CapabilitiesRequest())
    assert resp.p4runtime_api_version.startswith("1.")


def test_write_before_pipeline_is_failed_precondition(h: Harness) -> None:
    c = h.client(election_id=1)
    c.next("arbitration")
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(INSERT, table_entry=p4r.TableEntry(table_id=1)))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:
        c.read(p4r.Entity(table_entry=p4r.TableEntry()))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # finsy recognises a missing pipeline by this wording (as BMv2 words it)
    assert re.search(r"no .*\bforwarding pipeline config", exc.value.details(), re.I)
    with pytest.raises(grpc.RpcError) as exc:
        c.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=1))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_get_pipeline_returns_what_was_set_per_response_type(ready: tuple) -> None:
    h, c = ready
    R = p4r.GetForwardingPipelineConfigRequest
    full = c.stub.GetForwardingPipelineConfig(R(device_id=1, response_type=R.ALL)).config
    assert full.p4info == h.p4info
    assert full.p4_device_config == h.device_config
    assert full.cookie.cookie == 42
    cookie = c.stub.GetForwardingPipelineConfig(R(device_id=1, response_type=R.COOKIE_ONLY))
    assert cookie.config.cookie.cookie == 42
    assert not cookie.config.HasField("p4info") and not cookie.config.p4_device_config
    p4 = c.stub.GetForwardingPipelineConfig(R(device_id=1, response_type=R.P4INFO_AND_COOKIE))
    assert p4.config.p4info == h.p4info and not p4.config.p4_device_config
    dev = c.stub.GetForwardingPipelineConfig(
        R(device_id=1, response_type=R.DEVICE_CONFIG_AND_COOKIE)
    )
    assert dev.config.p4_device_config == h.device_config and not dev.config.HasField("p4info")


def test_verify_and_save_then_commit_switches_pipeline(h: Harness) -> None:
    A = p4r.SetForwardingPipelineConfigRequest
    c = h.client(election_id=3)
    c.next("arbitration")
    c.stub.SetForwardingPipelineConfig(h.pipeline_request(c, A.VERIFY))
    assert h.server.pipeline is None  # VERIFY applies nothing
    with pytest.raises(grpc.RpcError) as exc:
        c.stub.SetForwardingPipelineConfig(h.pipeline_request(c, A.COMMIT))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # nothing saved
    c.stub.SetForwardingPipelineConfig(h.pipeline_request(c, A.VERIFY_AND_SAVE))
    assert h.server.pipeline is None
    commit = A(device_id=1, election_id=U128.encode(3), action=A.COMMIT)
    c.stub.SetForwardingPipelineConfig(commit)
    assert h.server.pipeline is not None


def test_reconcile_and_commit_keeps_entries(ready: tuple) -> None:
    h, c = ready
    c.write(u(INSERT, table_entry=fwd_entry(h, MAC_A)))
    built = h.built
    h.set_pipeline(c, p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
    assert h.built == built  # same program: nothing recompiled
    assert len(c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=h.ids["Ing.fwd_t"])))) == 1
    h.set_pipeline(c)  # VERIFY_AND_COMMIT starts from a clean state
    assert c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=h.ids["Ing.fwd_t"]))) == []


def test_pipeline_with_bad_device_config_is_invalid_argument(h: Harness) -> None:
    c = h.client(election_id=3)
    c.next("arbitration")
    req = h.pipeline_request(c)
    req.config.p4_device_config = b"P4SIM1\nnot json"
    with pytest.raises(grpc.RpcError) as exc:
        c.stub.SetForwardingPipelineConfig(req)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_default_factory_compiles_the_source_bundle(program: tuple) -> None:
    device_config, p4info, _ = program
    srv = P4RuntimeServer(device_id=7, address="127.0.0.1:0")
    port = srv.start()
    try:
        c = Client(port)
        c.arbitrate(1, device_id=7)
        c.next("arbitration")
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=7,
            election_id=U128.encode(1),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        c.stub.SetForwardingPipelineConfig(req)
        assert [t.name for t in srv.switch.tables()][0].startswith("Ing.")
        c.close()
    finally:
        srv.stop(0)


def test_table_entry_insert_forwards_and_reads_back(ready: tuple) -> None:
    h, c = ready
    te = fwd_entry(h, MAC_A, port=3)
    te.metadata = b"cookie-1"
    c.write(u(INSERT, table_entry=te))
    assert h.server.inject(1, frame(MAC_A)) == [(3, frame(MAC_A))]
    got = c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=h.ids["Ing.fwd_t"])))
    assert len(got) == 1
    te = got[0].table_entry
    assert te.match[0].exact.value == b"\xaa"  # canonical: no leading zero bytes
    assert te.action.action.action_id == h.ids["Ing.fwd"]
    assert te.action.action.params[0].value == b"\x03"
    assert te.metadata == b"cookie-1"
    idle = fwd_entry(h, MAC_B)
    idle.idle_timeout_ns = 10**9
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(INSERT, table_entry=idle))
    assert "idle" in write_error(exc)[1][0].message


def test_modify_and_delete_table_entry(ready: tuple) -> None:
    h, c = ready
    c.write(u(INSERT, table_entry=fwd_entry(h, MAC_A, port=3)))
    c.write(u(MODIFY, table_entry=fwd_entry(h, MAC_A, port=5)))
    assert h.server.inject(1, frame(MAC_A)) == [(5, frame(MAC_A))]
    c.write(u(DELETE, table_entry=fwd_entry(h, MAC_A, port=None)))
    assert h.server.inject(1, frame(MAC_A)) == []


def test_duplicate_insert_is_already_exists_with_one_error_per_update(ready: tuple) -> None:
    h, c = ready
    c.write(u(INSERT, table_entry=fwd_entry(h, MAC_A)))
    with pytest.raises(grpc.RpcError) as exc:
        c.write(
            u(INSERT, table_entry=fwd_entry(h, MAC_B)),
            u(INSERT, table_entry=fwd_entry(h, MAC_A)),
            u(DELETE, table_entry=fwd_entry(h, 0xCC, port=None)),
        )
    code, details = write_error(exc)
    assert code == grpc.StatusCode.UNKNOWN
    assert codes(details) == ["OK", "ALREADY_EXISTS", "NOT_FOUND"]
    assert "already exists" in details[1].message
    # CONTINUE_ON_ERROR: the first update was applied
    assert len(c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=h.ids["Ing.fwd_t"])))) == 2


def test_bad_ids_and_values_are_rejected_with_readable_errors(ready: tuple) -> None:
    h, c = ready
    bad_table = fwd_entry(h, MAC_A)
    bad_table.table_id = 0x02FFFFFF
    too_wide = fwd_entry(h, MAC_A, port=0x3FF)  # bit<9>
    wrong_action = fwd_entry(h, MAC_A, action="Ing.set_color", port=None)
    missing_param = fwd_entry(h, MAC_A, port=None)
    with pytest.raises(grpc.RpcError) as exc:
        c.write(
            *(
                u(INSERT, table_entry=te)
                for te in (bad_table, too_wide, wrong_action, missing_param)
            )
        )
    _, details = write_error(exc)
    assert codes(details) == ["NOT_FOUND", "OUT_OF_RANGE", "INVALID_ARGUMENT", "INVALID_ARGUMENT"]
    assert "0x2ffffff" in details[0].message
    assert "9 bits" in details[1].message
    assert "not one of its actions" in details[2].message
    assert "port is missing" in details[3].message


def test_non_canonical_bytestrings_are_accepted(ready: tuple) -> None:
    h, c = ready
    te = fwd_entry(h, MAC_A)
    te.match[0].exact.value = b"\x00" * 8 + b"\xaa"  # longer than 6 bytes, value fits
    c.write(u(INSERT, table_entry=te))
    assert h.server.inject(1, frame(MAC_A)) == [(2, frame(MAC_A))]


def test_table_full_is_resource_exhausted(ready: tuple) -> None:
    h, c = ready
    c.write(*(u(INSERT, table_entry=fwd_entry(h, 0x10 + i)) for i in range(4)))
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(INSERT, table_entry=fwd_entry(h, 0x20)))
    assert codes(write_error(exc)[1]) == ["RESOURCE_EXHAUSTED"]


def _acl_entry(
    h: Harness,
    priority: int,
    src: tuple[int, int] | None = None,
    etype: tuple[int, int] | None = None,
    port: int | None = None,
) -> p4r.TableEntry:
    te = p4r.TableEntry(table_id=h.ids["Ing.acl"], priority=priority)
    if src is not None:
        fm = te.match.add(field_id=1)
        fm.ternary.value, fm.ternary.mask = src[0].to_bytes(6, "big"), src[1].to_bytes(6, "big")
    if etype is not None:
        fm = te.match.add(field_id=2)
        fm.range.low, fm.range.high = etype[0].to_bytes(2, "big"), etype[1].to_bytes(2, "big")
    if port is not None:
        te.match.add(field_id=3).optional.value = port.to_bytes(2, "big")
    te.action.action.action_id = h.ids["Ing.set_color"]
    return te


def test_ternary_range_optional_entries_with_priority_and_match_filter(ready: tuple) -> None:
    h, c = ready
    c.write(
        u(INSERT, table_entry=_acl_entry(h, 10, src=(0x1100, 0xFF00))),
        u(INSERT, table_entry=_acl_entry(h, 20, etype=(0x800, 0x8FF), port=1)),
        u(INSERT, table_entry=_acl_entry(h, 5)),
    )
    got = c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=h.ids["Ing.acl"])))
    by_prio = {e.table_entry.priority: e.table_entry for e in got}
    assert sorted(by_prio) == [5, 10, 20]
    assert [m.field_id for m in by_prio[10].match] == [1]  # don't-care fields omitted
    assert by_prio[10].match[0].ternary.mask == b"\xff\x00"
    assert by_prio[20].match[0].range.high == b"\x08\xff"
    assert by_prio[20].match[1].optional.value == b"\x01"
    assert list(by_prio[5].match) == []
    one = c.read(p4r.Entity(table_entry=_acl_entry(h, 10, src=(0x1100, 0xFF00))))
    assert [e.table_entry.priority for e in one] == [10]


def test_priority_rules(ready: tuple) -> None:
    h, c = ready
    no_prio = _acl_entry(h, 0, src=(1, 1))
    with_prio = fwd_entry(h, MAC_A)
    with_prio.priority = 3
    zero_mask = _acl_entry(h, 1, src=(0, 0))
    with pytest.raises(grpc.RpcError) as exc:
        c.write(
            u(INSERT, table_entry=no_prio),
            u(INSERT, table_entry=with_prio),
            u(INSERT, table_entry=zero_mask),
        )
    _, details = write_error(exc)
    assert codes(details) == ["INVALID_ARGUMENT"] * 3
    assert "priority" in details[0].message and "priority" in details[1].message


def test_lpm_entry_and_defaultonly_scope(ready: tuple) -> None:
    h, c = ready
    te = p4r.TableEntry(table_id=h.ids["Ing.route"])
    fm = te.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = (0xAA0000000000).to_bytes(6, "big"), 8
    te.action.action.action_id = h.ids["Ing.fwd"]
    te.action.action.params.add(param_id=1, value=b"\x07")
    c.write(u(INSERT, table_entry=te))
    got = c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=h.ids["Ing.route"])))
    assert got[0].table_entry.match[0].lpm.prefix_len == 8
    assert got[0].table_entry.match[0].lpm.value == b"\xaa\x00\x00\x00\x00\x00"
    assert got[0].table_entry.priority == 0
    bad = p4r.TableEntry(table_id=h.ids["Ing.route"])
    fm = bad.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = (0xBB0000000000).to_bytes(6, "big"), 8
    bad.action.action.action_id = h.ids["NoAction"]
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(INSERT, table_entry=bad))
    assert "@defaultonly" in write_error(exc)[1][0].message


def test_default_entry_modify_read_and_reset(ready: tuple) -> None:
    h, c = ready
    tid = h.ids["Ing.fwd_t"]
    default = p4r.TableEntry(table_id=tid, is_default_action=True)
    default.action.action.action_id = h.ids["Ing.fwd"]
    default.action.action.params.add(param_id=1, value=b"\x09")
    c.write(u(MODIFY, table_entry=default))
    assert h.server.inject(1, frame(0x99)) == [(9, frame(0x99))]
    got = c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=tid, is_default_action=True)))
    assert got[0].table_entry.action.action.action_id == h.ids["Ing.fwd"]
    c.write(u(MODIFY, table_entry=p4r.TableEntry(table_id=tid, is_default_action=True)))
    got = c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=tid, is_default_action=True)))
    assert got[0].table_entry.action.action.action_id == h.ids["Ing.drop"]
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(INSERT, table_entry=default))
    assert codes(write_error(exc)[1]) == ["INVALID_ARGUMENT"]


def test_const_table_reads_const_entries_and_refuses_writes(ready: tuple) -> None:
    h, c = ready
    got = c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=h.ids["Ing.const_t"])))
    assert len(got) == 1 and got[0].table_entry.is_const
    assert got[0].table_entry.match[0].exact.value == b"\x0b\xad"
    te = p4r.TableEntry(table_id=h.ids["Ing.const_t"])
    te.match.add(field_id=1).exact.value = b"\x01"
    te.action.action.action_id = h.ids["Ing.drop"]
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(INSERT, table_entry=te))
    assert "const" in write_error(exc)[1][0].message


def test_wildcard_read_of_all_tables(ready: tuple) -> None:
    h, c = ready
    c.write(u(INSERT, table_entry=fwd_entry(h, MAC_A)))
    got = c.read(p4r.Entity(table_entry=p4r.TableEntry()))
    assert sorted(e.table_entry.table_id for e in got) == sorted(
        [h.ids["Ing.fwd_t"], h.ids["Ing.const_t"]]
    )


def test_direct_counter_counts_and_is_writable(ready: tuple) -> None:
    h, c = ready
    c.write(u(INSERT, table_entry=fwd_entry(h, MAC_A)))
    h.server.inject(1, frame(MAC_A))
    h.server.inject(1, frame(MAC_A))
    req = p4r.DirectCounterEntry()
    req.table_entry.table_id = h.ids["Ing.fwd_t"]
    got = c.read(p4r.Entity(direct_counter_entry=req))
    assert got[0].direct_counter_entry.data.packet_count == 2
    assert got[0].direct_counter_entry.data.byte_count == 2 * len(frame(MAC_A))
    te_read = p4r.TableEntry(table_id=h.ids["Ing.fwd_t"])
    te_read.counter_data.SetInParent()
    assert c.read(p4r.Entity(table_entry=te_read))[0].table_entry.counter_data.packet_count == 2
    w = p4r.DirectCounterEntry()
    w.table_entry.CopyFrom(fwd_entry(h, MAC_A, port=None))
    w.data.packet_count, w.data.byte_count = 100, 1000
    c.write(u(MODIFY, direct_counter_entry=w))
    got = c.read(p4r.Entity(direct_counter_entry=req))
    assert got[0].direct_counter_entry.data.packet_count == 100


def test_counter_entry_read_one_and_all_indices_and_write(ready: tuple) -> None:
    h, c = ready
    h.server.inject(3, frame(MAC_A))
    cid = h.ids["Ing.port_pkts"]
    one = p4r.CounterEntry(counter_id=cid)
    one.index.index = 3
    got = c.read(p4r.Entity(counter_entry=one))
    assert got[0].counter_entry.data.packet_count == 1
    assert len(c.read(p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=cid)))) == 64
    one.data.packet_count = 50
    c.write(u(MODIFY, counter_entry=one))
    assert c.read(p4r.Entity(counter_entry=one))[0].counter_entry.data.packet_count == 50
    one.index.index = 64
    with pytest.raises(grpc.RpcError) as exc:
        c.read(p4r.Entity(counter_entry=one))
    assert exc.value.code() == grpc.StatusCode.OUT_OF_RANGE


def test_register_entry_write_then_read(ready: tuple) -> None:
    h, c = ready
    rid = h.ids["Ing.seen"]
    w = p4r.RegisterEntry(register_id=rid)
    w.index.index = 5
    w.data.CopyFrom(p4d.P4Data(bitstring=(0xDEADBEEF).to_bytes(4, "big")))
    c.write(u(MODIFY, register_entry=w))
    got = c.read(p4r.Entity(register_entry=p4r.RegisterEntry(register_id=rid)))
    values = {e.register_entry.index.index: e.register_entry.data.bitstring for e in got}
    assert len(values) == 8 and values[5] == b"\xde\xad\xbe\xef" and values[0] == b"\x00"
    h.server.inject(2, frame(MAC_A))  # the program writes 1 at index 2
    one = p4r.RegisterEntry(register_id=rid)
    one.index.index = 2
    assert c.read(p4r.Entity(register_entry=one))[0].register_entry.data.bitstring == b"\x01"
    w.data.bitstring = (1 << 32).to_bytes(5, "big")
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(MODIFY, register_entry=w))
    assert codes(write_error(exc)[1]) == ["OUT_OF_RANGE"]


def test_meter_and_direct_meter_config(ready: tuple) -> None:
    h, c = ready
    m = p4r.MeterEntry(meter_id=h.ids["Ing.port_meter"])
    m.index.index = 1
    m.config.cir, m.config.cburst, m.config.pir, m.config.pburst = 1000, 100, 2000, 200
    c.write(u(MODIFY, meter_entry=m))
    got = c.read(p4r.Entity(meter_entry=m))[0].meter_entry
    assert (got.config.cir, got.config.cburst, got.config.pir, got.config.pburst) == (
        1000,
        100,
        2000,
        200,
    )
    unset = p4r.MeterEntry(meter_id=h.ids["Ing.port_meter"])
    unset.index.index = 0
    assert not c.read(p4r.Entity(meter_entry=unset))[0].meter_entry.HasField("config")
    acl = _acl_entry(h, 7, src=(1, 0xFF))
    c.write(u(INSERT, table_entry=acl))
    dm = p4r.DirectMeterEntry()
    dm.table_entry.CopyFrom(acl)
    dm.config.cir, dm.config.cburst, dm.config.pir, dm.config.pburst = 10, 1, 20, 2
    c.write(u(MODIFY, direct_meter_entry=dm))
    req = p4r.DirectMeterEntry()
    req.table_entry.table_id = h.ids["Ing.acl"]
    got = c.read(p4r.Entity(direct_meter_entry=req))
    assert got[0].direct_meter_entry.config.pir == 20


def test_multicast_group_insert_read_modify_delete(ready: tuple) -> None:
    h, c = ready
    mc = p4r.MulticastGroupEntry(multicast_group_id=5)
    mc.replicas.add(egress_port=1, instance=0)
    mc.replicas.add(egress_port=2, instance=0)
    pre = p4r.PacketReplicationEngineEntry(multicast_group_entry=mc)
    c.write(u(INSERT, packet_replication_engine_entry=pre))
    c.write(u(INSERT, table_entry=fwd_entry(h, MAC_A, action="Ing.mcast", port=5)))
    outs = h.server.inject(3, frame(MAC_A))
    assert sorted(p for p, _ in outs) == [1, 2]
    read = p4r.PacketReplicationEngineEntry(multicast_group_entry=p4r.MulticastGroupEntry())
    got = c.read(p4r.Entity(packet_replication_engine_entry=read))
    reps = got[0].packet_replication_engine_entry.multicast_group_entry.replicas
    assert [(r.egress_port, r.instance) for r in reps] == [(1, 0), (2, 0)]
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(INSERT, packet_replication_engine_entry=pre))
    assert codes(write_error(exc)[1]) == ["ALREADY_EXISTS"]
    del mc.replicas[1]
    c.write(
        u(
            MODIFY,
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                multicast_group_entry=mc
            ),
        )
    )
    assert [p for p, _ in h.server.inject(3, frame(MAC_A))] == [1]
    c.write(u(DELETE, packet_replication_engine_entry=pre))
    assert c.read(p4r.Entity(packet_replication_engine_entry=read)) == []


def test_clone_session_with_byte_ports(ready: tuple) -> None:
    h, c = ready
    cs = p4r.CloneSessionEntry(session_id=9, class_of_service=1, packet_length_bytes=64)
    cs.replicas.add(port=b"\x00\x04", instance=1)
    c.write(
        u(
            INSERT,
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                clone_session_entry=cs
            ),
        )
    )
    read = p4r.PacketReplicationEngineEntry(clone_session_entry=p4r.CloneSessionEntry())
    got = c.read(p4r.Entity(packet_replication_engine_entry=read))
    out = got[0].packet_replication_engine_entry.clone_session_entry
    assert (out.session_id, out.class_of_service, out.packet_length_bytes) == (9, 1, 64)
    assert (out.replicas[0].port, out.replicas[0].instance) == (b"\x04", 1)
    assert h.server.switch.pre.clone_replicas(9) == [(4, 1)]


def test_digest_entry_config_and_digest_list_with_ack(ready: tuple) -> None:
    h, c = ready
    did = h.ids["learn_t"]
    learn = frame(MAC_A, src=0xABCDEF, etype=0x1234)
    h.server.inject(1, learn)  # not configured: dropped
    de = p4r.DigestEntry(digest_id=did)
    de.config.max_list_size, de.config.ack_timeout_ns = 1, 60 * 10**9
    c.write(u(INSERT, digest_entry=de))
    got = c.read(p4r.Entity(digest_entry=p4r.DigestEntry()))
    assert got[0].digest_entry.digest_id == did
    assert got[0].digest_entry.config.max_list_size == 1
    h.server.inject(3, learn)
    dl = c.next("digest")
    assert dl.digest_id == did
    members = dl.data[0].struct.members
    assert [m.bitstring for m in members] == [b"\xab\xcd\xef", b"\x03"]
    h.server.inject(3, learn)  # same data, list not acked yet: suppressed
    h.server.inject(4, learn)  # other data: sent
    assert c.next("digest").data[0].struct.members[1].bitstring == b"\x04"
    ack = p4r.StreamMessageRequest()
    ack.digest_ack.digest_id, ack.digest_ack.list_id = did, dl.list_id
    c.requests.put(ack)
    for _ in range(100):  # the ack travels on the stream; wait until it is processed
        if h.server.digest_lists.make(did, (0xABCDEF, 3), de.config) is not None:
            break
        threading.Event().wait(0.02)
    else:
        pytest.fail("the ack did not release the digest data")
    c.write(u(DELETE, digest_entry=de))
    assert c.read(p4r.Entity(digest_entry=p4r.DigestEntry())) == []


def test_packet_out_goes_to_the_port_in_its_metadata(ready: tuple) -> None:
    h, c = ready
    req = p4r.StreamMessageRequest()
    req.packet.payload = frame(MAC_A)
    req.packet.metadata.add(metadata_id=1, value=b"\x05")
    c.requests.put(req)
    for _ in range(100):
        if h.sent:
            break
        threading.Event().wait(0.02)
    assert h.sent == [(5, frame(MAC_A))]


def test_generated_p4info_has_controller_headers_with_p4c_ids(program: tuple) -> None:
    _, p4info, _ = program
    pin, pout = p4info.controller_packet_metadata
    assert (pin.preamble.name, pout.preamble.name) == ("packet_in", "packet_out")
    # p4c hashes the header *type* name (packet_in_t) for the ID
    assert pin.preamble.id == 0x04000000 | jenkins_one_at_a_time(b"packet_in_t") & 0xFFFFFF
    assert [(m.id, m.name, m.bitwidth) for m in pout.metadata] == [
        (1, "egress_port", 9),
        (2, "pad", 7),
    ]


def test_packet_to_cpu_port_becomes_packet_in_with_metadata(ready: tuple) -> None:
    h, c = ready
    c.write(u(INSERT, table_entry=fwd_entry(h, MAC_A, action="Ing.to_cpu", port=None)))
    assert h.server.inject(7, frame(MAC_A)) == []
    pin = c.next("packet")
    assert pin.payload == frame(MAC_A)
    assert [(m.metadata_id, m.value) for m in pin.metadata] == [(1, b"\x07"), (2, b"\x00")]


def test_arbitration_primary_backup_and_failover(h: Harness) -> None:
    a = h.client(election_id=10)
    assert a.next("arbitration").status.code == 0  # primary
    b = h.client(election_id=5)
    upd = b.next("arbitration")
    assert upd.status.code == grpc.StatusCode.ALREADY_EXISTS.value[0]
    assert U128.decode(upd.election_id) == 10
    h.set_pipeline(a)
    with pytest.raises(grpc.RpcError) as exc:
        b.write(u(INSERT, table_entry=fwd_entry(h, MAC_A)))
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as exc:
        h.set_pipeline(b)
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    a.write(u(INSERT, table_entry=fwd_entry(h, MAC_A)))
    a.close()  # the primary goes away: the backup becomes primary
    upd = b.next("arbitration")
    assert upd.status.code == 0 and U128.decode(upd.election_id) == 5
    b.write(u(INSERT, table_entry=fwd_entry(h, MAC_B)))


def test_higher_election_id_takes_over_and_everyone_is_told(h: Harness) -> None:
    a = h.client(election_id=10)
    a.next("arbitration")
    b = h.client(election_id=20)
    assert b.next("arbitration").status.code == 0
    upd = a.next("arbitration")
    assert upd.status.code != 0 and U128.decode(upd.election_id) == 20


def test_arbitration_errors_close_the_stream(h: Harness) -> None:
    a = h.client(election_id=10)
    a.next("arbitration")
    dup = h.client(election_id=10)
    assert dup.inbox.get(timeout=5) is None
    assert dup.error is not None and dup.error.code() == grpc.StatusCode.INVALID_ARGUMENT
    wrong = Client(h.port)
    h.clients.append(wrong)
    wrong.arbitrate(3, device_id=99)
    assert wrong.inbox.get(timeout=5) is None
    assert wrong.error.code() == grpc.StatusCode.NOT_FOUND


def test_wrong_device_id_and_unsupported_entity(ready: tuple) -> None:
    h, c = ready
    with pytest.raises(grpc.RpcError) as exc:
        list(c.stub.Read(p4r.ReadRequest(device_id=99, entities=[p4r.Entity(table_entry={})])))
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND
    ap = p4r.Entity(action_profile_member=p4r.ActionProfileMember(action_profile_id=1))
    with pytest.raises(grpc.RpcError) as exc:
        c.read(ap)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND  # this program has no profile 1
    extern = p4r.Entity(extern_entry=p4r.ExternEntry(extern_type_id=1))
    with pytest.raises(grpc.RpcError) as exc:
        c.read(extern)
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_server_survives_malformed_requests(ready: tuple) -> None:
    h, c = ready
    empty = p4r.Update(type=INSERT)  # no entity at all
    odd = p4r.Update(type=99, entity=p4r.Entity(table_entry=fwd_entry(h, MAC_A)))
    with pytest.raises(grpc.RpcError) as exc:
        c.write(empty, odd)
    assert codes(write_error(exc)[1]) == ["UNIMPLEMENTED", "INVALID_ARGUMENT"]
    raw = c.channel.unary_unary("/p4.v1.P4Runtime/Write")
    with pytest.raises(grpc.RpcError):
        raw(b"\xff\xff\xff garbage")
    assert c.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version


def test_tls_server_accepts_a_tls_client(tmp_path: Path) -> None:
    from p4sim.p4runtime.server import TLSConfig

    cert, key = _self_signed(tmp_path)
    srv = P4RuntimeServer(address="127.0.0.1:0", tls=TLSConfig(str(cert), str(key)))
    port = srv.start()
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        ch = grpc.secure_channel(f"localhost:{port}", creds)
        stub = p4r_grpc.P4RuntimeStub(ch)
        assert stub.Capabilities(p4r.CapabilitiesRequest(), timeout=5).p4runtime_api_version
        ch.close()
        plain = grpc.insecure_channel(f"localhost:{port}")
        with pytest.raises(grpc.RpcError):
            p4r_grpc.P4RuntimeStub(plain).Capabilities(p4r.CapabilitiesRequest(), timeout=2)
        plain.close()
    finally:
        srv.stop(0)


def _self_signed(d: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost, made with the openssl command."""
    import shutil
    import subprocess

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the openssl command is needed to make a test certificate")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_p4info_with_other_match_field_order_is_mapped_by_name(h: Harness) -> None:
    p4info = p4i.P4Info()
    p4info.CopyFrom(h.p4info)
    acl = next(t for t in p4info.tables if t.preamble.name == "Ing.acl")
    fields = list(acl.match_fields)
    del acl.match_fields[:]
    acl.match_fields.extend(reversed(fields))  # ids stay with their fields
    c = h.client(election_id=2)
    c.next("arbitration")
    req = h.pipeline_request(c)
    req.config.p4info.CopyFrom(p4info)
    c.stub.SetForwardingPipelineConfig(req)
    c.write(u(INSERT, table_entry=_acl_entry(h, 4, src=(0x12, 0xFF), port=6)))
    (entry,) = h.server.switch.table("Ing.acl").entries()
    assert entry.matches == ((0x12, 0xFF), (0, 0xFFFF), 6)  # runtime key order
    got = c.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=h.ids["Ing.acl"])))
    assert sorted(m.field_id for m in got[0].table_entry.match) == [1, 3]


def test_p4info_not_matching_the_program_is_invalid_argument(h: Harness) -> None:
    c = h.client(election_id=2)
    c.next("arbitration")
    req = h.pipeline_request(c)
    req.config.p4info.tables[0].preamble.name = "Ing.no_such_table"
    with pytest.raises(grpc.RpcError) as exc:
        c.stub.SetForwardingPipelineConfig(req)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "no_such_table" in exc.value.details()


def test_packet_out_from_a_backup_gets_a_stream_error(ready: tuple) -> None:
    h, _ = ready
    backup = h.client(election_id=1)
    backup.next("arbitration")
    req = p4r.StreamMessageRequest()
    req.packet.payload = frame(MAC_A)
    backup.requests.put(req)
    err = backup.next("error")
    assert err.canonical_code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert err.packet_out.packet_out.payload == frame(MAC_A)
    assert h.sent == []


def test_switch_loaded_at_start_is_served_without_set_pipeline(program: tuple) -> None:
    _, _, compiled = program
    srv = P4RuntimeServer(address="127.0.0.1:0", switch=Switch(compiled))
    port = srv.start()
    try:
        c = Client(port)
        c.arbitrate(1)
        c.next("arbitration")
        cfg = c.stub.GetForwardingPipelineConfig(
            p4r.GetForwardingPipelineConfigRequest(device_id=1)
        ).config
        names = {t.preamble.name: t.preamble.id for t in cfg.p4info.tables}
        te = p4r.TableEntry(table_id=names["Ing.fwd_t"])
        te.match.add(field_id=1).exact.value = b"\xaa"
        te.action.action.action_id = next(
            a.preamble.id for a in cfg.p4info.actions if a.preamble.name == "Ing.fwd"
        )
        te.action.action.params.add(param_id=1, value=b"\x02")
        c.write(u(INSERT, table_entry=te))
        assert srv.inject(1, frame(MAC_A)) == [(2, frame(MAC_A))]
        c.close()
    finally:
        srv.stop(0)


def test_value_set_members_steer_the_parser_and_read_back(ready: tuple) -> None:
    h, c = ready
    (vs,) = h.p4info.value_sets
    assert (vs.size, [m.bitwidth for m in vs.match]) == (4, [16])
    assert h.server.inject(1, frame(0x99, etype=0x88B5)) == []  # dropped by fwd_t's default
    vse = p4r.ValueSetEntry(value_set_id=vs.preamble.id)
    member = vse.members.add()
    member.match.add(field_id=1).exact.value = b"\x88\xb5"
    c.write(u(MODIFY, value_set_entry=vse))
    assert [p for p, _ in h.server.inject(1, frame(0x99, etype=0x88B5))] == [9]
    got = c.read(p4r.Entity(value_set_entry=p4r.ValueSetEntry()))
    assert got[0].value_set_entry.members[0].match[0].exact.value == b"\x88\xb5"
    too_many = p4r.ValueSetEntry(value_set_id=vs.preamble.id)
    for i in range(5):
        too_many.members.add().match.add(field_id=1).exact.value = bytes([i + 1])
    with pytest.raises(grpc.RpcError) as exc:
        c.write(u(MODIFY, value_set_entry=too_many))
    assert codes(write_error(exc)[1]) == ["RESOURCE_EXHAUSTED"]


class _FakePorts:
    """Stands in for p4sim.ports.PortSet: one frame arrives on port 1, then the loop ends."""

    def __init__(self) -> None:
        self.tx: list[tuple[int, bytes]] = []

    def transmit(self, port: int, data: bytes) -> bool:
        self.tx.append((port, data))
        return True

    def serve(self, process: Any) -> None:
        for port, pkt in process(1, frame(MAC_B)):
            self.transmit(port, pkt)


def test_serve_forever_runs_the_packet_loop_through_the_server(tmp_path: Path) -> None:
    from p4sim.p4runtime.server import program_args, serve_forever

    path = tmp_path / "prog.p4"
    path.write_text(PROGRAM)
    args = program_args(str(path))
    assert [c.preamble.name for c in args["p4info"].controller_packet_metadata] == [
        "packet_in",
        "packet_out",
    ]
    srv = P4RuntimeServer(address="127.0.0.1:0", cpu_port=CPU_PORT, **args)
    srv.switch.table_set_default("fwd_t", "fwd", {"port": 4})
    ports = _FakePorts()
    serve_forever(srv, ports)
    assert ports.tx == [(4, frame(MAC_B))]
    assert srv.packet_sink == ports.transmit


def test_a_client_that_reconnects_with_its_election_id_becomes_primary_again(h: Harness) -> None:
    # as the tutorials' p4runtime_lib does between tests: the channel goes away without a
    # clean end of its stream, and a new connection arbitrates with the same id at once
    for _ in range(20):
        c = h.client(election_id=7)
        upd = c.next("arbitration")
        assert upd.status.code == 0, upd.status.message
        c.channel.close()


def _arbitration(eid: int) -> p4r.MasterArbitrationUpdate:
    return p4r.MasterArbitrationUpdate(device_id=1, election_id=U128.encode(eid))


def test_an_election_id_held_by_a_stream_whose_client_is_gone_is_free_again() -> None:
    from p4sim.p4runtime.arbitration import Arbiter, Stream

    arb = Arbiter(device_id=1)
    gone = Stream(peer="old")
    arb.join(gone, _arbitration(7))
    gone.alive = lambda: False  # its RPC ended; the server has not cleaned it up yet
    new = Stream(peer="new")
    arb.join(new, _arbitration(7))
    assert arb.primary_stream() is new and gone not in arb.streams
    assert None in list(gone.out.queue)  # the old RPC is told to end


def test_an_election_id_is_refused_while_its_stream_lives_and_taken_once_it_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from p4sim.p4runtime import arbitration
    from p4sim.p4runtime.errors import P4RTError

    monkeypatch.setattr(arbitration, "REUSE_WAIT_S", 0.2)
    arb = arbitration.Arbiter(device_id=1)
    old = arbitration.Stream(peer="old")
    arb.join(old, _arbitration(7))
    with pytest.raises(P4RTError) as err:
        arb.join(arbitration.Stream(peer="dup"), _arbitration(7))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    threading.Timer(0.05, arb.leave, args=(old,)).start()  # leaves while the next one waits
    new = arbitration.Stream(peer="new")
    arb.join(new, _arbitration(7))
    assert arb.primary_stream() is new
