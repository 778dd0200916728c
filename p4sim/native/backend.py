"""The native back end: the program's packet path as C, compiled at load time.

Example::

    sw = Switch.from_file("p4src/inc.p4", backend="native")
    sw.backend                        # "native" (or "python" when the program uses a
                                      # construct the C generator does not cover)
    sw.send(1, frame)                 # the same outputs as the Python back end

``Native(program)`` generates C (``cgen.py``), compiles it with the system C compiler
(``cbuild.shared_library``) into a shared library cached by the source's hash
(``$P4SIM_NATIVE_CACHE``, default ``~/.cache/p4sim/native``) and loads a private copy
with ctypes. ``NativePipeline`` replaces the Python pipeline's ``process``; the control
plane keeps using the same Python objects:

* registers and indexed counters: their cells become numpy arrays the C code reads
  and writes in place (the objects' methods return Python ints as before);
* tables: every control-plane change (add/modify/delete/default/clear) marks the
  table, and before the next packet it is laid out again for C (entries in lookup
  order, exact tables sorted for binary search); direct counters are counted in C and
  added to ``Entry.counter`` (as deltas) before the control plane reads an entry;
* multicast groups: the replication engine's changes are laid out the same way.

``NativeLoop`` runs the packet loop of the ``p4sim`` command in C (docs/p4sim-design.md,
"Native back end").
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from cbuild.shared_library import DEFAULT_FLAGS, BuildError, build
from cbuild.shared_library import cache_dir as shared_cache_dir
from p4sim.compiler.program import ValueSet
from p4sim.native.cgen import CGen, Unsupported
from p4sim.runtime.action_profiles import GROUP, MEMBER, ActionProfile
from p4sim.runtime.externs import Counter, DirectMeter, Meter, MeterState, Register
from p4sim.runtime.pre import PacketReplicationEngine
from p4sim.runtime.tables import Table
from p4sim.v1model.pipeline import Pipeline

log = logging.getLogger("p4sim.native")

MAXPKT = 65600  # P4N_MAXPKT
MAXOUT = 64  # P4N_MAXOUT
#: "1": the native loop sends each egress port's runs of like UDP frames as one frame with
#: UDP segmentation offload (p4n_set_gso in cg_pipeline.py): the receiving hosts' kernels take a
#: run at once instead of frame by frame. A capture on the link sees the run as one frame,
#: so it is opt-in (tests/bench/ddp.py sets it for its own network).
UDP_GSO_ENV = "P4SIM_UDP_GSO"
SOL_PACKET, PACKET_VNET_HDR = 263, 15  # <linux/if_packet.h>
M64 = (1 << 64) - 1
U64 = ctypes.c_uint64
P64 = ctypes.POINTER(ctypes.c_uint64)


#: Set by every native pipeline's control-plane change and by a new pipeline: the C loop
#: running (possibly another, replaced, program's) goes back to Python to look.
_WAKE = ctypes.c_int(0)


class NativeError(Exception):
    """The native back end cannot run this program here (unsupported construct, no C
    compiler, compile error); the message is one line."""


class _CTable(ctypes.Structure):
    _fields_ = [
        ("n", ctypes.c_int64),
        ("nkeys", ctypes.c_int64),
        ("nargs", ctypes.c_int64),
        ("exact", ctypes.c_int64),
        ("vals", P64),
        ("masks", P64),
        ("action", ctypes.POINTER(ctypes.c_int64)),
        ("args", P64),
        ("counters", P64),
        ("def_action", ctypes.c_int64),
        ("def_args", P64),
        ("range", ctypes.POINTER(ctypes.c_int64)),
        ("grp", ctypes.POINTER(ctypes.c_int64)),
        ("mact", ctypes.POINTER(ctypes.c_int64)),
        ("margs", P64),
        ("meters", ctypes.POINTER(ctypes.c_double)),
        ("morigin", ctypes.c_int64),
    ]


class _CGroup(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64), ("ports", P64), ("rids", P64)]


class _CClone(ctypes.Structure):
    _fields_ = [
        ("sid", ctypes.c_uint64),
        ("trunc", ctypes.c_uint64),
        ("n", ctypes.c_int64),
        ("ports", P64),
        ("rids", P64),
    ]


def _ptr(a: np.ndarray) -> Any:
    return a.ctypes.data_as(P64)


def cache_dir() -> Path:
    return shared_cache_dir("P4SIM_NATIVE_CACHE", "p4sim/native")


class Native:
    """A program's generated C, compiled and loaded (one library per source hash; each
    Native loads its own copy so that two switches never share state)."""

    def __init__(self, compiled: Any) -> None:
        if compiled.program_ast is None:
            raise NativeError("the program was compiled without its syntax tree")
        if compiled.trace:
            raise NativeError("logging each packet (trace) needs the Python back end")
        gen = CGen(compiled.program_ast, compiled)
        try:
            self.source = gen.generate()
        except Unsupported as exc:
            raise NativeError(f"not covered by the C generator: {exc}") from None
        self.gen = gen
        self.path = self._build(self.source)
        # A private copy per switch: dlopen would hand back the same (shared) globals.
        fd, tmp = tempfile.mkstemp(prefix="p4sim-native-", suffix=".so")
        os.close(fd)
        Path(tmp).write_bytes(self.path.read_bytes())
        try:
            self.lib = ctypes.CDLL(tmp)
        finally:
            os.unlink(tmp)
        lib = self.lib
        lib.p4n_process.argtypes = [
            U64,
            ctypes.c_char_p,
            U64,
            U64,
            ctypes.c_void_p,
            P64,
            P64,
            ctypes.c_int,
        ]
        lib.p4n_process.restype = ctypes.c_int
        lib.p4n_set_register.argtypes = [ctypes.c_int, P64]
        lib.p4n_set_counter.argtypes = [ctypes.c_int, P64]
        lib.p4n_table_at.argtypes = [ctypes.c_int]
        lib.p4n_table_at.restype = ctypes.POINTER(_CTable)
        lib.p4n_vset_at.argtypes = [ctypes.c_int]
        lib.p4n_vset_at.restype = ctypes.POINTER(_CTable)
        lib.p4n_set_groups.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        lib.p4n_set_clones.argtypes = [ctypes.c_void_p, ctypes.c_int64]

    @staticmethod
    def _build(source: str) -> Path:
        try:
            return build(source, "p4n", cache_dir(), flags=(*DEFAULT_FLAGS, "-w"))
        except BuildError as exc:
            raise NativeError(str(exc)) from None


# -- shared state: the Python objects, their cells in numpy --------------------------


class NativeRegister(Register):
    """A Register whose cells are a numpy array shared with the C code."""

    values: Any

    def read(self, i: int, default: int = 0) -> int:
        return int(super().read(i, default))

    def cp_read(self, i: int) -> int:
        return int(super().cp_read(i))

    def reset(self) -> None:
        self.values[:] = 0


class NativeCounter(Counter):
    """A Counter whose (packets, bytes) cells are a numpy array shared with the C code."""

    cells: Any
    packets: Any
    bytes: Any

    def read(self, i: int) -> tuple[int, int]:
        p, b = super().read(i)
        return int(p), int(b)

    def reset(self) -> None:
        self.cells[:] = 0


#: A meter index's state in C (p4n_meter): one row of doubles, MeterState's fields.
METER_FIELDS = ("configured", "cir", "cburst", "ctok", "clast", "pir", "pburst", "ptok", "plast")


@contextlib.contextmanager
def holding(lib: Any) -> Iterator[None]:
    """C's lock (``p4n_lock``) of native library ``lib`` for the ``with`` block: the
    packet loop in C and the Python side never change the pipeline's state at once."""
    lib.p4n_lock()
    try:
        yield
    finally:
        lib.p4n_unlock()


def _meter_field(k: int, kind: Any) -> property:
    def get(self: NativeMeterState) -> Any:
        return kind(self.row[k])

    def put(self: NativeMeterState, v: Any) -> None:
        self.row[k] = float(v)

    return property(get, put)


class NativeMeterState(MeterState):
    """A MeterState whose fields are a row of the numpy array C's p4n_meter updates."""

    __slots__ = ("row",)

    def __init__(self, row: Any, old: MeterState) -> None:  # noqa: D107 - keeps old's values
        self.row = row
        for name in METER_FIELDS:
            setattr(self, name, getattr(old, name))


for _k, _name in enumerate(METER_FIELDS):
    _kind = bool if _name == "configured" else float if _name in ("cir", "pir") else int
    setattr(NativeMeterState, _name, _meter_field(_k, _kind))


class NativeMeter(Meter):
    """A Meter whose states and time origin live in memory shared with the C code;
    control-plane changes hold C's lock so that no packet sees half a configuration."""

    native_lib: Any
    origin: Any

    @property  # type: ignore[override]
    def time_origin_us(self) -> int:
        return int(self.origin[0])

    @time_origin_us.setter
    def time_origin_us(self, v: int) -> None:
        self.origin[0] = int(v)

    def _locked(self, fn: Any, *args: Any) -> Any:
        with holding(self.native_lib):
            return fn(self, *args)

    def set_rates(self, i: int, committed: tuple[float, int], peak: tuple[float, int]) -> None:
        self._locked(Meter.set_rates, i, committed, peak)

    def set_all_rates(self, committed: tuple[float, int], peak: tuple[float, int]) -> None:
        self._locked(Meter.set_all_rates, committed, peak)

    def reset_rates(self, i: int) -> None:
        self._locked(Meter.reset_rates, i)


class NativeDirectMeter(DirectMeter):
    """A direct meter whose entries' states live in their table's layout for C (each
    entry's ``meter`` a NativeMeterState over its row once laid out): a configuration
    change holds C's lock and lays the table out again (a new state gets its row)."""

    native_lib: Any

    def _locked(self, fn: Any, *args: Any) -> Any:
        try:
            with holding(self.native_lib):
                return fn(self, *args)
        finally:
            self.table._changed()  # type: ignore[attr-defined]

    def set_rates(self, handle: int, committed: tuple[float, int], peak: tuple[float, int]) -> None:
        self._locked(DirectMeter.set_rates, handle, committed, peak)

    def reset_rates(self, handle: int) -> None:
        self._locked(DirectMeter.reset_rates, handle)

    def reset_time_origin(self, now_us: int) -> None:
        self._locked(DirectMeter.reset_time_origin, now_us)


class NativeValueSet(ValueSet):
    """A parser value set that tells its NativePipeline when the control plane changed
    it; laid out for C as a table of (value, mask) keys without actions."""

    native_dirty: bool
    native_pipe: Any
    native_n: int

    def _changed(self) -> None:
        self.native_dirty = True
        self.native_pipe.notify()

    def add(self, values: tuple[int, ...], masks: tuple[int, ...] | None = None) -> None:
        try:
            super().add(values, masks)
        finally:
            self._changed()

    def remove(self, values: tuple[int, ...], masks: tuple[int, ...] | None = None) -> None:
        try:
            super().remove(values, masks)
        finally:
            self._changed()

    def clear(self) -> None:
        try:
            super().clear()
        finally:
            self._changed()


class NativeTable(Table):
    """A Table that tells its NativePipeline when the control plane changed it (after the
    change, so that a layout made meanwhile is made again), and brings C's direct-counter
    counts into its entries before they are read."""

    native_dirty: bool
    native_pipe: Any

    def _changed(self) -> None:
        self.native_dirty = True
        self.native_pipe.notify()

    def add(self, entry: Any, canonicalize: bool = False) -> int:
        try:
            return super().add(entry, canonicalize)
        finally:
            self._changed()

    def modify(self, handle: int, action: str, args: tuple[int, ...]) -> None:
        try:
            super().modify(handle, action, args)
        finally:
            self._changed()

    def delete(self, handle: int) -> None:
        self.native_pipe.flush(self)
        try:
            super().delete(handle)
        finally:
            self._changed()

    def set_default(self, action: str, args: tuple[int, ...] = ()) -> None:
        try:
            super().set_default(action, args)
        finally:
            self._changed()

    def clear(self) -> None:
        if not hasattr(self, "native_pipe"):
            super().clear()
            return
        self.native_pipe.flush(self)
        try:
            super().clear()
        finally:
            self._changed()

    def get(self, handle: int) -> Any:
        self.native_pipe.flush(self)
        return super().get(handle)

    def find(self, matches: tuple, priority: int = 0) -> Any:
        self.native_pipe.flush(self)
        return super().find(matches, priority)

    def entries(self) -> list:
        self.native_pipe.flush(self)
        return super().entries()


class NativeActionProfile(ActionProfile):
    """An action profile/selector whose changes lay out again the tables using it (their
    entries hold the members' actions and data, and the groups' members)."""

    native_tables: list[NativeTable]

    def _changed(self) -> None:
        for t in self.native_tables:
            t._changed()


_PROFILE_MUTATORS = (
    "add_member",
    "modify_member",
    "delete_member",
    "add_group",
    "set_group_members",
    "delete_group",
    "clear",
)


def _notifying(cls: type, base: type, names: tuple[str, ...]) -> None:
    """Give ``cls`` each of ``base``'s methods ``names`` (those it has) followed by
    ``cls._changed()``, also when the method raises (a half-done change is a change)."""

    def wrap(name: str) -> Any:
        method = getattr(base, name)

        def notifying(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            finally:
                self._changed()

        notifying.__name__ = name
        return notifying

    for name in names:
        if hasattr(base, name):
            setattr(cls, name, wrap(name))


_notifying(NativeActionProfile, ActionProfile, _PROFILE_MUTATORS)


class NativePRE(PacketReplicationEngine):
    """The replication engine, telling its NativePipeline about every change."""

    native_dirty: bool
    native_pipe: Any

    def _changed(self) -> None:
        if hasattr(self, "native_pipe"):
            self.native_dirty = True
            self.native_pipe.notify()


_PRE_MUTATORS = (
    "reset",
    "mc_group_set",
    "mc_group_delete",
    "group_create",
    "group_destroy",
    "node_create",
    "node_update",
    "node_destroy",
    "node_associate",
    "node_dissociate",
    "clone_session_set",
    "mirroring_add_mc",
    "clone_session_delete",
)


_notifying(NativePRE, PacketReplicationEngine, _PRE_MUTATORS)


class NativePipeline(Pipeline):
    """The v1model pipeline with ``process`` in C (see the module docstring), clones,
    resubmit and recirculate included (cut after ``max_passes`` passes, as in Python).
    Egress queue rates and digests are not covered: the program generator refuses
    programs using digests, and ``Switch`` refuses queue rates."""

    def __init__(self, native: Native, inst: Any, pre: Any, ctx: Any, *args: Any) -> None:
        super().__init__(inst, pre, ctx, *args)
        self.native = native
        lib = native.lib
        gen = native.gen
        self._keep: list[Any] = []
        for n, (fq, _w, size) in enumerate(gen.registers):
            r = inst.externs[fq]
            cells = np.zeros(size, dtype=np.uint64)
            cells[:] = r.values
            r.__class__ = NativeRegister
            r.values = cells
            lib.p4n_set_register(n, _ptr(cells))
        for n, (fq, size) in enumerate(gen.counters):
            c = inst.externs[fq]
            cells = np.zeros((size, 2), dtype=np.uint64)
            cells[:, 0] = c.packets
            cells[:, 1] = c.bytes
            c.__class__ = NativeCounter
            c.cells, c.packets, c.bytes = cells, cells[:, 0], cells[:, 1]
            lib.p4n_set_counter(n, cells.ctypes.data_as(P64))
        lib.p4n_set_meter.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.p4n_lock.argtypes = lib.p4n_unlock.argtypes = []
        self._meter_cells: list[Any] = []
        for n, (fq, size) in enumerate(gen.meters):
            m = inst.externs[fq]
            cells = np.zeros((size, len(METER_FIELDS)), dtype=np.float64)
            origin = np.array([m.time_origin_us], dtype=np.int64)
            m.__class__ = NativeMeter
            m.native_lib, m.origin = lib, origin
            m.states = [NativeMeterState(cells[i], st) for i, st in enumerate(m.states)]
            self._meter_cells.append((cells, origin))
            lib.p4n_set_meter(n, cells.ctypes.data, origin.ctypes.data)
        self._digests = list(gen.digest_names)
        self.tables: list[NativeTable] = []
        for n, fq in enumerate(gen.tables):
            t = inst.tables[fq]
            t.__class__ = NativeTable
            t.native_dirty = True
            t.native_pipe = self
            t._native = {"n": n, "order": [], "arrays": None}  # type: ignore[attr-defined]
            self.tables.append(t)
        for t in self.tables:
            prof_name = self._table_info(t.name).implementation
            if prof_name:
                prof = inst.externs[prof_name]
                if not isinstance(prof, NativeActionProfile):
                    prof.__class__ = NativeActionProfile
                    prof.native_tables = []
                prof.native_tables.append(t)
                t.native_profile = prof  # type: ignore[attr-defined]
        for t in self.tables:
            dm_name = self._table_info(t.name).direct_meter
            if dm_name:
                dm = inst.externs[dm_name]
                dm.__class__ = NativeDirectMeter
                dm.native_lib = lib
                t.native_dmeter = dm  # type: ignore[attr-defined]
        self.vsets: list[NativeValueSet] = []
        self._vkeep: dict[int, Any] = {}
        for n, fq in enumerate(gen.vsets):
            vs = inst.value_sets[fq]
            vs.__class__ = NativeValueSet
            vs.native_dirty, vs.native_pipe, vs.native_n = True, self, n
            self.vsets.append(vs)
        self.actions = {
            fq: {a: i for i, a in enumerate(self._table_info(fq).actions)} for fq in gen.tables
        }
        self._counting = [bool(self._table_info(fq).direct_counter) for fq in gen.tables]
        self._cdirty = ctypes.c_int.in_dll(lib, "p4n_dirty")
        ctypes.c_int.in_dll(lib, "p4n_max_passes").value = self.max_passes
        lib.p4n_lock.argtypes = lib.p4n_unlock.argtypes = []
        pre.__class__ = NativePRE
        self.pre: NativePRE = pre
        self.pre.native_dirty = True
        self.pre.native_pipe = self
        self.notify()  # a loop serving a program this one replaces: look again
        self.out = ctypes.create_string_buffer(MAXPKT * MAXOUT)
        self.oports = np.zeros(MAXOUT, dtype=np.uint64)
        self.olens = np.zeros(MAXOUT, dtype=np.uint64)
        self._op, self._ol = _ptr(self.oports), _ptr(self.olens)

    def _table_info(self, fq: str) -> Any:
        return next(t for t in self.native.gen.compiled.tables if t.name == fq)

    # -- table and group layout ------------------------------------------------------

    def notify(self) -> None:
        """The control plane changed something: the C loop lays it out before its next
        batch."""
        self._cdirty.value = 1
        _WAKE.value = 1

    def flush(self, t: NativeTable) -> None:
        """Add what C counted since the last flush to the entries' direct counters (so a
        counter written by the control plane meanwhile keeps counting from its value)."""
        st = t._native  # type: ignore[attr-defined]
        arrays = st["arrays"]
        if arrays is None or not self._counting[st["n"]]:
            return
        now = arrays[4].copy()
        delta = now - st["base"]
        st["base"] = now
        for i in np.flatnonzero(delta[0::2] | delta[1::2]):
            c = st["order"][i].counter
            c[0] += int(delta[2 * i])
            c[1] += int(delta[2 * i + 1])

    def _layout(self, t: NativeTable) -> None:
        st = t._native  # type: ignore[attr-defined]
        self.flush(t)
        entries = Table.entries(t)
        keys = t.keys
        nk = sum(2 if k.width > 64 else 1 for k in keys)  # bit<65..128>: two words
        acts = self.actions[t.name]
        nargs = max([1] + [len(self.native.gen.compiled.actions[a].params) for a in acts])
        seq = getattr(t, "_seq_of", {})

        def encode(e: Any) -> tuple[list[int], list[int]]:
            vals, masks = [], []
            for kf, m in zip(keys, e.matches, strict=True):
                full = (1 << kf.width) - 1
                if kf.match_kind == "exact":
                    vals.append(m & full)
                    masks.append(full)
                elif kf.match_kind == "lpm":
                    v, plen = m
                    mk = ((1 << plen) - 1) << (kf.width - plen)
                    vals.append(v & mk)
                    masks.append(mk)
                elif kf.match_kind == "ternary":
                    v, mk = m
                    vals.append(v & mk)
                    masks.append(mk)
                elif kf.match_kind == "optional":
                    vals.append(0 if m is None else m & full)
                    masks.append(0 if m is None else full)
                elif kf.match_kind == "range":  # (lo, hi) in place of (value, mask)
                    vals.append(m[0] & full)
                    masks.append(m[1] & full)
                else:
                    raise NativeError(f"table {t.name}: {kf.match_kind} keys")
                if kf.width > 64:  # the high word, then the low 64 bits
                    v, mk = vals.pop(), masks.pop()
                    vals += [v >> 64, v & M64]
                    masks += [mk >> 64, mk & M64]
            return vals, masks

        prof: Any = getattr(t, "native_profile", None)
        if prof is not None:
            nargs = max([nargs] + [len(m.args) for m in prof.members.values()])
        enc = [(e, *encode(e)) for e in entries]
        exact = t.mode == "exact"
        if exact:
            enc.sort(key=lambda x: tuple(x[1]))
        elif t.mode == "lpm":
            li = [k.match_kind for k in keys].index("lpm")
            enc.sort(key=lambda x: -x[0].matches[li][1])
        else:
            enc.sort(key=lambda x: (-x[0].priority, seq.get(x[0].handle, 0)))
        n = len(enc)
        vals = np.zeros(max(1, n * nk), dtype=np.uint64)
        masks = np.zeros(max(1, n * nk), dtype=np.uint64)
        action = np.zeros(max(1, n), dtype=np.int64)
        args = np.zeros(max(1, n * nargs), dtype=np.uint64)
        counters = np.zeros(max(2, 2 * n), dtype=np.uint64)  # counts since this layout
        groups: dict[int, int] = {}  # group id → its number in (grp, mact, margs)
        for i, (e, v, m) in enumerate(enc):
            vals[i * nk : (i + 1) * nk] = v
            masks[i * nk : (i + 1) * nk] = m
            data = e.args
            if e.action == MEMBER:  # the member's action and data in place of the entry
                mem = prof.members[e.args[0]]
                action[i], data = acts.get(mem.action, -1), mem.args
            elif e.action == GROUP:
                action[i], data = -2, (groups.setdefault(e.args[0], len(groups)),)
            else:
                action[i] = acts.get(e.action, -1)
            args[i * nargs : i * nargs + len(data)] = data
        dargs = np.zeros(nargs, dtype=np.uint64)
        dargs[: len(t.default_args)] = t.default_args
        rng = np.array(
            [int(k.match_kind == "range") for k in keys for _ in range(1 + (k.width > 64))] or [0],
            dtype=np.int64,
        )
        grp, mact, margs = self._layout_groups_of(prof, groups, acts, nargs)
        arrays = (vals, masks, action, args, counters, dargs, rng, grp, mact, margs)
        c = self.native.lib.p4n_table_at(st["n"]).contents
        c.n, c.nkeys, c.nargs, c.exact = n, nk, nargs, int(exact)
        c.vals, c.masks, c.args, c.counters = _ptr(vals), _ptr(masks), _ptr(args), _ptr(counters)
        c.action = action.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        c.def_action = acts.get(t.default_action, -1)
        c.def_args = _ptr(dargs)
        has_range = any(k.match_kind == "range" for k in keys)
        c.range = rng.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)) if has_range else None
        c.grp = grp.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        c.mact = mact.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        c.margs = _ptr(margs)
        dm = getattr(t, "native_dmeter", None)
        if dm is not None:  # each entry's meter state in its row (unset: not configured)
            cells = np.zeros((max(1, n), len(METER_FIELDS)), dtype=np.float64)
            for i, (e, _, _) in enumerate(enc):
                if e.meter is not None:
                    e.meter = NativeMeterState(cells[i], e.meter)
            c.meters = cells.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
            c.morigin = dm.time_origin_us
            st["meters"] = cells
        else:
            c.meters = None
        st["order"] = [x[0] for x in enc]
        st["arrays"] = arrays
        st["base"] = counters.copy()

    @staticmethod
    def _layout_groups_of(
        prof: Any, groups: dict[int, int], acts: dict[str, int], nargs: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(grp, mact, margs) of the groups a table's entries name, numbered as in
        ``groups``: each group's members in member-handle order (ActionProfile.resolve's)."""
        grp = np.zeros(max(2, 2 * len(groups)), dtype=np.int64)
        rows: list[Any] = []
        for gid, g in sorted(groups.items(), key=lambda x: x[1]):
            members = prof.groups[gid].members
            grp[2 * g], grp[2 * g + 1] = len(rows), len(members)
            rows += [prof.members[mid] for mid in members]
        mact = np.zeros(max(1, len(rows)), dtype=np.int64)
        margs = np.zeros(max(1, len(rows) * nargs), dtype=np.uint64)
        for k, mem in enumerate(rows):
            mact[k] = acts.get(mem.action, -1)
            margs[k * nargs : k * nargs + len(mem.args)] = mem.args
        return grp, mact, margs

    def _layout_groups(self) -> None:
        pre = self.pre
        gids = pre.groups()
        ng = (max(gids) + 1) if gids else 0
        groups = (_CGroup * max(1, ng))()
        keep: list[Any] = [groups]
        for gid in gids:
            reps = pre.replicas(gid)
            ports = np.array([p for p, _ in reps] or [0], dtype=np.uint64)
            rids = np.array([r for _, r in reps] or [0], dtype=np.uint64)
            keep += [ports, rids]
            groups[gid].n = len(reps)
            groups[gid].ports, groups[gid].rids = _ptr(ports), _ptr(rids)
        self.native.lib.p4n_set_groups(ctypes.addressof(groups), ng)
        sessions = pre.clone_sessions()
        clones = (_CClone * max(1, len(sessions)))()
        keep.append(clones)
        for c, sess in zip(clones, sessions, strict=False):
            reps = pre.clone_replicas(sess.session_id)
            ports = np.array([p for p, _ in reps] or [0], dtype=np.uint64)
            rids = np.array([r for _, r in reps] or [0], dtype=np.uint64)
            keep += [ports, rids]
            c.sid, c.trunc, c.n = sess.session_id, sess.truncate_bytes, len(reps)
            c.ports, c.rids = _ptr(ports), _ptr(rids)
        self.native.lib.p4n_set_clones(ctypes.addressof(clones), len(sessions))
        self._keep = keep

    def sync(self) -> None:
        """Lay out for C whatever the control plane changed since the last packet (the
        caller holds C's lock, p4n_lock). Flags are cleared first: a change finishing
        meanwhile sets them again and is laid out next time."""
        self._cdirty.value = 0
        for t in self.tables:
            if t.native_dirty:
                t.native_dirty = False
                self._layout(t)
        if self.pre.native_dirty:
            self.pre.native_dirty = False
            self._layout_groups()
        for vs in self.vsets:
            if vs.native_dirty:
                vs.native_dirty = False
                self._layout_vset(vs)

    def _layout_vset(self, vs: NativeValueSet) -> None:
        nk, n = len(vs.widths), len(vs.entries)
        vals = np.zeros(max(1, n * nk), dtype=np.uint64)
        masks = np.zeros(max(1, n * nk), dtype=np.uint64)
        for i, e in enumerate(vs.entries):
            vals[i * nk : (i + 1) * nk] = [v for v, _ in e]
            masks[i * nk : (i + 1) * nk] = [m for _, m in e]
        c = self.native.lib.p4n_vset_at(vs.native_n).contents
        c.vals, c.masks, c.range = _ptr(vals), _ptr(masks), None
        c.nkeys, c.nargs, c.exact, c.n = nk, 0, 0, n
        self._vkeep[vs.native_n] = (vals, masks)

    # -- packets ---------------------------------------------------------------------

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        lib = self.native.lib
        data = bytes(data)
        with holding(lib):
            self.sync()
            n = lib.p4n_process(
                port, data, len(data), self.now_us(), self.out, self._op, self._ol, MAXOUT
            )
            if self._digests:
                self._take_digests()
            base = ctypes.addressof(self.out)
            return [
                (int(self.oports[i]), ctypes.string_at(base + i * MAXPKT, int(self.olens[i])))
                for i in range(n)
            ]

    def _take_digests(self) -> None:
        """The digests C queued for this packet into ``ctx.digests`` (Switch.digests) as
        (struct name, values), as the Python pipeline appends them."""
        lib = self.native.lib
        count = ctypes.c_int64.in_dll(lib, "p4n_dgq_n")
        if not count.value:
            return
        ids = (ctypes.c_int64 * count.value).in_dll(lib, "p4n_dgq_id")
        lens = (ctypes.c_int64 * count.value).in_dll(lib, "p4n_dgq_len")
        vals = (ctypes.c_uint64 * (64 * count.value)).in_dll(lib, "p4n_dgq_v")
        for k in range(count.value):
            v = tuple(int(x) for x in vals[64 * k : 64 * k + lens[k]])
            self.ctx.digests.append((self._digests[ids[k]], v))
        count.value = 0

    def release(self) -> list[tuple[int, bytes]]:
        return []

    def next_departure_us(self) -> int | None:
        return None


class NativeLoop:
    """The packet loop in C for a native switch (``PortSet.serve(native=...)``):
    ``p4n_serve`` polls the ports, receives batches (recvmmsg), runs them and sends what
    leaves (sendmmsg), with no Python per packet and without the GIL. It comes back to
    Python when the control plane changed a table or group (laid out here, under the
    switch lock, before the next batch), when PortSet's wake-up pipe is written (stop),
    or after ``timeout`` idle seconds. ``switch()`` returns the switch now installed (the
    P4Runtime server may replace it); a switch on the Python back end, a port without
    batch I/O or a pcap capture keep the Python loop, and so does a program with digests
    (its packets still run in C, one by one, each with the digests it made)."""

    def __init__(self, portset: Any, switch: Any, budget: int = 64) -> None:
        self.portset = portset
        self.switch = switch
        self.budget = budget
        self._configured: Any = None
        self._gso: socket.socket | None = None

    def usable(self) -> Any:
        sw = self.switch()
        if sw is None or getattr(sw, "backend", "python") != "native":
            return None
        if sw.pipeline.native.gen.digest_names:  # each packet's digests go with it
            return None
        ps = self.portset
        if any(p.rx is None or p.pcap_in is not None for p in ps.ports.values()):
            return None
        return sw

    def _configure(self, sw: Any) -> None:
        lib = sw.pipeline.native.lib
        lib.p4n_set_port.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.p4n_serve.argtypes = [
            ctypes.c_void_p, P64, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, U64,
            ctypes.c_void_p,
        ]  # fmt: skip
        ports = sorted(self.portset.ports.values(), key=lambda p: p.number)
        for p in ports:
            lib.p4n_set_port(p.number, p.sock.fileno(), socket.if_nametoindex(p.iface))
        lib.p4n_set_gso.argtypes = [ctypes.c_int]
        lib.p4n_set_gso(self._gso_socket().fileno() if os.environ.get(UDP_GSO_ENV) == "1" else -1)
        self._fds = (ctypes.c_int * len(ports))(*[p.sock.fileno() for p in ports])
        self._nums = np.array([p.number for p in ports], dtype=np.uint64)
        self._stats = np.ctypeslib.as_array(
            (ctypes.c_uint64 * (512 * 6)).in_dll(lib, "p4n_stats")
        ).reshape(512, 6)
        self._last = self._stats.copy()
        self._configured = sw

    def _gso_socket(self) -> socket.socket:
        """The socket the loop sends runs of UDP frames on as one (``UDP_GSO_ENV``): a
        virtio_net_hdr before each frame says how the kernel cuts it; it receives nothing."""
        if self._gso is None:
            from p4sim.batch_io import set_buffers

            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            set_buffers(sock)
            self._gso = sock
        return self._gso

    def serve(self, sw: Any, wake_fd: int, timeout: float) -> int:
        """One stay in C (see the class docstring); its return code."""
        if self._configured is not sw:
            self._configure(sw)
        pipe: NativePipeline = sw.pipeline
        lib = pipe.native.lib
        _WAKE.value = 0
        with sw.lock, holding(lib):
            pipe.sync()
        if self.switch() is not sw:
            return 2  # replaced meanwhile
        rc = lib.p4n_serve(
            self._fds, _ptr(self._nums), len(self._nums), wake_fd, int(timeout * 1000),
            self.budget, pipe.t0, ctypes.byref(_WAKE),
        )  # fmt: skip
        if rc < 0:
            raise OSError("p4sim native loop: poll failed or no memory for packet buffers")
        self._account()
        return int(rc)

    def _account(self) -> None:
        """The ports' counters (PortSet.ports[n].counters) from C's."""
        now = self._stats.copy()
        delta = now - self._last
        self._last = now
        for p in self.portset.ports.values():
            if p.number < 512 and delta[p.number].any():
                d = delta[p.number]
                c = p.counters
                c.rx_packets += int(d[0])
                c.rx_bytes += int(d[1])
                c.tx_packets += int(d[2])
                c.tx_bytes += int(d[3])
                c.tx_errors += int(d[4])
