"""STF test runner: p4c's "simple test framework" scripts run against an in-process Switch.

Example::

    cmds = parse_stf(open("t.stf").read(), "t.stf")
    result = run_stf(Switch.from_file("prog.p4"), cmds)
    print(result.report)            # "PASS" or expected-vs-actual packets per port

The format: ``p4sim.stf_format``.

Packets are compared after the whole script ran, as p4c does; a port with output but no
``expect`` line fails. ``p4sim stf --p4c-compat`` (``p4c_compat=True``) reads scripts as p4c's
BMv2 runner does: output on a port that no ``packet``/``expect`` line names is ignored (the
runner opens interfaces only for those ports; BMv2 drops what goes anywhere else), and a
lone last hex digit X of packet data is the byte 0X (the runner converts digit pairs).
"""

from __future__ import annotations

import argparse
import operator
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from p4sim.stf_format import (
    CheckCounter,
    CheckRegister,
    Command,
    Expect,
    MatchValue,
    McGroupCreate,
    McNodeAssociate,
    McNodeCreate,
    MirroringAdd,
    MirroringAddMc,
    PacketIn,
    RegisterWrite,
    Remove,
    SetDefault,
    StfError,
    TableAdd,
    ValueSetAdd,
    match_expected,
    parse_stf,
)

_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class StfRunError(ValueError):
    """A script line the switch cannot carry out (unknown entry name, bad key value ...)."""


# ---------------------------------------------------------------------------------------
# Switch adaptation: every call into p4sim.switch goes through this class, so a change in
# the Switch API touches only this place.


@dataclass
class _KeyInfo:
    name: str
    match_kind: str
    width: int


class _Target:
    def __init__(self, switch: Any) -> None:
        self.sw = switch
        self.nodes: dict[int, tuple[int, tuple[int, ...]]] = {}  # handle -> (rid, ports)
        self.groups: dict[int, list[int]] = {}  # gid -> node handles
        self.mirror_mc: dict[int, int] = {}  # session -> gid
        self.handles: dict[str, tuple[str, Any]] = {}  # add "= name" -> (table, handle)
        self.added: list[tuple[str, Any]] = []
        self.members: dict[str, int] = {}  # action profile -> last member id created

    # -- tables ------------------------------------------------------------------------
    def table_keys(self, table: str) -> list[_KeyInfo] | None:
        """The table's key fields (``Switch.table_info``); None for a switch without it."""
        info = getattr(self.sw, "table_info", None)
        if info is None:
            return None
        return [_KeyInfo(k.name, k.match_kind, int(k.width)) for k in info(table).keys]

    def table_add(self, cmd: TableAdd) -> None:
        keys = self.table_keys(cmd.table)
        match = _build_match(cmd, keys)
        profile = self._profile_of(cmd.table)
        if profile:
            # as p4c's bmv2stf.py: on an indirect table, `add` creates a member holding the
            # action and adds an entry pointing at it
            self.members[profile] = self.members.get(profile, 0) + 1
            mid = self.members[profile]
            self.sw.act_prof_create_member(profile, mid, cmd.action, dict(cmd.args))
            handle = self.sw.table_indirect_add(cmd.table, match, member=mid, priority=cmd.priority)
        else:
            handle = self.sw.table_add(
                cmd.table, match, cmd.action, dict(cmd.args), priority=cmd.priority
            )
        self.added.append((cmd.table, handle))
        if cmd.name:
            self.handles[cmd.name] = (cmd.table, handle)

    def _profile_of(self, table: str) -> str | None:
        info = getattr(self.sw, "table_info", None)
        return getattr(info(table), "implementation", None) if info is not None else None

    def remove(self, target: str) -> None:
        if target == "all":
            for table, handle in reversed(self.added):
                self.sw.table_delete(table, handle)
            self.added.clear()
            self.handles.clear()
            return
        if target not in self.handles:
            raise StfRunError(f"no entry was added with '= {target}'")
        table, handle = self.handles.pop(target)
        self.sw.table_delete(table, handle)
        self.added.remove((table, handle))

    # -- replication -------------------------------------------------------------------
    def _replicas(self, gid: int) -> list[tuple[int, int]]:
        return [(p, rid) for h in self.groups[gid] for rid, ports in [self.nodes[h]] for p in ports]

    def _push_group(self, gid: int) -> None:
        # BMv2's node model is emulated here and pushed as a flat replica list, so only
        # Switch.mc_group_create (create or replace) is needed.
        self.sw.mc_group_create(gid, self._replicas(gid))
        for sid, g in self.mirror_mc.items():
            if g == gid:
                self.sw.clone_session_set(sid, self._replicas(gid))

    def mc_group_create(self, gid: int) -> None:
        if gid in self.groups:
            raise StfRunError(f"multicast group {gid} already exists")
        self.groups[gid] = []
        self._push_group(gid)

    def mc_node_create(self, rid: int, ports: tuple[int, ...]) -> int:
        handle = len(self.nodes)  # BMv2 hands out node handles 0, 1, 2, ...
        self.nodes[handle] = (rid, ports)
        return handle

    def mc_node_associate(self, gid: int, node: int) -> None:
        if gid not in self.groups:
            raise StfRunError(f"multicast group {gid} was not created (mc_mgrp_create)")
        if node not in self.nodes:
            raise StfRunError(f"multicast node handle {node} was not created (mc_node_create)")
        self.groups[gid].append(node)
        self._push_group(gid)

    def mirroring_add(self, sid: int, port: int) -> None:
        self.mirror_mc.pop(sid, None)
        self.sw.clone_session_set(sid, [(port, 0)])

    def mirroring_add_mc(self, sid: int, gid: int) -> None:
        if gid not in self.groups:
            raise StfRunError(f"multicast group {gid} was not created (mc_mgrp_create)")
        self.mirror_mc[sid] = gid
        self.sw.clone_session_set(sid, self._replicas(gid))

    # -- state -------------------------------------------------------------------------
    def register_write(self, reg: str, idx: int, val: int) -> None:
        self.sw.register_write(reg, idx, val)

    def register_read(self, reg: str, idx: int) -> int:
        return int(self.sw.register_read(reg, idx))

    def counter_read(self, name: str, idx: int) -> tuple[int, int]:
        packets, nbytes = self.sw.counter_read(name, idx)
        return int(packets), int(nbytes)

    def send(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        return [(int(p), bytes(d)) for p, d in self.sw.send(port, data)]


def _resolve_key(name: str, keys: list[_KeyInfo]) -> _KeyInfo:
    for k in keys:
        if k.name == name:
            return k
    hits = [k for k in keys if k.name.endswith("." + name)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        known = ", ".join(k.name for k in keys) or "none"
        raise StfRunError(f"table has no key field '{name}' (key fields: {known})")
    raise StfRunError(f"key field '{name}' is ambiguous: {', '.join(k.name for k in hits)}")


def _full(width: int) -> int:
    return (1 << width) - 1


def _convert(mv: MatchValue, key: _KeyInfo | None) -> Any:
    """STF spelling → the Switch's match value for a key of ``key.match_kind``."""
    kind = key.match_kind if key else None
    width = key.width if key else 0
    if mv.kind == "any":
        if kind == "optional" or kind is None:
            return None
        if kind in ("ternary", "lpm"):
            return (0, 0)
        if kind == "range":
            return (0, _full(width))
        raise StfRunError("'*' cannot match an exact key")
    if mv.kind == "int":
        if kind == "range":
            return (mv.value, mv.value)
        return mv.value
    if mv.kind == "ternary" and kind in (None, "ternary"):
        return (mv.value, mv.mask)
    if mv.kind == "lpm" and kind in (None, "lpm"):
        return (mv.value, mv.prefix)
    if mv.kind == "lpm" and kind == "ternary" and width:
        return (mv.value, _full(width) ^ _full(width - (mv.prefix or 0)))
    if mv.kind == "range" and kind in (None, "range"):
        return (mv.value, mv.hi)
    if mv.kind == "wild" and kind in (None, "ternary"):
        return (mv.value, mv.mask)
    if mv.kind == "wild" and kind == "lpm":
        # Trailing '*' digits are the wildcard part; with the key width known the prefix
        # is what is left (p4c counts written digits, which agrees when they fill the key).
        if width and mv.mask:
            trailing = (mv.mask & -mv.mask).bit_length() - 1
            return (mv.value, width - trailing)
        return (mv.value, 0 if not mv.mask else mv.prefix)
    raise StfRunError(f"a {mv.kind} value cannot match a {kind} key")


def _build_match(cmd: TableAdd, keys: list[_KeyInfo] | None) -> dict[str, Any]:
    if keys is None:
        return {name: _convert(mv, None) for name, mv in cmd.keys}
    match: dict[str, Any] = {}
    given = {}
    for name, mv in cmd.keys:
        k = _resolve_key(name, keys)
        given[k.name] = _convert(mv, k)
    for k in keys:
        if k.name in given:
            match[k.name] = given[k.name]
        elif k.match_kind != "exact":
            # p4c fills a key missing from the line with a don't-care (exact: 0).
            match[k.name] = _convert(MatchValue("any"), k)
        else:
            match[k.name] = 0
    return match


# ---------------------------------------------------------------------------------------
# Running


@dataclass
class StfResult:
    """Outcome of one script: ``passed`` and a human-readable ``report``."""

    passed: bool
    errors: list[str] = field(default_factory=list)
    outputs: dict[int, list[bytes]] = field(default_factory=dict)

    @property
    def report(self) -> str:
        return "PASS" if self.passed else "\n".join(self.errors)


def _check(op: str, actual: int, want: int) -> bool:
    return _OPS[op](actual, want)


def _apply(
    target: _Target, cmd: Command, outputs: dict[int, list[bytes]], errors: list[str]
) -> None:
    if isinstance(cmd, TableAdd):
        target.table_add(cmd)
    elif isinstance(cmd, SetDefault):
        target.sw.table_set_default(cmd.table, cmd.action, dict(cmd.args))
    elif isinstance(cmd, PacketIn):
        for port, data in target.send(cmd.port, cmd.data):
            outputs.setdefault(port, []).append(data)
    elif isinstance(cmd, Remove):
        target.remove(cmd.target)
    elif isinstance(cmd, McGroupCreate):
        target.mc_group_create(cmd.group)
    elif isinstance(cmd, McNodeCreate):
        target.mc_node_create(cmd.rid, cmd.ports)
    elif isinstance(cmd, McNodeAssociate):
        target.mc_node_associate(cmd.group, cmd.node)
    elif isinstance(cmd, MirroringAdd):
        target.mirroring_add(cmd.session, cmd.port)
    elif isinstance(cmd, MirroringAddMc):
        target.mirroring_add_mc(cmd.session, cmd.group)
    elif isinstance(cmd, RegisterWrite):
        target.register_write(cmd.register, cmd.index, cmd.value)
    elif isinstance(cmd, CheckRegister):
        got = target.register_read(cmd.register, cmd.index)
        if not _check(cmd.op, got, cmd.value):
            errors.append(
                f"{cmd.where}: {cmd.register}[{cmd.index}] is {got} "
                f"(0x{got:x}), expected {cmd.op} {cmd.value}"
            )
    elif isinstance(cmd, CheckCounter):
        _check_counter(target, cmd, errors)
    elif isinstance(cmd, ValueSetAdd):
        target.sw.value_set_add(
            cmd.value_set, list(cmd.values), list(cmd.masks) if cmd.masks else None
        )


def _check_counter(target: _Target, cmd: CheckCounter, errors: list[str]) -> None:
    index = cmd.index
    if cmd.entry is not None:
        if cmd.entry not in target.handles:
            raise StfRunError(f"no entry was added with '= {cmd.entry}'")
        index = target.handles[cmd.entry][1]
    packets, nbytes = target.counter_read(cmd.counter, index)
    wanted = {"packets": packets, "bytes": nbytes}
    kinds = [cmd.count_type] if cmd.count_type else ["packets", "bytes"]
    for kind in kinds:
        if not _check(cmd.op, wanted[kind], cmd.value):
            errors.append(
                f"{cmd.where}: {cmd.counter}[{cmd.index}] {kind} is "
                f"{wanted[kind]}, expected {cmd.op} {cmd.value}"
            )


def _compare(
    expects: list[Expect], outputs: dict[int, list[bytes]], watched: set[int] | None = None
) -> list[str]:
    """Per-port FIFO comparison of all expectations against all output packets.

    Only ports in ``watched`` (the ports the script's packet/expect lines name) are
    compared when it is given; output elsewhere has no interface to leave by.
    """
    errors: list[str] = []
    by_port: dict[int, list[Expect]] = {}
    any_ports: set[int] = set()
    for e in expects:
        if e.pattern is None:
            any_ports.add(e.port)
        else:
            by_port.setdefault(e.port, []).append(e)
    out_ports = set(outputs) if watched is None else set(outputs) & watched
    for port in sorted(set(by_port) | out_ports):
        if port in any_ports and port not in by_port:
            continue
        errors.extend(_compare_port(port, by_port.get(port, []), outputs.get(port, [])))
    return errors


def _compare_port(port: int, exp: list[Expect], got: list[bytes]) -> list[str]:
    lines: list[str] = []
    first_bad: tuple[int, int | None] | None = None
    for i in range(max(len(exp), len(got))):
        if i < len(exp) and i < len(got):
            bad = match_expected(exp[i].pattern or "", exp[i].exact_length, got[i])
            if bad is not None and first_bad is None:
                first_bad = (i, bad)
    if first_bad is None and len(exp) == len(got):
        return []
    head = f"port {port}: expected {len(exp)} packet(s), got {len(got)}"
    if first_bad is not None:
        head += f"; packet #{first_bad[0] + 1} differs at nibble {first_bad[1]}"
    lines.append(head)
    for i in range(max(len(exp), len(got))):
        e = exp[i] if i < len(exp) else None
        g = got[i].hex().upper() if i < len(got) else None
        bad = None
        if e is not None and g is not None:
            bad = match_expected(e.pattern or "", e.exact_length, got[i])
        if e is not None:
            tail = "$" if e.exact_length else ""
            lines.append(f"  #{i + 1} expected ({e.where}):")
            lines.append(f"      {e.pattern}{tail}")
        else:
            lines.append(f"  #{i + 1} expected: (nothing)")
        if g is not None:
            lines.append(f"  #{i + 1} actual:")
            lines.append(f"      {g}")
            if bad is not None:
                lines.append("      " + " " * bad + f"^ first difference (nibble {bad})")
        else:
            lines.append(f"  #{i + 1} actual:   (nothing)")
    return lines


def _short_traceback(exc: BaseException, frames: int = 4) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-frames)
    return "  " + "".join(tb).rstrip().replace("\n", "\n  ")


def run_stf(switch: Any, commands: Sequence[Command], p4c_compat: bool = False) -> StfResult:
    """Run ``commands`` on ``switch`` (a p4sim Switch) and compare the packets sent out.

    A control-plane command that the switch rejects stops the run and is reported with its
    file:line, as is any packet-processing error. ``p4c_compat``: ignore output on ports
    that no packet/expect line names (p4c's runner has no interface there).
    """
    target = _Target(switch)
    outputs: dict[int, list[bytes]] = {}
    errors: list[str] = []
    expects: list[Expect] = []
    for cmd in commands:
        if isinstance(cmd, Expect):
            expects.append(cmd)
            continue
        try:
            _apply(target, cmd, outputs, errors)
        except (ValueError, LookupError) as e:
            # a control-plane mistake (SwitchError is a ValueError): the message says it
            msg = e.args[0] if isinstance(e, KeyError) and e.args else e
            errors.append(f"{cmd.where}: error: {msg}")
            return StfResult(False, errors, outputs)
        except Exception as e:  # noqa: BLE001 - most likely a simulator bug: show where
            errors.append(f"{cmd.where}: error: {type(e).__name__}: {e}")
            errors.append(_short_traceback(e))
            return StfResult(False, errors, outputs)
    watched = None
    if p4c_compat:
        watched = {c.port for c in commands if isinstance(c, (PacketIn, Expect))}
    errors.extend(_compare(expects, outputs, watched))
    return StfResult(not errors, errors, outputs)


def run_stf_file(
    p4_path: str,
    stf_path: str,
    include_dirs: Sequence[str] = (),
    p4c_compat: bool = False,
    target: str = "bmv2",
    backend: str = "python",
) -> StfResult:
    """Load ``p4_path`` into a fresh Switch on ``backend`` and run the script in
    ``stf_path``."""
    with open(stf_path, encoding="utf-8") as f:
        commands = parse_stf(f.read(), stf_path, p4c_compat)
    from p4sim.switch import Switch  # late import: parsing STF needs no compiler

    switch = Switch.from_file(
        p4_path, include_dirs=tuple(include_dirs), target=target, backend=backend
    )
    return run_stf(switch, commands, p4c_compat)


def main(argv: Sequence[str] | None = None) -> int:
    """``p4sim stf PROG.p4 TEST.stf [-I DIR]``: 0 = every expectation met, 1 = a failure,
    2 = the program or script could not be loaded."""
    ap = argparse.ArgumentParser(prog="p4sim stf", description="Run an STF test script.")
    ap.add_argument("program", help="P4_16 program (v1model)")
    ap.add_argument("stf", help="STF test script")
    ap.add_argument(
        "-I",
        dest="include",
        action="append",
        default=[],
        metavar="DIR",
        help="extra #include directory (repeatable)",
    )
    ap.add_argument(
        "--p4c-compat",
        action="store_true",
        help="read the script as p4c's BMv2 runner does: ignore output on ports no "
        "packet/expect line names; a lone last hex digit X of packet data is byte 0X",
    )
    from p4sim.compiler.bmv2_target import add_target_flag

    add_target_flag(ap)
    ap.add_argument(
        "--backend",
        choices=("native", "python"),
        default=os.environ.get("P4SIM_BACKEND") or "native",
        help="the packet path to test, as the switch's --backend: native (C; a program it "
        "does not cover runs on python with a one-line notice) or python; default "
        "$P4SIM_BACKEND or native",
    )
    args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        result = run_stf_file(
            args.program,
            args.stf,
            args.include,
            args.p4c_compat,
            target=args.target,
            backend=args.backend,
        )
    except StfError as e:
        print(e, file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - P4Error and friends: print, no traceback
        if type(e).__name__ not in ("P4Error", "P4ErrorList"):
            raise
        render = getattr(e, "render", None)
        print(render() if callable(render) else e, file=sys.stderr)
        return 2
    print(result.report)
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
