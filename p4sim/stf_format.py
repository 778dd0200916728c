"""The STF script format (p4c's "simple test framework"): its commands, their parsing,
and the matching of an expected packet; ``p4sim.stf`` runs the commands against a switch.

Example::

    cmds = parse_stf("packet 0 0A0B\nexpect 1 0A0B", "t.stf")
    # -> [PacketIn(filename='t.stf', line=1, port=0, data=b'\n\x0b'),
    #     Expect(filename='t.stf', line=2, port=1, pattern='0A0B', exact_length=False)]

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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


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
