"""The P4Runtime server's view of one p4sim Switch: runtime objects by P4Info name.

Example::

    tgt = Target(Switch.from_file("basic.p4"))
    tgt.table("MyIngress.ipv4_lpm").entries()
    tgt.action_name("MyIngress.drop")       # the switch's own name for that action

P4Info names are resolved against the switch's ``ProgramInfo`` (exact name, else an
unambiguous dotted suffix) so a P4Info produced by p4c for the same program works too.
"""

from __future__ import annotations

from typing import Any

from p4sim.p4info import program_info_of
from p4sim.p4runtime.errors import not_found


def _resolve(name: str, names: list[str], what: str) -> str:
    if name in names:
        return name
    bare = name[1:] if name.startswith(".") else name
    hits = [n for n in names if n == bare or n.endswith("." + bare) or bare.endswith("." + n)]
    if len(hits) == 1:
        return hits[0]
    raise not_found(f"the loaded program has no {what} matching P4Info name {name!r}")


class Target:
    """Runtime objects of a Switch, looked up by P4Info names."""

    def __init__(self, switch: Any) -> None:
        self.switch = switch
        self.info = program_info_of(switch)
        self._cache: dict[tuple[str, str], Any] = {}
        # The initial default action of each table (MODIFY of a default entry without
        # an action restores it).
        self.initial_defaults: dict[str, tuple[str, tuple[int, ...]]] = {}
        for t in self.info.tables:
            self.initial_defaults[t.name] = (t.default_action, tuple(t.default_args))

    # -- names ------------------------------------------------------------------------

    def table_name(self, p4info_name: str) -> str:
        return _resolve(p4info_name, [t.name for t in self.info.tables], "table")

    def action_name(self, p4info_name: str) -> str:
        return _resolve(p4info_name, [a.name for a in self.info.actions], "action")

    # -- runtime objects -----------------------------------------------------------------

    def _object(self, kind: str, p4info_name: str, names: list[str], what: str) -> Any:
        key = (kind, p4info_name)
        if key not in self._cache:
            name = _resolve(p4info_name, names, what)
            self._cache[key] = self._fetch(kind, name)
        return self._cache[key]

    def _fetch(self, kind: str, name: str) -> Any:
        store = self.switch.inst.tables if kind == "table" else self.switch.inst.externs
        try:
            return store[name]
        except KeyError:
            raise not_found(f"the switch has no {kind} named {name!r}") from None

    def table(self, p4info_name: str) -> Any:
        return self._object("table", p4info_name, [t.name for t in self.info.tables], "table")

    def register(self, p4info_name: str) -> Any:
        names = [r.name for r in self.info.registers]
        return self._object("register", p4info_name, names, "register")

    def counter(self, p4info_name: str) -> Any:
        names = [c.name for c in self.info.counters]
        return self._object("counter", p4info_name, names, "counter")

    def meter(self, p4info_name: str) -> Any:
        return self._object("meter", p4info_name, [m.name for m in self.info.meters], "meter")

    def direct_counter(self, p4info_name: str) -> Any:
        names = [c.name for c in self.info.direct_counters]
        return self._object("direct_counter", p4info_name, names, "direct counter")

    def direct_meter(self, p4info_name: str) -> Any:
        names = [m.name for m in self.info.direct_meters]
        return self._object("direct_meter", p4info_name, names, "direct meter")

    def value_set(self, p4info_name: str) -> Any:
        names = [v.name for v in self.info.value_sets]
        name = _resolve(p4info_name, names, "value set")
        try:
            return self.switch.inst.value_sets[name]
        except KeyError:
            raise not_found(f"the switch has no value set named {name!r}") from None

    def action_profile(self, p4info_name: str) -> Any:
        names = [a.name for a in self.info.action_profiles]
        return self._object("action_profile", p4info_name, names, "action profile")

    @property
    def pre(self) -> Any:
        return self.switch.pre

    # -- packets -------------------------------------------------------------------------

    def send(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        return list(self.switch.send(port=port, data=data))

    def process(self, port: int, data: bytes) -> tuple[list, list[tuple[str, tuple[int, ...]]]]:
        """One packet and the digests it produced, under one acquisition of the switch
        lock (so no digest of a concurrent packet is taken or lost)."""
        sw = self.switch
        with sw.lock:
            outs = sw.pipeline.process(port, data)
            if not sw.digests:
                return outs, []
            got = list(sw.digests)
            sw.digests.clear()
        return outs, got

    def pop_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        got = list(self.switch.digests)
        self.switch.digests.clear()
        return got
