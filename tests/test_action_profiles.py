"""v1model action_profile / action_selector: compiler, in-process Switch API, P4Info and
P4Runtime over real gRPC (ActionProfileMember/Group, indirect TableEntry)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from finsy.proto import U128, p4i, p4r, p4r_grpc, rpc_status

from p4sim.frontend.diagnostics import P4Error
from p4sim.p4info import build_p4info, bundle_sources
from p4sim.p4runtime.server import P4RuntimeServer
from p4sim.switch import Switch, SwitchError

PROG = Path(__file__).parent / "p4/conformance/action_profiles/ecmp_selector.p4"
SEL = "MyIngress.ecmp_selector"
PROF = "MyIngress.smac_profile"


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (BMv2 ``crc16``): reflected poly 0x8005, init 0, no final xor."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def flow(src: int, dst: int, sport: int, dport: int, proto: int = 6) -> bytes:
    eth = b"\xff" * 6 + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 24, 0, 0, 64, proto, 0, src, dst)
    return eth + ip + struct.pack("!HH", sport, dport)


def selector_hash(src: int, dst: int, sport: int, dport: int, proto: int = 6) -> int:
    """The selector fields in key order, byte-packed: srcAddr, dstAddr, protocol, ports."""
    return crc16_arc(struct.pack("!IIBHH", src, dst, proto, sport, dport))


FLOWS = [
    (0x0A000001 + (i * 2654435761) % 251, 0x0A000102, (i * 40503) & 0xFFFF, 80 + i % 3)
    for i in range(24)
]


@pytest.fixture(scope="module")
def compiled() -> object:
    return Switch.from_file(str(PROG)).program


@pytest.fixture
def sw(compiled: object) -> Switch:
    s = Switch(compiled)  # type: ignore[arg-type]
    for i in range(4):
        s.act_prof_create_member(SEL, i + 1, "set_nhop", {"dmac": 0xB0 + i, "port": i + 1})
    s.act_prof_create_group(SEL, 100, [1, 2, 3, 4])
    s.table_indirect_add("ecmp", {"hdr.ipv4.dstAddr": (0x0A000000, 8)}, group=100)
    return s


def out_port(sw: Switch, f: tuple[int, int, int, int]) -> int | None:
    out = sw.send(0, flow(*f))
    return out[0][0] if out else None


# -------------------------------------------------------------------------- in-process


def test_selector_keys_are_not_match_keys(sw: Switch) -> None:
    info = sw.table_info("ecmp")
    assert [k.name for k in info.keys] == ["hdr.ipv4.dstAddr"]
    assert info.implementation == SEL
    assert [n for n, _ in info.selector_fields] == [
        "hdr.ipv4.srcAddr",
        "hdr.ipv4.dstAddr",
        "hdr.ipv4.protocol",
        "hdr.ports.srcPort",
        "hdr.ports.dstPort",
    ]


def test_group_member_is_crc16_of_selector_fields_mod_group_size(sw: Switch) -> None:
    ports = []
    for f in FLOWS:
        want = selector_hash(*f) % 4 + 1  # members 1..4 hold ports 1..4, in handle order
        got = out_port(sw, f)
        assert got == want, f"flow {f}"
        assert out_port(sw, f) == got  # the same flow always picks the same member
        ports.append(got)
    assert len(set(ports)) > 1  # flows spread over several members


def test_group_modify_reselects_over_remaining_members(sw: Switch) -> None:
    sw.act_prof_remove_member_from_group(SEL, 2, 100)
    remaining = [1, 3, 4]
    for f in FLOWS[:12]:
        assert out_port(sw, f) == remaining[selector_hash(*f) % 3]


def test_member_entry_on_selector_table_and_rewrite(sw: Switch) -> None:
    sw.table_indirect_add("ecmp", {"hdr.ipv4.dstAddr": (0x0B000000, 8)}, member=3)
    out = sw.send(0, flow(0x0A000001, 0x0B000001, 5, 6))
    assert out[0][0] == 3
    assert out[0][1][:6] == (0xB2).to_bytes(6, "big")


def test_empty_group_runs_default_action(sw: Switch) -> None:
    sw.act_prof_create_group(SEL, 200)
    sw.table_indirect_add("ecmp", {"hdr.ipv4.dstAddr": (0x0C000000, 8)}, group=200)
    assert sw.send(0, flow(1, 0x0C000001, 5, 6)) == []  # default drop()


def test_action_profile_member_entries(sw: Switch) -> None:
    sw.act_prof_create_member(PROF, 7, "set_src", {"smac": 0xAAAA})
    h = sw.table_indirect_add("smac", {"sm.egress_spec": 2}, member=7)
    f = next(x for x in FLOWS if selector_hash(*x) % 4 == 1)  # goes out of port 2
    assert sw.send(0, flow(*f))[0][1][6:12] == (0xAAAA).to_bytes(6, "big")
    sw.act_prof_modify_member(PROF, 7, "set_src", {"smac": 0xCCCC})
    assert sw.send(0, flow(*f))[0][1][6:12] == (0xCCCC).to_bytes(6, "big")
    with pytest.raises(SwitchError, match="still used"):
        sw.act_prof_delete_member(PROF, 7)
    sw.table_delete("smac", h)
    sw.act_prof_delete_member(PROF, 7)
    assert sw.send(0, flow(*f))[0][1][6:12] == (1).to_bytes(6, "big")


def test_indirect_table_errors(sw: Switch) -> None:
    with pytest.raises(SwitchError, match="table_indirect_add"):
        sw.table_add("ecmp", {"hdr.ipv4.dstAddr": (0x0D000000, 8)}, "drop", {})
    with pytest.raises(SwitchError, match="no group 9"):
        sw.table_indirect_add("ecmp", {"hdr.ipv4.dstAddr": (0x0D000000, 8)}, group=9)
    with pytest.raises(SwitchError, match="groups need an action_selector"):
        sw.act_prof_create_group(PROF, 1)
    with pytest.raises(SwitchError, match="still used"):
        sw.act_prof_delete_member(SEL, 1)  # in group 100
    with pytest.raises(SwitchError, match="group 100 is still used"):
        sw.act_prof_delete_group(SEL, 100)
    with pytest.raises(SwitchError, match="already exists"):
        sw.act_prof_create_member(SEL, 1, "set_nhop", {"dmac": 0, "port": 0})


ANON = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; }
struct M { }
parser P(packet_in p, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t {
        key = { hdr.h.a: exact; hdr.h.b: selector; }
        actions = { fwd; }
        implementation = action_selector(HashAlgorithm.crc16, 32w1024, 32w14);
    }
    table u {
        key = { hdr.h.a: exact; }
        actions = { fwd; }
        @name("u_prof") implementation = action_profile(32w8);
    }
    apply { t.apply(); u.apply(); } }
control E(inout H hdr, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M m) { apply { } }
control D(packet_out p, in H hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"""


def test_anonymous_implementations_are_named_after_table_or_name_annotation() -> None:
    s = Switch.from_source(ANON)
    assert s.table_info("t").implementation == "I.t"
    assert s.table_info("u").implementation == "I.u_prof"
    names = {(a.name, a.with_selector, a.size) for a in s.info.action_profiles}
    assert names == {("I.t", True, 1024), ("I.u_prof", False, 8)}


def test_selector_keys_without_selector_are_rejected() -> None:
    bad = ANON.replace("implementation = action_selector(HashAlgorithm.crc16, 32w1024, 32w14);", "")
    with pytest.raises(P4Error, match="selector keys but no action_selector"):
        Switch.from_source(bad)


# ----------------------------------------------------------------------------- P4Info


def test_p4info_action_profiles_and_implementation_id(compiled: object) -> None:
    s = Switch(compiled)  # type: ignore[arg-type]
    p4info = build_p4info(s.info)
    aps = {a.preamble.name: a for a in p4info.action_profiles}
    tables = {t.preamble.name: t for t in p4info.tables}
    sel, prof = aps[SEL], aps[PROF]
    assert sel.preamble.id >> 24 == 0x11 and prof.preamble.id >> 24 == 0x11
    assert sel.preamble.alias == "ecmp_selector"
    assert (sel.with_selector, sel.size, list(sel.table_ids)) == (
        True,
        64,
        [tables["MyIngress.ecmp"].preamble.id],
    )
    assert (prof.with_selector, prof.size) == (False, 16)
    assert tables["MyIngress.ecmp"].implementation_id == sel.preamble.id
    assert tables["MyIngress.smac"].implementation_id == prof.preamble.id
    assert [m.name for m in tables["MyIngress.ecmp"].match_fields] == ["hdr.ipv4.dstAddr"]


# ------------------------------------------------------------------------ P4Runtime gRPC

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


_CODES = {c.value[0]: c.value for c in grpc.StatusCode}


class WriteFailed(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code


class Rig:
    """A P4Runtime server on localhost with a primary client and the pipeline set."""

    def __init__(self, compiled: object) -> None:
        self.switches: list[Switch] = []

        def factory(cfg: bytes) -> Switch:
            self.switches.append(Switch(compiled))  # type: ignore[arg-type]
            return self.switches[-1]

        self.server = P4RuntimeServer(
            switch_factory=factory, device_id=1, address="127.0.0.1:0", cpu_port=64
        )
        port = self.server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self.p4info = build_p4info(Switch(compiled).info)  # type: ignore[arg-type]
        self.ids = {
            x.preamble.name: x.preamble.id
            for kind in ("tables", "actions", "action_profiles")
            for x in getattr(self.p4info, kind)
        }
        arb = p4r.StreamMessageRequest()
        arb.arbitration.device_id = 1
        arb.arbitration.election_id.CopyFrom(U128.encode(1))
        self._stream_done = False
        self.stream = self.stub.StreamChannel(self._requests(arb))
        next(self.stream)  # the arbitration answer
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=1,
            election_id=U128.encode(1),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        req.config.p4info.CopyFrom(self.p4info)
        req.config.p4_device_config = bundle_sources(str(PROG)).to_bytes()
        self.stub.SetForwardingPipelineConfig(req)

    def _requests(self, first: p4r.StreamMessageRequest) -> Iterator[p4r.StreamMessageRequest]:
        yield first
        import time

        while not self._stream_done:
            time.sleep(0.05)

    def write(self, kind: int, **entity: object) -> None:
        """One update; WriteFailed with the update's own p4.v1.Error code on failure."""
        upd = p4r.Update(type=kind, entity=p4r.Entity(**entity))
        req = p4r.WriteRequest(device_id=1, election_id=U128.encode(1), updates=[upd])
        try:
            self.stub.Write(req)
        except grpc.RpcError as err:
            for key, value in err.trailing_metadata() or ():  # type: ignore[attr-defined]
                if key == "grpc-status-details-bin":
                    st = rpc_status.Status()
                    st.ParseFromString(value)
                    e = p4r.Error()
                    st.details[0].Unpack(e)
                    raise WriteFailed(
                        grpc.StatusCode(_CODES[e.canonical_code]), e.message
                    ) from None
            raise

    def read(self, **entity: object) -> list[p4r.Entity]:
        req = p4r.ReadRequest(device_id=1, entities=[p4r.Entity(**entity)])
        return [e for resp in self.stub.Read(req) for e in resp.entities]

    def member(self, mid: int, port: int) -> p4r.ActionProfileMember:
        m = p4r.ActionProfileMember(action_profile_id=self.ids[SEL], member_id=mid)
        m.action.action_id = self.ids["MyIngress.set_nhop"]
        m.action.params.add(param_id=1, value=(0xB0 + port).to_bytes(6, "big"))
        m.action.params.add(param_id=2, value=port.to_bytes(2, "big"))
        return m

    def group(self, gid: int, members: list[int]) -> p4r.ActionProfileGroup:
        g = p4r.ActionProfileGroup(action_profile_id=self.ids[SEL], group_id=gid, max_size=8)
        for mid in members:
            g.members.add(member_id=mid, weight=1)
        return g

    def entry(self, prefix: int, group: int | None = None, member: int | None = None):  # type: ignore[no-untyped-def]
        te = p4r.TableEntry(table_id=self.ids["MyIngress.ecmp"])
        fm = te.match.add(field_id=1)
        fm.lpm.value, fm.lpm.prefix_len = prefix.to_bytes(4, "big"), 8
        if group is not None:
            te.action.action_profile_group_id = group
        if member is not None:
            te.action.action_profile_member_id = member
        return te

    def close(self) -> None:
        self._stream_done = True
        self.channel.close()
        self.server.stop(0)


@pytest.fixture
def rig(compiled: object) -> Iterator[Rig]:
    r = Rig(compiled)
    yield r
    r.close()


def test_p4runtime_members_groups_entries_forward_and_read_back(rig: Rig) -> None:
    for i in range(1, 5):
        rig.write(INSERT, action_profile_member=rig.member(i, i))
    rig.write(INSERT, action_profile_group=rig.group(100, [1, 2, 3, 4]))
    rig.write(INSERT, table_entry=rig.entry(0x0A000000, group=100))
    sw = rig.switches[-1]
    for f in FLOWS[:12]:
        assert out_port(sw, f) == selector_hash(*f) % 4 + 1
    members = rig.read(action_profile_member=p4r.ActionProfileMember())
    assert [m.action_profile_member.member_id for m in members] == [1, 2, 3, 4]
    assert members[2].action_profile_member.action.params[1].value == b"\x03"
    (grp,) = rig.read(action_profile_group=p4r.ActionProfileGroup(action_profile_id=rig.ids[SEL]))
    assert [m.member_id for m in grp.action_profile_group.members] == [1, 2, 3, 4]
    assert grp.action_profile_group.max_size == 8
    (te,) = rig.read(table_entry=p4r.TableEntry(table_id=rig.ids["MyIngress.ecmp"]))
    assert te.table_entry.action.action_profile_group_id == 100
    rig.write(MODIFY, action_profile_group=rig.group(100, [4]))
    assert {out_port(sw, f) for f in FLOWS[:8]} == {4}


def test_p4runtime_errors_for_in_use_duplicate_and_unknown(rig: Rig) -> None:
    rig.write(INSERT, action_profile_member=rig.member(1, 1))
    rig.write(INSERT, action_profile_group=rig.group(100, [1]))
    rig.write(INSERT, table_entry=rig.entry(0x0A000000, group=100))
    rig.write(INSERT, table_entry=rig.entry(0x0B000000, member=1))
    cases = [
        (DELETE, {"action_profile_member": rig.member(1, 1)}, grpc.StatusCode.FAILED_PRECONDITION),
        (DELETE, {"action_profile_group": rig.group(100, [])}, grpc.StatusCode.FAILED_PRECONDITION),
        (INSERT, {"action_profile_member": rig.member(1, 1)}, grpc.StatusCode.ALREADY_EXISTS),
        (INSERT, {"table_entry": rig.entry(0x0C000000, group=7)}, grpc.StatusCode.NOT_FOUND),
        (INSERT, {"action_profile_group": rig.group(5, [9])}, grpc.StatusCode.NOT_FOUND),
    ]
    for op, ent, code in cases:
        with pytest.raises(WriteFailed) as exc:
            rig.write(op, **ent)
        assert exc.value.code == code, ent
    direct = rig.entry(0x0D000000)
    direct.action.action.action_id = rig.ids["MyIngress.drop"]
    with pytest.raises(WriteFailed) as exc:
        rig.write(INSERT, table_entry=direct)
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    # once nothing refers to them, group and member can go
    rig.write(DELETE, table_entry=rig.entry(0x0A000000))
    rig.write(DELETE, table_entry=rig.entry(0x0B000000))
    rig.write(DELETE, action_profile_group=rig.group(100, []))
    rig.write(DELETE, action_profile_member=rig.member(1, 1))
    assert rig.read(action_profile_member=p4r.ActionProfileMember()) == []


def test_p4info_declares_selector_for_p4runtime(rig: Rig) -> None:
    sel = next(a for a in rig.p4info.action_profiles if a.preamble.name == SEL)
    assert isinstance(sel, p4i.ActionProfile) and sel.with_selector
