"""Switch: the in-process API of p4sim (load a program, fill tables, send packets).

Example::

    sw = Switch.from_file("basic.p4")
    sw.table_add("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000001, 32)},
                 "MyIngress.ipv4_forward", {"dstAddr": 0x000000000111, "port": 1})
    sw.send(port=0, data=pkt)          # -> [(1, b"...")]

Names of tables, actions and externs are fully qualified (``MyIngress.ipv4_lpm``) or any
unambiguous dotted suffix (``ipv4_lpm``). Errors a controller can make raise
``SwitchError`` (a ``ValueError``) with a message that says what is wrong.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from p4sim.compiler import compile_file, compile_text
from p4sim.compiler.program import ActionInfo, CompiledProgram, TableInfo, ValueSet
from p4sim.compiler.rt import Ctx
from p4sim.runtime.action_profiles import GROUP, MEMBER, ActionProfile
from p4sim.runtime.externs import ExternError
from p4sim.runtime.pre import PacketReplicationEngine, PREError
from p4sim.runtime.tables import Entry, Table, TableError
from p4sim.v1model.pipeline import Pipeline
from p4sim.v1model.traffic_manager import QueueConfigError, TrafficManager

Matches = Mapping[str, Any] | Sequence[Any]
Params = Mapping[str, int] | Sequence[int]


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """Run ``method`` under the switch lock: packets and control-plane calls may come
    from different threads (port loop, P4Runtime server)."""

    @functools.wraps(method)
    def wrapper(self: Switch, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class SwitchError(ValueError):
    """A control-plane mistake: unknown name, bad entry, bad index ..."""


BACKENDS = ("python", "native")
_log = logging.getLogger("p4sim.switch")


def _load_native(program: CompiledProgram, tm: TrafficManager | None) -> Any:
    """The compiled native program, or a one-line notice saying why the switch runs on
    the Python back end instead."""
    from p4sim.native.backend import Native, NativeError

    if tm is not None and tm.active:
        return "p4sim: egress queue rates need the Python back end; running on Python"
    try:
        return Native(program)
    except NativeError as exc:
        return f"p4sim: native back end unavailable ({exc}); running on the Python back end"


def _resolve(name: str, names: Sequence[str], what: str) -> str:
    if name in names:
        return name
    cands = [n for n in names if n.endswith("." + name)]
    if len(cands) == 1:
        return cands[0]
    if not cands:
        known = ", ".join(sorted(names)) or "none"
        raise SwitchError(f"unknown {what} '{name}' (known: {known})")
    raise SwitchError(f"ambiguous {what} '{name}': {', '.join(sorted(cands))}")


def _int(v: Any, what: str) -> int:
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(v, "big")
    if isinstance(v, bool) or not isinstance(v, int):
        raise SwitchError(f"{what}: expected an int, got {v!r}")
    return v


class Switch:
    """One p4sim switch running a compiled v1model program."""

    def __init__(
        self,
        program: CompiledProgram,
        log: Callable[[str], None] | None = None,
        max_passes: int = 32,
        tm: TrafficManager | None = None,
        backend: str = "python",
    ) -> None:
        if backend not in BACKENDS:
            raise SwitchError(
                f"unknown back end {backend!r} (expected one of {', '.join(BACKENDS)})"
            )
        self.program = program
        self.log = log
        self.lock = threading.RLock()
        self.ctx = Ctx()
        self.ctx.log = log
        self.digests: list[tuple[str, tuple]] = self.ctx.digests
        self.pre = PacketReplicationEngine()
        self.inst = program.instantiate(self.ctx, log)
        self.backend = "python"
        self.backend_notice = ""
        native = None
        if backend == "native":
            native = _load_native(program, tm)
            if isinstance(native, str):
                self.backend_notice = native
                _log.warning("%s", native)
                native = None
        if native is not None:
            from p4sim.native.backend import NativePipeline

            self.pipeline: Pipeline = NativePipeline(
                native, self.inst, self.pre, self.ctx, log, max_passes, tm
            )
            self.backend = "native"
        else:
            self.pipeline = Pipeline(self.inst, self.pre, self.ctx, log, max_passes, tm)
        self.tm = self.pipeline.tm
        self._tables = {t.name: t for t in program.tables}

    # -- construction -------------------------------------------------------------

    @classmethod
    def from_file(
        cls,
        path: str,
        include_dirs: Sequence[str] = (),
        defines: Mapping[str, str] | None = None,
        log: Callable[[str], None] | None = None,
        tm: TrafficManager | None = None,
        backend: str = "python",
        target: str = "bmv2",
    ) -> Switch:
        """Compile ``path`` (P4Error on a bad program) and build a switch running it on
        ``backend`` ("python", or "native": C, see p4sim/native/backend.py). ``target``
        "bmv2" refuses what BMv2 cannot run; "p4sim" takes all that p4sim runs."""
        prog = compile_file(path, include_dirs, defines, trace=log is not None, target=target)
        return cls(prog, log, tm=tm, backend=backend)

    @classmethod
    def from_source(
        cls,
        text: str,
        filename: str = "<string>",
        include_dirs: Sequence[str] = (),
        defines: Mapping[str, str] | None = None,
        log: Callable[[str], None] | None = None,
        tm: TrafficManager | None = None,
        backend: str = "python",
        target: str = "bmv2",
    ) -> Switch:
        prog = compile_text(
            text, filename, include_dirs, defines, trace=log is not None, target=target
        )
        return cls(prog, log, tm=tm, backend=backend)

    # -- packets ------------------------------------------------------------------

    @_locked
    def send(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Process one packet arriving on ``port``; returns every packet sent out."""
        return self.pipeline.process(port, data)

    @_locked
    def release(self) -> list[tuple[int, bytes]]:
        """Packets whose departure time from an egress queue has come (after egress);
        only ports with a queue rate hold packets back."""
        return self.pipeline.release()

    def next_departure_us(self) -> int | None:
        """Switch-clock microseconds (``pipeline.now_us()``) of the next queued departure."""
        return self.pipeline.next_departure_us()

    # -- egress queues (simple_switch_CLI set_queue_rate / set_queue_depth) ------------

    @_locked
    def set_queue_rate(
        self, rate_pps: float, port: int | None = None, priority: int | None = None
    ) -> None:
        """Departures per second of a port's queue (all ports when None; one priority
        queue with ``priority``); 0 removes the limit, which is the default."""
        if self.backend == "native" and rate_pps:
            raise SwitchError("egress queue rates need the Python back end (--backend python)")
        try:
            self.tm.set_rate(rate_pps, port, priority)
        except QueueConfigError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def set_queue_depth(
        self, depth: int, port: int | None = None, priority: int | None = None
    ) -> None:
        """Capacity of a port's queue in packets (64 by default); a full queue drops."""
        try:
            self.tm.set_depth(depth, port, priority)
        except QueueConfigError as exc:
            raise SwitchError(str(exc)) from None

    # -- introspection --------------------------------------------------------------

    @property
    def info(self) -> Any:
        """Control-plane view of the program (``p4sim.program_info.ProgramInfo``)."""
        return self.program.info

    def tables(self) -> list[TableInfo]:
        return list(self.program.tables)

    def table_info(self, name: str) -> TableInfo:
        return self._tables[_resolve(name, list(self._tables), "table")]

    def actions(self) -> dict[str, ActionInfo]:
        return dict(self.program.actions)

    def action_info(self, name: str) -> ActionInfo:
        return self.program.actions[_resolve(name, list(self.program.actions), "action")]

    def externs(self) -> list:
        return list(self.program.externs)

    def table(self, name: str) -> Table:
        """The runtime Table object (entries, lookup) of ``name``."""
        return self.inst.tables[self.table_info(name).name]

    # -- tables -------------------------------------------------------------------

    def _action(self, info: TableInfo, action: str) -> ActionInfo:
        fq = _resolve(action, info.actions, f"action of table {info.name}")
        return self.program.actions[fq]

    def _params(self, a: ActionInfo, params: Params | None) -> tuple[int, ...]:
        params = params if params is not None else {}
        names = [n for n, _ in a.params]
        if isinstance(params, Mapping):
            extra = set(params) - set(names)
            if extra:
                raise SwitchError(
                    f"action {a.name} has no parameter(s) {sorted(extra)}; it takes {names}"
                )
            missing = [n for n in names if n not in params]
            if missing:
                raise SwitchError(f"action {a.name}: missing parameter(s) {missing}")
            vals = [params[n] for n in names]
        else:
            vals = list(params)
            if len(vals) != len(names):
                raise SwitchError(
                    f"action {a.name} takes {len(names)} parameter(s) {names}, got {len(vals)}"
                )
        out = []
        for (n, w), v in zip(a.params, vals, strict=False):
            iv = _int(v, f"action {a.name} parameter {n}")
            if w and not 0 <= iv < (1 << w):
                raise SwitchError(
                    f"action {a.name}: value {iv:#x} of parameter {n} does not fit in {w} bits"
                )
            out.append(iv)
        return tuple(out)

    def _matches(self, info: TableInfo, matches: Matches) -> tuple:
        keys = info.keys
        if isinstance(matches, Mapping):
            by_name: dict[str, Any] = {}
            for k, v in matches.items():
                fq = _resolve(k, [kf.name for kf in keys], f"key of table {info.name}")
                by_name[fq] = v
            out = []
            for kf in keys:
                if kf.name in by_name:
                    out.append(by_name[kf.name])
                elif kf.match_kind in ("ternary", "optional", "lpm", "range"):
                    out.append(
                        {
                            "ternary": (0, 0),
                            "optional": None,
                            "lpm": (0, 0),
                            "range": (0, (1 << kf.width) - 1),
                        }[kf.match_kind]
                    )
                else:
                    raise SwitchError(f"table {info.name}: missing exact key {kf.name}")
            return tuple(out)
        vals = tuple(matches)
        if len(vals) != len(keys):
            raise SwitchError(f"table {info.name} has {len(keys)} key(s), got {len(vals)}")
        return vals

    @_locked
    def table_add(
        self,
        table: str,
        matches: Matches,
        action: str,
        params: Params | None = None,
        priority: int | None = None,
        canonicalize: bool = False,
    ) -> int:
        """Add an entry; returns its handle. Match values as in ``tables.Entry``;
        ``canonicalize`` clears value bits outside masks/prefixes (BMv2 CLI) instead of
        rejecting them (P4Runtime)."""
        info = self.table_info(table)
        if info.implementation:
            raise SwitchError(
                f"table {info.name} uses action profile {info.implementation}: add entries "
                "with table_indirect_add(table, matches, member=... or group=...)"
            )
        a = self._action(info, action)
        if info.action_scopes.get(a.name) == "defaultonly":
            raise SwitchError(f"action {a.name} is @defaultonly in table {info.name}")
        entry = Entry(self._matches(info, matches), a.name, self._params(a, params), priority or 0)
        try:
            return self.table(info.name).add(entry, canonicalize=canonicalize)
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def table_modify(
        self, table: str, handle: int, action: str, params: Params | None = None
    ) -> None:
        info = self.table_info(table)
        if info.implementation:
            raise SwitchError(f"table {info.name} is indirect: use table_indirect_modify")
        a = self._action(info, action)
        try:
            self.table(info.name).modify(handle, a.name, self._params(a, params))
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def table_delete(self, table: str, handle: int) -> None:
        try:
            t = self.table(table)
            info = self.table_info(table)
            if info.implementation:
                e = self._entry(t, handle)
                t.delete(handle)
                self._profile(info).ref(e.action, e.args[0], -1)
            else:
                t.delete(handle)
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def table_clear(self, table: str) -> None:
        try:
            t = self.table(table)
            info = self.table_info(table)
            old = t.entries() if info.implementation else []
            t.clear()
            for e in old:
                self._profile(info).ref(e.action, e.args[0], -1)
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    # -- action profiles / selectors (indirect tables) ---------------------------------

    def action_profile(self, name: str) -> ActionProfile:
        """The runtime ActionProfile of an action_profile/action_selector instance."""
        return self._extern(name, ("action_profile", "action_selector"))

    def _profile(self, info: TableInfo) -> ActionProfile:
        if not info.implementation:
            raise SwitchError(f"table {info.name} has no action profile")
        return self.inst.externs[info.implementation]

    def _profile_action(self, profile: str, action: str) -> ActionInfo:
        ap = self.action_profile(profile)
        ei = next(e for e in self.program.externs if e.name == ap.name)
        if not ei.tables:
            raise SwitchError(f"action profile {ap.name} is not used by any table")
        info = self.table_info(ei.tables[0])
        a = self._action(info, action)
        if info.action_scopes.get(a.name) == "defaultonly":
            raise SwitchError(f"action {a.name} is @defaultonly in table {info.name}")
        return a

    @staticmethod
    def _entry(t: Table, handle: int) -> Entry:
        try:
            return t.get(handle)
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def act_prof_create_member(
        self, profile: str, member_id: int, action: str, params: Params | None = None
    ) -> None:
        """Add member ``member_id`` (action + data) to an action profile/selector."""
        a = self._profile_action(profile, action)
        try:
            self.action_profile(profile).add_member(member_id, a.name, self._params(a, params))
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def act_prof_modify_member(
        self, profile: str, member_id: int, action: str, params: Params | None = None
    ) -> None:
        a = self._profile_action(profile, action)
        try:
            self.action_profile(profile).modify_member(member_id, a.name, self._params(a, params))
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def act_prof_delete_member(self, profile: str, member_id: int) -> None:
        """SwitchError while a table entry or a group still uses the member."""
        self._ap_call(profile, "delete_member", member_id)

    @_locked
    def act_prof_create_group(
        self, profile: str, group_id: int, members: Sequence[int] = (), max_size: int = 0
    ) -> None:
        self._ap_call(profile, "add_group", group_id, list(members), max_size)

    @_locked
    def act_prof_set_group_members(
        self, profile: str, group_id: int, members: Sequence[int]
    ) -> None:
        """Replace the members of a selector group."""
        self._ap_call(profile, "set_group_members", group_id, list(members))

    @_locked
    def act_prof_add_member_to_group(self, profile: str, member_id: int, group_id: int) -> None:
        self._ap_call(profile, "group_add_member", group_id, member_id)

    @_locked
    def act_prof_remove_member_from_group(
        self, profile: str, member_id: int, group_id: int
    ) -> None:
        self._ap_call(profile, "group_remove_member", group_id, member_id)

    @_locked
    def act_prof_delete_group(self, profile: str, group_id: int) -> None:
        """SwitchError while a table entry still uses the group."""
        self._ap_call(profile, "delete_group", group_id)

    def _ap_call(self, profile: str, method: str, *args: Any) -> Any:
        try:
            return getattr(self.action_profile(profile), method)(*args)
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @staticmethod
    def _ref(member: int | None, group: int | None) -> tuple[str, int]:
        if (member is None) == (group is None):
            raise SwitchError("an indirect table entry needs exactly one of member= or group=")
        return (MEMBER, int(member)) if member is not None else (GROUP, int(group))  # type: ignore

    @_locked
    def table_indirect_add(
        self,
        table: str,
        matches: Matches,
        member: int | None = None,
        group: int | None = None,
        priority: int | None = None,
    ) -> int:
        """Add an entry of an indirect table pointing at a member or (selector) group."""
        info = self.table_info(table)
        ap = self._profile(info)
        kind, rid = self._ref(member, group)
        entry = Entry(self._matches(info, matches), kind, (rid,), priority or 0)
        try:
            ap.ref(kind, rid)
            try:
                return self.table(info.name).add(entry)
            except TableError:
                ap.ref(kind, rid, -1)
                raise
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def table_indirect_modify(
        self, table: str, handle: int, member: int | None = None, group: int | None = None
    ) -> None:
        info = self.table_info(table)
        ap = self._profile(info)
        kind, rid = self._ref(member, group)
        t = self.table(info.name)
        try:
            e = self._entry(t, handle)
            ap.ref(kind, rid)
            ap.ref(e.action, e.args[0], -1)
            t.modify(handle, kind, (rid,))
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def table_set_default(self, table: str, action: str, params: Params | None = None) -> None:
        info = self.table_info(table)
        a = self._action(info, action)
        if info.action_scopes.get(a.name) == "tableonly":
            raise SwitchError(f"action {a.name} is @tableonly in table {info.name}")
        try:
            self.table(info.name).set_default(a.name, self._params(a, params))
        except TableError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def table_default(self, table: str) -> tuple[str, tuple[int, ...]]:
        """(action, args) run on a miss."""
        t = self.table(table)
        return t.default_action, tuple(t.default_args)

    @_locked
    def table_entries(self, table: str) -> list[Entry]:
        return self.table(table).entries()

    # -- replication ----------------------------------------------------------------

    @_locked
    def mc_group_create(self, gid: int, replicas: Sequence[tuple[int, int]]) -> None:
        """Create or replace multicast group ``gid`` with ``[(port, rid), ...]``."""
        try:
            self.pre.mc_group_set(gid, list(replicas))
        except PREError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def mc_group_delete(self, gid: int) -> None:
        try:
            self.pre.mc_group_delete(gid)
        except PREError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def clone_session_set(
        self, sid: int, replicas: Sequence[tuple[int, int]], truncate_bytes: int = 0
    ) -> None:
        try:
            self.pre.clone_session_set(sid, list(replicas), truncate_bytes=truncate_bytes)
        except PREError as exc:
            raise SwitchError(str(exc)) from None

    # -- externs --------------------------------------------------------------------

    def extern(self, name: str) -> Any:
        """The runtime object (Register, Counter, Meter, DirectCounter, DirectMeter) of
        an extern instance, by fully-qualified name or unambiguous suffix."""
        kinds: tuple[str, ...] = ("register", "counter", "meter", "direct_counter")
        kinds += ("direct_meter", "action_profile", "action_selector")
        return self._extern(name, kinds)

    def _extern(self, name: str, kinds: tuple[str, ...]) -> Any:
        names = [e.name for e in self.program.externs if e.kind in kinds]
        fq = _resolve(name, names, "/".join(kinds))
        return self.inst.externs[fq]

    @_locked
    def register_read(self, name: str, index: int) -> int:
        try:
            return self._extern(name, ("register",)).cp_read(index)
        except ExternError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def register_write(self, name: str, index: int, value: int) -> None:
        try:
            self._extern(name, ("register",)).cp_write(index, value)
        except ExternError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def register_reset(self, name: str) -> None:
        self._extern(name, ("register",)).reset()

    @_locked
    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of an indexed counter, or of the entry ``index`` (handle) of
        a direct counter."""
        try:
            return self._extern(name, ("counter", "direct_counter")).read(index)
        except ExternError as exc:
            raise SwitchError(str(exc)) from None

    @_locked
    def counter_reset(self, name: str) -> None:
        self._extern(name, ("counter", "direct_counter")).reset()

    @_locked
    def meter_set_rates(
        self, name: str, index: int, committed: tuple[float, int], peak: tuple[float, int]
    ) -> None:
        """Rates per microsecond, bursts in packets/bytes (BMv2 ``meter_set_rates``)."""
        try:
            self._extern(name, ("meter", "direct_meter")).set_rates(index, committed, peak)
        except ExternError as exc:
            raise SwitchError(str(exc)) from None

    def value_set(self, name: str) -> ValueSet:
        names = [v.name for v in self.program.value_sets]
        return self.inst.value_sets[_resolve(name, names, "value set")]

    @_locked
    def value_set_add(
        self, name: str, values: Sequence[int], masks: Sequence[int] | None = None
    ) -> None:
        try:
            self.value_set(name).add(tuple(values), tuple(masks) if masks else None)
        except ValueError as exc:
            raise SwitchError(str(exc)) from None


__all__ = ["Switch", "SwitchError"]
