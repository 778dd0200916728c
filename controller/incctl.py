"""``incctl``: admit, list and cancel jobs; show switch memory (talks to the daemon's API).

Example::

    incctl job submit netreduce --workers 4 --window 64 --name mlp
    incctl job submit netreduce --workers 2 --class md --deadline 90s --epochs 50 \
        --model-bytes 400K --compute-ms 20       # the scheduler sizes its memory
        [--addressing hashed]                    # Hash(psn, job) % size + offset
    incctl sched show                            # queue, regions, predicted finish vs deadline
    incctl job list
    incctl job worker 1 0          # what worker 0 of job 1 is told at start (JSON)
    incctl job cancel 1
    incctl job submit serene --workers 4 --window 64 --mode "partial 3"
    incctl job mode 2 bounded 2    # serene: sync | partial K [bound S] | bounded S | async
    incctl job submit ask --workers 2 --rows 1024 --window 64   # key-value (ASK)
    incctl switch memory

``incctl job submit KIND --help`` lists a kind's options (those every kind shares, then its
own); the flat form ``incctl job submit [--kind KIND] ...`` (netreduce by default) is the
same command.

``--controller URL`` (or ``INCCTL_CONTROLLER``) picks the daemon, http://127.0.0.1:7070 by
default. Tokens need nothing on the daemon's machine: changes go with the operator token
the daemon writes beside its socket (``controller/api_client.py`` finds it); elsewhere,
``INC_TOKEN`` (and ``INC_CA_FILE`` for an ``https://`` URL) give them (docs/deploy.md).
Exit status: 0 done, 1 refused by the controller or unreachable, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from controller.api_client import DEFAULT_URL, ApiError, ControllerApi
from wire.header import SLOTS

Handler = Callable[[ControllerApi, argparse.Namespace, Console], None]


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "m": 60.0, "min": 60.0, "h": 3600.0}


def _amount(text: str) -> float:
    """``400K``, ``1.5M``, ``2G``: decimal multiples; a plain number as is."""
    t = text.strip().lower().removesuffix("b").removesuffix("/s")
    unit = t[-1:] if t[-1:] in _UNITS and t[-1:] else ""
    try:
        value = float(t[: len(t) - len(unit)]) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number like 400K or 1.5M, got {text!r}"
        ) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive amount, got {text!r}")
    return value


def _bytes(text: str) -> int:
    value = _amount(text)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number of bytes, got {text!r}")
    return int(value)


def _duration(text: str) -> float:
    """``90s``, ``1.5m``, ``2h``, ``250ms`` or plain seconds."""
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num) :]
    try:
        value = float(num) * _TIME_UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(
            f"expected a duration like 90s, 2m or 1h, got {text!r}"
        ) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive duration, got {text!r}")
    return value


def _ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected milliseconds >= 0, got {text!r}")
    return value


# -- job submit: one subcommand per kind, the options every kind shares once -------------

DEFAULT_KIND = "netreduce"
#: option dest -> field of the request, where the two differ or the option is not shared
BODY_KEYS = {
    "mode": "mode",
    "round_packets": "round_packets",
    "window": "window",
    "slots": "slots",
    "region_size": "region_size",
    "meter_pps": "meter_pps",
    "meter_burst": "meter_burst",
    "job_class": "class",
    "deadline": "deadline_s",
    "epochs": "epochs",
    "model_bytes": "model_bytes",
    "compute_ms": "compute_ms",
    "throughput": "throughput",
    "addressing": "addressing",
    "ps_port": "ps_port",
    "pool_offset": "pool_offset",
    "pool_size": "pool_size",
    "rows": "rows",
    "partitions": "partitions",
    "reducer_port": "reducer_port",
    "cache_size": "cache_size",
    "server": "server",
    "refresh_ms": "refresh_ms",
    "replicas": "replicas",
    "replica_ports": "replica_ports",
    "replica_ips": "replica_ips",
    "replica_macs": "replica_macs",
    "device_id": "device_id",
    "worker_ports": "worker_ports",
    "worker_ips": "worker_ips",
    "worker_macs": "worker_macs",
    "agg_ip": "agg_ip",
    "agg_mac": "agg_mac",
}


def _shared_options() -> argparse.ArgumentParser:
    """What every kind of job takes: its hosts, where they send, its name and switch."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("every kind")
    g.add_argument("--workers", type=_positive, required=True, help="number of workers")
    g.add_argument("--name", default="")
    g.add_argument("--switch", type=int, dest="device_id", help="device id of the switch")
    g.add_argument("--worker-ports", type=_int_list, help="switch port of each worker: 1,2,3")
    g.add_argument("--worker-ips", type=_str_list, help="IPv4 of each worker")
    g.add_argument("--worker-macs", type=_str_list, help="MAC of each worker")
    g.add_argument("--agg-ip", help="address the workers send to (the parameter server)")
    g.add_argument("--agg-mac")
    g.add_argument("--json", action="store_true", help="print the job as JSON")
    return p


def _window(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--window",
        type=_positive,
        help="packets in flight per worker (region size >= window); not with --class",
    )


def _aggregation(p: argparse.ArgumentParser, region: bool = True) -> None:
    """Options of the all-reduce kinds (netreduce, serene, atp)."""
    _window(p)
    p.add_argument(
        "--slots", type=_positive, default=SLOTS,
        help=f"values per packet ({SLOTS}; netreduce also 64, 96, 128: wider frames)",
    )  # fmt: skip
    if region:
        p.add_argument("--region-size", type=_positive, help="aggregators (default: the window)")
    p.add_argument("--meter-pps", type=_positive, help="packets/s the job may send, no more")
    p.add_argument("--meter-burst", type=_positive, help="packets above the rate in a burst (64)")
    sched = p.add_argument_group("scheduled jobs (memory sized by the scheduler)")
    sched.add_argument(
        "--class",
        dest="job_class",
        choices=("md", "be"),
        help="md: meet a deadline; be: best effort",
    )
    sched.add_argument("--deadline", type=_duration, help="md: time to finish, e.g. 90s, 5m")
    sched.add_argument("--epochs", type=_positive, help="compute + all-reduce rounds")
    sched.add_argument("--model-bytes", type=_bytes, help="bytes all-reduced per epoch: 400K")
    sched.add_argument("--compute-ms", type=_ms, help="compute time per epoch, milliseconds")
    sched.add_argument("--throughput", type=_amount, help="bytes/s the job can use at most: 50M")
    sched.add_argument(
        "--addressing",
        choices=["modulo", "hashed"],
        help="psn to aggregator: offset + psn %% size (modulo, default) or"
        " Hash(psn, job) %% size + offset (hashed)",
    )


def _serene(p: argparse.ArgumentParser) -> None:
    _aggregation(p)
    p.add_argument("--mode", help="sync | 'partial K [bound S]' | 'bounded S' | async")
    p.add_argument(
        "--round-packets",
        type=_positive,
        help="packets per worker and epoch (1): partial K bound S needs a region of (S + 2) x it",
    )


def _atp(p: argparse.ArgumentParser) -> None:
    _aggregation(p, region=False)
    p.add_argument("--ps-port", type=int, help="switch port towards the job's PS")
    p.add_argument("--pool-offset", type=int, help="first aggregator of the job's pool range")
    p.add_argument("--pool-size", type=_positive, help="aggregators (default: the whole pool)")


def _ask(p: argparse.ArgumentParser) -> None:  # workers are mappers
    _window(p)
    p.add_argument("--rows", type=_positive, help="rows of the key-value array (256)")
    p.add_argument("--partitions", type=_positive, help="key-space partitions (one per mapper)")
    p.add_argument("--reducer-port", type=int, help="the reducer's switch port (workers + 1)")


def _kv_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-size", type=_positive, help="cache entries of the job (64)")
    p.add_argument("--server", type=int, help="the storage server's switch port (workers + 1)")
    p.add_argument("--refresh-ms", type=_positive, help="how often hot keys are chosen (500)")


def _consensus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replicas", type=_positive, help="replica hosts (3), after the clients")
    p.add_argument("--replica-ports", type=_int_list, help="switch port of each replica")
    p.add_argument("--replica-ips", type=_str_list, help="IPv4 of each replica")
    p.add_argument("--replica-macs", type=_str_list, help="MAC of each replica")


#: kind -> (what it is, its own options)
KINDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "netreduce": ("synchronous all-reduce in the switch's aggregators (default)", _aggregation),
    "serene": ("all-reduce under a synchronisation mode (sync, partial, bounded, async)", _serene),
    "atp": ("all-reduce in a pool shared by jobs, a parameter server per job", _atp),
    "ask": ("key-value aggregation: workers are mappers, one reducer", _ask),
    "kv_cache": ("key-value cache in the switch before a storage server", _kv_cache),
    "consensus": ("replicated log with the switch as sequencer", _consensus),
}


def flat_submit(argv: list[str]) -> list[str]:
    """The flat form ``job submit [--kind K] ...`` as ``job submit K ...`` (K: netreduce
    unless given), so that both spellings parse the same way."""
    for i in range(len(argv) - 1):
        if argv[i : i + 2] == ["job", "submit"]:
            break
    else:
        return argv
    rest = argv[i + 2 :]
    if rest[:1] and (rest[0] in KINDS or rest[0] in ("-h", "--help")):
        return argv
    kind, out, j = DEFAULT_KIND, [], 0
    while j < len(rest):
        if rest[j] == "--kind" and j + 1 < len(rest):
            kind, j = rest[j + 1], j + 2
            continue
        if rest[j].startswith("--kind="):
            kind = rest[j].partition("=")[2]
        else:
            out.append(rest[j])
        j += 1
    return [*argv[: i + 2], kind, *out]


class _Parser(argparse.ArgumentParser):
    """incctl's parser: reads the flat ``job submit`` form as the per-kind one."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(flat_submit(argv), namespace)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="incctl", description="In-network computing job control")
    p.add_argument(
        "--controller",
        default=os.environ.get("INCCTL_CONTROLLER", DEFAULT_URL),
        help=f"controller API URL ({DEFAULT_URL})",
    )
    top = p.add_subparsers(
        dest="group",
        metavar="{job,switch,sched}",
        required=True,
        parser_class=argparse.ArgumentParser,
    )

    job = top.add_parser("job", help="admit, list, cancel jobs").add_subparsers(
        dest="command", metavar="{submit,list,show,worker,cancel,mode}", required=True
    )
    submit = job.add_parser(
        "submit",
        help="admit a job of one kind: incctl job submit KIND --workers N ...",
        description="Admit a job; each kind takes the options every kind shares and its own"
        " (incctl job submit KIND --help). The older flat form, incctl job submit"
        " [--kind KIND] ..., still works.",
    )
    kinds = submit.add_subparsers(dest="kind", metavar="{" + ",".join(KINDS) + "}", required=True)
    shared = _shared_options()
    for name, (summary, add_options) in KINDS.items():
        add_options(kinds.add_parser(name, help=summary, description=summary, parents=[shared]))
    lst = job.add_parser("list", help="list the jobs")
    lst.add_argument("--json", action="store_true")
    show = job.add_parser("show", help="one job with its workers")
    show.add_argument("job_id", type=int)
    show.add_argument("--json", action="store_true")
    wk = job.add_parser("worker", help="a worker's start-up configuration (JSON)")
    wk.add_argument("job_id", type=int)
    wk.add_argument("worker_id", type=int)
    cancel = job.add_parser("cancel", help="cancel a job and free its switch memory")
    cancel.add_argument("job_id", type=int)
    mode = job.add_parser("mode", help="change a serene job's synchronisation mode")
    mode.add_argument("job_id", type=int)
    mode.add_argument("mode", nargs="+", help="sync | partial K [bound S] | bounded S | async")
    mode.add_argument("--json", action="store_true")

    sw = top.add_parser("switch", help="switch state").add_subparsers(
        dest="command", metavar="{memory,list}", required=True
    )
    mem = sw.add_parser("memory", help="who owns which aggregators")
    mem.add_argument("--json", action="store_true")
    sw.add_parser("list", help="the controller's switches")

    sc = top.add_parser("sched", help="the memory scheduler").add_subparsers(
        dest="command", metavar="{show}", required=True
    )
    show_s = sc.add_parser("show", help="queue, regions, predicted finish vs deadline")
    show_s.add_argument("--json", action="store_true")
    return p


def _submit_body(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /jobs`` body: the kind, and every option of its parser that was given."""
    body: dict[str, Any] = {"workers": args.workers}
    if args.kind != DEFAULT_KIND:
        body["kind"] = args.kind
    body["name"] = args.name
    for dest, key in BODY_KEYS.items():
        value = getattr(args, dest, None)
        if value is not None:
            body[key] = value
    return body


def _job_table(jobs: list[dict[str, Any]], title: str = "jobs") -> Table:
    t = Table(title=title)
    for col in ("id", "name", "switch", "workers", "window", "region", "agg address"):
        t.add_column(col, justify="right" if col in ("id", "workers", "window") else "left")
    for j in jobs:
        r = j["region"]
        t.add_row(
            str(j["job_id"]),
            j["name"] + (f" ({j['params']['class']})" if j.get("params", {}).get("class") else ""),
            str(j["device_id"]),
            str(j["n_workers"]),
            str(j["window"]),
            f"[{r['offset']}, {r['offset'] + r['size']})",
            f"{j['agg_ip']} {j['agg_mac']}",
        )
    return t


def _worker_table(job: dict[str, Any]) -> Table:
    t = Table(title=f"job {job['job_id']} workers")
    for col in ("worker", "switch port", "ip", "mac"):
        t.add_column(col)
    for w in job["workers"]:
        t.add_row(str(w["worker_id"]), str(w["port"]), w["ip"], w["mac"])
    return t


def _print_json(console: Console, data: Any) -> None:
    console.print_json(json.dumps(data))


def cmd_submit(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    job = api.submit(_submit_body(args))
    if args.json:
        _print_json(out, job)
        return
    r = job["region"]
    who, what = ("mappers", "rows") if job.get("kind") == "ask" else ("workers", "aggregators")
    out.print(
        f"job {job['job_id']} ({job['name']}) admitted: {job['n_workers']} {who},"
        f" {what} [{r['offset']}, {r['offset'] + r['size']}) on switch {job['device_id']}"
    )
    out.print(_worker_table(job))
    where = api.token_dir / f"job-{job['job_id']}.token"
    out.print(f"its token (owns the job; INC_TOKEN of its workers on other machines): {where}")


def cmd_list(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    jobs = api.jobs()
    if args.json:
        _print_json(out, jobs)
    elif not jobs:
        out.print("no jobs")
    else:
        out.print(_job_table(jobs))


def cmd_show(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    job = api.job(args.job_id)
    if args.json:
        _print_json(out, job)
    else:
        out.print(_job_table([job], f"job {job['job_id']}"))
        out.print(_worker_table(job))


def cmd_worker(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    _print_json(out, api.worker_config(args.job_id, args.worker_id))


def cmd_cancel(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    job = api.cancel(args.job_id)
    r = job["region"]
    out.print(
        f"job {job['job_id']} cancelled; aggregators [{r['offset']},"
        f" {r['offset'] + r['size']}) cleared and free"
    )


def cmd_mode(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    got = api.set_mode(args.job_id, " ".join(args.mode))
    if args.json:
        _print_json(out, got)
        return
    out.print(f"job {got['job_id']}: {got['mode']} from epoch {got['boundary_epoch']}")


def cmd_memory(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    switches = api.memory()
    if args.json:
        _print_json(out, switches)
        return
    for sw in switches:
        t = Table(
            title=f"switch {sw['device_id']}: {sw['free']} of {sw['pool_size']}"
            f" aggregators free (2 copies each)"
        )
        for col in ("aggregators", "size", "owner"):
            t.add_column(col)
        for s in sw["segments"]:
            owner = "free" if s["job_id"] is None else f"job {s['job_id']} ({s['name']})"
            t.add_row(f"[{s['offset']}, {s['offset'] + s['size']})", str(s["size"]), owner)
        out.print(t)
        atp = sw.get("atp_pool")
        if atp:
            out.print(
                f"ATP pool of switch {sw['device_id']}: {atp['held']} of {atp['pool_size']}"
                f" aggregators held; claimed {atp['claimed']}, added {atp['added']}, completed"
                f" {atp['completed']}, collisions {atp['collision']}, fallbacks"
                f" {atp['collision'] + atp['retx_fallback'] + atp['overflow']} (retransmissions"
                f" {atp['retx_fallback']}, overflows {atp['overflow']}), released"
                f" {atp['released']}, release misses {atp['release_missed']}"
            )


def cmd_switches(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    t = Table(title="switches")
    for col in ("device", "name", "address", "role"):
        t.add_column(col)
    for s in api.switches():
        t.add_row(
            str(s["device_id"]), s["name"], s["address"], "primary" if s["primary"] else "backup"
        )
    out.print(t)


def _ago(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    d = t - now
    return f"in {d:.0f} s" if d >= 0 else f"{-d:.0f} s ago"


def _region(r: dict[str, int] | None) -> str:
    return "-" if not r else f"[{r['offset']}, {r['offset'] + r['size']})"


def cmd_sched(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    view = api.schedule()
    if args.json:
        _print_json(out, view)
        return
    now = view["now"]
    for sw in view["switches"]:
        t = Table(
            title=f"switch {sw['device_id']}, pool {sw.get('pool', 'agg')}, policy"
            f" {view['policy']}: {sw['capacity']} of {sw['pool_size']} aggregators scheduled,"
            f" {sw['free']} free (queue in policy order)"
        )
        for col in (
            "job", "class", "state", "epochs", "region", "planned", "want", "need",
            "predicted finish", "deadline", "on time",
        ):  # fmt: skip
            t.add_column(col)
        for j in sw["jobs"]:
            t.add_row(
                f"{j['job_id']} {j.get('name', '')}",
                j["class"],
                j["state"] + (" (switching)" if j.get("retiring") else ""),
                f"{j['epochs_done']:.0f}/{j['epochs']}",
                _region(j["region"]),
                str(j["planned"]),
                str(j["want"]),
                "-" if j["need"] is None else str(j["need"]),
                _ago(j["predicted_finish"], now),
                _ago(j["deadline"], now),
                {None: "-", True: "yes", False: "no"}[j["on_time"]],
            )
        out.print(t)
    if view["finished"]:
        f = Table(title="finished jobs")
        for col in ("job", "class", "state", "JCT", "deadline met"):
            f.add_column(col)
        for j in view["finished"]:
            met = {None: "-", True: "yes", False: "no"}[j["met"]]
            f.add_row(
                f"{j['job_id']} {j['name']}", j["class"], j["state"], f"{j['jct']:.1f} s", met
            )
        out.print(f)


COMMANDS: dict[tuple[str, str], Handler] = {
    ("job", "submit"): cmd_submit,
    ("job", "list"): cmd_list,
    ("job", "show"): cmd_show,
    ("job", "worker"): cmd_worker,
    ("job", "cancel"): cmd_cancel,
    ("job", "mode"): cmd_mode,
    ("switch", "memory"): cmd_memory,
    ("switch", "list"): cmd_switches,
    ("sched", "show"): cmd_sched,
}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)  # usage errors: message and exit status 2
    out = Console()
    try:
        COMMANDS[(args.group, args.command)](ControllerApi(args.controller), args, out)
    except ApiError as err:
        print(f"incctl: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
