"""``incctl``: admit, list and cancel jobs; show switch memory (talks to the daemon's API).

Example::

    incctl job submit --workers 4 --window 64 --name mlp
    incctl job submit --workers 2 --class md --deadline 90s --epochs 50 \
        --model-bytes 400K --compute-ms 20       # the scheduler sizes its memory
        [--addressing hashed]                    # Hash(psn, job) % size + offset
    incctl sched show                            # queue, regions, predicted finish vs deadline
    incctl job list
    incctl job worker 1 0          # what worker 0 of job 1 is told at start (JSON)
    incctl job cancel 1
    incctl job submit --kind serene --workers 4 --window 64 --mode "partial 3"
    incctl job mode 2 bounded 2    # serene: sync | partial K [bound S] | bounded S | async
    incctl job submit --kind ask --workers 2 --rows 1024 --window 64   # key-value (ASK)
    incctl switch memory

``--controller URL`` (or ``INCCTL_CONTROLLER``) picks the daemon, http://127.0.0.1:7070 by
default. Exit status: 0 done, 1 refused by the controller or unreachable, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="incctl", description="In-network computing job control")
    p.add_argument(
        "--controller",
        default=os.environ.get("INCCTL_CONTROLLER", DEFAULT_URL),
        help=f"controller API URL ({DEFAULT_URL})",
    )
    top = p.add_subparsers(dest="group", metavar="{job,switch,sched}", required=True)

    job = top.add_parser("job", help="admit, list, cancel jobs").add_subparsers(
        dest="command", metavar="{submit,list,show,worker,cancel,mode}", required=True
    )
    sub = job.add_parser("submit", help="admit a synchronous aggregation job")
    sub.add_argument("--workers", type=_positive, required=True, help="number of workers")
    sub.add_argument(
        "--kind",
        help="job kind (netreduce by default; serene: with --mode; kv_cache; consensus; atp; ask)",
    )
    sub.add_argument("--mode", help="serene: sync | 'partial K [bound S]' | 'bounded S' | async")
    kv = sub.add_argument_group("key-value cache jobs (--kind kv_cache)")
    kv.add_argument("--cache-size", type=_positive, help="cache entries of the job (64)")
    kv.add_argument("--server", type=int, help="the storage server's switch port (workers + 1)")
    kv.add_argument("--refresh-ms", type=_positive, help="how often hot keys are chosen (500)")
    cons = sub.add_argument_group("replicated logs (--kind consensus)")
    cons.add_argument("--replicas", type=_positive, help="replica hosts (3), after the clients")
    cons.add_argument("--replica-ports", type=_int_list, help="switch port of each replica")
    cons.add_argument("--replica-ips", type=_str_list, help="IPv4 of each replica")
    cons.add_argument("--replica-macs", type=_str_list, help="MAC of each replica")
    ask = sub.add_argument_group("key-value aggregation jobs (--kind ask): workers are mappers")
    ask.add_argument("--rows", type=_positive, help="rows of the key-value array (256)")
    ask.add_argument("--partitions", type=_positive, help="key-space partitions (one per mapper)")
    ask.add_argument("--reducer-port", type=int, help="the reducer's switch port (workers + 1)")
    sub.add_argument(
        "--window",
        type=_positive,
        help="packets in flight per worker (region size >= window); not with --class",
    )
    sched = sub.add_argument_group("scheduled jobs (memory sized by the scheduler)")
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
    sub.add_argument("--slots", type=_positive, default=SLOTS, help=f"values per packet ({SLOTS})")
    sub.add_argument("--name", default="")
    sub.add_argument("--region-size", type=_positive, help="aggregators (default: the window)")
    atp = sub.add_argument_group("ATP jobs (--kind atp): a shared pool, a PS per job")
    atp.add_argument("--ps-port", type=int, help="switch port towards the job's PS")
    atp.add_argument("--pool-offset", type=int, help="first aggregator of the job's pool range")
    atp.add_argument("--pool-size", type=_positive, help="aggregators (default: the whole pool)")
    sub.add_argument("--meter-pps", type=_positive, help="netreduce, atp: packets/s, no more")
    sub.add_argument("--meter-burst", type=_positive, help="packets above the rate in a burst (64)")
    sub.add_argument("--switch", type=int, dest="device_id", help="device id of the switch")
    sub.add_argument("--worker-ports", type=_int_list, help="switch port of each worker: 1,2,3")
    sub.add_argument("--worker-ips", type=_str_list, help="IPv4 of each worker")
    sub.add_argument("--worker-macs", type=_str_list, help="MAC of each worker")
    sub.add_argument("--agg-ip", help="address the workers send to (the parameter server)")
    sub.add_argument("--agg-mac")
    sub.add_argument("--json", action="store_true", help="print the job as JSON")
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
    body: dict[str, Any] = {"workers": args.workers}
    if args.kind is not None:
        body["kind"] = args.kind
    if args.mode is not None:
        body["mode"] = args.mode
    body["name"] = args.name
    if args.kind in ("kv_cache", "consensus"):  # no slots: their packets always carry K
        for key in ("cache_size", "server", "refresh_ms", "replicas", "replica_ports",
                    "replica_ips", "replica_macs"):  # fmt: skip
            if getattr(args, key) is not None:
                body[key] = getattr(args, key)
    elif args.kind == "ask":  # no slots: an AGG_KV packet always carries 16 tuples
        for key in ("rows", "partitions", "reducer_port"):
            if getattr(args, key) is not None:
                body[key] = getattr(args, key)
    else:
        body["slots"] = args.slots
    if args.window is not None:
        body["window"] = args.window
    if args.job_class is not None:
        body["class"] = args.job_class
    for src, key in (
        ("deadline", "deadline_s"),
        ("epochs", "epochs"),
        ("model_bytes", "model_bytes"),
        ("compute_ms", "compute_ms"),
        ("throughput", "throughput"),
        ("addressing", "addressing"),
    ):
        if getattr(args, src) is not None:
            body[key] = getattr(args, src)
    for key in (
        "region_size",
        "ps_port",
        "pool_offset",
        "pool_size",
        "meter_pps",
        "meter_burst",
        "device_id",
        "worker_ports",
        "worker_ips",
        "worker_macs",
        "agg_ip",
        "agg_mac",
    ):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
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
