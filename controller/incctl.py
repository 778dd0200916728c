"""``incctl``: admit, list and cancel jobs; show switch memory (talks to the daemon's API).

Example::

    incctl job submit --workers 4 --window 64 --name mlp
    incctl job list
    incctl job worker 1 0          # what worker 0 of job 1 is told at start (JSON)
    incctl job cancel 1
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="incctl", description="In-network computing job control")
    p.add_argument(
        "--controller",
        default=os.environ.get("INCCTL_CONTROLLER", DEFAULT_URL),
        help=f"controller API URL ({DEFAULT_URL})",
    )
    top = p.add_subparsers(dest="group", metavar="{job,switch}", required=True)

    job = top.add_parser("job", help="admit, list, cancel jobs").add_subparsers(
        dest="command", metavar="{submit,list,show,worker,cancel}", required=True
    )
    sub = job.add_parser("submit", help="admit a synchronous aggregation job")
    sub.add_argument("--workers", type=_positive, required=True, help="number of workers")
    sub.add_argument(
        "--window",
        type=_positive,
        required=True,
        help="packets in flight per worker (region size >= window)",
    )
    sub.add_argument("--slots", type=_positive, default=SLOTS, help=f"values per packet ({SLOTS})")
    sub.add_argument("--name", default="")
    sub.add_argument("--region-size", type=_positive, help="aggregators (default: the window)")
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

    sw = top.add_parser("switch", help="switch state").add_subparsers(
        dest="command", metavar="{memory,list}", required=True
    )
    mem = sw.add_parser("memory", help="who owns which aggregators")
    mem.add_argument("--json", action="store_true")
    sw.add_parser("list", help="the controller's switches")
    return p


def _submit_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        "workers": args.workers,
        "window": args.window,
        "slots": args.slots,
        "name": args.name,
    }
    for key in (
        "region_size",
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
            j["name"],
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
    out.print(
        f"job {job['job_id']} ({job['name']}) admitted: {job['n_workers']} workers,"
        f" aggregators [{r['offset']}, {r['offset'] + r['size']}) on switch"
        f" {job['device_id']}"
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


def cmd_switches(api: ControllerApi, args: argparse.Namespace, out: Console) -> None:
    t = Table(title="switches")
    for col in ("device", "name", "address", "role"):
        t.add_column(col)
    for s in api.switches():
        t.add_row(
            str(s["device_id"]), s["name"], s["address"], "primary" if s["primary"] else "backup"
        )
    out.print(t)


COMMANDS: dict[tuple[str, str], Handler] = {
    ("job", "submit"): cmd_submit,
    ("job", "list"): cmd_list,
    ("job", "show"): cmd_show,
    ("job", "worker"): cmd_worker,
    ("job", "cancel"): cmd_cancel,
    ("switch", "memory"): cmd_memory,
    ("switch", "list"): cmd_switches,
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
