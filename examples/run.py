"""Run an example application on the Mininet network in one command (root).

Example::

    python -m examples.run training               # DDP, gradients summed in the switch
    python -m examples.run training --comm gloo   # the same with PyTorch's own all-reduce
    python -m examples.run training --shaped      # links at make run's rate (link_rate.py)
    python -m examples.run training --model large # 1.1M parameters: bandwidth-bound
    python -m examples.run training --slots 32    # 194-byte frames instead of 578
    python -m examples.run training --exhaust     # switch memory taken first: runs on hosts
    python -m examples.run training --direct      # examples/direct/training.py (no inclib)
    python -m examples.run word_count             # mappers h1..h4, reducer h5 (ASK)
    python -m examples.run kv_client              # clients h1..h4, storage server h5
    python -m examples.run replicated_counter     # clients h1..h4, replicas h5..h7
    python -m examples.run kv_client --no-switch  # no controller: inclib runs on the hosts
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
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hosts.mlp import MODELS
from topologies.experiment import (
    Experiment,
    ExperimentConfig,
    ExperimentError,
    HostRun,
    main_guard,
    star,
)
from topologies.link_rate import LinkRate, link_rate
from wire.header import AGG_POOL_SIZE

WORKERS = 4
NO_SWITCH = "unix:/nonexistent/controller.sock"  # --no-switch: admission finds no controller


@dataclass(frozen=True)
class Served:
    """An app whose launcher admits the job (the app's ``admit`` role) and starts its
    servers (each prints a line with "ready") before its clients on h1..h4."""

    hosts: int  # in the star
    servers: list[tuple[str, list[str]]]  # (host, role arguments)
    client_role: str = "client"
    server_writes_record: bool = False  # the first server writes the record and then ends


SERVED_APPS = {
    "word_count": Served(5, [("h5", ["reduce"])], "map", server_writes_record=True),
    "kv_client": Served(5, [("h5", ["serve"])]),
    "replicated_counter": Served(
        7, [(f"h{5 + i}", ["replica", "--rank", str(i)]) for i in range(3)]
    ),
}
APPS = ("training", *SERVED_APPS)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m examples.run")
    ap.add_argument("app", choices=APPS)
    ap.add_argument("--comm", choices=("switch", "gloo"), default="switch", help="training")
    ap.add_argument("--epochs", type=int, default=4, help="training")
    ap.add_argument("--model", choices=list(MODELS), default="small", help="training: the MLP")
    ap.add_argument(
        "--shaped",
        action="store_true",
        help="links at the rate make run chooses for the switch (topologies/link_rate.py)",
    )
    ap.add_argument(
        "--slots", type=int, default=None,
        help="training, netreduce: values per packet (32, 64, 96, 128; default the example's)",
    )  # fmt: skip
    ap.add_argument("--kind", default="netreduce", help="training: netreduce or serene")
    ap.add_argument("--mode", default="sync", help="training, serene: synchronisation mode")
    ap.add_argument("--exhaust", action="store_true", help="take all switch memory first")
    ap.add_argument("--direct", action="store_true", help="the version without inclib")
    ap.add_argument("--no-switch", action="store_true", help="admit with no controller (hosts)")
    ap.add_argument("--out", default="results/examples", help="folder for the record")
    ap.add_argument("--quiet", action="store_true", help="print only the record")
    return ap


def shaped_rate() -> LinkRate:
    """The link rate ``make run`` would choose for this switch ($SWITCH) and the workers."""
    return link_rate(os.environ.get("SWITCH", "p4sim"), WORKERS)


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


def run_served_app(
    ex: Experiment, app: str, record: Path, no_switch: bool = False, direct: bool = False
) -> tuple[dict[str, Any], list[HostRun]]:
    """Admit ``app``'s job with its own ``admit`` role, start its servers, run its clients
    on h1..h4 and stop the servers; rank 0's record and every client's run."""
    url = NO_SWITCH if no_switch else ex.controller_url
    mod = [sys.executable, "-m", f"examples.{'direct.' if direct else ''}{app}"]
    got = subprocess.run([*mod, "admit", "--controller", url], capture_output=True, text=True)
    if got.returncode != 0:
        raise ExperimentError(f"{app} admit: {got.stderr.strip()}")
    plan = got.stdout.strip()
    app_ = SERVED_APPS[app]
    record.unlink(missing_ok=True)
    servers = []
    for i, (h, role) in enumerate(app_.servers):
        cmd = [*mod, *role, "--plan", plan]
        cmd += ["--out", str(record)] if app_.server_writes_record and i == 0 else []
        servers.append(ex.start_service(h, cmd, ready="ready", log_name=f"{app}-{h}"))
    try:
        cmds = []
        for rank in range(WORKERS):
            cmd = [*mod, app_.client_role, "--plan", plan, "--rank", str(rank)]
            cmd += ["--world", str(WORKERS)]
            if rank == 0 and not app_.server_writes_record:
                cmd += ["--out", str(record)]
            cmds.append((f"h{rank + 1}", cmd))
        runs = ex.run_hosts(cmds, show=0)
        if app_.server_writes_record:
            servers[0].wait(timeout=120)
    finally:
        for p in servers:
            ex.stop(p)
    for run in runs:
        if run.code != 0:
            last = " | ".join(run.lines[-3:])
            raise ExperimentError(f"{run.host} exited with {run.code}: {last}")
    if not record.exists():
        raise ExperimentError(f"{app}: no record at {record} (see {ex.logs})")
    return json.loads(record.read_text()), runs


def take_all_memory(ex: Experiment) -> None:
    """Admit a job that holds the whole aggregator pool of s1."""
    ex.submit("hog", workers=1, window=AGG_POOL_SIZE)


def run(a: argparse.Namespace) -> int:
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = ("-direct" if a.direct else "") + ("-exhaust" if a.exhaust else "")
    tag += "-no-switch" if a.no_switch else ""
    tag += ("-shaped" if a.shaped else "") + ("" if a.model == "small" else f"-{a.model}")
    record = (out_dir / f"{a.app}-{a.comm}{tag}.json").resolve()
    log = (lambda s: None) if a.quiet else print
    hosts = SERVED_APPS[a.app].hosts if a.app in SERVED_APPS else WORKERS + 1
    rate = shaped_rate() if a.shaped else None
    if rate is not None:
        log(f"examples: every link {rate.mbps:g} Mbit/s ({rate.describe()})")
    bw = rate.mbps if rate is not None else None
    cfg = ExperimentConfig(star(hosts), bw_mbps=bw, run_dir=Path("run/examples"), log=log)
    if a.app == "training":  # p4sim sends runs of results with segmentation offload
        from p4sim.native.backend import UDP_GSO_ENV

        os.environ.setdefault(UDP_GSO_ENV, "1")
    with Experiment(cfg) as ex:
        if a.app in SERVED_APPS:
            rec, _ = run_served_app(ex, a.app, record, a.no_switch, a.direct)
            if "counts" in rec:  # word count: the record file has them all
                counts = rec.pop("counts")
                top = sorted(counts.items(), key=lambda kv: -kv[1])[:10]
                rec.update(distinct=len(counts), words=sum(counts.values()), top=top)
            print(json.dumps(rec, indent=1))
            return 0
        if a.exhaust:
            take_all_memory(ex)
            log(f"examples: job 'hog' holds all {AGG_POOL_SIZE} aggregators of s1")
        extra: tuple[str, ...] = ("--kind", a.kind, "--mode", a.mode, "--model", a.model)
        extra += ("--slots", str(a.slots)) if a.slots is not None else ()
        app = f"direct.{a.app}" if a.direct else a.app
        rec, _ = run_app(ex, app, record, a.comm, a.epochs, extra)
    print(json.dumps(rec, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a.model != "small" and (a.direct or a.app != "training"):
        ap.error(f"--model {a.model}: only training without --direct has more than one model")
    if a.slots is not None and (a.direct or a.app != "training"):
        ap.error("--slots: only training without --direct")
    return main_guard("examples.run", lambda: run(a))


if __name__ == "__main__":
    sys.exit(main())
