"""Run an example application on the Mininet network in one command (root).

Example::

    python -m examples.run training               # DDP, gradients summed in the switch
    python -m examples.run training --comm gloo   # the same with PyTorch's own all-reduce
    python -m examples.run training --exhaust     # switch memory taken first: runs on hosts
    python -m examples.run training --direct      # examples/direct/training.py (no inclib)
    python -m examples.run training --kind serene --mode "bounded 1"   # a Serene mode

One switch ``s1`` (p4sim, or BMv2 with SWITCH=bmv2) with hosts h1..h5 on a star
(``topologies.experiment``); the controller daemon owns the switch; the application's
workers run on h1..h4, h5 is the aggregation address. ``--exhaust`` first admits a job
that holds the whole aggregator pool, so that the application's own request finds no
memory and inclib falls back to the hosts (with its one-line notice). The record of the
run (rank 0's) is printed and written under ``results/examples/``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    HostRun,
    main_guard,
    star,
)
from wire.header import AGG_POOL_SIZE

WORKERS = 4
APPS = ("training",)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m examples.run")
    ap.add_argument("app", choices=APPS)
    ap.add_argument("--comm", choices=("switch", "gloo"), default="switch", help="training")
    ap.add_argument("--epochs", type=int, default=4, help="training")
    ap.add_argument("--kind", default="netreduce", help="training: netreduce or serene")
    ap.add_argument("--mode", default="sync", help="training, serene: synchronisation mode")
    ap.add_argument("--exhaust", action="store_true", help="take all switch memory first")
    ap.add_argument("--direct", action="store_true", help="the version without inclib")
    ap.add_argument("--out", default="results/examples", help="folder for the record")
    ap.add_argument("--quiet", action="store_true", help="print only the record")
    return ap


def worker_commands(
    app: str, url: str, out: Path, comm: str = "switch", epochs: int = 4, extra: tuple = ()
) -> list[tuple[str, list[str]]]:
    """``app``: a module of examples/ (``training``, ``direct.training``)."""
    cmds = []
    for r in range(WORKERS):
        cmd = [sys.executable, "-m", f"examples.{app}", "--controller", url, "--rank", str(r)]
        cmd += ["--world", str(WORKERS), "--comm", comm, "--epochs", str(epochs)]
        cmd += ["--out", str(out), *extra]
        cmds.append((f"h{r + 1}", cmd))
    return cmds


def run_app(
    ex: Experiment,
    app: str,
    record: Path,
    comm: str = "switch",
    epochs: int = 4,
    extra: tuple[str, ...] = (),
) -> tuple[dict[str, Any], list[HostRun]]:
    """Run ``app``'s workers on h1..h4 of ``ex``; rank 0's record and every host's run."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")  # gloo: the host's link, not lo
    record.unlink(missing_ok=True)
    cmds = worker_commands(app, ex.controller_url, record, comm, epochs, extra)
    runs = ex.run_hosts(cmds, show=0)
    for r in runs:
        if r.code != 0:
            raise ExperimentError(f"{r.host} exited with {r.code}: {' | '.join(r.lines[-3:])}")
    if not record.exists():
        raise ExperimentError(f"{app}: rank 0 wrote no record at {record}")
    return json.loads(record.read_text()), runs


def take_all_memory(ex: Experiment) -> None:
    """Admit a job that holds the whole aggregator pool of s1."""
    ex.submit("hog", workers=1, window=AGG_POOL_SIZE)


def run(a: argparse.Namespace) -> int:
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = ("-direct" if a.direct else "") + ("-exhaust" if a.exhaust else "")
    record = (out_dir / f"{a.app}-{a.comm}{tag}.json").resolve()
    log = (lambda s: None) if a.quiet else print
    cfg = ExperimentConfig(star(WORKERS + 1), run_dir=Path("run/examples"), log=log)
    with Experiment(cfg) as ex:
        if a.exhaust:
            take_all_memory(ex)
            log(f"examples: job 'hog' holds all {AGG_POOL_SIZE} aggregators of s1")
        extra = ("--kind", a.kind, "--mode", a.mode)
        app = f"direct.{a.app}" if a.direct else a.app
        rec, _ = run_app(ex, app, record, a.comm, a.epochs, extra)
    print(json.dumps(rec, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    return main_guard("examples.run", lambda: run(a))


if __name__ == "__main__":
    sys.exit(main())
