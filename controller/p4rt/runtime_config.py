"""Apply a p4lang tutorial ``sN-runtime.json`` to a switch over P4Runtime.

Example::

    cfg = load_runtime_json("topologies/basic/s1-runtime.json")
    async with SwitchConnection(spec, Pipeline.from_files(p4info, device_config)) as sw:
        await apply_runtime_config(sw, cfg)

The file is parsed by ``p4rt_config.runtime_json`` (the same parser p4sim's ``--runtime-json``
uses). Installing is idempotent: entries that already exist are modified, so it is safe to
re-apply the file to a switch that kept its state across a controller restart.
"""

from __future__ import annotations

from typing import Any

from finsy import P4CloneSessionEntry, P4MulticastGroupEntry, P4TableEntry
from finsy.p4schema import P4MatchType

from controller.p4rt.p4runtime_client import (
    SwitchConnection,
    SwitchError,
    default_action,
    table_entry,
)
from p4rt_config.runtime_json import RuntimeConfig, TableEntrySpec


def _match(sw: SwitchConnection, spec: TableEntrySpec) -> dict[str, Any]:
    try:
        fields = sw.schema.tables[spec.table].match_fields
    except (KeyError, ValueError):
        raise SwitchError(f"runtime config: the P4Info has no table {spec.table!r}") from None
    out: dict[str, Any] = {}
    for key, value in spec.match.items():
        try:
            kind = fields[key].match_type
        except (KeyError, ValueError):
            kind = None  # finsy reports the unknown field when encoding
        if kind == P4MatchType.TERNARY and isinstance(value, tuple):
            value = (value[0] & value[1], value[1])  # P4Runtime: masked-off bits must be 0
        out[key] = value
    return out


def table_entries(sw: SwitchConnection, cfg: RuntimeConfig) -> list[P4TableEntry]:
    """The non-default table entries of ``cfg`` as finsy entities."""
    return [
        table_entry(e.table, _match(sw, e), e.action, e.priority or 0, **e.params)
        for e in cfg.table_entries
        if not e.is_default
    ]


async def apply_runtime_config(sw: SwitchConnection, cfg: RuntimeConfig) -> None:
    """Install default actions, table entries, multicast groups and clone sessions."""
    defaults = [
        default_action(e.table, e.action, **e.params) for e in cfg.table_entries if e.is_default
    ]
    if defaults:
        await sw.modify(defaults)
    await sw.upsert(table_entries(sw, cfg))
    await sw.upsert(
        [
            P4MulticastGroupEntry(g.group_id, replicas=tuple(g.replicas))
            for g in cfg.multicast_groups
        ]
    )
    await sw.upsert(
        [
            P4CloneSessionEntry(
                c.session_id,
                replicas=tuple(c.replicas),
                class_of_service=c.class_of_service,
                packet_length_bytes=c.packet_length_bytes,
            )
            for c in cfg.clone_sessions
        ]
    )
