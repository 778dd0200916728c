"""The p4lang tutorials' ``sN-runtime.json`` format: table entries, multicast groups and
clone sessions for one switch.

Example::

    config = load_runtime_json("s1-runtime.json")
    for e in config.table_entries:
        print(e.table, e.match, e.action, e.params)

Values may be written as integers, IPv4/IPv6 addresses ("10.0.1.1"), MAC addresses
("08:00:00:00:01:11") or hex strings ("0x0800"). Match forms follow the tutorials: exact
``value``, lpm ``[value, prefix_len]``, ternary ``[value, mask]``, range ``[lo, hi]``.
The same parsed form is used by p4sim (``--runtime-json``, ``p4sim/runtime_json.py``) and by
the controller, which writes it over P4Runtime (``controller/p4rt/runtime_config.py``).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class RuntimeJsonError(ValueError):
    """A runtime JSON file that cannot be used; the message names the file and the entry."""


MatchValue = int | tuple[int, int]


@dataclass(frozen=True)
class TableEntrySpec:
    table: str
    match: dict[str, MatchValue]
    action: str
    params: dict[str, int]
    priority: int | None = None
    is_default: bool = False


@dataclass(frozen=True)
class MulticastGroupSpec:
    group_id: int
    replicas: list[tuple[int, int]]  # (egress_port, instance)


@dataclass(frozen=True)
class CloneSessionSpec:
    session_id: int
    replicas: list[tuple[int, int]]
    class_of_service: int = 0
    packet_length_bytes: int = 0


@dataclass
class RuntimeConfig:
    table_entries: list[TableEntrySpec] = field(default_factory=list)
    multicast_groups: list[MulticastGroupSpec] = field(default_factory=list)
    clone_sessions: list[CloneSessionSpec] = field(default_factory=list)
    p4info: str | None = None
    device_config: str | None = None


def parse_value(v: Any) -> int:
    """An integer from the forms the tutorials use.

    >>> parse_value("10.0.1.1"), parse_value("00:00:00:00:01:02"), parse_value("0x10")
    (167772417, 258, 16)
    """
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if not isinstance(v, str):
        raise ValueError(f"expected a number or an address string, got {v!r}")
    s = v.strip()
    if s.count(":") == 5 and all(len(x) <= 2 for x in s.split(":")):
        return int(s.replace(":", ""), 16)
    try:
        return int(ipaddress.ip_address(s))
    except ValueError:
        pass
    try:
        return int(s, 0)
    except ValueError:
        raise ValueError(f"cannot read {v!r} as an integer, address or MAC") from None


def _match_value(v: Any) -> MatchValue:
    if isinstance(v, list) and len(v) == 1:
        # The tutorials write exact keys as ``[1]`` too (basic_tunnel's ``dst_id``); their
        # helper unwraps a one-element list before encoding it.
        return parse_value(v[0])
    if isinstance(v, list):
        if len(v) != 2:
            raise ValueError(f"a match given as a list must have one or two elements, got {v!r}")
        return (parse_value(v[0]), parse_value(v[1]))
    return parse_value(v)


def _table_entry(raw: dict[str, Any]) -> TableEntrySpec:
    table = raw["table"]
    is_default = bool(raw.get("default_action", False))
    action = raw.get("action_name")
    if not action:
        raise ValueError("missing 'action_name'")
    match = {} if is_default else {k: _match_value(v) for k, v in raw.get("match", {}).items()}
    params = {k: parse_value(v) for k, v in raw.get("action_params", {}).items()}
    prio = raw.get("priority")
    return TableEntrySpec(
        table, match, action, params, None if prio is None else int(prio), is_default
    )


def _replicas(raw: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(r["egress_port"]), int(r.get("instance", 0))) for r in raw.get("replicas", [])]


def parse_runtime_json(data: dict[str, Any], source: str = "<json>") -> RuntimeConfig:
    cfg = RuntimeConfig(p4info=data.get("p4info"), device_config=data.get("bmv2_json"))
    for i, raw in enumerate(data.get("table_entries", [])):
        try:
            cfg.table_entries.append(_table_entry(raw))
        except (KeyError, ValueError, TypeError) as e:
            raise RuntimeJsonError(f"{source}: table_entries[{i}]: {e}") from None
    for i, raw in enumerate(data.get("multicast_group_entries", [])):
        try:
            cfg.multicast_groups.append(
                MulticastGroupSpec(int(raw["multicast_group_id"]), _replicas(raw))
            )
        except (KeyError, ValueError, TypeError) as e:
            raise RuntimeJsonError(f"{source}: multicast_group_entries[{i}]: {e}") from None
    for i, raw in enumerate(data.get("clone_session_entries", [])):
        try:
            cfg.clone_sessions.append(
                CloneSessionSpec(
                    int(raw["clone_session_id"]),
                    _replicas(raw),
                    int(raw.get("class_of_service", 0)),
                    int(raw.get("packet_length_bytes", 0)),
                )
            )
        except (KeyError, ValueError, TypeError) as e:
            raise RuntimeJsonError(f"{source}: clone_session_entries[{i}]: {e}") from None
    return cfg


def load_runtime_json(path: str | Path) -> RuntimeConfig:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise RuntimeJsonError(f"{p}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise RuntimeJsonError(f"{p}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise RuntimeJsonError(f"{p}: expected a JSON object at the top level")
    return parse_runtime_json(data, str(p))
