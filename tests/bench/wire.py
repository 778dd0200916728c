"""Switches on the wire at paced offered loads: p4sim and, where installed, BMv2, same
programs, same entries, same traffic, in one run (root: veth interfaces, raw sockets).

For each program (tests/bench/programs.py) a veth pair per switch port is made, the switch
is started with the ``simple_switch_grpc`` command line (``p4sim`` or
``simple_switch_grpc``), its pipeline and entries are pushed over P4Runtime by the project's
controller client (P4Info + p4sim device config, or P4Info + BMv2 JSON from ``p4c``), and a
sender process offers packets at rising paced rates while a receiver process counts and
checks what comes out (tests/bench/traffic.py). Per rate: offered input packets/s,
delivered input packets/s (outputs received / outputs per input), loss, and frames whose
content was wrong. The figure of merit is the highest delivered rate over the sweep.

Sender, switch and receiver share this machine's cores (2 here), as in the reference
measurements of BMv2.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench.programs import ROOT, Case

#: offered rates (input packets/s) of a sweep; it stops early once the switch is saturated
DEFAULT_RATES = (
    2_000, 5_000, 10_000, 20_000, 30_000, 45_000, 60_000, 80_000, 100_000, 130_000, 160_000,
    200_000, 250_000, 300_000, 400_000,
)  # fmt: skip
CEILING_RATES = (20_000, 50_000, 100_000, 200_000, 300_000, 400_000, 600_000, 800_000)


@dataclass(frozen=True)
class Step:
    offered: float  # input packets/s the sender achieved
    delivered: float  # input packets/s whose outputs all arrived (outputs / outputs per input)
    wrong: int  # output frames with a content the program cannot produce

    @property
    def loss(self) -> float:
        return max(0.0, 1.0 - self.delivered / self.offered) if self.offered else 0.0


@dataclass
class Sweep:
    target: str
    case: str
    steps: list[Step] = field(default_factory=list)
    error: str | None = None

    @property
    def best(self) -> float:
        return max((s.delivered for s in self.steps), default=0.0)

    @property
    def lossless(self) -> float:
        """The highest offered rate delivered with less than 1 % loss."""
        return max((s.offered for s in self.steps if s.loss < 0.01), default=0.0)


def bmv2_available() -> str | None:
    """None when ``simple_switch_grpc`` and ``p4c`` are on PATH, else what is missing."""
    missing = [b for b in ("simple_switch_grpc", "p4c") if shutil.which(b) is None]
    return " and ".join(missing) + " not on PATH" if missing else None


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Veths:
    """One veth pair per switch port: (switch side, host side), removed on exit."""

    def __init__(self, ports: Sequence[int]) -> None:
        tag = f"b{os.getpid() % 10000}"
        self.pairs = {p: (f"{tag}s{p}", f"{tag}h{p}") for p in ports}

    def __enter__(self) -> _Veths:
        try:
            for a, b in self.pairs.values():
                _sh("ip", "link", "add", "name", a, "type", "veth", "peer", "name", b)
                for n in (a, b):
                    subprocess.run(
                        ["sysctl", "-qw", f"net.ipv6.conf.{n}.disable_ipv6=1"],
                        capture_output=True,
                        check=False,
                    )
                    subprocess.run(
                        ["ethtool", "-K", n, "rx", "off", "tx", "off", "sg", "off"],
                        capture_output=True,
                        check=False,
                    )
                    _sh("ip", "link", "set", "dev", n, "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for a, _ in self.pairs.values():
            subprocess.run(["ip", "link", "del", a], capture_output=True, check=False)


def _program(address: str, compiled: object, runtime_json: Path) -> None:
    from controller.p4rt.p4runtime_client import SwitchConnection, SwitchSpec
    from controller.p4rt.runtime_config import apply_runtime_config
    from p4rt_config.runtime_json import load_runtime_json

    async def go() -> None:
        spec = SwitchSpec(1, address, name="bench")
        async with SwitchConnection(spec, compiled.pipeline()) as sw:  # type: ignore[attr-defined]
            await apply_runtime_config(sw, load_runtime_json(runtime_json))

    asyncio.run(go())


def _start_switch(target: str, case: Case, veths: _Veths, tmp: Path) -> subprocess.Popen:
    from topologies.p4switch import compile_program, switch_command

    kind = "bmv2" if target == "bmv2" else "p4sim"
    compiled = compile_program(case.program, kind, tmp / target)
    grpc_port = _free_port()
    exe = [sys.executable, "-m", "p4sim.cli"] if kind == "p4sim" else ["simple_switch_grpc"]
    if target == "p4sim-native":  # the C back end (p4sim/native), same command otherwise
        exe += ["--backend", "native"]  # (target p4sim: P4SIM_BACKEND=python below)
    ports = {p: sw for p, (sw, _) in veths.pairs.items()}
    cmd = switch_command(exe, ports, device_id=1, grpc_port=grpc_port, thrift_port=_free_port())
    log = open(tmp / f"{target}.log", "wb")  # noqa: SIM115 - closed with the process
    env = dict(os.environ)
    if target == "p4sim":  # the Python back end (the p4sim command's default is native)
        env["P4SIM_BACKEND"] = "python"
    other = os.environ.get("BENCH_P4SIM_CHECKOUT")
    if other and kind == "p4sim":  # before/after: another checkout's p4sim, same harness
        env["PYTHONPATH"] = other
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=tmp
    )
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{target} exited: {(tmp / f'{target}.log').read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", grpc_port)) == 0:
                break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{target} did not listen on gRPC port {grpc_port}")
        time.sleep(0.1)
    _program(f"127.0.0.1:{grpc_port}", compiled, case.write_runtime_json(tmp / "runtime.json"))
    notice = [
        ln
        for ln in (tmp / f"{target}.log").read_text(errors="replace").splitlines()
        if "native back end unavailable" in ln
    ]
    if target == "p4sim-native" and notice:  # the rate would be Python's, not native's
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{target} fell back to Python: {notice[0]}")
    return proc


def _expected_output(case: Case) -> bytes:
    """The one output of the first input (what basic forwarding must send for every
    packet; the register program keeps its first 14 bytes)."""
    sw = case.switch()
    port, frame = case.frames(1)[0]
    outs = sw.send(port, frame)
    return outs[0][1] if outs else b""


def _cc() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def _build(name: str, tmp: Path) -> Path:
    """``tests/bench/NAME.c`` built in ``tmp`` with the system C compiler."""
    cc = _cc()
    if cc is None:
        raise RuntimeError(f"no C compiler (cc/gcc) to build tests/bench/{name}.c")
    exe = tmp / name
    built = subprocess.run(
        [cc, "-O2", "-Wall", "-o", str(exe), str(ROOT / f"tests/bench/{name}.c")],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise RuntimeError(f"building tests/bench/{name}.c failed: {built.stderr[-500:]}")
    return exe


def _start_reflector(veths: _Veths, tmp: Path) -> subprocess.Popen:
    """tests/bench/reflector.c, built here, forwarding port 1's frames to port 2."""
    exe = _build("reflector", tmp)
    (s1, _), (s2, _) = veths.pairs[1], veths.pairs[2]
    proc = subprocess.Popen([str(exe), s1, s2], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("the reflector did not start")
    return proc


def ceiling(
    case: Case,
    rates: Sequence[float] = CEILING_RATES,
    seconds: float = 1.5,
    log: Callable[[str], None] = lambda s: None,
    traffic: str | None = None,
) -> Sweep:
    """The same sweep with a C reflector, which costs nothing, in the switch's place: the
    most that any switch can be measured at here (frames are counted, not checked)."""
    return sweep("ceiling", case, rates, seconds, log, traffic)


#: sender and receiver: "c" (tests/bench/traffic.c, built here) or "python" (traffic.py)
TRAFFIC = ("c", "python")


def traffic_default() -> str:
    """C where a compiler is installed: it leaves the switch more of the shared cores."""
    return "c" if _cc() else "python"


def _traffic_commands(
    case: Case, hosts: str, expected: str, tmp: Path, traffic: str
) -> tuple[list[str], list[str]]:
    """The receiver's and the sender's command lines for ``case``."""
    from tests.bench import programs

    if traffic == "python":
        py = [sys.executable, "-m", "tests.bench.traffic"]
        return [*py, "receive", case.name, hosts, expected], [*py, "send", case.name, hosts]
    exe = str(_build("traffic", tmp))
    frames = tmp / "frames.bin"
    if case.program == programs.INC:
        records = [(w, programs.inc_frame(w, 0)) for w in range(programs.WORKERS)]
        send_mode = ["inc", str(programs.REGION)]
    else:
        records = [(case.ports.index(port), f) for port, f in case.frames(64)]
        send_mode = ["fixed"]
    frames.write_bytes(b"".join(bytes([i]) + len(f).to_bytes(2, "little") + f for i, f in records))
    if expected == "any":
        check = ["any"]
    elif case.program == programs.INC:
        check = ["inc", f"{programs.WORKERS},{programs.JOB}"]
    elif case.program == programs.REGISTERS:
        check = ["prefix", expected]
    else:
        check = ["equal", expected]
    ports = ",".join(str(p) for p in case.ports)
    return (
        [exe, "receive", hosts, ports, *check],
        [exe, "send", hosts, str(frames), *send_mode],
    )


def step_traffic(
    rx: subprocess.Popen, tx: subprocess.Popen, rate: float, seconds: float
) -> tuple[int, int, int]:
    """One step of a running receiver and sender (traffic.c or traffic.py): ``tx`` offers
    ``rate`` frames/s for ``seconds`` while ``rx`` counts 0.3 s longer; (sent, received,
    wrong)."""
    assert rx.stdin is not None and rx.stdout is not None
    assert tx.stdin is not None and tx.stdout is not None
    rx.stdin.write(f"{seconds + 0.3}\n")
    rx.stdin.flush()
    tx.stdin.write(f"{rate} {seconds}\n")
    tx.stdin.flush()
    sent = int(tx.stdout.readline())
    got, wrong = (int(x) for x in rx.stdout.readline().split())
    return sent, got, wrong


def sweep(
    target: str,
    case: Case,
    rates: Sequence[float] = DEFAULT_RATES,
    seconds: float = 1.5,
    log: Callable[[str], None] = lambda s: None,
    traffic: str | None = None,
) -> Sweep:
    """Offer each rate for ``seconds``; stop once delivery falls under half the offer
    twice (the switch is saturated). ``traffic``: who sends and receives (``TRAFFIC``;
    default ``traffic_default()``)."""
    traffic = traffic or traffic_default()
    result = Sweep(target, case.name)
    expected = _expected_output(case).hex() if target != "ceiling" else "any"
    procs: list[subprocess.Popen] = []
    with _Veths(case.ports) as veths, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        try:
            if target == "ceiling":
                procs.append(_start_reflector(veths, tmp))
            else:
                procs.append(_start_switch(target, case, veths, tmp))
            hosts = ",".join(h for _, h in veths.pairs.values())
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            popen = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True, "env": env}
            rx_cmd, tx_cmd = _traffic_commands(case, hosts, expected, tmp, traffic)
            rx = subprocess.Popen(rx_cmd, **popen)
            tx = subprocess.Popen(tx_cmd, **popen)
            procs += [rx, tx]
            assert rx.stdout is not None
            if rx.stdout.readline().strip() != "ready":
                raise RuntimeError("the receiver did not start")
            saturated = 0
            for i, rate in enumerate([rates[0], *rates]):
                sent, got, wrong = step_traffic(rx, tx, rate, seconds)
                step = Step(sent / seconds, got / case.outputs_per_input / seconds, wrong)
                if i == 0:
                    continue  # warm-up: the switch's first packets, not counted
                result.steps.append(step)
                log(
                    f"  {target:5} {case.name}: offered {step.offered:9,.0f}/s  delivered "
                    f"{step.delivered:9,.0f}/s  loss {step.loss:6.1%}  wrong {wrong}"
                )
                saturated = saturated + 1 if step.delivered < 0.5 * step.offered else 0
                if saturated >= 2:
                    break
                time.sleep(0.3)  # let queues drain between steps
        except (RuntimeError, OSError, subprocess.SubprocessError) as err:
            result.error = str(err)
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.terminate()
                    try:
                        p.wait(10)
                    except subprocess.TimeoutExpired:
                        p.kill()
    return result
