"""Every tests/p4/**/*.stf run through p4sim, on both back ends, against the .p4 program in
its directory.

A directory holds one program: ``<dir>/<dir name>.p4`` when present, else the only ``.p4``
file there. The test fails with the STF runner's expected-vs-actual report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.stf import run_stf
from p4sim.stf_format import parse_stf
from tests.beyond_bmv2 import target_of

P4_DIR = Path(__file__).parent / "p4"
STF_FILES = sorted(P4_DIR.rglob("*.stf"))


def program_for(stf: Path) -> Path:
    """The P4 program an STF script tests: ``name.p4`` beside ``name.stf``, or the
    directory's own program."""
    same = stf.with_suffix(".p4")
    if same.exists():
        return same
    named = stf.parent / f"{stf.parent.name}.p4"
    if named.exists():
        return named
    programs = sorted(stf.parent.glob("*.p4"))
    if len(programs) != 1:
        raise FileNotFoundError(f"{stf}: cannot tell which .p4 program it tests")
    return programs[0]


def test_library_has_scripts_for_every_tutorial() -> None:
    tutorials = {p.parent.name for p in STF_FILES if "tutorials" in p.parts}
    assert tutorials >= {
        "basic", "basic_tunnel", "calc", "ecn", "mri", "source_routing", "load_balance",
        "firewall", "multicast", "link_monitor", "qos",
    }  # fmt: skip


@pytest.mark.parametrize("backend", ["native", "python"])
@pytest.mark.parametrize("stf", STF_FILES, ids=[str(p.relative_to(P4_DIR)) for p in STF_FILES])
def test_stf_script_passes(stf: Path, backend: str) -> None:
    """On both back ends, as ``p4sim stf --backend``: a program the native back end does
    not cover runs on Python there (tests/test_native_coverage.py lists those that must
    not)."""
    from p4sim.switch import Switch

    commands = parse_stf(stf.read_text(), str(stf))
    program = program_for(stf)
    switch = Switch.from_file(
        str(program), include_dirs=(str(stf.parent),), target=target_of(program), backend=backend
    )
    result = run_stf(switch, commands)
    if not result.passed:
        where = f"{stf.relative_to(P4_DIR)} on {switch.backend}"
        pytest.fail(f"{where}\n{result.report}", pytrace=False)


def test_cli_exit_codes_follow_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from p4sim.stf import main

    basic = P4_DIR / "tutorials" / "basic"
    assert main([str(basic / "basic.p4"), str(basic / "basic.stf")]) == 0
    wrong = tmp_path / "wrong.stf"
    wrong.write_text("packet 1 " + "00" * 14 + "\nexpect 0 " + "11" * 14 + "\n")
    assert main([str(basic / "basic.p4"), str(wrong)]) == 1
    assert "port 0: expected 1 packet(s), got 1" in capsys.readouterr().out


def test_cli_runs_the_script_on_the_back_end_asked_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from p4sim import stf
    from p4sim.switch import Switch

    basic = P4_DIR / "tutorials" / "basic"
    used: list[str] = []
    real = Switch.from_file

    def spy(*args: object, **kwargs: object) -> Switch:
        sw = real(*args, **kwargs)  # type: ignore[arg-type]
        used.append(sw.backend)
        return sw

    monkeypatch.setattr(Switch, "from_file", spy)
    monkeypatch.delenv("P4SIM_BACKEND", raising=False)
    args = [str(basic / "basic.p4"), str(basic / "basic.stf")]
    assert stf.main(args) == 0  # native by default, as the switch
    assert stf.main(["--backend", "python", *args]) == 0
    assert used == ["native", "python"]
