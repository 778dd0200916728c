"""The digits MLP in two sizes (hosts/mlp.py): ``--model small|large`` on every command that
trains it, a bad name a one-line usage error, and the large model trains."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hosts.mlp import layer_sizes, parameter_count


def _parse_hosts_train(argv: list[str]) -> object:
    from hosts.train import _parser

    return _parser().parse_args(["--method", "local", *argv])


def _parse_netreduce(argv: list[str]) -> object:
    from topologies.netreduce import parser

    return parser().parse_args(argv)


def _parse_examples_run(argv: list[str]) -> object:
    from examples.run import parser

    return parser().parse_args(["training", *argv])


def _parse_bench(argv: list[str]) -> object:
    from tests.bench.__main__ import main

    return main(["--only", "ddp", *[a.replace("--model", "--ddp-models") for a in argv]])


PARSERS: dict[str, Callable[[list[str]], object]] = {
    "hosts.train": _parse_hosts_train,
    "topologies.netreduce": _parse_netreduce,
    "examples.run": _parse_examples_run,
    "tests.bench": _parse_bench,
}


@pytest.mark.parametrize("command", PARSERS)
def test_an_unknown_model_is_a_one_line_usage_error(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        PARSERS[command](["--model", "huge"])
    assert e.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "huge" in err[0] and "small" in err[0], err
    assert "Traceback" not in capsys.readouterr().err


def test_the_large_model_with_direct_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from examples.run import main

    with pytest.raises(SystemExit):
        main(["training", "--direct", "--model", "large"])
    assert "only training without --direct" in capsys.readouterr().err


def test_layer_sizes_of_an_unknown_model_name_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown model 'huge': choose one of small, large"):
        layer_sizes("huge")


def test_the_large_model_has_a_million_parameters_and_trains_in_one_epoch() -> None:
    from hosts.netreduce.allreduce import LocalGroup
    from hosts.train import train

    assert parameter_count(layer_sizes("large")) >= 1_000_000
    group = LocalGroup(2)
    hist: list[object] = []

    import threading

    def work(w: int) -> None:
        hist.append(train(group.allreduce_fn(w), w, 2, epochs=1, model="large"))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(hist) == 2
    assert all(h.final_accuracy > 0.9 for h in hist)  # type: ignore[attr-defined]


def test_the_ddp_example_trains_the_large_model(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch==2.13.0 is in the test extra (make setup-test)")
    with socket.socket() as s:  # a free port for gloo's rendezvous on loopback
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "rec.json"
    cmd = [sys.executable, "-m", "examples.training", "--controller", "unix:/nonexistent",
           "--rank", "0", "--world", "1", "--master", f"127.0.0.1:{port}", "--comm", "gloo",
           "--epochs", "1", "--model", "large", "--out", str(out)]  # fmt: skip
    env = {"GLOO_SOCKET_IFNAME": "lo", "PATH": "/usr/bin:/bin"}
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert got.returncode == 0, got.stderr[-2000:]
    rec = json.loads(out.read_text())
    assert rec["model"].startswith("large model (1,126,410 parameters")
    assert rec["epochs"][0]["accuracy"] > 0.85


@pytest.mark.parametrize("slots", ["48", "0", "256", "x"])
def test_make_run_slots_other_than_whole_blocks_is_a_one_line_usage_error(
    slots: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from topologies.demo import main

    with pytest.raises(SystemExit) as e:
        main(["--slots", slots])
    assert e.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1 and slots in lines[0] and "--slots" in lines[0], err
    assert "Traceback" not in err


def test_make_run_takes_the_values_per_packet_of_its_job() -> None:
    from topologies.netreduce import parser
    from wire.header import AGG_SLOT_COUNTS, SLOTS

    assert parser().parse_args([]).slots == SLOTS
    assert all(parser().parse_args(["--slots", str(k)]).slots == k for k in AGG_SLOT_COUNTS)
