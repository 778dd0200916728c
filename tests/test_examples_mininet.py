"""Word count, the key-value client and the replicated counter of examples/, written with
inclib, on Mininet: through the switch (ask, kv_cache and consensus jobs) and, with no
controller, on the hosts with one notice per client; and the direct versions give the same
results (root)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def net() -> Iterator[Any]:
    from topologies.experiment import Experiment, ExperimentConfig, star

    cfg = ExperimentConfig(star(7), run_dir=Path("run/examples-served"), log=lambda s: None)
    with Experiment(cfg) as ex:
        yield ex


def notices(runs: list[Any]) -> list[list[str]]:
    return [[line for line in r.lines if line.startswith("inclib:")] for r in runs]


@pytest.mark.parametrize("no_switch", [False, True], ids=["switch", "hosts"])
def test_kv_client_reads_back_every_write(net: Any, tmp_path: Path, no_switch: bool) -> None:
    from examples.run import run_served_app

    rec, runs = run_served_app(net, "kv_client", tmp_path / "kv.json", no_switch)
    assert rec["on_switch"] is not no_switch and rec["wrong"] == [] and rec["puts"] == 50
    for n in notices(runs):
        assert len(n) == (1 if no_switch else 0)
        assert all("get/put go straight to the storage server" in x for x in n)


@pytest.mark.parametrize("no_switch", [False, True], ids=["switch", "hosts"])
def test_replicated_counter_counts_every_committed_increment(
    net: Any, tmp_path: Path, no_switch: bool
) -> None:
    from examples.run import run_served_app

    rec, runs = run_served_app(net, "replicated_counter", tmp_path / "c.json", no_switch)
    assert rec["on_switch"] is not no_switch and rec["counter"] == rec["expected"] == 80
    for n in notices(runs):
        assert len(n) == (1 if no_switch else 0)
        assert all("the leader replica sequences the log's appends" in x for x in n)


@pytest.mark.parametrize("no_switch", [False, True], ids=["switch", "hosts"])
def test_word_count_equals_a_counter_of_the_same_corpus(
    net: Any, tmp_path: Path, no_switch: bool
) -> None:
    from collections import Counter

    from examples.run import WORKERS, run_served_app
    from examples.word_count import corpus

    rec, runs = run_served_app(net, "word_count", tmp_path / "wc.json", no_switch)
    want = Counter(w for r in range(WORKERS) for w in corpus(r, WORKERS))
    assert rec["on_switch"] is not no_switch and rec["counts"] == dict(want)
    for n in notices(runs):
        assert len(n) == (1 if no_switch else 0)
        assert all("reduce-by-key sends each mapper's combined pairs" in x for x in n)


@pytest.mark.parametrize("app", ["word_count", "kv_client", "replicated_counter"])
def test_the_direct_versions_do_the_same(net: Any, tmp_path: Path, app: str) -> None:
    from collections import Counter

    from examples.run import WORKERS, run_served_app
    from examples.word_count import corpus

    rec, _ = run_served_app(net, app, tmp_path / "d.json", direct=True)
    assert rec["on_switch"] and rec.get("wrong", []) == []
    assert rec.get("counter", 80) == 80
    if app == "word_count":
        assert rec["counts"] == Counter(w for r in range(WORKERS) for w in corpus(r, WORKERS))
