"""Word count written directly against the transport: the same application as
``examples/word_count.py`` with the controller's API and ``hosts/ask/run.py`` by hand.

Run on Mininet: ``python -m examples.run word_count --direct``. Next to the library version
it has no host-only path: without the switch's job it stops.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Hashable, Iterator
from pathlib import Path

from controller.api_client import ControllerApi
from hosts.ask import run as ask_run


def corpus(rank: int, world: int, files: int = 40) -> Iterator[str]:
    for path in sorted(Path(os.__file__).parent.glob("*.py"))[:files][rank::world]:
        yield from path.read_text(errors="replace").split()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.direct.word_count")
    ap.add_argument("role", choices=("admit", "reduce", "map"))
    ap.add_argument("--controller", default="")
    ap.add_argument("--plan", default="")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.role == "admit":
        job = ControllerApi(a.controller).submit({"kind": "ask", "workers": a.world})
        print(json.dumps({"controller": a.controller, "job_id": job["job_id"]}))
        return 0
    plan = json.loads(a.plan)
    if a.role == "map":
        pairs: list[tuple[Hashable, int]] = list(Counter(corpus(a.rank, a.world)).items())
        chunks = (dict(pairs[i : i + 4096]) for i in range(0, len(pairs), 4096))
        ask_run.send_partition(plan["controller"], plan["job_id"], a.rank, chunks)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        argv = ["reducer", "--controller", plan["controller"], "--job-id", str(plan["job_id"])]
        if ask_run.run_reducer(ask_run.parser().parse_args([*argv, "--out", out])) != 0:
            return 1
        counts: dict[str, int] = ask_run.read_record(Path(out))["result"]
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
    print(f"{len(counts)} distinct words, {sum(counts.values())} in all; top: {top}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"on_switch": True, "counts": counts}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
