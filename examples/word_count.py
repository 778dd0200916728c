"""Word count with inclib: ReduceByKey through the switch (ASK), or on the hosts.

One command runs it on the Mininet network (mappers h1..h4, reducer h5)::

    python -m examples.run word_count

Roles: ``admit`` (prints the plan), ``reduce`` (the reducer: prints and writes the
counts), ``map`` (a mapper: counts the words of its share of the corpus). The corpus is
real text every machine has: the Python standard library's own source files.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from pathlib import Path

import inclib


def corpus(rank: int, world: int, files: int = 40) -> Iterator[str]:
    """The words of mapper ``rank``'s share of the standard library's first ``files``."""
    for path in sorted(Path(os.__file__).parent.glob("*.py"))[:files][rank::world]:
        yield from path.read_text(errors="replace").split()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.word_count")
    ap.add_argument("role", choices=("admit", "reduce", "map"))
    ap.add_argument("--controller", default="")
    ap.add_argument("--plan", default="")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.role == "admit":
        print(inclib.admit(a.controller, a.world, kind="ask", name="words").to_json())
        return 0
    if a.role == "map":
        with inclib.join(a.plan, worker_id=a.rank) as s:
            s.reduce_by_key((w, 1) for w in corpus(a.rank, a.world))
        return 0
    with inclib.reducer(a.plan) as r:
        counts = r.collect()
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
    print(f"{len(counts)} distinct words, {sum(counts.values())} in all; top: {top}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"on_switch": inclib.Plan.from_json(a.plan).on_switch, "counts": counts}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
