"""Programs ``p4src/source_guard.p4``: which IPv4 sources each host-facing port may use.

Example::

    bindings = [SourceBinding(port=1, prefix="10.0.0.1/32"), SourceBinding(2, "10.0.0.2/32")]
    runtime = {"target": "bmv2", "table_entries": runtime_entries(bindings)}  # sN-runtime.json
    await sw.insert(table_entries(bindings))                                  # or directly

A port with at least one binding is a host-facing port (``source_ports``): an IPv4 packet
arriving there passes only when one of the port's prefixes (``source_addrs``) holds its
source address; the rest is dropped and counted, ``DropReason.SPOOFED_SOURCE``. A port with
no binding is not checked: a trunk between switches, or a port of a topology that binds
none. The bindings come from the topology (which host sits on which port, with which
address): ``topologies.experiment.Layout`` writes them into each switch's runtime JSON, which
the controller daemon installs with the forwarding (``--runtime-json``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from finsy import P4TableEntry

from controller.p4rt.p4runtime_client import table_entry

PREFIX = "IncIngress.source_guard."
SOURCE_PORTS = PREFIX + "source_ports"
SOURCE_ADDRS = PREFIX + "source_addrs"
HOST_PORT = PREFIX + "host_port"
HOST_SOURCE = PREFIX + "host_source"
PORT_FIELD = "standard_metadata.ingress_port"
SOURCE_FIELD = "hdr.ipv4.srcAddr"


@dataclass(frozen=True)
class SourceBinding:
    """Sources in ``prefix`` (an address or ``a.b.c.d/len``) may enter on switch ``port``."""

    port: int
    prefix: str

    def network(self) -> ipaddress.IPv4Network:
        try:
            net = ipaddress.IPv4Network(self.prefix, strict=True)
        except ValueError as err:
            raise ValueError(f"source binding of port {self.port}: {err}") from None
        if net.prefixlen == 0:  # P4Runtime has no /0 lpm value; it would check nothing
            raise ValueError(f"source binding of port {self.port}: /0 allows every source")
        return net


def _checked(bindings: Iterable[SourceBinding]) -> list[tuple[int, ipaddress.IPv4Network]]:
    return sorted({(b.port, b.network()) for b in bindings})


def runtime_entries(bindings: Iterable[SourceBinding]) -> list[dict[str, Any]]:
    """The bindings as tutorial runtime-JSON table entries (``sN-runtime.json``)."""
    pairs = _checked(bindings)
    ports = [
        {"table": SOURCE_PORTS, "match": {PORT_FIELD: p}, "action_name": HOST_PORT,
         "action_params": {}}
        for p in sorted({p for p, _ in pairs})
    ]  # fmt: skip
    addrs = [
        {"table": SOURCE_ADDRS,
         "match": {PORT_FIELD: p, SOURCE_FIELD: [str(net.network_address), net.prefixlen]},
         "action_name": HOST_SOURCE, "action_params": {}}
        for p, net in pairs
    ]  # fmt: skip
    return ports + addrs


def table_entries(bindings: Iterable[SourceBinding]) -> list[P4TableEntry]:
    """The bindings as P4Runtime entries (finsy), for a client that writes them itself."""
    pairs = _checked(bindings)
    bound = sorted({p for p, _ in pairs})
    ports = [table_entry(SOURCE_PORTS, {PORT_FIELD: p}, HOST_PORT) for p in bound]
    addrs = [
        table_entry(SOURCE_ADDRS, {PORT_FIELD: p, SOURCE_FIELD: str(net)}, HOST_SOURCE)
        for p, net in pairs
    ]
    return ports + addrs
