"""P4Info generation (as p4c emits it for BMv2) and p4sim's ``p4_device_config`` bundle.

Example::

    info = Switch.from_file("basic.p4").info
    p4info = build_p4info(info)
    write_p4info(p4info, "basic.p4info.txtpb")             # or fmt="binary"
    write_device_config(bundle_sources("basic.p4"), "basic.p4sim")

IDs follow p4c's ``P4RuntimeSymbolTable``: the top byte is the entity's ``P4Ids`` prefix;
an ``@id`` is used as given (its prefix added when missing); every other symbol gets the
low 24 bits of the Jenkins one-at-a-time hash of its control-plane name, assigned in
sorted name order with linear probing on a collision.  Aliases are the shortest unique
dotted suffix among all symbols.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finsy.proto import p4i

from p4sim import program_info as pi
from p4sim.program_info import Annotated, KeyInfo, ProgramInfo

# P4Ids.Prefix values (p4info.proto).
ACTION, TABLE, VALUE_SET, CONTROLLER_HEADER = 0x01, 0x02, 0x03, 0x04
ACTION_PROFILE = 0x11
COUNTER, DIRECT_COUNTER, METER, DIRECT_METER, REGISTER, DIGEST = (
    0x12,
    0x13,
    0x14,
    0x15,
    0x16,
    0x17,
)

DEVICE_CONFIG_MAGIC = b"P4SIM1\n"

_MATCH_TYPES = {
    "exact": p4i.MatchField.EXACT,
    "lpm": p4i.MatchField.LPM,
    "ternary": p4i.MatchField.TERNARY,
    "range": p4i.MatchField.RANGE,
    "optional": p4i.MatchField.OPTIONAL,
}
_COUNTER_UNITS = {
    "packets": p4i.CounterSpec.PACKETS,
    "bytes": p4i.CounterSpec.BYTES,
    "packets_and_bytes": p4i.CounterSpec.BOTH,
}
_METER_UNITS = {"packets": p4i.MeterSpec.PACKETS, "bytes": p4i.MeterSpec.BYTES}
_SCOPES = {
    "TABLE_AND_DEFAULT": p4i.ActionRef.TABLE_AND_DEFAULT,
    "TABLE_ONLY": p4i.ActionRef.TABLE_ONLY,
    "DEFAULT_ONLY": p4i.ActionRef.DEFAULT_ONLY,
}
# Annotations p4c consumes itself instead of copying them into a preamble.
_DROPPED_ANNOTATIONS = {"name", "id", "hidden", "defaultonly", "tableonly", "brief", "description"}
_ANNOT_NAME = re.compile(r"@\s*([A-Za-z_][A-Za-z0-9_]*)")


class P4InfoError(Exception):
    """The program cannot be described in P4Info (e.g. two ``@id`` on one value)."""


def jenkins_one_at_a_time(data: bytes) -> int:
    """Bob Jenkins' one-at-a-time hash (32 bits), as p4c hashes P4Runtime names.

    >>> hex(jenkins_one_at_a_time(b"NoAction") & 0xFFFFFF)
    '0x445137'
    """
    h = 0
    for b in data:
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    return (h + (h << 15)) & 0xFFFFFFFF


def control_plane_name(name: str) -> str:
    """p4c drops the leading dot of an absolute ``@name(".x")``."""
    return name[1:] if name.startswith(".") else name


class SymbolTable:
    """Assigns P4Runtime IDs the way p4c's ``P4RuntimeSymbolTable`` does.

    Example::

        st = SymbolTable()
        st.add(ACTION, "NoAction")
        st.compute_ids()
        st.id(ACTION, "NoAction")      # 21257015 (0x01445137)
    """

    def __init__(self) -> None:
        self._tables: dict[int, dict[str, int | None]] = {}
        self._assigned: set[int] = set()
        self._names: set[str] = set()

    def add(self, prefix: int, name: str, explicit_id: int | None = None) -> None:
        table = self._tables.setdefault(prefix, {})
        if name in table:
            return  # p4c tolerates duplicates (the same symbol seen twice)
        self._names.add(name)
        table[name] = self._explicit(prefix, name, explicit_id)

    def _explicit(self, prefix: int, name: str, explicit_id: int | None) -> int | None:
        if explicit_id is None:
            return None
        top = explicit_id & 0xFF000000
        if top and top != prefix << 24:
            raise P4InfoError(f"{name}: @id {explicit_id:#x} has the wrong 8-bit prefix")
        full = explicit_id | (prefix << 24)
        if full in self._assigned:
            raise P4InfoError(f"@id {full} is assigned to multiple declarations")
        self._assigned.add(full)
        return full

    def compute_ids(self) -> None:
        for prefix in sorted(self._tables):
            table = self._tables[prefix]
            for name in sorted(n for n, i in table.items() if i is None):
                table[name] = self._probe(prefix, jenkins_one_at_a_time(name.encode()))

    def _probe(self, prefix: int, start: int) -> int:
        value = start
        while True:
            candidate = (prefix << 24) | (value & 0xFFFFFF)
            if candidate not in self._assigned:
                self._assigned.add(candidate)
                return candidate
            value = (value + 1) & 0xFFFFFFFF
            if value == start:
                raise P4InfoError("no P4Runtime id left")

    def id(self, prefix: int, name: str) -> int:
        got = self._tables.get(prefix, {}).get(name)
        if got is None:
            raise P4InfoError(f"no P4Runtime id for {name!r}")
        return got

    def alias(self, name: str) -> str:
        """Shortest dotted suffix of ``name`` that no other symbol ends with."""
        parts = name.split(".")
        for n in range(1, len(parts) + 1):
            suffix = ".".join(parts[-n:])
            clash = [o for o in self._names if o != name and _ends_with(o, suffix)]
            if not clash:
                return suffix
        return name


def _ends_with(name: str, suffix: str) -> bool:
    return name == suffix or name.endswith("." + suffix)


# ------------------------------------------------------------- ProgramInfo source


def program_info_of(switch: Any) -> ProgramInfo:
    """The ProgramInfo of a loaded Switch (``switch.info``, filled by the compiler)."""
    info = getattr(switch, "info", None)
    if not isinstance(info, ProgramInfo):
        raise P4InfoError("this switch does not describe its program (no ProgramInfo)")
    return info


@dataclass(frozen=True)
class SourceControllerHeader(pi.ControllerHeaderInfo):
    """A controller header found in the source; ``type_name`` is the header type's name,
    which p4c hashes for the ID."""

    type_name: str = ""


def controller_headers_from_source(
    path: str, include_dirs: Sequence[str] = (), defines: Mapping[str, str] | None = None
) -> list[pi.ControllerHeaderInfo]:
    """The ``@controller_header("...")`` headers of a P4 program, parsed from its source
    (for when the compiler's ProgramInfo does not list them)."""
    from p4sim.frontend import ast
    from p4sim.frontend.parser import parse_program

    prog = parse_program(path, include_dirs, defines)
    typedefs = {d.name: d.type for d in prog.declarations if isinstance(d, ast.TypedefDecl)}
    for d in prog.declarations:  # a serializable enum's field has its underlying width
        if isinstance(d, ast.EnumDecl) and d.underlying is not None:
            typedefs[d.name] = d.underlying
    out: list[pi.ControllerHeaderInfo] = []
    for d in prog.declarations:
        if not isinstance(d, ast.HeaderDecl):
            continue
        for a in d.annotations:
            if a.name == "controller_header" and a.args and isinstance(a.args[0], ast.StringLit):
                fields = tuple(pi.FieldInfo(f.name, _bit_width(f.type, typedefs)) for f in d.fields)
                out.append(
                    SourceControllerHeader(
                        a.args[0].value,
                        fields=fields,
                        annotations=(f'@controller_header("{a.args[0].value}")',),
                        type_name=d.name,
                    )
                )
    return out


def _bit_width(t: Any, typedefs: Mapping[str, Any]) -> int:
    from p4sim.frontend import ast

    for _ in range(16):  # follow typedef chains
        if isinstance(t, ast.NamedType) and t.name in typedefs:
            t = typedefs[t.name]
    if isinstance(t, ast.BitType) and isinstance(t.width, ast.IntLit):
        return t.width.value
    raise P4InfoError(f"controller header field type {t!r} is not bit<W> with a literal W")


def program_info_for_file(
    switch: Any,
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
) -> ProgramInfo:
    """``program_info_of(switch)`` with its controller headers completed from the source:
    their header type names (for p4c's IDs), or the headers themselves when missing."""
    info = program_info_of(switch)
    if all(getattr(ch, "type_name", "") for ch in info.controller_headers):
        if info.controller_headers:
            return info
    found = {ch.name: ch for ch in controller_headers_from_source(path, include_dirs, defines)}
    if not info.controller_headers:
        return dataclasses.replace(info, controller_headers=list(found.values()))
    merged: list[pi.ControllerHeaderInfo] = []
    for ch in info.controller_headers:
        src = found.get(ch.name)
        type_name = getattr(src, "type_name", "") if src is not None else ""
        merged.append(
            SourceControllerHeader(
                ch.name,
                fields=ch.fields,
                annotations=ch.annotations,
                explicit_id=ch.explicit_id,
                doc=ch.doc,
                type_name=type_name or getattr(ch, "type_name", "") or "",
            )
        )
    return dataclasses.replace(info, controller_headers=merged)


# ------------------------------------------------------------------------ P4Info


def _annotation_kind(text: str) -> str:
    m = _ANNOT_NAME.match(text.strip())
    return m.group(1) if m else ""


def _is_hidden(obj: Annotated) -> bool:
    return any(_annotation_kind(a) == "hidden" for a in obj.annotations)


def _kept_annotations(annotations: Iterable[str]) -> list[str]:
    return [a for a in annotations if _annotation_kind(a) not in _DROPPED_ANNOTATIONS]


def _controller_header_key(ch: Annotated) -> str:
    # p4c hashes the header *type* name; the P4Info name is the annotation's string.
    return getattr(ch, "type_name", None) or ch.name


def collect_symbols(info: ProgramInfo) -> SymbolTable:
    """A SymbolTable with an ID for every P4Runtime-visible object of ``info``."""
    st = SymbolTable()
    groups: list[tuple[int, Sequence[Annotated]]] = [
        (TABLE, [t for t in info.tables if not _is_hidden(t)]),
        (ACTION, [a for a in info.actions if not _is_hidden(a)]),
        (ACTION_PROFILE, info.action_profiles),
        (COUNTER, info.counters),
        (DIRECT_COUNTER, info.direct_counters),
        (METER, info.meters),
        (DIRECT_METER, info.direct_meters),
        (REGISTER, info.registers),
        (DIGEST, info.digests),
        (VALUE_SET, info.value_sets),
    ]
    for prefix, items in groups:
        for it in items:
            st.add(prefix, control_plane_name(it.name), it.explicit_id)
    for ch in info.controller_headers:
        st.add(CONTROLLER_HEADER, _controller_header_key(ch), ch.explicit_id)
    st.compute_ids()
    return st


def _preamble(pre: p4i.Preamble, st: SymbolTable, prefix: int, obj: Annotated) -> None:
    name = control_plane_name(obj.name)
    pre.id = st.id(prefix, name)
    pre.name = name
    pre.alias = st.alias(name)
    pre.annotations.extend(_kept_annotations(obj.annotations))
    if obj.doc:
        pre.doc.brief = obj.doc


def _bitstring(spec: Any, width: int) -> None:  # p4.config.v1.P4DataTypeSpec
    spec.bitstring.bit.bitwidth = width


def _match_field(mf: p4i.MatchField, index: int, key: KeyInfo) -> None:
    mf.id = key.explicit_id or index + 1
    mf.name = key.name
    mf.bitwidth = key.width
    mf.annotations.extend(_kept_annotations(key.annotations))
    kind = _MATCH_TYPES.get(key.match_kind)
    if kind is None:
        mf.other_match_type = key.match_kind
    else:
        mf.match_type = kind
    if key.type_name:
        mf.type_name.name = key.type_name


def _add_tables(p4info: p4i.P4Info, info: ProgramInfo, st: SymbolTable) -> None:
    direct: dict[str, list[int]] = {}
    for dc in info.direct_counters:
        direct.setdefault(dc.table, []).append(st.id(DIRECT_COUNTER, control_plane_name(dc.name)))
    for dm in info.direct_meters:
        direct.setdefault(dm.table, []).append(st.id(DIRECT_METER, control_plane_name(dm.name)))
    for t in info.tables:
        if _is_hidden(t):
            continue
        pt = p4info.tables.add()
        _preamble(pt.preamble, st, TABLE, t)
        for i, key in enumerate(t.keys):
            _match_field(pt.match_fields.add(), i, key)
        for ref in t.actions:
            ar = pt.action_refs.add()
            ar.id = st.id(ACTION, control_plane_name(ref.action))
            ar.annotations.extend(ref.annotations)
            ar.scope = _SCOPES[ref.scope]
        default_id = st.id(ACTION, control_plane_name(t.default_action))
        if t.default_is_const:
            pt.const_default_action_id = default_id
        _initial_default(
            pt.initial_default_action, default_id, info, t.default_action, t.default_args
        )
        for rid in direct.get(t.name, []):
            pt.direct_resource_ids.append(rid)
        if t.implementation:
            pt.implementation_id = st.id(ACTION_PROFILE, control_plane_name(t.implementation))
        pt.size = t.size
        if t.idle_timeout:
            pt.idle_timeout_behavior = p4i.Table.NOTIFY_CONTROL
        if t.const_entries is not None:
            pt.is_const_table = True
            pt.has_initial_entries = bool(t.const_entries)


def _initial_default(
    out: Any, action_id: int, info: ProgramInfo, action: str, args: Sequence[int]
) -> None:
    # Current p4c writes the initial default action of every table, its arguments
    # padded to the parameter's full width in bytes.
    out.action_id = action_id
    params = info.action(action).params if args else ()
    for i, (p, v) in enumerate(zip(params, args, strict=False)):
        out.arguments.add(
            param_id=p.explicit_id or i + 1, value=int(v).to_bytes((p.width + 7) // 8, "big")
        )


def _add_actions(p4info: p4i.P4Info, info: ProgramInfo, st: SymbolTable) -> None:
    for a in info.actions:
        if _is_hidden(a):
            continue
        pa = p4info.actions.add()
        _preamble(pa.preamble, st, ACTION, a)
        for i, p in enumerate(a.params):
            pp = pa.params.add()
            pp.id = p.explicit_id or i + 1
            pp.name = p.name
            pp.annotations.extend(_kept_annotations(p.annotations))
            pp.bitwidth = p.width
            if p.type_name:
                pp.type_name.name = p.type_name


def _add_action_profiles(p4info: p4i.P4Info, info: ProgramInfo, st: SymbolTable) -> None:
    for ap in info.action_profiles:
        pa = p4info.action_profiles.add()
        _preamble(pa.preamble, st, ACTION_PROFILE, ap)
        for t in ap.tables:
            pa.table_ids.append(st.id(TABLE, control_plane_name(t)))
        pa.with_selector = ap.with_selector
        pa.size = ap.size
        pa.max_group_size = ap.max_group_size


def _add_externs(p4info: p4i.P4Info, info: ProgramInfo, st: SymbolTable) -> None:
    for c in info.counters:
        pc = p4info.counters.add()
        _preamble(pc.preamble, st, COUNTER, c)
        pc.spec.unit = _COUNTER_UNITS[c.unit]
        pc.size = c.size
    for dc in info.direct_counters:
        pdc = p4info.direct_counters.add()
        _preamble(pdc.preamble, st, DIRECT_COUNTER, dc)
        pdc.spec.unit = _COUNTER_UNITS[dc.unit]
        pdc.direct_table_id = st.id(TABLE, control_plane_name(dc.table))
    for m in info.meters:
        pm = p4info.meters.add()
        _preamble(pm.preamble, st, METER, m)
        pm.spec.unit = _METER_UNITS[m.unit]
        pm.size = m.size
    for dm in info.direct_meters:
        pdm = p4info.direct_meters.add()
        _preamble(pdm.preamble, st, DIRECT_METER, dm)
        pdm.spec.unit = _METER_UNITS[dm.unit]
        pdm.direct_table_id = st.id(TABLE, control_plane_name(dm.table))
    for r in info.registers:
        pr = p4info.registers.add()
        _preamble(pr.preamble, st, REGISTER, r)
        _bitstring(pr.type_spec, r.width)
        pr.size = r.size


def _add_digests(p4info: p4i.P4Info, info: ProgramInfo, st: SymbolTable) -> None:
    for d in info.digests:
        pd = p4info.digests.add()
        _preamble(pd.preamble, st, DIGEST, d)
        type_name = control_plane_name(d.name)
        pd.type_spec.struct.name = type_name
        struct = p4info.type_info.structs[type_name]
        for f in d.fields:
            member = struct.members.add()
            member.name = f.name
            _bitstring(member.type_spec, f.width)


def _add_value_sets(p4info: p4i.P4Info, info: ProgramInfo, st: SymbolTable) -> None:
    for vs in info.value_sets:
        pv = p4info.value_sets.add()
        _preamble(pv.preamble, st, VALUE_SET, vs)
        for i, key in enumerate(vs.fields):
            _match_field(pv.match.add(), i, key)
        pv.size = vs.size


def _add_controller_headers(p4info: p4i.P4Info, info: ProgramInfo, st: SymbolTable) -> None:
    for ch in info.controller_headers:
        pc = p4info.controller_packet_metadata.add()
        pc.preamble.id = st.id(CONTROLLER_HEADER, _controller_header_key(ch))
        pc.preamble.name = ch.name
        pc.preamble.alias = ch.name
        annots = _kept_annotations(ch.annotations)
        if not any(_annotation_kind(a) == "controller_header" for a in annots):
            annots.insert(0, f'@controller_header("{ch.name}")')
        pc.preamble.annotations.extend(annots)
        for i, f in enumerate(ch.fields):
            md = pc.metadata.add()
            md.id = i + 1
            md.name = f.name
            md.bitwidth = f.width
            if f.type_name:
                md.type_name.name = f.type_name
    for e in info.serializable_enums:
        pe = p4info.type_info.serializable_enums[e.name]
        pe.underlying_type.bitwidth = e.width
        for member, value in e.members:
            raw = (value & ((1 << e.width) - 1)).to_bytes((e.width + 7) // 8, "big")
            pe.members.add(name=member, value=raw)


def build_p4info(info: ProgramInfo) -> p4i.P4Info:
    """The P4Info message p4c would emit for ``info`` with ``--arch v1model``."""
    st = collect_symbols(info)
    p4info = p4i.P4Info()
    p4info.pkg_info.arch = "v1model"
    _add_tables(p4info, info, st)
    _add_actions(p4info, info, st)
    _add_action_profiles(p4info, info, st)
    _add_externs(p4info, info, st)
    _add_digests(p4info, info, st)
    _add_value_sets(p4info, info, st)
    _add_controller_headers(p4info, info, st)
    p4info.type_info.SetInParent()  # p4c always writes `type_info {}`
    return p4info


def p4info_text(p4info: p4i.P4Info) -> str:
    """Text format with p4c's header comment."""
    from google.protobuf import text_format

    head = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"
    return head + text_format.MessageToString(p4info)


def write_p4info(p4info: p4i.P4Info, path: str | os.PathLike[str], fmt: str = "text") -> None:
    """Write P4Info as protobuf text (``fmt="text"``) or binary wire format (``"binary"``)."""
    if fmt == "text":
        Path(path).write_text(p4info_text(p4info), encoding="utf-8")
    elif fmt == "binary":
        Path(path).write_bytes(p4info.SerializeToString())
    else:
        raise ValueError(f"unknown P4Info format {fmt!r} (expected 'text' or 'binary')")


def read_p4info(path: str | os.PathLike[str]) -> p4i.P4Info:
    """Read a P4Info file in either format (text is tried when the bytes are not binary)."""
    from google.protobuf import text_format

    data = Path(path).read_bytes()
    msg = p4i.P4Info()
    try:
        return text_format.Parse(data.decode("utf-8"), msg)
    except (UnicodeDecodeError, text_format.ParseError):
        msg.ParseFromString(data)
        return msg


# ------------------------------------------------------------ p4_device_config


@dataclass
class SourceBundle:
    """The P4 sources of one program: what p4sim's ``p4_device_config`` carries.

    ``files`` maps paths relative to a common root to their bytes; ``main`` is one of
    them; ``include_dirs`` are relative to the same root.
    """

    main: str
    files: dict[str, bytes]
    include_dirs: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    target: str = "bmv2"  # what the program was checked for (compile_file's target)

    def to_bytes(self) -> bytes:
        """Encode as ``P4SIM1\\n`` + JSON (file contents base64), a stable format.

        >>> SourceBundle("a.p4", {"a.p4": b"x"}).to_bytes()[:7]
        b'P4SIM1\\n'
        """
        files = sorted(self.files.items())
        doc = {
            "main": self.main,
            "files": {p: base64.b64encode(b).decode("ascii") for p, b in files},
            "include_dirs": list(self.include_dirs),
            "defines": dict(self.defines),
        }
        if self.target != "bmv2":
            doc["target"] = self.target
        return DEVICE_CONFIG_MAGIC + json.dumps(doc, sort_keys=True).encode("utf-8")


class DeviceConfigError(Exception):
    """A ``p4_device_config`` blob p4sim cannot use."""


def read_device_config(data: bytes) -> tuple[str, dict[str, bytes], dict]:
    """Decode a device config into ``(main_path, files, options)``; options are
    ``{"include_dirs": [...], "defines": {...}, "target": "bmv2" | "p4sim"}``.

    Bytes without the magic prefix are taken as the text of a single P4 file
    (``main.p4``), so a bare ``.p4`` file also works as a device config.
    """
    if not data:
        raise DeviceConfigError("p4_device_config is empty (expected a p4sim source bundle)")
    if not data.startswith(DEVICE_CONFIG_MAGIC):
        if data.lstrip()[:1] == b"{":
            raise DeviceConfigError(
                "p4_device_config looks like a BMv2 JSON file: p4sim runs it from the P4 "
                "source it names (p4sim.bmv2_json), or push a source bundle (write one with "
                "`p4sim compile PROG.p4 --device-config OUT`)"
            )
        return (
            "main.p4",
            {"main.p4": bytes(data)},
            {
                "include_dirs": [],
                "defines": {},
                "target": "bmv2",
            },
        )
    try:
        doc = json.loads(data[len(DEVICE_CONFIG_MAGIC) :].decode("utf-8"))
        files = {_safe_rel(p): base64.b64decode(b) for p, b in doc["files"].items()}
        main = _safe_rel(doc["main"])
        options = {
            "include_dirs": [_safe_rel(d) for d in doc.get("include_dirs", [])],
            "defines": {str(k): str(v) for k, v in doc.get("defines", {}).items()},
            "target": str(doc.get("target", "bmv2")),
        }
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise DeviceConfigError(f"malformed p4sim device config: {err}") from None
    if main not in files:
        raise DeviceConfigError(f"device config names main file {main!r} but does not hold it")
    return main, files, options


def _safe_rel(p: str) -> str:
    norm = os.path.normpath(str(p))
    if os.path.isabs(norm) or norm.startswith(".."):
        raise DeviceConfigError(f"device config path {p!r} escapes the bundle")
    return norm


def bundle_sources(
    path: str | os.PathLike[str],
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
    target: str = "bmv2",
) -> SourceBundle:
    """Collect the main P4 file and every user file it includes (p4sim's own
    ``core.p4``/``v1model.p4`` are left out: the receiving p4sim has them)."""
    from p4sim.frontend.preprocessor import BUILTIN_INCLUDE_DIR, preprocess

    main = Path(path).resolve()
    src = preprocess(str(path), include_dirs, defines)
    builtin = Path(BUILTIN_INCLUDE_DIR).resolve()
    used = [Path(f).resolve() for f in src.files if Path(f).is_file()]
    used = [f for f in used if builtin not in f.parents]
    if main not in used:
        used.insert(0, main)
    dirs = [Path(d).resolve() for d in include_dirs if Path(d).is_dir()]
    root = Path(os.path.commonpath([str(f.parent) for f in used] + [str(d) for d in dirs]))
    return SourceBundle(
        main=str(main.relative_to(root)),
        files={str(f.relative_to(root)): f.read_bytes() for f in used},
        include_dirs=[str(d.relative_to(root)) for d in dirs],
        defines=dict(defines or {}),
        target=target,
    )


def write_device_config(bundle: SourceBundle, path: str | os.PathLike[str]) -> None:
    """Write the bytes a client sends as ``p4_device_config`` (``FwdPipeConfig``'s file)."""
    Path(path).write_bytes(bundle.to_bytes())


def unpack_device_config(data: bytes, directory: str | os.PathLike[str]) -> tuple[str, dict]:
    """Write a device config's files under ``directory``; ``(main file path, options)``
    with include dirs made absolute, ready for ``Switch.from_file``."""
    main, files, options = read_device_config(data)
    root = Path(directory)
    for rel, content in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(content)
    options = dict(options)
    options["include_dirs"] = [str(root / d) for d in options["include_dirs"]]
    return str(root / main), options


def compile_outputs(
    path: str,
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
    p4info_out: str | None = None,
    fmt: str = "text",
    device_config_out: str | None = None,
    target: str = "bmv2",
) -> p4i.P4Info:
    """``p4sim compile``: load the program (P4Error on mistakes), write its P4Info and/or
    its device config; returns the P4Info."""
    from p4sim.switch import Switch

    sw = Switch.from_file(
        path, include_dirs=tuple(include_dirs), defines=dict(defines or {}), target=target
    )
    p4info = build_p4info(program_info_for_file(sw, path, include_dirs, defines))
    if p4info_out:
        write_p4info(p4info, p4info_out, fmt)
    if device_config_out:
        write_device_config(bundle_sources(path, include_dirs, defines, target), device_config_out)
    return p4info
