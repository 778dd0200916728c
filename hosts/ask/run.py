"""ASK mapper and reducer processes over real sockets (Mininet hosts, any IPv4 network).

Example (each in its own host; the job admitted with kind ``ask``)::

    python -m hosts.ask.run reducer --controller unix:run/ask/controller.sock --job-id 1 \\
        --out run/ask/result.json
    python -m hosts.ask.run mapper --controller unix:run/ask/controller.sock --job-id 1 \\
        --worker-id 0 --input run/ask/words0.txt
    python -m hosts.ask.run mapper --controller unix:run/ask/controller.sock --serve
                                                  # long-lived: one JSON job per stdin line

The processes: ``hosts/ask/mapper_process.py`` (``send_partition``; ``--serve``: a
long-lived mapper), ``hosts/ask/reducer_process.py`` (``run_reducer``; ``--serve``: a
long-lived reducer), over the control channel of ``hosts/ask/control.py`` (its module doc:
the protocol, who is who, signed lines); ASK's own mappers read text splits
(``hosts/ask/text_splits.py``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from hosts.ask.control import (
    CONTROL_PORT,
    MAX_LINE,
    Lines,
    RecordWatch,
    collect,
    control_key,
    read_record,
    subscribe,
    wait_record,
)

# the processes' modules, imported by the role that runs (a mapper process does not pay
# for the reducer's imports, nor the reducer for the mapper's): part of their one-time start
_LAZY = {
    "run_mapper": "hosts.ask.mapper_process", "send_partition": "hosts.ask.mapper_process",
    "serve_mapper": "hosts.ask.mapper_process", "run_reducer": "hosts.ask.reducer_process",
    "serve_reducer": "hosts.ask.reducer_process", "chunk_counts_of": "hosts.ask.text_splits",
    "split_blocks": "hosts.ask.text_splits",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [  # the processes' pieces, by the names callers have used from here (and the
    # processes' functions, through ``_LAZY``)
    "CONTROL_PORT", "MAX_LINE", "Lines", "RecordWatch", "collect", "control_key", "main",
    "parser", "read_record", "subscribe", "wait_record",
]  # fmt: skip


def _split(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N, got {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"split {text!r}: need 0 <= I < N")
    return i, n


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m hosts.ask.run", description=__doc__)
    sub = ap.add_subparsers(dest="role", required=True)
    for role in ("mapper", "reducer"):
        p = sub.add_parser(role)
        p.add_argument("--controller", required=True, help="daemon URL (unix:PATH)")
        p.add_argument("--job-id", type=int, help="required without --serve")
        p.add_argument("--rto", type=float, default=0.05, help="retransmission timeout (s)")
        p.add_argument(
            "--serve",
            action="store_true",
            help=f"stay up and run one {role} per JSON job line on stdin (long-lived)",
        )
    m = sub.choices["mapper"]
    m.add_argument("--worker-id", type=int, help="required without --serve")
    m.add_argument("--verbose", action="store_true", help="print progress every 2 s")
    m.add_argument("--input", help="text file: its words are the keys")
    m.add_argument(
        "--split",
        type=_split,
        default=(0, 1),
        metavar="I/N",
        help="read split I of N of the input (byte ranges, whole lines)",
    )
    m.add_argument(
        "--wait-go",
        action="store_true",
        help="once set up, print 'ask mapper ready' and wait for a line on stdin",
    )
    m.add_argument("--chunk", type=int, default=4096, help="about so many words combined")
    m.add_argument("--hot", type=int, default=0, help="keys counted fewer times bypass")
    m.add_argument("--tuples", type=int, default=16, help="tuples per packet (1..16)")
    r = sub.choices["reducer"]
    r.add_argument("--out", help="JSON file for the result")
    r.add_argument("--swap-s", type=float, default=0.0, help="array swap period (s), 0: none")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        if a.role == "mapper":
            from hosts.ask import mapper_process

            if a.serve:
                return mapper_process.serve_mapper(a)
            if None in (a.input, a.worker_id, a.job_id):
                print("ask mapper: --job-id, --worker-id and --input are required (or --serve)",
                      file=sys.stderr)  # fmt: skip
                return 2
            return mapper_process.run_mapper(a)
        from hosts.ask import reducer_process

        if a.serve:
            return reducer_process.serve_reducer(a)
        if a.job_id is None:
            print("ask reducer: --job-id is required (or --serve)", file=sys.stderr)
            return 2
        return reducer_process.run_reducer(a)
    except (OSError, ConnectionError, ValueError) as e:
        print(f"ask {a.role}: {e}", file=sys.stderr, flush=True)
        import traceback

        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
