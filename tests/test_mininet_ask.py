"""ASK word count on Mininet (root): two mapper hosts and a reducer host around the p4sim
switch, every link impaired (1% loss, duplication, reordering), the array swapped every
0.1 s; the counts equal ``collections.Counter`` over the mappers' files."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.slow, pytest.mark.timeout(300)]


def test_word_count_through_the_switch_is_exact_under_impairment_and_swaps() -> None:
    from topologies.ask import run

    rec = run(mappers=2, words=3000, swap_s=0.1, loss=0.01, run_dir=Path("run/ask-test"),
              timeout=180)  # fmt: skip
    assert rec["exact"], "reducer counts differ from Counter over the same files"
    assert rec["keys"] > 100
    assert rec["epochs"] >= 3, "the run must cross array swaps"
    red = rec["reducer"]
    assert red["drained_tuples"] > 0, "nothing was aggregated in the switch"
    assert red["packets"] > 0, "no tuple passed the switch to the reducer"
    impaired = sum(s["retransmissions"] for s in rec["mappers_stats"].values())
    assert impaired > 0 or red["duplicates"] > 0, "the impairment never hit a packet"
