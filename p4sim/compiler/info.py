"""The control-plane view of a compiled program (``p4sim.program_info.ProgramInfo``).

Example::

    info = compile_file("basic.p4").info
    t = info.table("MyIngress.ipv4_lpm")
    t.annotations          # ('@name("ipv4_lpm")',) as written in the source
    t.explicit_id          # the value of @id(...), or None

Annotations are kept as source-like text so that P4Info generation can copy them.
"""

from __future__ import annotations

from typing import Any, Protocol

from p4sim import program_info as pi
from p4sim.frontend import ast


class CompiledProgram(Protocol):
    """What the control-plane view reads of a compiled program
    (``p4sim.compiler.program.CompiledProgram``, which builds its view with this module)."""

    tables: list[Any]  # TableInfo
    actions: dict[str, Any]  # ActionInfo by name
    externs: list[Any]  # ExternInfo
    value_sets: list[Any]  # ValueSetInfo
    digests: dict[str, list[tuple[str, int]]]
    controller_headers: list[Any]
    main_file: str
    newtypes: set[str]


_SCOPES = {"tableonly": "TABLE_ONLY", "defaultonly": "DEFAULT_ONLY"}


def _expr_src(e: ast.Expr) -> str:
    if isinstance(e, ast.StringLit):
        return '"' + e.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(e, ast.IntLit):
        return e.text or str(e.value)
    if isinstance(e, ast.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Member):
        return f"{_expr_src(e.expr)}.{e.name}"
    return "?"


def annotation_text(a: ast.Annotation) -> str:
    """``@name("x")`` / ``@id(5)`` / ``@hidden`` as text."""
    if a.raw:
        body = a.raw.strip()
        if not body.startswith(("(", "[")):
            body = f"({body})"
        return f"@{a.name}{body}"
    if a.kv:
        return f"@{a.name}[" + ", ".join(f"{k}={_expr_src(v)}" for k, v in a.kv.items()) + "]"
    if a.args:
        return f"@{a.name}(" + ", ".join(_expr_src(x) for x in a.args) + ")"
    return f"@{a.name}"


def _annos(annos: list[ast.Annotation] | None) -> dict[str, Any]:
    annos = annos or []
    explicit = None
    doc = ""
    for a in annos:
        if a.name == "id" and a.args and isinstance(a.args[0], ast.IntLit):
            explicit = a.args[0].value
        elif a.name in ("brief", "description") and a.args and isinstance(a.args[0], ast.StringLit):
            doc = a.args[0].value
    return {
        "annotations": tuple(annotation_text(a) for a in annos),
        "explicit_id": explicit,
        "doc": doc,
    }


def _param_type_name(p: ast.Param, prog: CompiledProgram) -> str | None:
    """P4Info ``type_name`` of a parameter declared with a ``type`` (new type)."""
    t = p.type
    return t.name if isinstance(t, ast.NamedType) and t.name in prog.newtypes else None


def program_info(prog: CompiledProgram) -> pi.ProgramInfo:
    """Build the ProgramInfo of ``prog`` from the compiler's metadata."""
    out = pi.ProgramInfo(source=prog.main_file)
    in_tables = {a for t in prog.tables for a in (*t.actions, t.default_action)}
    for a in _p4c_action_order(prog, in_tables):
        decl = a.decl
        data = [p for p in (decl.params if decl is not None else []) if not p.direction]
        if a.called_directly and a.name not in in_tables:
            # p4c's front end turns every parameter of an action that only ever runs by a
            # direct call into a local variable, so its P4Info lists no parameters
            data = []
        params = []
        for (n, w), p in zip(a.params if data else (), data, strict=False):
            params.append(pi.ParamInfo(n, w, _param_type_name(p, prog), **_annos(p.annotations)))
        out.actions.append(pi.ActionInfo(a.name, params=tuple(params), **_annos(a.annotations)))
    for t in prog.tables:
        out.tables.append(_table(t))
    for e in prog.externs:
        kw = _annos(e.annotations)
        if e.kind == "register":
            out.registers.append(pi.RegisterInfo(e.name, size=e.size, width=e.width, **kw))
        elif e.kind == "counter":
            out.counters.append(pi.CounterInfo(e.name, size=e.size, unit=e.unit, **kw))
        elif e.kind == "meter":
            out.meters.append(pi.MeterInfo(e.name, size=e.size, unit=e.unit, **kw))
        elif e.kind == "direct_counter" and e.table:
            out.direct_counters.append(
                pi.DirectCounterInfo(e.name, table=e.table, unit=e.unit, **kw)
            )
        elif e.kind == "direct_meter" and e.table:
            out.direct_meters.append(pi.DirectMeterInfo(e.name, table=e.table, unit=e.unit, **kw))
        elif e.kind in ("action_profile", "action_selector") and e.tables:
            out.action_profiles.append(_profile(e, kw))
    for name, fields in prog.digests.items():
        out.digests.append(pi.DigestInfo(name, tuple(pi.FieldInfo(n, w) for n, w in fields)))
    for v in prog.value_sets:
        keys = tuple(
            pi.KeyInfo(n, "exact", w) for n, w in zip(v.field_names, v.widths, strict=False)
        )
        out.value_sets.append(
            pi.ValueSetInfo(v.name, size=v.size, fields=keys, **_annos(v.annotations))
        )
    enums: dict[str, pi.SerializableEnumInfo] = {}
    for name, fields, annos, type_name in prog.controller_headers:
        infos = []
        for n, w, enum in fields:
            if enum is not None:  # p4c names the enum and lists it in type_info
                width = enum.underlying.width
                enums[enum.name] = pi.SerializableEnumInfo(enum.name, width, enum.values)
            infos.append(pi.FieldInfo(n, w, enum.name if enum is not None else None))
        out.controller_headers.append(
            pi.ControllerHeaderInfo(name, tuple(infos), type_name=type_name, **_annos(annos))
        )
    out.serializable_enums = list(enums.values())
    return out


def _p4c_action_order(prog: CompiledProgram, in_tables: set[str]) -> list[Any]:
    """The actions P4Info lists, in p4c's order. p4c's mid end inlines every action called
    from another action and drops the actions nothing uses any more (an action listed by
    no table and called by no apply block), and places a copy of each top-level action a
    control uses at the start of that control, in the order of first use; P4Info then
    lists the actions control by control, each name once."""
    used = [a for a in prog.actions.values() if a.name in in_tables or a.called_from_control]
    owners = list(dict.fromkeys(a.owner for a in used))
    return [
        a
        for owner in owners
        for top_level in (True, False)
        for a in used
        if a.owner == owner and a.top_level == top_level
    ]


def _table(t: Any) -> pi.TableInfo:
    refs = tuple(
        pi.ActionRefInfo(
            a,
            _SCOPES.get(t.action_scopes.get(a, ""), "TABLE_AND_DEFAULT"),
            (f"@{t.action_scopes[a]}",) if a in t.action_scopes else (),
        )
        for a in t.actions
    )
    keys = []
    for i, k in enumerate(t.keys):
        annos = t.key_annotations[i] if i < len(t.key_annotations) else []
        keys.append(pi.KeyInfo(k.name, k.match_kind, k.width, **_annos(annos)))
    const = None
    if t.entries_const:
        const = tuple(
            pi.ConstEntryInfo(e.matches, e.action, tuple(e.args), e.priority)
            for e in t.const_entries
        )
    return pi.TableInfo(
        t.name,
        keys=tuple(keys),
        actions=refs,
        size=t.size,
        default_action=t.default_action,
        default_args=tuple(t.default_args),
        default_is_const=t.default_const,
        const_entries=const,
        direct_counter=t.direct_counter,
        direct_meter=t.direct_meter,
        idle_timeout=t.support_timeout,
        implementation=t.implementation,
        **_annos(t.annotations),
    )


def _profile(e: Any, kw: dict[str, Any]) -> pi.ActionProfileInfo:
    mgs = 0
    for text in kw["annotations"]:
        if text.startswith("@max_group_size(") and text.endswith(")"):
            mgs = int(text[len("@max_group_size(") : -1].strip(), 0)
    sel = e.kind == "action_selector"
    return pi.ActionProfileInfo(
        e.name,
        tables=tuple(e.tables),
        size=e.size,
        with_selector=sel,
        max_group_size=mgs,
        algo=e.unit if sel else None,
        **kw,
    )
