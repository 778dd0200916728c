"""Fuzzing p4sim: random and mutated packets through every test program, and malformed
P4 sources through the whole compiler.

Packets: each program is set up by its STF script (table entries, groups, sessions), then
100,000 packets derived from the script's packets (bit flips, truncations, extensions,
random bytes) go through it. None may raise; every output is bytes on a valid port; a
script that expects output gets some. The seed is fixed and printed (``FUZZ_SEED``).
``p4src/inc.p4`` has its own fuzzer with a state oracle: tests/test_fuzz_inc.py.
Sources: truncations and token deletions of every program must give a P4Error (a clean
``file:line:col`` message) or compile; never another exception.
"""

from __future__ import annotations

import os
import random
import re
import zlib
from pathlib import Path

import pytest

from p4sim.compiler import compile_text
from p4sim.frontend.diagnostics import P4Error
from p4sim.stf import run_stf
from p4sim.stf_format import Expect, PacketIn, parse_stf
from p4sim.switch import Switch
from tests.beyond_bmv2 import target_of
from tests.test_stf_programs import program_for

ROOT = Path(__file__).resolve().parents[1]
STF_FILES = sorted((ROOT / "tests/p4").rglob("*.stf"))
PROGRAMS = sorted(
    {p for p in (ROOT / "tests/p4").rglob("*.p4")}
    | {ROOT / "topologies/basic/basic.p4", ROOT / "p4src/inc.p4"}
)
PACKETS_PER_PROGRAM = 100_000
# Fixed and printed: FUZZ_SEED=N reproduces a failure (each program mixes in its path's CRC,
# which, unlike hash(), does not change with PYTHONHASHSEED).
FUZZ_SEED = int(os.environ.get("FUZZ_SEED", "0"))


def _mutations(seeds: list[bytes], n: int, rng: random.Random):
    """``n`` packets: mostly mutated copies of ``seeds``, some wholly random."""
    for i in range(n):
        kind = i % 8
        if kind == 7 or not seeds:
            yield rng.randbytes(rng.randrange(0, 200))
            continue
        pkt = bytearray(rng.choice(seeds))
        if kind <= 3 and pkt:  # flip a few bits
            for _ in range(1 + kind):
                j = rng.randrange(len(pkt))
                pkt[j] ^= 1 << rng.randrange(8)
        elif kind == 4:  # truncate anywhere, including inside the first header
            del pkt[rng.randrange(len(pkt) + 1) :]
        elif kind == 5:  # extend with garbage
            pkt += rng.randbytes(rng.randrange(1, 64))
        else:  # overwrite a random span with random bytes
            if pkt:
                a = rng.randrange(len(pkt))
                b = min(len(pkt), a + rng.randrange(1, 9))
                pkt[a:b] = rng.randbytes(b - a)
        yield bytes(pkt)


@pytest.mark.slow
@pytest.mark.parametrize("stf", STF_FILES, ids=lambda p: str(p.relative_to(ROOT / "tests/p4")))
def test_hundred_thousand_mutated_packets_never_crash_the_pipeline(stf: Path) -> None:
    program = program_for(stf)
    commands = parse_stf(stf.read_text(), str(stf))
    sw = Switch.from_file(str(program), target=target_of(program))
    run_stf(sw, commands)  # installs the script's state; its verdict is tested elsewhere
    seeds = [c.data for c in commands if isinstance(c, PacketIn)]
    ports = sorted({c.port for c in commands if isinstance(c, PacketIn)} | {0, 1, 2})
    seed = FUZZ_SEED ^ zlib.crc32(str(stf.relative_to(ROOT)).encode())
    print(f"{stf.name}: fuzz seed {seed} (FUZZ_SEED={FUZZ_SEED})")
    rng = random.Random(seed)
    out_packets = 0
    for i, pkt in enumerate(_mutations(seeds, PACKETS_PER_PROGRAM, rng)):
        outs = sw.send(ports[i % len(ports)], pkt)
        for port, data in outs:
            assert isinstance(data, bytes) and 0 <= port < 512, f"seed {seed}, packet {i}"
        out_packets += len(outs)
    # A script that expects packets out has seeds that reach the deparser; lightly mutated
    # copies of them (extended, a bit flipped in the payload) do too. None out means the
    # fuzz never got past the parser, whatever it claims.
    if any(isinstance(c, Expect) for c in commands):
        assert out_packets > 0, f"seed {seed}: no mutated packet came out of {program.name}"


def _tokens(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\w+|[^\s\w]", text)]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_malformed_sources_get_a_clean_error_every_time(program: Path) -> None:
    text = program.read_text()
    spans = _tokens(text)
    rng = random.Random(len(text))
    errors = 0
    for trial in range(12):
        if trial % 3 == 0:
            mutated = text[: rng.randrange(len(text))]
        else:  # delete one to three tokens, last first so earlier spans stay valid
            mutated = text
            for a, b in sorted(rng.sample(spans, 1 + trial % 3), reverse=True):
                mutated = mutated[:a] + mutated[b:]
        try:
            compile_text(
                mutated,
                str(program),
                include_dirs=[str(program.parent)],
                target=target_of(program),
            )
        except P4Error as err:
            errors += 1
            assert re.match(r"^.+:\d+:\d+: error: .+", str(err)), str(err)
    assert errors >= 4  # truncations always break a program
