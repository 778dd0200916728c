"""CompiledProgram: the generated code plus the metadata of tables, actions and externs.

Example::

    prog = compile_file("basic.p4")
    prog.tables[0].name                 # 'MyIngress.ipv4_lpm'
    inst = prog.instantiate(Ctx())      # fresh tables/registers + entry points
    inst.fns["ingress"](hdr, meta, sm)

A CompiledProgram is immutable and may be instantiated many times (one per switch);
each instance owns its own tables, registers, counters, meters and value sets.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from p4sim.compiler import rt
from p4sim.runtime import hashes
from p4sim.runtime.action_profiles import ActionProfile
from p4sim.runtime.externs import Counter, DirectCounter, DirectMeter, Meter, Register
from p4sim.runtime.tables import Entry, KeyField, Table

#: Opens the message of a P4Error that is p4sim's fault, not the program's.
INTERNAL_ERROR = "p4sim internal error"


@dataclass
class ActionInfo:
    """An action: fully-qualified name and its action-data parameters (name, width)."""

    name: str
    params: list[tuple[str, int]]
    decl: Any = None
    annotations: list = field(default_factory=list)
    called_directly: bool = False  # some control or action body calls it by name
    called_from_control: bool = False  # an apply block (not only other actions) calls it
    # the top-level control that first uses it (top-level actions: p4c localises a copy
    # of them at the start of each control that uses them) and whether it is top-level
    owner: str = ""
    top_level: bool = False


@dataclass
class TableInfo:
    """A table instance. ``actions`` are fully-qualified action names; ``action_scopes``
    maps them to ``tableonly``/``defaultonly`` when annotated."""

    name: str
    pyname: str
    keys: list[KeyField]
    size: int
    actions: list[str]
    default_action: str
    default_args: tuple[int, ...]
    default_const: bool
    const_entries: list[Entry]
    entries_const: bool
    direct_counter: str | None = None
    direct_meter: str | None = None
    action_scopes: dict[str, str] = field(default_factory=dict)
    annotations: list = field(default_factory=list)
    key_exprs: list[str] = field(default_factory=list)
    key_annotations: list = field(default_factory=list)
    support_timeout: bool = False
    implementation: str | None = None  # action profile/selector name (an indirect table)
    selector_fields: list[tuple[str, int]] = field(default_factory=list)  # (name, width)


@dataclass
class ExternInfo:
    """A stateful extern instance: register, counter, meter, direct_counter, direct_meter."""

    kind: str
    name: str
    pyname: str
    size: int = 0
    width: int = 0
    unit: str = ""
    table: str | None = None
    annotations: list = field(default_factory=list)
    tables: list[str] = field(default_factory=list)  # action profiles: the tables using it


@dataclass
class ValueSetInfo:
    name: str
    pyname: str
    widths: list[int]
    size: int
    field_names: list[str] = field(default_factory=list)
    annotations: list = field(default_factory=list)


@dataclass
class BlockSet:
    """Python function names of the six v1model blocks."""

    parser: str
    verify_checksum: str
    ingress: str
    egress: str
    compute_checksum: str
    deparser: str


class ValueSet:
    """A parser value set: entries are tuples of (value, mask) per key field."""

    def __init__(self, name: str, widths: list[int], size: int) -> None:
        self.name, self.widths, self.size = name, widths, size
        self.entries: list[tuple[tuple[int, int], ...]] = []

    def add(self, values: tuple[int, ...], masks: tuple[int, ...] | None = None) -> None:
        if len(values) != len(self.widths):
            raise ValueError(f"value set {self.name}: expected {len(self.widths)} values")
        if len(self.entries) >= self.size:
            raise ValueError(f"value set {self.name} is full ({self.size} entries)")
        if masks is None:
            masks = tuple((1 << w) - 1 for w in self.widths)
        self.entries.append(tuple((v & m, m) for v, m in zip(values, masks, strict=False)))

    def remove(self, values: tuple[int, ...], masks: tuple[int, ...] | None = None) -> None:
        if masks is None:
            masks = tuple((1 << w) - 1 for w in self.widths)
        self.entries.remove(tuple((v & m, m) for v, m in zip(values, masks, strict=False)))

    def clear(self) -> None:
        self.entries = []

    def match(self, key: tuple[int, ...]) -> bool:
        for e in self.entries:
            if all((k & m) == v for k, (v, m) in zip(key, e, strict=False)):
                return True
        return False


@dataclass
class Instance:
    """A runnable instance: entry functions and the runtime objects by name."""

    fns: dict[str, Any]
    ns: dict[str, Any]
    tables: dict[str, Table]
    externs: dict[str, Any]
    value_sets: dict[str, ValueSet]
    hdr_cls: Any
    meta_cls: Any
    sm_cls: Any


@dataclass
class CompiledProgram:
    """Output of the compiler (see the module docstring)."""

    source: str
    blocks: BlockSet
    block_names: dict[str, str]
    tables: list[TableInfo]
    actions: dict[str, ActionInfo]
    externs: list[ExternInfo]
    value_sets: list[ValueSetInfo]
    digests: dict[str, list[tuple[str, int]]]
    field_lists: dict[int, list[str]]
    hdr_class: str
    meta_class: str
    sm_class: str
    errors: list[str]
    trace: bool = False
    controller_headers: list = field(default_factory=list)  # see Compiler.controller_headers
    main_file: str = ""
    newtypes: set = field(default_factory=set)  # names declared with `type T name;`
    program_ast: Any = None  # the parsed program (the native back end generates C from it)
    _code: Any = None
    _info: Any = None

    @property
    def info(self) -> Any:
        """The control-plane view (``p4sim.program_info.ProgramInfo``)."""
        if self._info is None:
            from p4sim.compiler.info import program_info

            self._info = program_info(self)
        return self._info

    def code(self) -> Any:
        if self._code is None:
            try:
                self._code = compile(self.source, "<p4sim generated>", "exec")
            except SyntaxError as err:  # a p4sim bug, said as such in the one-line form
                from p4sim.frontend.ast import SourceLoc
                from p4sim.frontend.diagnostics import P4Error

                where = SourceLoc(self.main_file or "<program>", 1, 1)
                raise P4Error(
                    where,
                    f"{INTERNAL_ERROR}: the generated Python does not compile "
                    f"(line {err.lineno}: {err.msg}); please report it with the program",
                ) from None
        return self._code

    def instantiate(self, ctx: rt.Ctx, log: Any = None) -> Instance:
        """Fresh runtime objects and the generated functions bound to them."""
        ns: dict[str, Any] = {
            "CTX": ctx,
            "LOG": log or (lambda msg: None),
            "v1model_hash": hashes.v1model_hash,
            "checksum": hashes.checksum,
            "verify_checksum": hashes.verify_checksum,
            "compute_fields": hashes.compute_fields,
        }
        tables: dict[str, Table] = {}
        for ti in self.tables:
            entries = [copy.deepcopy(e) for e in ti.const_entries]
            t = Table(
                ti.name,
                ti.keys,
                ti.size,
                ti.default_action,
                ti.default_args,
                ti.default_const,
                const_entries=ti.entries_const,
                entries=entries,
            )
            tables[ti.name] = t
            ns[ti.pyname] = t
        externs: dict[str, Any] = {}
        for ei in self.externs:
            obj: Any
            if ei.kind == "register":
                obj = Register(ei.name, ei.width, ei.size)
            elif ei.kind == "counter":
                obj = Counter(ei.name, ei.size, ei.unit)
            elif ei.kind == "meter":
                obj = Meter(ei.name, ei.size, ei.unit)
            elif ei.kind == "action_profile":
                obj = ActionProfile(ei.name, ei.size)
            elif ei.kind == "action_selector":
                obj = ActionProfile(ei.name, ei.size, ei.unit)
            elif ei.table is None:
                continue  # a direct extern no table uses
            elif ei.kind == "direct_counter":
                obj = DirectCounter(ei.name, tables[ei.table], ei.unit)
            elif ei.kind == "direct_meter":
                obj = DirectMeter(ei.name, tables[ei.table], ei.unit)
            else:
                continue
            externs[ei.name] = obj
            ns[ei.pyname] = obj
            if ei.kind == "register":
                ns[ei.pyname + "_v"] = obj.values  # the generated code's direct cells
        vsets: dict[str, ValueSet] = {}
        for vi in self.value_sets:
            vs = ValueSet(vi.name, vi.widths, vi.size)
            vsets[vi.name] = vs
            ns[vi.pyname] = vs
        exec(self.code(), ns)  # noqa: S102 - code generated by our own compiler
        b = self.blocks
        fns = {
            role: ns[getattr(b, role)]
            for role in (
                "parser",
                "verify_checksum",
                "ingress",
                "egress",
                "compute_checksum",
                "deparser",
            )
        }
        fns["fl_save"] = ns["_fl_save"]
        fns["fl_restore"] = ns["_fl_restore"]
        return Instance(
            fns,
            ns,
            tables,
            externs,
            vsets,
            ns[self.hdr_class],
            ns[self.meta_class],
            ns[self.sm_class],
        )
