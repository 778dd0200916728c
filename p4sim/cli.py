"""The ``p4sim`` command.

``p4sim [simple_switch_grpc flags] PROG.p4``   run a switch on Linux interfaces
``p4sim compile PROG.p4 [-I DIR]``             check a program
``p4sim stf PROG.p4 TEST.stf [-I DIR]``        run an STF test (p4c test-suite format)
``p4sim cli [--thrift-port N] < COMMANDS``     run-time commands (egress queues), in
                                               simple_switch_CLI's syntax

The switch accepts the flags of BMv2's ``simple_switch_grpc`` so that scripts written for
BMv2 start p4sim unchanged: ``-i 1@veth1``, ``--device-id``, ``--log-console``, ``-L``,
``--pcap DIR``, ``--no-p4``, and after ``--`` the target options ``--grpc-server-addr``,
``--cpu-port``, ``--priority-queues``, and ``--thrift-port`` (where ``p4sim cli`` reaches
the queue commands). p4sim adds ``--queue-rate`` and ``--queue-depth`` to set egress queues
at start. Flags that p4sim cannot honour are accepted with a warning.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from p4sim.compiler.bmv2_target import add_target_flag
from p4sim.frontend.diagnostics import P4Error

log = logging.getLogger("p4sim")

LOG_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "off": logging.CRITICAL + 10,
}
# simple_switch_grpc options that make no sense for p4sim: accepted, warned about.
IGNORED_VALUE_FLAGS = (
    "--notifications-addr",
    "--nanolog",
    "--max-port-count",
    "--restore-state",
    "--debugger-addr",
    "--drop-port",
    "--dp-grpc-server-addr",
)
IGNORED_BOOL_FLAGS = (
    "--use-files",
    "--packet-in",
    "--debugger",
    "--dump-packet-data",
    "--enable-swap",
    "--disable-swap",
    "--no-mgmt",
)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so every error prints one usage line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}")


def _add_include_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-I",
        dest="include",
        action="append",
        default=[],
        metavar="DIR",
        help="add DIR to the #include search path",
    )
    p.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="define a preprocessor macro",
    )


def _defines(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = value if _ else "1"
    return out


def _json_program_args(
    path: Path,
    dirs: list[Path],
    include_dirs: list[str],
    log: Any,
    tm: Any,
    backend: str = "python",
) -> dict[str, Any]:
    """``program_args`` for a BMv2 JSON given on the command line: its source compiled
    (the JSON stays the device config that the P4Runtime server reports)."""
    from p4sim.bmv2_json import switch_from_bmv2_json
    from p4sim.p4info import build_p4info, program_info_for_file

    data = path.read_bytes()
    sw, source = switch_from_bmv2_json(data, dirs, include_dirs, log=log, tm=tm, backend=backend)
    info = program_info_for_file(sw, str(source), (str(source.parent), *include_dirs))
    log_ = logging.getLogger("p4sim")
    log_.info("%s: running its P4 source %s", path, source)
    return {"switch": sw, "p4info": build_p4info(info), "device_config": data}


def _switch_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="p4sim",
        description="p4sim: a P4_16 v1model software switch "
        "(flags as simple_switch_grpc). Subcommands: compile, stf.",
    )
    p.add_argument(
        "program",
        nargs="?",
        help="P4_16 source file (.p4) to run, or p4c's BMv2 JSON (.json) of one: its source "
        "is found beside it or one folder up and compiled",
    )
    p.add_argument(
        "--p4-source-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="where the P4 source of a BMv2 JSON (given or pushed) is looked for (repeatable)",
    )
    p.add_argument(
        "-i",
        "--interface",
        action="append",
        default=[],
        metavar="PORT@IFACE",
        help="attach Linux interface IFACE as switch port PORT (repeatable)",
    )
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument(
        "--log-console", action="store_true", help="print the per-packet trace to the console"
    )
    p.add_argument("-L", "--log-level", default="info", choices=sorted(LOG_LEVELS))
    p.add_argument("--log-file", metavar="FILE", help="write the log to FILE")
    p.add_argument(
        "--pcap",
        nargs="?",
        const=".",
        metavar="DIR",
        help="write <iface>_in.pcap / <iface>_out.pcap captures into DIR",
    )
    p.add_argument(
        "--no-p4",
        action="store_true",
        help="start without a program (a controller pushes it later)",
    )
    p.add_argument(
        "--backend",
        choices=("python", "native"),
        default=os.environ.get("P4SIM_BACKEND") or "native",
        help="packet path: native (C generated from the program and compiled at load, its "
        "packet loop in C; a program it does not cover, or egress queue rates, run on "
        "python with a one-line notice) or python (the reference); default $P4SIM_BACKEND "
        "or native",
    )
    p.add_argument("--grpc-server-addr", default="0.0.0.0:9559")
    p.add_argument(
        "--cpu-port",
        type=int,
        default=None,
        help="port whose packets become P4Runtime PacketIn (and PacketOut enters)",
    )
    p.add_argument("--grpc-server-ssl", action="store_true", help="serve P4Runtime over TLS")
    p.add_argument("--grpc-server-cert", metavar="FILE", help="TLS certificate (PEM)")
    p.add_argument("--grpc-server-key", metavar="FILE", help="TLS private key (PEM)")
    p.add_argument("--grpc-server-cacert", metavar="FILE", help="CA for client certificates")
    p.add_argument(
        "--grpc-server-with-client-auth", action="store_true", help="require client certificates"
    )
    p.add_argument(
        "--runtime-json",
        metavar="FILE",
        help="install table entries, multicast groups and clone sessions from a "
        "p4lang tutorials sN-runtime.json file at start",
    )
    p.add_argument("--pid-file", metavar="FILE", help="write the process id to FILE")
    p.add_argument(
        "--thrift-port",
        type=int,
        default=9090,
        help="port (localhost) of the runtime commands (p4sim cli, simple_switch_CLI syntax)",
    )
    p.add_argument(
        "--priority-queues",
        type=int,
        default=1,
        metavar="N",
        help="egress queues per port, chosen by standard_metadata.priority (higher first)",
    )
    p.add_argument(
        "--queue-rate",
        action="append",
        default=[],
        metavar="PPS[:PORT[:PRIORITY]]",
        help="egress queue rate in packets/s (all ports without PORT); 0 = no limit",
    )
    p.add_argument(
        "--queue-depth",
        action="append",
        default=[],
        metavar="PKTS[:PORT[:PRIORITY]]",
        help="egress queue depth in packets (default 64); a full queue drops",
    )
    _add_include_flags(p)
    add_target_flag(p)
    for flag in IGNORED_VALUE_FLAGS:
        p.add_argument(
            flag,
            dest="ignored_" + flag.strip("-").replace("-", "_"),
            default=None,
            help=argparse.SUPPRESS,
        )
    for flag in IGNORED_BOOL_FLAGS:
        p.add_argument(
            flag,
            dest="ignored_" + flag.strip("-").replace("-", "_"),
            action="store_true",
            help=argparse.SUPPRESS,
        )
    return p


def _parse_interfaces(items: Sequence[str]) -> dict[int, str]:
    ports: dict[int, str] = {}
    for item in items:
        num, sep, iface = item.partition("@")
        if not sep or not num.isdigit() or not iface:
            raise UsageError(f"p4sim: error: -i expects PORT@IFACE, got {item!r}")
        if int(num) in ports:
            raise UsageError(f"p4sim: error: port {num} is given twice")
        ports[int(num)] = iface
    return ports


def _setup_logging(level: str, log_file: str | None, console: bool) -> None:
    handlers: list[logging.Handler] = []
    if log_file:
        handlers.append(logging.FileHandler(log_file))
    if console or not log_file:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(
        level=LOG_LEVELS[level],
        handlers=handlers,
        format="[%(asctime)s.%(msecs)03d] [%(name)s] %(message)s",
        datefmt="%H:%M:%S",
    )


def run_switch(argv: Sequence[str]) -> int:
    # simple_switch_grpc puts target options after "--"; accept them on either side.
    args = _switch_parser().parse_args([a for a in argv if a != "--"])
    _setup_logging(args.log_level, args.log_file, args.log_console)
    for name, value in vars(args).items():
        if name.startswith("ignored_") and value not in (None, False):
            log.warning(
                "option --%s is not supported by p4sim; ignored",
                name[len("ignored_") :].replace("_", "-"),
            )
    ports = _parse_interfaces(args.interface)
    if args.program is None and not args.no_p4:
        raise UsageError("p4sim: error: a P4 program is required (or --no-p4)")

    from p4sim.p4runtime import P4RuntimeServer, TLSConfig, program_args
    from p4sim.p4runtime.pipeline import load_switch_from_device_config
    from p4sim.ports import PortSet
    from p4sim.runtime_cli import RuntimeCommandServer, native_refusal, no_lock, run_command
    from p4sim.runtime_json import RuntimeJsonError, apply_to_switch, load_runtime_json
    from p4sim.v1model.traffic_manager import QueueConfigError, TrafficManager

    try:
        tm = TrafficManager(args.priority_queues)
    except QueueConfigError as err:
        raise UsageError(f"p4sim: error: --priority-queues: {err}") from None
    for flag, items in (("set_queue_rate", args.queue_rate), ("set_queue_depth", args.queue_depth)):
        for item in items:
            answer = run_command(tm, " ".join([flag, *item.split(":")]))
            if answer != "ok":
                raise UsageError(f"p4sim: error: --{flag[4:].replace('_', '-')} {item}: {answer}")

    trace = None
    if args.log_console and LOG_LEVELS[args.log_level] <= logging.DEBUG:
        pkt_log = logging.getLogger("p4sim.packet")

        def trace(line: str) -> None:
            pkt_log.debug(line)

    tls = None
    if args.grpc_server_ssl:
        if not (args.grpc_server_cert and args.grpc_server_key):
            raise UsageError(
                "p4sim: error: --grpc-server-ssl needs --grpc-server-cert and --grpc-server-key"
            )
        tls = TLSConfig(
            args.grpc_server_cert,
            args.grpc_server_key,
            args.grpc_server_cacert,
            args.grpc_server_with_client_auth,
        )
    from p4sim.bmv2_json import Bmv2JsonError, source_dirs

    json_path = Path(args.program) if args.program and args.program.endswith(".json") else None
    dirs = source_dirs(json_path, args.p4_source_dir)
    loaded = {}
    if not args.no_p4:
        if json_path is not None:
            try:
                loaded = _json_program_args(
                    json_path, dirs, args.include, trace, tm, backend=args.backend
                )
            except (OSError, Bmv2JsonError) as err:
                raise UsageError(f"p4sim: error: {json_path}: {err}") from None
        else:
            loaded = program_args(
                args.program,
                args.include,
                _defines(args.defines),
                log=trace,
                tm=tm,
                backend=args.backend,
                target=args.target,
            )
        if args.runtime_json:
            try:
                apply_to_switch(loaded["switch"], load_runtime_json(args.runtime_json))
            except RuntimeJsonError as e:
                log.error("%s", e)
                return 1
    server = P4RuntimeServer(
        switch_factory=lambda config: load_switch_from_device_config(
            config, log=trace, tm=tm, backend=args.backend, source_dirs=dirs
        ),
        device_id=args.device_id,
        address=args.grpc_server_addr,
        cpu_port=args.cpu_port,
        tls=tls,
        **loaded,
    )
    if args.pid_file:
        Path(args.pid_file).write_text(f"{os.getpid()}\n")

    def switch_lock() -> object:
        sw = server.switch
        return sw.lock if sw is not None else no_lock()

    commands = None
    try:
        commands = RuntimeCommandServer(
            tm,
            args.thrift_port,
            switch_lock,
            refuse=lambda line: native_refusal(server.switch, line),
        )
        commands.start()
    except OSError as err:
        log.warning(
            "runtime commands (p4sim cli) unavailable on port %d: %s", args.thrift_port, err
        )
    try:
        with PortSet(ports, pcap_dir=args.pcap) as portset:
            server.packet_sink = portset.transmit

            def _stop(signum: int, frame: object) -> None:
                portset.stop()

            signal.signal(signal.SIGTERM, _stop)
            signal.signal(signal.SIGINT, _stop)
            server.start()
            try:
                sw = server.switch
                log.info(
                    "p4sim: %s running on %s; P4Runtime on %s (device id %d); back end %s",
                    args.program or "(no program yet)",
                    ", ".join(f"{n}@{i}" for n, i in sorted(ports.items())) or "no ports",
                    args.grpc_server_addr,
                    args.device_id,
                    sw.backend if sw is not None else args.backend,
                )
                native = None
                if args.backend == "native" and args.cpu_port is None:
                    native = lambda: server.switch  # noqa: E731 - the switch installed now
                portset.serve(server.inject, timer=server.release, native=native)
            finally:
                server.stop()
                if commands is not None:
                    commands.stop()
    finally:
        if args.pid_file:
            Path(args.pid_file).unlink(missing_ok=True)
    log.info("p4sim: stopped")
    return 0


def run_compile(argv: Sequence[str]) -> int:
    p = _Parser(
        prog="p4sim compile",
        description="check a P4_16 v1model program and write its P4Info and p4sim device config",
    )
    p.add_argument("program")
    p.add_argument("--p4info", metavar="OUT", help="write the P4Info to OUT")
    p.add_argument("--p4info-format", choices=("text", "binary"), default="text")
    p.add_argument(
        "--device-config",
        metavar="OUT",
        help="write the p4_device_config that P4Runtime clients push to p4sim",
    )
    _add_include_flags(p)
    add_target_flag(p)
    args = p.parse_args(argv)
    from p4sim.p4info import compile_outputs

    p4info = compile_outputs(
        args.program,
        args.include,
        _defines(args.defines),
        args.p4info,
        args.p4info_format,
        args.device_config,
        target=args.target,
    )
    print(
        f"{args.program}: ok: {len(p4info.tables)} tables, {len(p4info.actions)} actions, "
        f"{len(p4info.registers)} registers, {len(p4info.counters)} counters, "
        f"{len(p4info.meters)} meters, {len(p4info.digests)} digests"
    )
    return 0


def run_stf(argv: Sequence[str]) -> int:
    from p4sim import stf

    return int(stf.main(list(argv)))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "compile":
            return run_compile(argv[1:])
        if argv and argv[0] == "stf":
            return run_stf(argv[1:])
        if argv and argv[0] == "cli":
            from p4sim.runtime_cli import client_main

            return client_main(argv[1:])
        return run_switch(argv)
    except UsageError as e:
        print(e, file=sys.stderr)
        print(
            "usage: p4sim [-i PORT@IFACE ...] [options] PROG.p4 | p4sim compile PROG.p4 | "
            "p4sim stf PROG.p4 TEST.stf  (p4sim --help for all options)",
            file=sys.stderr,
        )
        return 2
    except P4Error as e:
        print(e.render(), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"p4sim: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
