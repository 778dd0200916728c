"""The wire benchmark's C sender and receiver (tests/bench/traffic.c) on a veth pair (root):
what it sends arrives, and its checks count wrong frames as wrong."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bench import programs
from tests.bench.wire import _build, step_traffic

pytestmark = pytest.mark.root


@pytest.fixture
def pair() -> Iterator[tuple[str, str]]:
    a, b = f"tt{os.getpid() % 10000}a", f"tt{os.getpid() % 10000}b"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        for n in (a, b):
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{n}.disable_ipv6=1"], check=False)
            subprocess.run(["ip", "link", "set", "dev", n, "up"], check=True)
        yield a, b
    finally:
        subprocess.run(["ip", "link", "del", a], check=False)


def _records(path: Path, frames: list[bytes]) -> Path:
    path.write_bytes(b"".join(b"\0" + len(f).to_bytes(2, "little") + f for f in frames))
    return path


def _run(
    exe: Path, pair: tuple[str, str], frames: Path, mode: list[str], check: list[str],
    port: int = 1, rate: int = 2000, seconds: float = 0.5,
) -> tuple[int, int, int]:  # fmt: skip
    """(sent, received, wrong) of one step from ``pair[0]`` to ``pair[1]``."""
    opts = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    rx = subprocess.Popen([str(exe), "receive", pair[1], str(port), *check], **opts)
    tx = subprocess.Popen([str(exe), "send", pair[0], str(frames), *mode], **opts)
    try:
        assert rx.stdout.readline().strip() == "ready"
        return step_traffic(rx, tx, rate, seconds)
    finally:
        for p in (tx, rx):
            p.kill()
            p.wait(5)


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("traffic", tmp_path_factory.mktemp("traffic"))


def test_every_frame_sent_arrives_and_only_the_altered_ones_are_wrong(
    exe: Path, pair: tuple[str, str], tmp_path: Path
) -> None:
    good = programs.ipv4_frame()
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    frames = _records(tmp_path / "f.bin", [good, bytes(bad)])
    sent, got, wrong = _run(exe, pair, frames, ["fixed"], ["equal", good.hex()])
    assert sent > 0 and got == sent
    assert wrong == sent // 2  # the records alternate: every second frame is the altered one
    _, got, wrong = _run(exe, pair, frames, ["fixed"], ["any"])
    assert got > 0 and wrong == 0


def test_the_inc_check_accepts_the_switchs_result_and_nothing_else(
    exe: Path, pair: tuple[str, str], tmp_path: Path
) -> None:
    case = programs.CASES["inc.p4 aggregation round"]
    sw = case.switch()
    outs: list[tuple[int, bytes]] = []
    for port, frame in case.frames(programs.WORKERS):  # one round: the 4 contributions
        outs += sw.send(port, frame)
    result = dict(outs)[1]  # the copy the switch sends worker 0, on port 1
    check = ["inc", f"{programs.WORKERS},{programs.JOB}"]
    frames = _records(tmp_path / "r.bin", [result])
    sent, got, wrong = _run(exe, pair, frames, ["fixed"], check, port=1)
    assert got == sent > 0 and wrong == 0
    # the same frame arriving where worker 1's copy should: wrong worker id
    _, got, wrong = _run(exe, pair, frames, ["fixed"], check, port=2)
    assert wrong == got > 0
    # a contribution is no result
    contribution = _records(tmp_path / "c.bin", [programs.inc_frame(0, 0)])
    _, got, wrong = _run(exe, pair, contribution, ["fixed"], check, port=1)
    assert wrong == got > 0


def test_inc_mode_numbers_the_rounds_psn_by_psn(
    exe: Path, pair: tuple[str, str], tmp_path: Path
) -> None:
    """In inc mode every record is a worker's template; the frames carry psn 0, 0, .., 1, ..
    with agg_idx and ver as a NetReduce worker sets them: the prefix check (first 14 bytes,
    length) passes, the equal check fails from the second round on."""
    templates = [programs.inc_frame(w, 0) for w in range(2)]
    frames = _records(tmp_path / "t.bin", templates[:1])
    sent, got, wrong = _run(
        exe, pair, frames, ["inc", str(programs.REGION)], ["equal", templates[0].hex()]
    )
    assert got == sent > 1
    assert wrong == sent - 1  # only psn 0 equals the template
