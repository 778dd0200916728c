"""The tutorials' ``sN-runtime.json`` for p4sim: the format is ``p4rt_config.runtime_json``
(shared with the controller); this module installs a parsed file into an in-process switch
and keeps the format's names importable from here.

Example::

    apply_to_switch(switch, load_runtime_json("s1-runtime.json"))
"""

from __future__ import annotations

from typing import Any

from p4rt_config.runtime_json import (
    CloneSessionSpec,
    MatchValue,
    MulticastGroupSpec,
    RuntimeConfig,
    RuntimeJsonError,
    TableEntrySpec,
    load_runtime_json,
    parse_runtime_json,
    parse_value,
)

__all__ = [
    "CloneSessionSpec",
    "MatchValue",
    "MulticastGroupSpec",
    "RuntimeConfig",
    "RuntimeJsonError",
    "TableEntrySpec",
    "apply_to_switch",
    "load_runtime_json",
    "parse_runtime_json",
    "parse_value",
]


def apply_to_switch(switch: Any, cfg: RuntimeConfig) -> None:
    """Install ``cfg`` into an in-process :class:`p4sim.switch.Switch`."""
    for e in cfg.table_entries:
        if e.is_default:
            switch.table_set_default(e.table, e.action, e.params)
        else:
            switch.table_add(e.table, e.match, e.action, e.params, priority=e.priority)
    for g in cfg.multicast_groups:
        switch.mc_group_create(g.group_id, g.replicas)
    for c in cfg.clone_sessions:
        switch.clone_session_set(c.session_id, c.replicas)
