"""Run a p4lang-tutorials-style exercise: ``topology.json`` + ``sN-runtime.json`` on Mininet,
with every switch programmed over P4Runtime.

Example::

    python -m topologies.runner topologies/triangle/topology.json \
        --program topologies/basic/basic.p4 --ping-all          # SWITCH=bmv2 or --switch bmv2

As in the tutorials: the program is compiled once (p4sim: P4Info + device config; bmv2:
p4c's P4Info + BMv2 JSON) into ``build/<switch kind>/``, every switch starts with
``--no-p4``, then the project's P4Runtime client connects to each, becomes primary,
pushes the pipeline and applies the switch's ``sN-runtime.json`` (table entries, multicast
groups, clone sessions).

``topology.json`` holds ``hosts`` (ip, mac, commands), ``switches`` (``runtime_json``,
optionally ``program``) and ``links``: ``["h1", "s1-p1"]`` or
``["s1-p2", "s2-p2", "5ms", 10, 1.5]`` (latency, bandwidth in Mbit/s, and our extension,
loss in percent). Bandwidth uses Mininet's TCLink (htb); latency and loss use netem where
the kernel has it. Without netem, latency is ignored with a warning and loss is done with
nftables ``egress`` hooks on both ends of the link (see :func:`apply_link_loss`). Host
interfaces are named ``eth0`` as in the tutorials. PIDs, interfaces and nftables tables
are recorded in ``run/state.json`` so that ``make stop`` can remove them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topologies.p4switch import (
    CompiledProgram,
    SwitchStartError,
    compile_program,
    switch_kind,
)

STATE_FILE = Path("run/state.json")


class TopologyError(ValueError):
    pass


@dataclass
class HostSpec:
    name: str
    ip: str
    mac: str
    commands: list[str] = field(default_factory=list)


@dataclass
class SwitchSpec:
    name: str
    runtime_json: str | None = None
    program: str | None = None


@dataclass
class LinkSpec:
    a: str
    a_port: int | None
    b: str
    b_port: int | None
    latency: str = "0ms"
    bandwidth_mbps: float | None = None
    loss_pct: float = 0.0


@dataclass
class Topology:
    hosts: list[HostSpec]
    switches: list[SwitchSpec]
    links: list[LinkSpec]
    base_dir: Path


_ENDPOINT = re.compile(r"^(?P<node>[A-Za-z][\w]*?)(?:-p(?P<port>\d+))?$")
_NO_DELAY = ("0ms", "0", "", "0s", "0us")


def _endpoint(text: str) -> tuple[str, int | None]:
    m = _ENDPOINT.match(text)
    if not m:
        raise TopologyError(f"bad link endpoint {text!r}: expected 'h1' or 's1-p2'")
    port = m.group("port")
    return m.group("node"), int(port) if port else None


def _loss(raw: Any, where: str) -> float:
    """Loss in percent: ``1.5`` or ``"1.5%"``."""
    try:
        pct = float(str(raw).rstrip("%")) if raw is not None else 0.0
    except ValueError:
        raise TopologyError(f"{where}: loss {raw!r} is not a percentage") from None
    if not 0.0 <= pct <= 100.0:
        raise TopologyError(f"{where}: loss {pct} is outside 0..100 percent")
    return pct


def _link(raw: Any, where: str) -> LinkSpec:
    if not isinstance(raw, list) or len(raw) < 2:
        raise TopologyError(f"{where}: bad link {raw!r}")
    a, ap = _endpoint(raw[0])
    b, bp = _endpoint(raw[1])
    latency = str(raw[2]) if len(raw) > 2 else "0ms"
    try:
        bw = float(raw[3]) if len(raw) > 3 and raw[3] is not None else None
    except (TypeError, ValueError):
        raise TopologyError(f"{where}: bandwidth {raw[3]!r} is not a number (Mbit/s)") from None
    loss = _loss(raw[4], where) if len(raw) > 4 else 0.0
    return LinkSpec(a, ap, b, bp, latency, bw, loss)


def load_topology(path: str | Path) -> Topology:
    p = Path(path)
    try:
        data: dict[str, Any] = json.loads(p.read_text())
    except OSError as e:
        raise TopologyError(f"{p}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise TopologyError(f"{p}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    hosts = [
        HostSpec(n, h["ip"], h["mac"], list(h.get("commands", [])))
        for n, h in data.get("hosts", {}).items()
    ]
    switches = [
        SwitchSpec(n, s.get("runtime_json"), s.get("program"))
        for n, s in data.get("switches", {}).items()
    ]
    links = [_link(raw, str(p)) for raw in data.get("links", [])]
    names = {h.name for h in hosts} | {s.name for s in switches}
    for link in links:
        for n in (link.a, link.b):
            if n not in names:
                raise TopologyError(f"{p}: link names unknown node {n!r}")
    return Topology(hosts, switches, links, p.parent)


@functools.cache
def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (delay/loss on links)."""
    probe = subprocess.run(
        ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms"],
        capture_output=True,
        check=False,
    )
    if probe.returncode == 0:
        subprocess.run(
            ["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True, check=False
        )
        return True
    return False


def resolve_path(topo: Topology, rel: str) -> Path:
    """Where a path named in ``topology.json`` points.

    ``resolve_path(topo, "pod-topo/s1-runtime.json")`` with the topology at
    ``ex/pod-topo/topology.json`` is ``ex/pod-topo/s1-runtime.json``. The p4lang tutorials
    name files relative to the exercise directory (their ``make run`` works from there), one
    level above ``pod-topo/``, so that directory and the working directory are tried too;
    the first candidate that exists wins, else the topology's own directory.
    """
    given = Path(rel)
    if given.is_absolute():
        return given
    for base in (topo.base_dir, topo.base_dir.parent, Path.cwd()):
        if (base / given).exists():
            return base / given
    return topo.base_dir / given


def _program_path(topo: Topology, rel: str) -> Path:
    """``resolve_path`` for a switch's program; a tutorial's ``build/NAME.json`` not built
    yet resolves where ``NAME.p4`` is, for ``compile_program`` to compile that source."""
    found = resolve_path(topo, rel)
    given = Path(rel)
    if found.exists() or given.suffix != ".json" or given.is_absolute():
        return found
    for base in (topo.base_dir, topo.base_dir.parent, Path.cwd()):
        cand = base / given
        if any((d / f"{given.stem}.p4").is_file() for d in (cand.parent, cand.parent.parent)):
            return cand
    return found


def compile_programs(
    topo: Topology, program: str | None, kind: str, build_dir: str | Path
) -> dict[str, CompiledProgram]:
    """Each switch's compiled program (a program used by several switches compiles once);
    switches without any program are left out and start empty."""
    cache: dict[Path, CompiledProgram] = {}
    out: dict[str, CompiledProgram] = {}
    for s in topo.switches:
        src = _program_path(topo, s.program) if s.program else (Path(program) if program else None)
        if src is None:
            if s.runtime_json:
                raise TopologyError(
                    f"switch {s.name} has runtime_json but no program: give --program"
                )
            continue
        key = src.resolve()
        if key not in cache:
            cache[key] = compile_program(src, kind, build_dir)
        out[s.name] = cache[key]
    return out


def _link_options(link: LinkSpec, default_bw: float | None, netem: bool) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    bw = link.bandwidth_mbps if link.bandwidth_mbps is not None else default_bw
    if bw is not None:
        opts["bw"] = bw
    if netem and link.latency not in _NO_DELAY:
        opts["delay"] = link.latency
    if netem and link.loss_pct:
        opts["loss"] = link.loss_pct
    return opts


def build_network(
    topo: Topology,
    program: str | None,
    log_dir: str = "run/logs",
    default_bw: float | None = None,
    *,
    kind: str | None = None,
    build_dir: str | Path | None = None,
    compiled: dict[str, CompiledProgram] | None = None,
) -> Any:
    """A Mininet network (not started) for ``topo``; switches are :class:`P4Switch`es that
    start empty and are programmed over P4Runtime when the network starts.

    ``program`` is compiled into ``build_dir`` (default ``build/<kind>``) unless
    ``compiled`` already maps switch names to compiled programs. ``net.p4_links`` pairs
    each :class:`LinkSpec` with its Mininet link.
    """
    from mininet.link import TCLink
    from mininet.net import Mininet

    from topologies.p4switch import P4Switch

    kind = switch_kind(kind)
    if compiled is None:
        compiled = compile_programs(topo, program, kind, build_dir or Path("build") / kind)
    net = Mininet(controller=None, link=TCLink, autoSetMacs=False, autoStaticArp=False)
    try:
        for h in topo.hosts:
            net.addHost(h.name, ip=h.ip, mac=h.mac)
        for s in topo.switches:
            rt = str(resolve_path(topo, s.runtime_json)) if s.runtime_json else None
            net.addSwitch(
                s.name,
                cls=P4Switch,
                kind=kind,
                compiled=compiled.get(s.name),
                runtime_json=rt,
                log_dir=log_dir,
            )
        hosts = {h.name for h in topo.hosts}
        netem = netem_available()
        net.p4_links = []
        for link in topo.links:
            opts = _link_options(link, default_bw, netem)
            if link.a in hosts:
                opts["intfName1"] = "eth0"
            if link.b in hosts:
                opts["intfName2"] = "eth0"
            made = net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, **opts)
            net.p4_links.append((link, made))
    except BaseException:
        net.stop()  # hosts' shells and veths already exist
        raise
    return net


def impairment_warnings(topo: Topology) -> list[str]:
    """What this kernel cannot do for ``topo`` (latency without netem)."""
    if netem_available():
        return []
    slow = [f"{x.a}-{x.b}" for x in topo.links if x.latency not in _NO_DELAY]
    if not slow:
        return []
    return [
        f"this kernel has no netem: latency on {', '.join(slow)} is ignored "
        "(bandwidth and loss still apply)"
    ]


def _nft_chain(iface: str, pct: float) -> str:
    verdict = "drop" if pct >= 100 else f"numgen random mod 10000 < {round(pct * 100)} drop"
    name = "loss_" + re.sub(r"\W", "_", iface)
    return (
        f'  chain {name} {{\n    type filter hook egress device "{iface}" priority 0;\n'
        f"    {verdict}\n  }}\n"
    )


def _nft(script: str, ns_pid: int | None = None) -> None:
    cmd = ["nft", "-f", "-"]
    if ns_pid is not None:
        cmd = ["nsenter", "-t", str(ns_pid), "-n", *cmd]
    done = subprocess.run(cmd, input=script, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SwitchStartError(f"nft failed: {done.stderr.strip()}\n{script}")


def loss_table_name() -> str:
    return f"inc_loss_{os.getpid()}"


def remove_stale_loss_tables() -> list[str]:
    """Delete ``inc_loss_<pid>`` tables whose runner is gone (killed with SIGKILL).

    Needed because a netdev chain outlives its interface and, on current kernels, hooks
    onto the next interface with that name: the next run's ``s1-eth2`` would lose frames.
    Tables of runners that are still alive are left alone.
    """
    listed = subprocess.run(
        ["nft", "list", "tables", "netdev"], capture_output=True, text=True, check=False
    )
    stale = [
        m.group(0)
        for m in re.finditer(r"\binc_loss_(\d+)\b", listed.stdout)
        if not Path(f"/proc/{m.group(1)}").exists()
    ]
    remove_link_loss(stale)
    return stale


def apply_link_loss(net: Any, topo: Topology | None = None) -> list[str]:
    """Loss with nftables where netem is missing; returns the root-namespace tables made.

    A netdev ``ingress`` hook runs after the kernel hands frames to AF_PACKET sockets, so
    the switch (p4sim or BMv2, both read with AF_PACKET) would still see a frame dropped
    there. Each direction is therefore dropped on the *sending* side: an ``egress`` hook on
    both ends of the link (the host's ``eth0`` inside its namespace, whose table goes away
    with the namespace, and the switch-side interface in the root namespace).
    """
    if netem_available():
        return []
    remove_stale_loss_tables()
    root: list[str] = []
    per_host: dict[int, list[str]] = {}
    for link, made in getattr(net, "p4_links", []):
        if not link.loss_pct:
            continue
        for intf in (made.intf1, made.intf2):
            chain = _nft_chain(intf.name, link.loss_pct)
            if getattr(intf.node, "inNamespace", False):
                per_host.setdefault(intf.node.pid, []).append(chain)
            else:
                root.append(chain)
    table = loss_table_name()
    made_tables: list[str] = []
    if root:
        _nft(f"table netdev {table} {{\n{''.join(root)}}}\n")
        made_tables.append(table)
    for pid, chains in per_host.items():
        _nft(f"table netdev inc_loss {{\n{''.join(chains)}}}\n", ns_pid=pid)
    return made_tables


def remove_link_loss(tables: Sequence[str]) -> None:
    for table in tables:
        subprocess.run(
            ["nft", "delete", "table", "netdev", table], capture_output=True, check=False
        )


def configure_hosts(net: Any, topo: Topology) -> None:
    for h in topo.hosts:
        node = net.get(h.name)
        for off in ("rx", "tx", "sg"):
            node.cmd(f"ethtool --offload eth0 {off} off")
        node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        for c in h.commands:
            node.cmd(c)


def record_state(net: Any, nft_tables: Sequence[str] = ()) -> None:
    """Write PIDs, root-namespace interfaces and nftables tables so `make stop` can clean
    up by PID."""
    pids = [n.pid for n in net.hosts if getattr(n, "pid", None)]
    for s in net.switches:
        proc = getattr(s, "proc", None)
        if proc is not None:
            pids.append(proc.pid)
    intfs = [i.name for s in net.switches for i in s.intfList() if i.name != "lo"]
    state = {
        "pids": pids,
        "interfaces": intfs,
        "runner_pid": os.getpid(),
        "nft_tables": [f"netdev {t}" for t in nft_tables],
    }
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    STATE_FILE.write_text(json.dumps(state, indent=1))


@contextmanager
def started_network(
    topo: Topology,
    program: str | None = None,
    *,
    kind: str | None = None,
    log_dir: str = "run/logs",
    build_dir: str | Path | None = None,
    default_bw: float | None = None,
) -> Iterator[Any]:
    """Build, start and program the network; everything is removed on exit or failure.

    >>> # with started_network(load_topology("topologies/triangle/topology.json"),
    >>> #                      "topologies/basic/basic.p4") as net:
    >>> #     print(ping_all(net, topo))
    """
    net = build_network(topo, program, log_dir, default_bw, kind=kind, build_dir=build_dir)
    tables: list[str] = []
    try:
        record_state(net)  # hosts and veths exist already
        net.start()  # each P4Switch starts, then gets its pipeline and entries
        tables = apply_link_loss(net, topo)
        record_state(net, tables)
        configure_hosts(net, topo)
        yield net
    finally:
        remove_link_loss(tables)
        # Switch processes first: Mininet removes links before switches, and a switch
        # whose interfaces vanish under it logs errors for nothing.
        for sw in net.switches:
            getattr(sw, "stop_process", lambda: None)()
        net.stop()
        STATE_FILE.unlink(missing_ok=True)


def ping_all(net: Any, topo: Topology, count: int = 3) -> list[tuple[str, str, int, int]]:
    """Ping every host pair; returns (src, dst, sent, received) from ping's own summary."""
    results = []
    for a in topo.hosts:
        for b in topo.hosts:
            if a is b:
                continue
            dst = b.ip.split("/")[0]
            out = net.get(a.name).cmd(f"ping -c {count} -W 2 -i 0.2 {dst}")
            m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
            sent, recv = (int(m.group(1)), int(m.group(2))) if m else (count, 0)
            results.append((a.name, b.name, sent, recv))
    return results


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m topologies.runner", description="run a topology.json exercise on Mininet"
    )
    ap.add_argument("topology", help="path to topology.json")
    ap.add_argument("--program", help="P4 program (or BMv2 JSON) for switches without their own")
    ap.add_argument(
        "--switch",
        choices=("p4sim", "bmv2"),
        default=None,
        help="switch target (default: $SWITCH, else p4sim)",
    )
    ap.add_argument("--ping-all", action="store_true", help="ping every pair, then stop")
    ap.add_argument("--cli", action="store_true", help="open the Mininet CLI")
    ap.add_argument("--bw", type=float, default=None, help="default link bandwidth, Mbit/s")
    ap.add_argument("--log-dir", default="run/logs")
    ap.add_argument("--build-dir", default=None, help="compiler output (default build/KIND)")
    return ap.parse_args(argv)


def _sigterm(signum: int, frame: object) -> None:
    # `make stop` sends SIGTERM: unwind through the finally blocks that clean up.
    raise SystemExit(128 + signum)


def _report_pings(results: list[tuple[str, str, int, int]]) -> int:
    for src, dst, sent, recv in results:
        print(f"  {src} -> {dst}: {recv}/{sent} replies")
    lost = sum(1 for *_, sent, recv in results if recv == 0)
    print(f"ping-all: {len(results) - lost}/{len(results)} host pairs reachable")
    return 0 if lost == 0 else 1


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if os.geteuid() != 0:
        print("runner: Mininet needs root (network namespaces and veth links)", file=sys.stderr)
        return 1
    try:
        kind = switch_kind(args.switch)
        topo = load_topology(args.topology)
    except (TopologyError, ValueError) as e:
        print(f"runner: {e}", file=sys.stderr)
        return 1
    for warning in impairment_warnings(topo):
        print(f"runner: warning: {warning}", file=sys.stderr)
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        with started_network(
            topo,
            args.program,
            kind=kind,
            log_dir=args.log_dir,
            build_dir=args.build_dir,
            default_bw=args.bw,
        ) as net:
            if args.ping_all:
                time.sleep(0.5)
                return _report_pings(ping_all(net, topo))
            if args.cli:
                from mininet.cli import CLI

                CLI(net)
            return 0
    except (SwitchStartError, TopologyError) as e:
        print(f"runner: {e}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
