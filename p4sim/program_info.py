"""What the control plane sees of a loaded P4 program: its tables, actions and externs.

The compiler fills a :class:`ProgramInfo`; P4Info generation and the P4Runtime server read
it. Names are fully qualified as p4c names them for P4Info (``MyIngress.ipv4_lpm``, or the
``@name`` annotation's value); ``annotations`` keeps every annotation as its source text
(``@name("x")``, ``@id(5)``), and ``explicit_id`` holds an ``@id`` value when present.

Example::

    info = switch.info
    t = info.table("MyIngress.ipv4_lpm")
    print([(k.name, k.match_kind, k.width) for k in t.keys], t.actions)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Annotated:
    name: str
    annotations: tuple[str, ...] = field(default=(), kw_only=True)
    explicit_id: int | None = field(default=None, kw_only=True)
    doc: str = field(default="", kw_only=True)


@dataclass(frozen=True)
class ParamInfo(Annotated):
    width: int
    type_name: str | None = None  # a typedef/type name (P4Info type_name), if any


@dataclass(frozen=True)
class ActionInfo(Annotated):
    params: tuple[ParamInfo, ...] = ()


@dataclass(frozen=True)
class KeyInfo(Annotated):
    match_kind: str  # exact | lpm | ternary | range | optional | (other, by name)
    width: int
    type_name: str | None = None


@dataclass(frozen=True)
class ActionRefInfo:
    action: str  # fully-qualified action name
    scope: str = "TABLE_AND_DEFAULT"  # or TABLE_ONLY (@tableonly), DEFAULT_ONLY (@defaultonly)
    annotations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConstEntryInfo:
    matches: tuple  # as p4sim.runtime.tables.Entry.matches
    action: str
    args: tuple[int, ...]
    priority: int | None


@dataclass(frozen=True)
class TableInfo(Annotated):
    keys: tuple[KeyInfo, ...]
    actions: tuple[ActionRefInfo, ...]
    size: int
    default_action: str
    default_args: tuple[int, ...] = ()
    default_is_const: bool = False
    const_entries: tuple[ConstEntryInfo, ...] | None = None  # None: no `const entries`
    direct_counter: str | None = None
    direct_meter: str | None = None
    implementation: str | None = None  # action profile / selector name
    idle_timeout: bool = False


@dataclass(frozen=True)
class CounterInfo(Annotated):
    size: int
    unit: str  # packets | bytes | packets_and_bytes
    index_width: int = 32


@dataclass(frozen=True)
class DirectCounterInfo(Annotated):
    table: str
    unit: str


@dataclass(frozen=True)
class MeterInfo(Annotated):
    size: int
    unit: str  # packets | bytes
    index_width: int = 32


@dataclass(frozen=True)
class DirectMeterInfo(Annotated):
    table: str
    unit: str


@dataclass(frozen=True)
class RegisterInfo(Annotated):
    size: int
    width: int
    index_width: int = 32
    type_name: str | None = None


@dataclass(frozen=True)
class ActionProfileInfo(Annotated):
    """An ``action_profile`` (``with_selector`` False) or ``action_selector``."""

    tables: tuple[str, ...]
    size: int
    with_selector: bool = False
    max_group_size: int = 0  # 0: no limit (``@max_group_size(N)`` sets one)
    algo: str | None = None  # selector hash algorithm


@dataclass(frozen=True)
class FieldInfo:
    name: str
    width: int
    type_name: str | None = None  # a serializable enum's name (P4Info type_name), if any


@dataclass(frozen=True)
class SerializableEnumInfo:
    """``enum bit<W> name { member = value, ... }`` as P4Info's type_info lists it."""

    name: str
    width: int
    members: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class DigestInfo(Annotated):
    """``digest<T>(receiver, data)``: one entry per distinct T (the struct type's name)."""

    fields: tuple[FieldInfo, ...]


@dataclass(frozen=True)
class ValueSetInfo(Annotated):
    size: int
    fields: tuple[KeyInfo, ...]


@dataclass(frozen=True)
class ControllerHeaderInfo(Annotated):
    """A header annotated ``@controller_header("packet_in")`` / ``("packet_out")``;
    ``name`` is that string; ``type_name`` the header type's name (p4c hashes it)."""

    fields: tuple[FieldInfo, ...]
    type_name: str = ""


@dataclass
class ProgramInfo:
    """Everything P4Info needs; filled by the compiler."""

    source: str = ""
    tables: list[TableInfo] = field(default_factory=list)
    actions: list[ActionInfo] = field(default_factory=list)
    counters: list[CounterInfo] = field(default_factory=list)
    direct_counters: list[DirectCounterInfo] = field(default_factory=list)
    meters: list[MeterInfo] = field(default_factory=list)
    direct_meters: list[DirectMeterInfo] = field(default_factory=list)
    registers: list[RegisterInfo] = field(default_factory=list)
    digests: list[DigestInfo] = field(default_factory=list)
    value_sets: list[ValueSetInfo] = field(default_factory=list)
    controller_headers: list[ControllerHeaderInfo] = field(default_factory=list)
    action_profiles: list[ActionProfileInfo] = field(default_factory=list)
    serializable_enums: list[SerializableEnumInfo] = field(default_factory=list)  # named

    def table(self, name: str) -> TableInfo:
        return _find(self.tables, name, "table")

    def action(self, name: str) -> ActionInfo:
        return _find(self.actions, name, "action")


def _find(items: list, name: str, what: str):  # type: ignore[no-untyped-def]
    for it in items:
        if it.name == name:
            return it
    matches = [it for it in items if it.name.endswith("." + name)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise KeyError(f"{what} name {name!r} is ambiguous: {', '.join(m.name for m in matches)}")
    raise KeyError(f"no {what} named {name!r}")
