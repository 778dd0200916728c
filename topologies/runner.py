"""Run a p4lang-tutorials-style exercise: ``topology.json`` + ``sN-runtime.json`` on Mininet.

Example::

    python -m topologies.runner topologies/basic/topology.json \
        --program topologies/basic/basic.p4 --ping-all

``topology.json`` holds ``hosts`` (ip, mac, commands), ``switches`` (``runtime_json``,
optionally ``program``) and ``links`` (``["h1", "s1-p1"]`` or
``["s1-p2", "s2-p2", "0ms", 10]`` with latency and bandwidth in Mbit/s). Host interfaces
are named ``eth0`` as in the tutorials. The processes and interfaces started are recorded
in ``run/state.json`` so that ``make stop`` can remove them by PID if a run is interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass
class Topology:
    hosts: list[HostSpec]
    switches: list[SwitchSpec]
    links: list[LinkSpec]
    base_dir: Path


_ENDPOINT = re.compile(r"^(?P<node>[A-Za-z][\w]*?)(?:-p(?P<port>\d+))?$")


def _endpoint(text: str) -> tuple[str, int | None]:
    m = _ENDPOINT.match(text)
    if not m:
        raise TopologyError(f"bad link endpoint {text!r}: expected 'h1' or 's1-p2'")
    port = m.group("port")
    return m.group("node"), int(port) if port else None


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
    links = []
    for raw in data.get("links", []):
        if not isinstance(raw, list) or len(raw) < 2:
            raise TopologyError(f"{p}: bad link {raw!r}")
        a, ap = _endpoint(raw[0])
        b, bp = _endpoint(raw[1])
        latency = str(raw[2]) if len(raw) > 2 else "0ms"
        bw = float(raw[3]) if len(raw) > 3 and raw[3] is not None else None
        links.append(LinkSpec(a, ap, b, bp, latency, bw))
    names = {h.name for h in hosts} | {s.name for s in switches}
    for link in links:
        for n in (link.a, link.b):
            if n not in names:
                raise TopologyError(f"{p}: link names unknown node {n!r}")
    return Topology(hosts, switches, links, p.parent)


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


def build_network(
    topo: Topology, program: str | None, log_dir: str = "run/logs", default_bw: float | None = None
) -> Any:
    """A Mininet network (not started) for ``topo``; switches are :class:`P4Switch`."""
    from mininet.link import TCLink
    from mininet.net import Mininet

    from topologies.p4switch import P4Switch

    net = Mininet(controller=None, link=TCLink, autoSetMacs=False, autoStaticArp=False)
    for h in topo.hosts:
        net.addHost(h.name, ip=h.ip, mac=h.mac)
    for s in topo.switches:
        rt = str(topo.base_dir / s.runtime_json) if s.runtime_json else None
        prog = str(topo.base_dir / s.program) if s.program else program
        net.addSwitch(s.name, cls=P4Switch, program=prog, runtime_json=rt, log_dir=log_dir)
    hosts = {h.name for h in topo.hosts}
    for link in topo.links:
        opts: dict[str, Any] = {}
        bw = link.bandwidth_mbps if link.bandwidth_mbps is not None else default_bw
        if bw is not None:
            opts["bw"] = bw
        if link.latency not in ("0ms", "0", ""):
            opts["delay"] = link.latency
        if link.a in hosts:
            opts["intfName1"] = "eth0"
        if link.b in hosts:
            opts["intfName2"] = "eth0"
        net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, **opts)
    return net


def configure_hosts(net: Any, topo: Topology) -> None:
    for h in topo.hosts:
        node = net.get(h.name)
        for off in ("rx", "tx", "sg"):
            node.cmd(f"ethtool --offload eth0 {off} off")
        node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        for c in h.commands:
            node.cmd(c)


def record_state(net: Any) -> None:
    """Write PIDs and root-namespace interfaces so `make stop` can clean up by PID."""
    pids = [n.pid for n in net.hosts if getattr(n, "pid", None)]
    for s in net.switches:
        proc = getattr(s, "proc", None)
        if proc is not None:
            pids.append(proc.pid)
    intfs = [i.name for s in net.switches for i in s.intfList() if i.name != "lo"]
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    STATE_FILE.write_text(
        json.dumps({"pids": pids, "interfaces": intfs, "runner_pid": os.getpid()}, indent=1)
    )


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m topologies.runner", description="run a topology.json exercise on Mininet"
    )
    ap.add_argument("topology", help="path to topology.json")
    ap.add_argument("--program", help="P4 program for switches without their own")
    ap.add_argument("--ping-all", action="store_true", help="ping every pair, then stop")
    ap.add_argument("--cli", action="store_true", help="open the Mininet CLI")
    ap.add_argument("--bw", type=float, default=None, help="default link bandwidth, Mbit/s")
    ap.add_argument("--log-dir", default="run/logs")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("runner: Mininet needs root (network namespaces and veth links)", file=sys.stderr)
        return 1
    try:
        topo = load_topology(args.topology)
    except TopologyError as e:
        print(f"runner: {e}", file=sys.stderr)
        return 1
    if any(link.latency not in ("0ms", "0", "") for link in topo.links) and not netem_available():
        print("runner: warning: this kernel has no netem; link latency is ignored", file=sys.stderr)
    net = build_network(topo, args.program, args.log_dir, args.bw)
    try:
        net.start()
        record_state(net)
        configure_hosts(net, topo)
        if args.ping_all:
            time.sleep(0.5)
            results = ping_all(net, topo)
            for src, dst, sent, recv in results:
                print(f"  {src} -> {dst}: {recv}/{sent} replies")
            lost = sum(1 for *_, sent, recv in results if recv == 0)
            print(f"ping-all: {len(results) - lost}/{len(results)} host pairs reachable")
            return 0 if lost == 0 else 1
        if args.cli:
            from mininet.cli import CLI

            CLI(net)
        return 0
    finally:
        net.stop()
        STATE_FILE.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
