"""The native back end (p4sim/native) against the Python back end, its reference.

* every P4 program in the repository: either the native back end runs it and gives the
  same outputs as Python on the same fuzzed packets, or the switch says in one line why
  it runs on Python;
* inc.p4 with both jobs installed by the controller's own code: the inc.p4 fuzzer's
  stream (valid contributions and mutations of them) gives identical outputs, registers
  and counters on both back ends;
* (every STF script runs on both back ends in tests/test_stf_programs.py);
* the control plane keeps working: direct counters, register and counter reads and
  writes, entries changed between packets, multicast groups.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from p4sim.runtime.tables import Entry
from p4sim.switch import Switch, SwitchError
from tests.bench.programs import CASES
from tests.beyond_bmv2 import target_of
from tests.test_native_coverage import MUST_RUN_NATIVE

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted(
    p
    for p in subprocess.run(
        ["git", "ls-files", "*.p4"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if "frontend/include" not in p and "V1Switch(" in (ROOT / p).read_text()
)


def fuzz_frames(rng: random.Random, n: int, seeds: list[bytes]) -> list[bytes]:
    """Frames that reach deep into parsers: seeds with bytes flipped and cut, plus
    Ethernet frames of common and random types with random contents."""
    out = []
    for _ in range(n):
        r = rng.random()
        if seeds and r < 0.6:
            f = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(0, 4)):
                if f:
                    f[rng.randrange(len(f))] = rng.randrange(256)
            if rng.random() < 0.15:
                f = f[: rng.randrange(len(f) + 1)]
            out.append(bytes(f))
        else:
            et = rng.choice([0x0800, 0x0800, 0x1212, 0x86DD, rng.randrange(65536)])
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 120)))
            ip = bytes([0x45, 0, 0, 40, 0, 1, 0, 0, 64, rng.choice([6, 17, 0x8F])]) + body
            out.append(bytes(rng.randrange(256) for _ in range(12)) + et.to_bytes(2) + ip)
    return out


def state(sw: Switch) -> dict[str, bytes]:
    """Every register cell and counter of a switch (as uint64 bytes, to compare fast)."""
    got: dict[str, bytes] = {}
    for e in sw.externs():
        x = sw.extern(e.name)
        if e.kind == "register":
            got[e.name] = np.asarray(x.values, dtype=np.uint64).tobytes()
        elif e.kind == "counter":
            cells = (np.asarray(x.packets, dtype=np.uint64), np.asarray(x.bytes, dtype=np.uint64))
            got[e.name] = b"".join(c.tobytes() for c in cells)
    return got


def copy_control_plane(src: Switch, dst: Switch) -> None:
    """Every table entry, default action, multicast group and register cell (the
    controller writes some) of ``src`` into ``dst``."""
    for e in src.externs():
        if e.kind == "register":
            dst.extern(e.name).values[:] = src.extern(e.name).values
    for info in src.tables():
        t = src.table(info.name)
        for e in t.entries():
            dst.table(info.name).add(Entry(e.matches, e.action, e.args, e.priority))
        if not info.default_const:
            dst.table(info.name).set_default(t.default_action, t.default_args)
    for gid in src.pre.groups():
        dst.mc_group_create(gid, src.pre.replicas(gid))


def run_both(py: Switch, nat: Switch, frames: list[tuple[int, bytes]]) -> int:
    """Send every frame to both; the outputs must be equal. Returns frames out. Both see the
    same switch clock, a millisecond per frame (timestamps, job_meter.p4's buckets)."""
    total = 0
    now = [0]
    py.pipeline.clock = nat.pipeline.clock = lambda: now[0]
    for i, (port, f) in enumerate(frames):
        now[0] = 1000 * (i + 1)
        a, b = py.send(port, f), nat.send(port, f)
        assert a == b, f"frame {i} on port {port} ({f.hex()}): python {a} native {b}"
        total += len(a)
    return total


@pytest.mark.parametrize("path", PROGRAMS)
def test_native_matches_python_on_every_program(path: str) -> None:
    target = target_of(ROOT / path)
    nat = Switch.from_file(str(ROOT / path), backend="native", target=target)
    if nat.backend != "native":
        assert path not in MUST_RUN_NATIVE, nat.backend_notice
        notice = nat.backend_notice
        assert notice.startswith("p4sim: native back end unavailable") and "\n" not in notice
        return
    py = Switch.from_file(str(ROOT / path), target=target)
    case = next((c for c in CASES.values() if c.program == ROOT / path), None)
    seeds: list[bytes] = []
    if case is not None:
        case.install(py)
        case.install(nat)
        seeds = [f for _, f in case.frames(16)]
    rng = random.Random(17)
    frames = [(rng.randrange(0, 8), f) for f in fuzz_frames(rng, 300, seeds)]
    if case is not None:  # the program's own traffic first, whole
        frames = case.frames(64) + frames
    run_both(py, nat, frames)
    assert state(py) == state(nat)


def test_inc_fuzz_stream_is_identical_on_both_back_ends(tmp_path: Path) -> None:
    from tests import test_fuzz_inc as fz

    gen = fz.program(tmp_path)
    py = next(gen)
    try:
        nat = Switch(py.program, backend="native")
        assert nat.backend == "native", nat.backend_notice
        copy_control_plane(py, nat)
        rng = random.Random(fz.SEED)
        stream = fz.valid_stream(rng) + fz.other_traffic()
        frames = list(stream)
        for _ in range(1500):
            port, f = rng.choice(stream)
            frames.append((rng.randrange(0, 8) if rng.random() < 0.2 else port, fz.mutate(f, rng)))
        assert run_both(py, nat, frames) > 0
        assert state(py) == state(nat)
        for info in py.tables():  # direct counters, through the entries
            got = [tuple(e.counter) for e in nat.table(info.name).entries()]
            assert got == [tuple(e.counter) for e in py.table(info.name).entries()], info.name
    finally:
        gen.close()


def test_control_plane_changes_between_packets_reach_native() -> None:
    case = CASES["inc.p4 aggregation round"]
    sw = case.switch(backend="native")
    frames = case.frames(8)
    outs = [o for p, f in frames[:4] for o in sw.send(p, f)]
    assert sorted(p for p, _ in outs) == [1, 2, 3, 4]  # the round's result to every worker
    jobs = sw.table("job_region.jobs")
    (entry,) = jobs.entries()
    assert tuple(entry.counter) == (4, 4 * len(frames[0][1]))  # direct counter, from C
    # the job's entry goes: the next round is dropped and counted as an unknown job
    sw.table_delete("job_region.jobs", entry.handle)
    assert [o for p, f in frames[4:8] for o in sw.send(p, f)] == []
    assert sw.counter_read("inc_drops", 0)[0] == 4
    # registers: what C wrote is what the control plane reads, and the reverse
    addr = 2 * 0 + 0
    assert sw.register_read("agg_count", addr) == 4
    sw.register_write("agg_job", addr, 0)
    sw.register_reset("agg_value_00")
    assert sw.register_read("agg_value_00", 1) == 0
    # multicast groups replaced while running
    case.install(sw.__class__.from_file(str(case.program)))  # unaffected other switch
    sw.table_add("job_region.jobs", {"hdr.inc.job_id": 7}, "set_region",
                 {"offset": 0, "size": 64, "quorum": 4, "mcast_grp": 7,
                  "slot_count": 32})  # fmt: skip
    sw.mc_group_create(7, [(2, 2)])
    outs = [o for p, f in frames[:4] for o in sw.send(p, f)]
    assert [p for p, _ in outs] == [2]
    with pytest.raises(SwitchError, match="Python back end"):
        sw.set_queue_rate(100, port=2)


def test_unknown_back_end_is_a_one_line_error() -> None:
    with pytest.raises(SwitchError, match="unknown back end 'fast'"):
        Switch.from_file(str(ROOT / "topologies/basic/basic.p4"), backend="fast")


def test_queue_rates_are_refused_on_native_in_one_line_and_kept_on_python() -> None:
    from p4sim.runtime_cli import native_refusal
    from p4sim.v1model.traffic_manager import TrafficManager

    nat = Switch.from_file(str(ROOT / "topologies/basic/basic.p4"), backend="native")
    py = Switch.from_file(str(ROOT / "topologies/basic/basic.p4"))
    answer = native_refusal(nat, "set_queue_rate 50 2")
    assert answer is not None and answer.startswith("error:") and "--backend python" in answer
    assert native_refusal(nat, "set_queue_depth 100 2") is None  # depth alone changes nothing
    assert native_refusal(py, "set_queue_rate 50 2") is None
    tm = TrafficManager()
    tm.set_rate(100, 2)
    shaped = Switch.from_file(str(ROOT / "topologies/basic/basic.p4"), tm=tm, backend="native")
    assert shaped.backend == "python" and "queue rates" in shaped.backend_notice


def test_an_unwritable_build_cache_falls_back_to_python_with_a_notice(monkeypatch) -> None:
    monkeypatch.setenv("P4SIM_NATIVE_CACHE", "/proc/p4sim-no-such-dir")
    sw = Switch.from_file(str(ROOT / "topologies/basic/basic.p4"), backend="native")
    assert sw.backend == "python"
    assert "cannot write the build cache /proc/p4sim-no-such-dir" in sw.backend_notice
    case = CASES["basic IPv4 forwarding"]
    case.install(sw)
    assert sw.send(*case.frames(1)[0])  # and it forwards, on Python


def _stack_frame(op: int, idx: int, port: int, items: list[tuple[int, int]]) -> bytes:
    """tests/p4/native/stacks_and_ranges.p4's packet: ctl then (bos, val) items."""
    ctl = bytes([op, idx, 0, 0]) + port.to_bytes(2, "big")
    return ctl + b"".join(bytes(i) for i in items) + b"payload"


def test_header_stacks_and_range_keys_run_native_with_pythons_outputs() -> None:
    """Every op of the program on stacks of 1 to 5 items (5: StackOutOfBounds), indices
    in and out of range, ports inside, on and outside the range entries' bounds."""
    path = str(ROOT / "tests/p4/native/stacks_and_ranges.p4")
    py = Switch.from_file(path, target=target_of(path))
    nat = Switch.from_file(path, backend="native", target=target_of(path))
    assert nat.backend == "native", nat.backend_notice
    for sw in (py, nat):
        sw.table_add("by_port", {"hdr.ctl.port": (100, 199), "hdr.ctl.op": (0, 0)},
                     "band", {"tag": 1, "port": 2}, priority=10)  # fmt: skip
        sw.table_add("by_port", {"hdr.ctl.port": (150, 300), "hdr.ctl.op": (3, 0xFF)},
                     "band", {"tag": 2, "port": 3}, priority=20)  # fmt: skip
    frames = []
    for op in range(7):
        for depth in range(1, 6):
            items = [(0, 0x10 + i) for i in range(depth - 1)] + [(1, 0x10 + depth - 1)]
            for idx in (0, 1, 3, 4, 200):
                for port in (99, 100, 150, 199, 200, 300, 301):
                    frames.append((1, _stack_frame(op, idx, port, items)))
    frames.append((1, _stack_frame(1, 0, 5, [(0, 1), (0, 2)])))  # cut inside the stack
    frames[-1] = (1, frames[-1][1][:9])
    assert run_both(py, nat, frames) == len(frames)
    # what the outputs are, not only that both agree
    ((port, out),) = nat.send(1, _stack_frame(1, 0, 150, [(0, 1), (1, 2)]))
    assert port == 2 and out[3] == 1 and out[6:12] == bytes([0, 0xAA, 0, 1, 1, 2])
    ((port, out),) = nat.send(1, _stack_frame(3, 200, 250, [(1, 9)]))  # write out of range
    assert port == 3 and out[3] == 2 and out[6:8] == bytes([1, 9])
    ((_, out),) = nat.send(1, _stack_frame(4, 3, 0, [(1, 9)]))  # read out of the valid ones
    assert out[2] == 0x80 and out[3] == 0xEE
    ((_, out),) = nat.send(1, _stack_frame(0, 0, 0, [(0, i) for i in range(5)]))
    assert out[2] == 0xF0  # a fifth item: StackOutOfBounds reaches ingress


def test_signed_ints_run_native_with_pythons_outputs() -> None:
    """tests/p4/native/signed_ops.p4 on operands at the edges of int<8> and int<64>
    (most negative, -1, 0, 1, most positive) and random ones, every shift from 0 to 70."""
    path = str(ROOT / "tests/p4/native/signed_ops.p4")
    py = Switch.from_file(path, target=target_of(path))
    nat = Switch.from_file(path, backend="native", target=target_of(path))
    assert nat.backend == "native", nat.backend_notice
    rng = random.Random(5)
    edges8 = [0x80, 0x81, 0xFF, 0, 1, 0x7F, 0xFD]
    edges64 = [1 << 63, (1 << 64) - 1, 0, 1, (1 << 63) - 1, (1 << 64) - 3]
    frames = []
    for i in range(600):
        a = edges8[i % 7] if i < 300 else rng.randrange(256)
        b = edges8[(i // 7) % 7] if i < 300 else rng.randrange(256)
        c = edges64[i % 6] if i < 300 else rng.getrandbits(64)
        d = edges64[(i // 6) % 6] if i < 300 else rng.getrandbits(64)
        f = bytes([a, b]) + c.to_bytes(8, "big") + d.to_bytes(8, "big") + bytes([i % 71])
        frames.append((1, f))
    assert run_both(py, nat, frames) == len(frames)
    # what the outputs are: -128 / -1 wraps to -128; -128 >> 70 is -1; 127 |+| 127 is 127
    ((_, out),) = nat.send(1, bytes([0x80, 0xFF]) + bytes(16) + bytes([70]))
    cmp8, _, div8, mod8 = out[:4]
    assert (cmp8, div8, mod8) == (1 | 2 | 32, 0x80, 0) and out[20] == 0xFF  # sar8
    ((_, out),) = nat.send(1, bytes([0x7F, 0x7F]) + bytes(16) + bytes([0]))
    assert out[29] == 0x7F and out[49:53] == bytes([0, 0, 0, 0x7F])  # sadd8, wide
    ((_, out),) = nat.send(1, bytes([0xFE, 0x7F]) + bytes(16) + bytes([0]))
    assert out[30] == 0x80 and out[49:53] == bytes(
        [0xFF, 0xFF, 0xFF, 0xFE]
    )  # -2 |-| 127 saturates; -2 widened


def test_hash_identity_and_xor16_run_native_with_pythons_outputs() -> None:
    """tests/p4/native/hash_algos.p4: identity and xor16 (with crc16/crc32 beside them)
    over fields of odd widths, on random inputs and the all-zero/all-one ones."""
    from p4sim.runtime.hashes import v1model_hash

    path = str(ROOT / "tests/p4/native/hash_algos.p4")
    py = Switch.from_file(path, target=target_of(path))
    nat = Switch.from_file(path, backend="native", target=target_of(path))
    assert nat.backend == "native", nat.backend_notice
    rng = random.Random(9)
    frames = [(1, bytes(9)), (1, b"\xff" * 9)] + [(1, rng.randbytes(9)) for _ in range(300)]
    assert run_both(py, nat, frames) == len(frames)
    ((_, out),) = nat.send(1, bytes(range(1, 10)))  # a=1 b=0x0203 c=0x04050607 d=0x080 e=9
    fields = [(1, 8), (0x0203, 16), (0x04050607, 32), (0x080, 12)]
    assert int.from_bytes(out[:8], "big") == v1model_hash("identity", 0, fields, 2**64 - 1, 64)
    want = v1model_hash("identity", 7, [(0x04050607, 32), (9, 4)], 1000, 32)
    assert int.from_bytes(out[8:12], "big") == want
    assert int.from_bytes(out[12:14], "big") == v1model_hash("xor16", 0, fields, 65536, 16)


def test_header_unions_and_plain_enums_run_native_with_pythons_outputs() -> None:
    """tests/p4/native/unions_enums.p4: every parse path into the union (neither member,
    a, b, a then b) with every op (setValid of b, of a, setInvalid of a, drop by enum)."""
    path = str(ROOT / "tests/p4/native/unions_enums.p4")
    py = Switch.from_file(path, target=target_of(path))
    nat = Switch.from_file(path, backend="native", target=target_of(path))
    assert nat.backend == "native", nat.backend_notice
    rng = random.Random(3)
    frames = [
        (1, bytes([kind, op]) + rng.randbytes(n))
        for kind in range(5)
        for op in range(6)
        for n in (0, 2, 5, 9)
    ]
    assert run_both(py, nat, frames) == sum(1 for _, f in frames if f[1] != 4)
    # a then b extracted: only b valid, out on port 2 (the enum's OUT)
    ((port, out),) = nat.send(1, bytes([3, 0, 0xA1, 0x11, 0xB2, 0x22, 0x33]))
    assert port == 2 and out == bytes([3, 2 | 4 | 8, 0xB2, 0x22, 0x33])
    # b made valid over an extracted a: a is no longer emitted
    ((port, out),) = nat.send(1, bytes([1, 1, 0xA1, 0x11]))
    assert port == 2 and out == bytes([1, 2 | 4 | 8, 9, 0x12, 0x34])
    assert nat.send(1, bytes([0, 4])) == []  # Dir.DROP


def test_sub_control_out_parameters_start_from_their_default_on_native() -> None:
    """tests/p4/native/subcontrol_params.p4: the sub-control reads its out parameters
    before writing them (0 and an invalid header, whatever the arguments held); exit in a
    sub-control and a sub-parser's reject write no out/inout scalar argument back."""
    path = str(ROOT / "tests/p4/native/subcontrol_params.p4")
    py = Switch.from_file(path, target=target_of(path))
    nat = Switch.from_file(path, backend="native", target=target_of(path))
    assert nat.backend == "native", nat.backend_notice
    rng = random.Random(4)
    frames = [(1, rng.randbytes(rng.randrange(0, 8))) for _ in range(200)]
    assert run_both(py, nat, frames) > 0
    # a=7 (out: reads 0, becomes 5), b=10 (inout), c=1 (in, then out as c + 1), aux valid
    # (out: invalid, not emitted)
    assert nat.send(1, bytes([7, 10, 1, 0x33]) + b"xy") == [(1, bytes([5, 11, 2]) + b"xy")]
    # exit in a sub-control: its out and inout arguments keep the caller's values
    assert nat.send(1, bytes([0xEE, 10, 1, 0x33])) == [(1, bytes([0xEE, 10, 1, 0x33]))]
    # a sub-parser rejecting after its extract: the caller's header stays invalid
    assert [o[:3] for _, o in nat.send(1, bytes([7, 10, 1, 0xFF]))] == [bytes([5, 11, 2])]


def test_action_out_inout_and_in_header_parameters_run_native_as_copies() -> None:
    """tests/p4/native/action_params.p4: direct action calls whose parameters are copies
    (copy-out overwrites a direct write to the argument), an out one starting from 0, an
    in header taken at the call, one header passed as in and inout."""
    path = str(ROOT / "tests/p4/native/action_params.p4")
    py = Switch.from_file(path, target=target_of(path))
    nat = Switch.from_file(path, backend="native", target=target_of(path))
    assert nat.backend == "native", nat.backend_notice
    rng = random.Random(6)
    frames = [
        (1, bytes([rng.randrange(256), rng.randrange(256), c % 6, 9, 0x20])) for c in range(300)
    ]
    frames += [(1, rng.randbytes(rng.randrange(0, 6))) for _ in range(50)]
    assert run_both(py, nat, frames) > 0
    send = lambda c: nat.send(1, bytes([5, 10, c, 9, 0x20]))[0][1]  # noqa: E731
    assert send(1)[:2] == bytes([15, 10])  # a = a + b; the direct write of 0x77 is lost
    assert send(2)[:2] == bytes([0x77, 15])  # b = b + a; a written directly
    assert send(3)[2:4] == bytes([3, 0])  # out: read as 0, then 3
    assert send(4)[4] == 0x21  # g2 = g + 1 over the direct write of 0x55


def test_error_keys_take_p4cs_error_numbers_on_native() -> None:
    """tests/p4/native/error_keys.p4: entries written with p4c's error numbers (NoError 1,
    the program's first own error 8) match on both back ends."""
    path = str(ROOT / "tests/p4/native/error_keys.p4")
    py = Switch.from_file(path, target=target_of(path))
    nat = Switch.from_file(path, backend="native", target=target_of(path))
    assert nat.backend == "native", nat.backend_notice
    for sw in (py, nat):
        sw.table_add("by_error", {"sm.parser_error": 1}, "set1", {"v": 0x10})  # NoError
        sw.table_add("by_error", {"sm.parser_error": 8}, "set1", {"v": 0xEE})  # Unwanted
    frames = [(1, bytes([k, 0]) + b"p") for k in range(5)] + [(1, b"\x01"), (1, b"")]
    assert run_both(py, nat, frames) == len(frames)
    assert nat.send(1, bytes([1, 0]))[0][1] == bytes([1, 0x10])
    assert nat.send(1, bytes([2, 0]))[0][1] == bytes([2, 0xEE])


def _replication_setup(sw: Switch) -> None:
    """Groups and clone sessions for the replication programs: a session to one port, a
    truncating one to two ports, one to a multicast group, and one changed after use."""
    sw.mc_group_create(3, [(2, 10), (4, 11)])
    sw.mc_group_create(9, [(1, 1), (3, 2), (5, 3)])
    sw.clone_session_set(5, [(7, 0)])
    sw.clone_session_set(6, [(6, 3), (2, 4)], truncate_bytes=5)
    sw.pre.mirroring_add_mc(7, 9)


@pytest.mark.parametrize(
    "path",
    [
        "tests/compiler_programs/replicate.p4",
        "tests/p4/conformance/architecture/clone.p4",
        "tests/p4/conformance/architecture/resubmit_recirculate.p4",
    ],
)
def test_clones_resubmits_and_recirculations_match_python(path: str) -> None:
    """Every request kind (I2E/E2E clones to ports, truncated, to a multicast group;
    resubmit and recirculate with field lists; endless resubmission cut by the pass
    limit) on the same fuzzed requests: the same frames, in the same order."""
    py = Switch.from_file(str(ROOT / path))
    nat = Switch.from_file(str(ROOT / path), backend="native")
    assert nat.backend == "native", nat.backend_notice
    for sw in (py, nat):
        _replication_setup(sw)
    rng = random.Random(29)
    reqs = [
        bytes([rng.randrange(11), rng.randrange(6)] + [0] * rng.randrange(4)) for _ in range(200)
    ]
    seeds = [r + bytes(rng.randrange(256) for _ in range(8)) for r in reqs[:20]]
    frames = [(rng.randrange(8), f) for f in reqs + fuzz_frames(rng, 100, seeds)]
    assert run_both(py, nat, frames[:150]) > 100
    for sw in (py, nat):  # a session changed between packets reaches C
        sw.clone_session_set(5, [(3, 8), (4, 9)], truncate_bytes=2)
        sw.mc_group_create(3, [(6, 12)])
    run_both(py, nat, frames[150:])


EVAL_ORDER = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; }
struct hdrs_t { h_t h; }
struct meta_t {}
bit<8> bump(inout bit<8> x) { x = x + 1; return x; }
bit<8> sub(in bit<8> l, in bit<8> r) { return l - r; }
parser P(packet_in pk, out hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control VC(inout hdrs_t h, inout meta_t m) { apply {} }
control Ig(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) {
    action put(bit<8> l, bit<8> r) { h.h.e = l - r; }
    apply {
        sm.egress_spec = 1;
        h.h.a = bump(h.h.a) + h.h.a;              // the call first: (a0 + 1) * 2
        h.h.b = sub(bump(h.h.b), h.h.b) + bump(h.h.b);  // 0 + (b0 + 2)
        tuple<bit<8>, bit<8>> t = { h.h.c, bump(h.h.c) };
        h.h.c = t[1] - t[0];                      // 1
        put(bump(h.h.d), h.h.d);                  // 0
        h.h.d = (h.h.d == 0) ? bump(h.h.d) : h.h.d ^ bump(h.h.d) ^ bump(h.h.d);  // 1^2^3
    }
}
control Eg(inout hdrs_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t h, inout meta_t m) { apply {} }
control D(packet_out pk, in hdrs_t h) { apply { pk.emit(h); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), D()) main;
"""


def test_calls_with_inout_arguments_inside_expressions_run_in_p4_order_on_native() -> None:
    """A call changing its argument inside a sum, a function's and an action's arguments,
    a tuple initialiser and a conditional: evaluated left to right, each once, as on
    Python (C alone leaves the order of operands open)."""
    py = Switch.from_source(EVAL_ORDER, "eval_order_native.p4")
    nat = Switch.from_source(EVAL_ORDER, "eval_order_native.p4", backend="native")
    assert nat.backend == "native", nat.backend_notice
    rng = random.Random(8)
    frames = [(0, bytes([0, 0, 0, 0, 0]))] + [(0, rng.randbytes(5)) for _ in range(200)]
    assert run_both(py, nat, frames) == len(frames)
    out = nat.send(0, bytes([10, 20, 30, 0, 9]))[0][1]
    assert out == bytes([22, 22, 1, 0, 0])


UNION_STACK_SHIFTS = """
#include <core.p4>
#include <v1model.p4>
header byte_t { bit<8> data; }
header short_t { bit<16> data; }
header_union u_t { byte_t byte; short_t short; }
header h_t { bit<8> op; }
struct hdrs_t { h_t h; u_t[3] u; }
struct meta_t {}
parser P(packet_in pk, out hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition one; }
    state one { pk.extract(hdr.u.next.byte);
                transition select(hdr.u.last.byte.data) { 0: accept; 1: one; default: two; } }
    state two { pk.extract(hdr.u.next.short); transition accept; }
}
control VC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Ig(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) { hdr.u.push_front(1); }
        if (hdr.h.op == 2) { hdr.u.pop_front(1); }
        if (hdr.h.op == 3) { hdr.u.push_front(2); hdr.u[0].short.setValid(); }
        hdr.h.op = hdr.u[0].isValid() ? 8w1 : 8w0;
    }
}
control Eg(inout hdrs_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout hdrs_t hdr, inout meta_t m) { apply {} }
control Dp(packet_out pk, in hdrs_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), VC(), Ig(), Eg(), CC(), Dp()) main;
"""


def test_stacks_of_header_unions_shift_like_python_on_native() -> None:
    """Extract into stack.next.member, push_front/pop_front invalidating every member of
    the elements shifted in, emit of the whole stack: Python's outputs."""
    py = Switch.from_source(UNION_STACK_SHIFTS, "union_shifts.p4")
    nat = Switch.from_source(UNION_STACK_SHIFTS, "union_shifts.p4", backend="native")
    assert nat.backend == "native", nat.backend_notice
    rng = random.Random(3)
    frames = [
        (0, bytes([rng.randrange(4)] + [rng.choice([0, 1, 2, 7]) for _ in range(rng.randrange(7))]))
        for _ in range(300)
    ]
    assert run_both(py, nat, frames) > 0
    # [1, 0] then a push: [invalid, 1, 0]; u[0] invalid after it
    assert nat.send(0, bytes([1, 1, 0]))[0][1] == bytes([0, 1, 0])
