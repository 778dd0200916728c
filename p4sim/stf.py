"""STF test runner: p4c's "simple test framework" scripts run against an in-process Switch.

Example::

    cmds = parse_stf(open("t.stf").read(), "t.stf")
    result = run_stf(Switch.from_file("prog.p4"), cmds)
    print(result.report)            # "PASS" or expected-vs-actual packets per port

Format (one command a line, ``#`` starts a comment), as p4c's BMv2 STF runner reads it:

``add <table> [<priority>] <key>:<value> ... <action>(<param>:<value>, ...) [= <name>]``
    values: decimal, ``0x`` hex, ``0b`` binary, ``0o`` octal; ``v&&&m`` ternary; ``v/len``
    lpm; ``lo->hi`` range; ``*`` digits are wildcard digits (ternary mask / lpm prefix);
    a lone ``*`` is a don't-care. A priority, when given, is P4Runtime-like: the higher
    number wins (p4c hands BMv2 ``10000 - priority``, and BMv2 prefers the lower value).
``setdefault <table> <action>(<param>:<value>, ...)``
``packet <port> <hex bytes, spaces allowed>``
``expect <port> [<hex with * wildcard nibbles>][$]``: a trailing ``$`` demands the exact
    length, otherwise a longer packet matches on its prefix; with no data, any number of
    packets may leave on that port. Expectations form one FIFO per port; ports interleave.
``no_packet``, ``wait``: accepted, nothing to do (the switch runs synchronously).
``remove all`` / ``remove <name>``: delete every entry added here / the entry ``= <name>``.
``mc_mgrp_create <gid>``, ``mc_node_create <rid> <port>...``, ``mc_node_associate <gid> <h>``
``mirroring_add <session> <port>``, ``mirroring_add_mc <session> <gid>``
``register_write <reg> <index> <value>``; ``check_register <reg>(<index>) <op> <value>``
``check_counter <counter>(<index>|$<name>) [packets|bytes <op> <value>]`` with ``op`` in
    ``== != < <= > >=``; without a condition both counts must be 0; ``$<name>`` reads the
    direct counter of the entry added with ``= <name>``.
``value_set_add <value_set> <value>[&&&<mask>] ...`` (p4sim extension, not in p4c): add a
    member (one value per field of the set's type) to a parser value_set.

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
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "StfError",
    "StfRunError",
    "Command",
    "MatchValue",
    "TableAdd",
    "SetDefault",
    "PacketIn",
    "Expect",
    "Remove",
    "Nop",
    "McGroupCreate",
    "McNodeCreate",
    "McNodeAssociate",
    "MirroringAdd",
    "MirroringAddMc",
    "RegisterWrite",
    "CheckRegister",
    "CheckCounter",
    "ValueSetAdd",
    "StfResult",
    "parse_stf",
    "parse_value",
    "match_expected",
    "run_stf",
    "run_stf_file",
    "main",
]


class StfRunError(ValueError):
    """A script line the switch cannot carry out (unknown entry name, bad key value ...)."""


class StfError(Exception):
    """A mistake in an STF script, rendered as ``file:line: error: message``."""

    def __init__(self, filename: str, line: int, message: str) -> None:
        super().__init__(f"{filename}:{line}: error: {message}")
        self.filename = filename
        self.line = line
        self.message = message


# ---------------------------------------------------------------------------------------
# Commands


@dataclass(frozen=True)
class Command:
    """Base of every parsed command; ``line`` is 1-based in ``filename``."""

    filename: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.filename}:{self.line}"


@dataclass(frozen=True)
class MatchValue:
    """One key value as written; ``kind`` is how it was spelled.

    int: plain number; ternary: ``v&&&m``; lpm: ``v/len``; range: ``lo->hi``;
    wild: a number with ``*`` digits (``mask`` covers the written digits that are not
    ``*``, ``prefix`` counts the non-``*`` digits' bits, as p4c does); any: a lone ``*``.
    """

    kind: str
    value: int = 0
    mask: int | None = None
    prefix: int | None = None
    hi: int | None = None


@dataclass(frozen=True)
class TableAdd(Command):
    table: str
    priority: int | None
    keys: tuple[tuple[str, MatchValue], ...]
    action: str
    args: tuple[tuple[str, int], ...]
    name: str | None = None


@dataclass(frozen=True)
class SetDefault(Command):
    table: str
    action: str
    args: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PacketIn(Command):
    port: int
    data: bytes


@dataclass(frozen=True)
class Expect(Command):
    """``pattern`` is upper-case hex with ``*`` nibbles; None means "any packets"."""

    port: int
    pattern: str | None
    exact_length: bool = False


@dataclass(frozen=True)
class Remove(Command):
    target: str  # "all" or a name given with "= name" on an add line


@dataclass(frozen=True)
class Nop(Command):
    word: str  # wait, no_packet


@dataclass(frozen=True)
class McGroupCreate(Command):
    group: int


@dataclass(frozen=True)
class McNodeCreate(Command):
    rid: int
    ports: tuple[int, ...]


@dataclass(frozen=True)
class McNodeAssociate(Command):
    group: int
    node: int


@dataclass(frozen=True)
class MirroringAdd(Command):
    session: int
    port: int


@dataclass(frozen=True)
class MirroringAddMc(Command):
    session: int
    group: int


@dataclass(frozen=True)
class RegisterWrite(Command):
    register: str
    index: int
    value: int


@dataclass(frozen=True)
class CheckRegister(Command):
    register: str
    index: int
    op: str
    value: int


@dataclass(frozen=True)
class CheckCounter(Command):
    counter: str
    index: int
    count_type: str | None  # packets | bytes | None (both must be 0)
    op: str
    value: int
    entry: str | None = None  # "$NAME": the direct counter of the entry added "= NAME"


@dataclass(frozen=True)
class ValueSetAdd(Command):
    """p4sim extension: ``value_set_add <name> <value>[&&&<mask>] ...`` (one member)."""

    value_set: str
    values: tuple[int, ...]
    masks: tuple[int, ...] | None


# ---------------------------------------------------------------------------------------
# Parsing

_NAME = r"[A-Za-z_$][A-Za-z0-9_$.\[\]]*"
_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_RADIX = {"0x": (16, 4), "0b": (2, 1), "0o": (8, 3)}


def _int(text: str) -> int:
    """Parse a decimal/0x/0b/0o integer (underscores allowed); ValueError otherwise."""
    t = text.strip().lower().replace("_", "")
    base = _RADIX.get(t[:2], (10, 0))[0]
    digits = t[2:] if base != 10 else t
    if not digits or not re.fullmatch(r"[0-9a-f]+", digits):
        raise ValueError(f"bad number '{text}'")
    return int(digits, base)


def parse_value(text: str) -> MatchValue:
    """Parse one key value: ``10``, ``0x0a******``, ``0x0800&&&0xff00``, ``10/8``, ``1->5``.

    >>> parse_value("0x0a**")
    MatchValue(kind='wild', value=2560, mask=65280, prefix=8, hi=None)
    """
    t = text.strip()
    if t == "*":
        return MatchValue("any")
    if "&&&" in t:
        v, m = t.split("&&&", 1)
        return MatchValue("ternary", _int(v), mask=_int(m))
    if "->" in t:
        lo, hi = t.split("->", 1)
        return MatchValue("range", _int(lo), hi=_int(hi))
    if "/" in t:
        v, p = t.split("/", 1)
        return MatchValue("lpm", _int(v), prefix=_int(p))
    if "*" in t:
        return _wild(t)
    return MatchValue("int", _int(t))


def _wild(text: str) -> MatchValue:
    """A number with ``*`` digits: each ``*`` digit is a wildcard digit."""
    prefix = text[:2].lower()
    if prefix not in _RADIX:
        raise ValueError(f"wildcard digits need a 0x/0b/0o number, got '{text}'")
    base, bits = _RADIX[prefix]
    digits = text[2:].replace("_", "")
    value = mask = known = 0
    for d in digits:
        value <<= bits
        mask <<= bits
        if d == "*":
            continue
        v = int(d, 16)
        if v >= base:
            raise ValueError(f"bad digit '{d}' in '{text}'")
        value |= v
        mask |= (1 << bits) - 1
        known += 1
    return MatchValue("wild", value, mask=mask, prefix=known * bits)


def _split_statement(text: str) -> tuple[str, str]:
    parts = text.split(None, 1)
    return parts[0], (parts[1].strip() if len(parts) > 1 else "")


def _parse_args(text: str, err: Callable[[str], StfError]) -> tuple[tuple[str, int], ...]:
    """``a:1, b:0x2`` → (("a", 1), ("b", 2))."""
    out: list[tuple[str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, val = item.partition(":")
        if not sep or not name.strip():
            raise err(f"action argument '{item}' is not <name>:<value>")
        try:
            out.append((name.strip(), _int(val)))
        except ValueError as e:
            raise err(f"action argument '{name.strip()}': {e}") from None
    return tuple(out)


def _parse_action(text: str, err: Callable[[str], StfError]) -> tuple[str, tuple, str]:
    """``act(a:1) rest`` → ("act", args, "rest")."""
    m = re.match(rf"\s*({_NAME})\s*\(([^)]*)\)\s*(.*)$", text)
    if not m:
        raise err(f"expected <action>(<param>:<value>, ...), got '{text}'")
    return m.group(1), _parse_args(m.group(2), err), m.group(3).strip()


def _key_name(name: str) -> str:
    # p4c lets STF spell stack elements "hdr$0.f" for "hdr[0].f".
    return re.sub(r"\$([0-9]+)", r"[\1]", name)


def _parse_add(rest: str, fn: str, line: int, err: Callable[[str], StfError]) -> TableAdd:
    table, rest = _split_statement(rest) if rest else ("", "")
    if not table:
        raise err("add needs a table name")
    priority = None
    first = rest.split(None, 1)[0] if rest else ""
    if re.fullmatch(r"[0-9]+", first):
        priority = int(first)
        rest = rest[len(first) :].strip()
    keys: list[tuple[str, MatchValue]] = []
    while rest and not re.match(rf"{_NAME}\s*\(", rest):
        word, rest = _split_statement(rest)
        name, sep, val = word.partition(":")
        if not sep or not name or not val:
            raise err(f"table key '{word}' is not <field>:<value>")
        try:
            keys.append((_key_name(name), parse_value(val)))
        except ValueError as e:
            raise err(f"key '{name}': {e}") from None
    action, args, tail = _parse_action(rest, err)
    handle_name = None
    if tail:
        m = re.fullmatch(r"=\s*([A-Za-z_][A-Za-z0-9_]*)", tail)
        if not m:
            raise err(f"unexpected text after the action: '{tail}'")
        handle_name = m.group(1)
    return TableAdd(fn, line, table, priority, tuple(keys), action, args, handle_name)


def _parse_hex(data: str, err: Callable[[str], StfError], wild: bool) -> str:
    hexs = "".join(data.split()).upper()
    allowed = r"[0-9A-F*]*" if wild else r"[0-9A-F]*"
    if not re.fullmatch(allowed, hexs):
        bad = re.sub(r"[0-9A-F*]" if wild else r"[0-9A-F]", "", hexs)[:1]
        raise err(f"packet data has a character that is not a hex digit: '{bad}'")
    return hexs


def _parse_packet(
    rest: str, fn: str, line: int, err: Callable[[str], StfError], p4c_compat: bool = False
) -> PacketIn:
    port_s, data = _split_statement(rest) if rest else ("", "")
    port = _port(port_s, err)
    hexs = _parse_hex(data, err, wild=False)
    if len(hexs) % 2:
        if not p4c_compat:
            raise err(f"packet data has an odd number of hex digits ({len(hexs)})")
        # p4c's runner converts two digits at a time, so a lone last digit X is byte 0X
        hexs = hexs[:-1] + "0" + hexs[-1]
    return PacketIn(fn, line, port, bytes.fromhex(hexs))


def _parse_expect(rest: str, fn: str, line: int, err: Callable[[str], StfError]) -> Expect:
    port_s, data = _split_statement(rest) if rest else ("", "")
    port = _port(port_s, err)
    data = data.strip()
    exact = data.endswith("$")
    if exact:
        data = data[:-1]
    hexs = _parse_hex(data, err, wild=True)
    if not hexs:
        if exact:
            raise err("'$' needs packet data before it")
        return Expect(fn, line, port, None)
    return Expect(fn, line, port, hexs, exact)


def _port(text: str, err: Callable[[str], StfError]) -> int:
    if not re.fullmatch(r"[0-9]+", text):
        raise err(f"expected a port number, got '{text}'")
    return int(text)


def _ints(rest: str, count: int | None, usage: str, err: Callable[[str], StfError]) -> list[int]:
    words = rest.split()
    if (count is not None and len(words) != count) or (count is None and len(words) < 2):
        raise err(f"usage: {usage}")
    try:
        return [_int(w) for w in words]
    except ValueError as e:
        raise err(f"{e}; usage: {usage}") from None


def _parse_check(
    word: str, rest: str, fn: str, line: int, err: Callable[[str], StfError]
) -> Command:
    if word == "check_counter":
        m = re.fullmatch(
            rf"({_NAME})\s*\(\s*(\S+?)\s*\)\s*(?:(packets|bytes)\s*"
            r"(==|!=|<=|>=|<|>)\s*(\S+))?",
            rest,
        )
        if not m:
            raise err("usage: check_counter <counter>(<index>) [packets|bytes <op> <value>]")
        where, entry = m.group(2), None
        if re.fullmatch(r"\$[A-Za-z_][A-Za-z0-9_]*", where):
            where, entry = "0", where[1:]
        try:
            idx, val = _int(where), _int(m.group(5) or "0")
        except ValueError as e:
            raise err(str(e)) from None
        op = m.group(4) or "=="
        return CheckCounter(fn, line, m.group(1), idx, m.group(3), op, val, entry)
    m = re.fullmatch(rf"({_NAME})\s*\(\s*(\S+?)\s*\)\s*(==|!=|<=|>=|<|>)\s*(\S+)", rest)
    if not m:
        raise err("usage: check_register <register>(<index>) <op> <value>")
    try:
        idx, val = _int(m.group(2)), _int(m.group(4))
    except ValueError as e:
        raise err(str(e)) from None
    return CheckRegister(fn, line, m.group(1), idx, m.group(3), val)


def _parse_value_set(rest: str, fn: str, line: int, err: Callable[[str], StfError]) -> ValueSetAdd:
    words = rest.split()
    if len(words) < 2:
        raise err("usage: value_set_add <value_set> <value>[&&&<mask>] ...")
    values, masks = [], []
    for w in words[1:]:
        v, sep, m = w.partition("&&&")
        try:
            values.append(_int(v))
            masks.append(_int(m) if sep else None)
        except ValueError as e:
            raise err(str(e)) from None
    if all(m is None for m in masks):
        return ValueSetAdd(fn, line, words[0], tuple(values), None)
    if any(m is None for m in masks):
        raise err("give a mask for every value of a value_set_add or for none")
    return ValueSetAdd(fn, line, words[0], tuple(values), tuple(m for m in masks if m is not None))


def _parse_line(word: str, rest: str, fn: str, line: int, p4c_compat: bool = False) -> Command:
    def err(msg: str) -> StfError:
        return StfError(fn, line, msg)

    if word == "add":
        return _parse_add(rest, fn, line, err)
    if word == "setdefault":
        table, rest2 = _split_statement(rest) if rest else ("", "")
        action, args, tail = _parse_action(rest2, err)
        if not table or tail:
            raise err("usage: setdefault <table> <action>(<param>:<value>, ...)")
        return SetDefault(fn, line, table, action, args)
    if word == "packet":
        return _parse_packet(rest, fn, line, err, p4c_compat)
    if word == "expect":
        return _parse_expect(rest, fn, line, err)
    if word in ("wait", "no_packet"):
        return Nop(fn, line, word)
    if word == "remove":
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rest):
            raise err("usage: remove all | remove <name given with '= name' on an add>")
        return Remove(fn, line, rest)
    if word == "mc_mgrp_create":
        return McGroupCreate(fn, line, *_ints(rest, 1, "mc_mgrp_create <group>", err))
    if word == "mc_node_create":
        rid, *ports = _ints(rest, None, "mc_node_create <rid> <port> [<port> ...]", err)
        return McNodeCreate(fn, line, rid, tuple(ports))
    if word == "mc_node_associate":
        return McNodeAssociate(fn, line, *_ints(rest, 2, "mc_node_associate <group> <node>", err))
    if word == "mirroring_add":
        return MirroringAdd(fn, line, *_ints(rest, 2, "mirroring_add <session> <port>", err))
    if word == "mirroring_add_mc":
        return MirroringAddMc(fn, line, *_ints(rest, 2, "mirroring_add_mc <session> <group>", err))
    if word == "register_write":
        words = rest.split()
        if len(words) != 3:
            raise err("usage: register_write <register> <index> <value>")
        idx, val = _ints(" ".join(words[1:]), 2, "register_write <register> <index> <value>", err)
        return RegisterWrite(fn, line, words[0], idx, val)
    if word in ("check_counter", "check_register"):
        return _parse_check(word, rest, fn, line, err)
    if word == "value_set_add":
        return _parse_value_set(rest, fn, line, err)
    raise err(f"unknown command '{word}'")


def parse_stf(text: str, filename: str = "<stf>", p4c_compat: bool = False) -> list[Command]:
    """Parse a whole STF script; raises StfError naming the file and line of a bad line.
    ``p4c_compat``: read packet data with an odd number of digits as p4c's runner does."""
    commands: list[Command] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        word, rest = _split_statement(body)
        commands.append(_parse_line(word.lower(), rest, filename, lineno, p4c_compat))
    return commands


# ---------------------------------------------------------------------------------------
# Packet comparison


def match_expected(pattern: str, exact_length: bool, actual: bytes) -> int | None:
    """Return None when ``actual`` matches, else the index of the first bad nibble.

    A too-short packet fails at its end; with ``exact_length`` a longer one fails at the
    first extra nibble, without it the extra bytes are ignored (p4c's rule).

    >>> match_expected("0A*B", False, bytes.fromhex("0a5b77"))   # prefix match
    >>> match_expected("0A*B", True, bytes.fromhex("0a5b77"))
    4
    """
    got = actual.hex().upper()
    for i, ch in enumerate(pattern):
        if i >= len(got):
            return i
        if ch != "*" and ch != got[i]:
            return i
    if exact_length and len(got) > len(pattern):
        return len(pattern)
    return None


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
