"""Tables: key compilation, action lists, default actions, const entries and the
generated ``tbl_N(F) -> (hit, action_name)`` function of every table instance.

Example (generated for ``table t { key = { hdr.ipv4.dstAddr: lpm; } ... }``)::

    def tbl_6_t(F):
        e = T_6.lookup((F.v_hdr.ipv4.dstAddr, ))
        if e is None:
            a = T_6.default_action
            ACTS_T_6[a](F, *T_6.default_args)
            return False, a
        a = e.action
        ACTS_T_6[a](F, *e.args)
        return True, a
"""

from __future__ import annotations

import copy
from typing import Any

from p4sim.compiler.cg_base import CompilerBase, CtlInst, Fn, fq_name
from p4sim.compiler.cg_call import expr_text
from p4sim.compiler.cg_expr import lit, pyname
from p4sim.compiler.cg_extern import profile_info
from p4sim.compiler.program import TableInfo
from p4sim.compiler.typecheck import VOID, Sym, TBit, TBool, TEnum, TError, TObject, annotation
from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error
from p4sim.runtime.tables import Entry, KeyField, Table, TableError


class TableMixin(CompilerBase):
    """Table compilation; mixed into ``codegen.Compiler``."""

    tables: list
    externs: list
    src: list[str]
    ids: Any
    _implicit_noaction: str | None
    _errno: dict[str, int]

    def gen_table(self, d: ast.TableDecl, inst: CtlInst) -> None:

        fq = fq_name(inst.path, d.name, d.annotations)
        ident = next(self.ids)
        tvar, tfn = f"T_{ident}", f"tbl_{ident}_{pyname(d.name)}"
        fn = Fn(inst.scope, "control", inst.path, ctl=inst)
        keys: list[KeyField] = []
        kcodes: list[str] = []
        texts: list[str] = []
        selectors: list[tuple[str, str, int]] = []  # (name, code, width)
        for k in d.keys:
            if k.match_kind not in self.genv.match_kinds:
                raise P4Error(k.loc, f"unknown match kind '{k.match_kind}'")
            ev = self.expr(k.expr, fn)
            if isinstance(ev.type, TBool):
                code, w = f"(1 if {ev.code} else 0)", 1
            elif isinstance(ev.type, TBit):
                code, w = ev.code, ev.type.width
            elif isinstance(ev.type, TEnum) and ev.type.underlying is not None:
                code, w = ev.code, ev.type.underlying.width
            elif isinstance(ev.type, TError):
                # p4c numbers errors in declaration order from 1 (NoError, as its BMv2 JSON
                # lists them) and BMv2 matches them as 32-bit values
                if not self.__dict__.get("_errno"):
                    self._errno = {n: i for i, n in enumerate(self.genv.errors, 1)}
                    self.src.append(f"ERRNO = {self._errno!r}\n")
                code, w = f"ERRNO[{ev.code}]", 32
            else:
                raise P4Error(k.expr.loc, f"a table key cannot have type {ev.type.show()}")
            kname = None
            a = annotation(k.annotations, "name")
            if a is not None:
                from p4sim.compiler.typecheck import name_annotation

                kname = name_annotation(k.annotations)
            text = expr_text(k.expr)
            if k.match_kind == "selector":  # hashed by the selector, not matched
                selectors.append((kname or text, code, w))
                continue
            keys.append(KeyField(kname or text, k.match_kind, w))
            kcodes.append(code)
            texts.append(text)
        action_fq: dict[str, str] = {}
        dispatch: dict[str, str] = {}
        scopes: dict[str, str] = {}
        bound: dict[str, str] = {}  # fq action → wrapper that supplies the bound arguments
        for ar in d.actions:
            py, afq, adecl = self.action_ref(ar.name, inst, ar.loc)  # type: ignore[attr-defined]
            if ar.args:
                bound[afq] = self.bound_action(py, adecl, ar, inst)
            elif any(p.direction for p in adecl.params):
                raise P4Error(
                    ar.loc,
                    f"action '{ar.name}' has directional parameters: the table's action list "
                    f"must bind them, e.g. {ar.name}(hdr.x)",
                )
            action_fq[ar.name] = afq
            for an in ("tableonly", "defaultonly"):
                if annotation(ar.annotations, an) is not None:
                    scopes[afq] = an
        self._implicit_noaction = None
        default, dargs = self.table_default(d, inst, action_fq)
        if self._implicit_noaction:
            scopes[self._implicit_noaction] = "defaultonly"
        for an in action_fq:
            dispatch[action_fq[an]] = bound.get(action_fq[an]) or inst.actions[an][0]
        size = 1024
        timeout = False
        dcounter = dmeter = None
        profile: Any = None
        for p in d.properties:
            if p.name == "size":
                size = self.genv.const_int(p.value)
            elif p.name in ("counters", "meters"):
                ex = self.expr(p.value, fn)
                info = next((x for x in self.externs if x.pyname == ex.code), None)
                if info is None or info.kind not in ("direct_counter", "direct_meter"):
                    raise P4Error(
                        p.value.loc, f"'{p.name}' must name a direct_counter/direct_meter instance"
                    )
                info.table = fq
                if p.name == "counters":
                    dcounter = info
                else:
                    dmeter = info
            elif p.name == "support_timeout":
                ev = self.expr(p.value, fn)
                timeout = bool(ev.is_const and ev.const)
            elif p.name == "implementation":
                profile = self.table_profile(p, fq, inst, fn)
        if selectors and (profile is None or profile.kind != "action_selector"):
            raise P4Error(d.loc, f"table '{d.name}' has selector keys but no action_selector")
        entries = self.const_entries(d, keys, action_fq, inst)
        info = TableInfo(
            fq,
            tvar,
            keys,
            size,
            list(action_fq.values()),
            default,
            dargs,
            d.default_action_const,
            entries,
            d.entries_const or bool(entries and d.entries_const),
            dcounter.name if dcounter else None,
            dmeter.name if dmeter else None,
            scopes,
            list(d.annotations),
            texts,
            [list(k.annotations) for k in d.keys if k.match_kind != "selector"],
            timeout,
        )
        self.tables.append(info)
        if profile is not None:
            if dcounter is not None or dmeter is not None:
                raise P4Error(d.loc, "p4sim does not support direct resources on indirect tables")
            if entries:
                raise P4Error(d.loc, "p4sim does not support `entries` on indirect tables")
            info.implementation = profile.name
            info.selector_fields = [(n, w) for n, _, w in selectors]
            profile.tables.append(fq)
            sel = "[" + ", ".join(f"({c}, {w})" for _, c, w in selectors) + "]"
            self.indirect_function(info, tfn, kcodes, dispatch, profile.pyname, sel)
        else:
            self.table_function(info, tfn, kcodes, dispatch, dcounter, dmeter)
        inst.scope.declare(
            d.name,
            Sym(
                "table", TObject("table", fq), tfn, decl=d, extra={"fq": fq, "action_fq": action_fq}
            ),
            d.loc,
        )

    def table_profile(self, p: ast.TableProperty, table_fq: str, inst: CtlInst, fn: Fn) -> Any:
        """The ExternInfo of ``implementation = <instance>`` or of an anonymous
        ``implementation = action_selector(...)``/``action_profile(...)``, which is named
        by the property's ``@name`` or else after the table."""

        v = p.value
        kinds = ("action_profile", "action_selector")
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.name in kinds:
            args = [self.expr(a.value, fn) for a in v.args]
            if any(not a.is_const for a in args):
                raise P4Error(v.loc, "implementation arguments must be constants")
            name = fq_name(inst.path, table_fq.rsplit(".", 1)[-1], p.annotations)
            if annotation(p.annotations, "name") is None:
                name = table_fq
            info = profile_info(v.func.name, name, f"X_{next(self.ids)}_ap", args, [])
            info.annotations = list(p.annotations)
            self.externs.append(info)
            return info
        ev = self.expr(v, fn)
        found = next((x for x in self.externs if x.pyname == ev.code), None)
        if found is None or found.kind not in kinds:
            raise P4Error(v.loc, "'implementation' must be an action_profile/action_selector")
        return found

    def indirect_function(
        self,
        info: TableInfo,
        tfn: str,
        kcodes: list[str],
        dispatch: dict[str, str],
        ap: str,
        sel: str,
    ) -> None:
        """``tbl_N(F)`` of a table with an action profile: the entry names a member or a
        group; an empty group behaves as a miss."""
        tvar = info.pyname
        dvar = f"ACTS_{tvar}"
        key = "(" + "".join(c + ", " for c in kcodes) + ")"
        lines = [f"def {tfn}(F):"]
        if self.trace:
            lines.append(f"    LOG({'Applying table ' + repr(info.name)!r})")
        lines.append(f"    e = {tvar}.lookup({key})" if kcodes else "    e = None")
        lines.append("    if e is not None:")
        lines.append(f"        a, args = {ap}.resolve(e.action, e.args[0], {sel})")
        lines.append("        if a:")
        if self.trace:
            lines.append(
                f"            LOG('Table ' + {repr(repr(info.name))} + ': hit with handle ' "
                "+ str(e.handle) + ', ' + e.action[1:] + ' ' + str(e.args[0]))"
            )
            lines.append(
                "            LOG('Action entry is ' + a + ' - ' + ','.join('%x' % v for v in args))"
            )
        lines.append(f"            {dvar}[a](F, *args)")
        lines.append("            return True, a")
        lines.append(f"    a = {tvar}.default_action")
        if self.trace:
            lines.append(f"    LOG('Table ' + {repr(repr(info.name))} + ': miss')")
        lines.append(f"    {dvar}[a](F, *{tvar}.default_args)")
        lines.append("    return False, a")
        table = "{" + ", ".join(f"{k!r}: {v}" for k, v in dispatch.items()) + "}"
        self.src.append(f"{dvar} = {table}\n" + "\n".join(lines) + "\n")

    def bound_action(self, py: str, adecl: Any, ar: ast.ActionRef, inst: CtlInst) -> str:
        """A wrapper ``bnd_N(F, *data)`` for an action-list item such as ``setbyte(hdr.f)``:
        the listed arguments bind the action's directional parameters (copy-in/copy-out on
        every call, evaluated then), the control plane supplies the rest."""

        dirs = [p for p in adecl.params if p.direction]
        if len(ar.args) != len(dirs) or any(a.name for a in ar.args):
            raise P4Error(
                ar.loc,
                f"action '{ar.name}' in a table's action list must bind exactly its "
                f"{len(dirs)} directional parameter(s), got {len(ar.args)} argument(s)",
            )
        fn = Fn(inst.scope.child(), "control", inst.path, ctl=inst)
        wrapper = f"bnd_{next(self.ids)}_{pyname(ar.name)}"
        args: list[ast.Expr | None] = []
        it = iter(ar.args)
        data: list[str] = []
        for p in adecl.params:
            if p.direction:
                args.append(next(it).value)
            else:  # directionless: the entry's action data, a parameter of the wrapper
                data.append(f"d_{p.name}")
                args.append(ast.Name(f"d_{p.name}", loc=ar.loc))
                fn.scope.declare(
                    f"d_{p.name}",
                    Sym("param", self.genv.resolve(p.type), f"d_{p.name}", direction="in"),
                    ar.loc,
                )
        ptypes = [self.genv.resolve(p.type) for p in adecl.params]
        ev = self.call_with_dirs(  # type: ignore[attr-defined]
            py,
            adecl.params,
            ptypes,
            args,
            fn,
            ["F"],
            VOID,
            True,
            ar.loc,
            True,
            self.reach(adecl, inst),
        )
        if ev.code:
            fn.emit(ev.code)
        head = f"def {wrapper}({', '.join(['F', *data])}):"
        self.src.append("\n".join([head, *fn.lines, "    return"]) + "\n")
        return wrapper

    def table_default(
        self, d: ast.TableDecl, inst: CtlInst, action_fq: dict[str, str]
    ) -> tuple[str, tuple[int, ...]]:

        if d.default_action is None:
            if "NoAction" not in action_fq:  # p4c adds `@defaultonly NoAction`
                py, afq, _ = self.action_ref("NoAction", inst, d.loc)  # type: ignore
                action_fq["NoAction"] = afq
                self._implicit_noaction = afq
            return action_fq["NoAction"], ()
        ar = d.default_action
        if ar.name not in action_fq:
            raise P4Error(
                ar.loc, f"default action '{ar.name}' is not in the actions of table '{d.name}'"
            )
        fn = Fn(inst.scope, "control", inst.path, ctl=inst)
        return action_fq[ar.name], self.const_action_args(ar, inst, fn, "default action")

    def const_action_args(
        self, ar: ast.ActionRef, inst: CtlInst, fn: Fn, what: str
    ) -> tuple[int, ...]:
        """The action data of ``ar`` (a default action or a const entry's action), which
        must be compile-time constants, converted to the parameters' types."""
        _, _, adecl = self.action_ref(ar.name, inst, ar.loc)  # type: ignore[attr-defined]
        data = [p for p in adecl.params if not p.direction]
        given = data_args(adecl, ar)
        if len(given) != len(data):
            raise P4Error(
                ar.loc, f"action '{ar.name}' takes {len(data)} argument(s), got {len(ar.args)}"
            )
        vals = []
        for p, a in zip(data, given, strict=False):
            ev = self.value(a.value, fn, self.genv.resolve(p.type))
            if not ev.is_const:
                raise P4Error(a.loc, f"{what} arguments must be constants")
            vals.append(int(ev.const))
        return tuple(vals)

    def const_entries(
        self, d: ast.TableDecl, keys: list[KeyField], action_fq: dict[str, str], inst: CtlInst
    ) -> list[Entry]:

        fn = Fn(inst.scope, "control", inst.path, ctl=inst)
        out: list[Entry] = []
        n = len(d.entries)
        check = Table(d.name, keys, max(n, 1), "")
        for i, te in enumerate(d.entries):
            ks = te.keyset
            if len(ks) == 1 and isinstance(ks[0], ast.ListExpr) and len(keys) > 1:
                ks = ks[0].elems
            if len(ks) != len(keys):
                raise P4Error(
                    te.loc, f"entry has {len(ks)} key value(s), the table has {len(keys)} key(s)"
                )
            matches = tuple(self.entry_match(k, x, fn) for k, x in zip(keys, ks, strict=False))
            ar = te.action
            if ar.name not in action_fq:
                raise P4Error(ar.loc, f"action '{ar.name}' is not in the table's actions")
            args = self.const_action_args(ar, inst, fn, "entry action")
            entry = Entry(matches, action_fq[ar.name], args, self.entry_priority(d, te, n - i))
            try:  # the runtime table checks widths, masks and duplicates
                check.add(copy.copy(entry))
            except TableError as exc:
                raise P4Error(te.loc, f"bad entry: {exc}") from None
            out.append(entry)
        return out

    def entry_priority(self, d: ast.TableDecl, te: ast.TableEntry, implicit: int) -> int:
        """Entry priority, higher wins (P4Runtime): ``priority = N:``; without one, earlier
        entries win. ``largest_priority_wins = false`` flips explicit priorities. The older
        ``@priority(N)`` annotation follows BMv2: lower N wins, position i counts as i."""
        expr = te.priority
        a = annotation(te.annotations, "priority")
        if expr is None and a is not None and a.args:
            # p4c hands `@priority(N)` to BMv2 as is, where the lowest value wins and an entry
            # without one has its 1-based position: map that scale onto ours (higher wins)
            return len(d.entries) + 1 - self.genv.const_int(a.args[0])
        if expr is None:
            return implicit
        prio = self.genv.const_int(expr)
        for p in d.properties:
            if p.name == "largest_priority_wins":
                v = self.genv.const_value(p.value, None)
                if v is False:
                    return -prio
        return prio

    def entry_match(self, k: KeyField, x: ast.Expr, fn: Fn) -> Any:
        t = TBit(k.width)
        full = (1 << k.width) - 1
        kind = k.match_kind
        if isinstance(x, (ast.DontCare, ast.Default)):
            return {
                "exact": 0,
                "lpm": (0, 0),
                "ternary": (0, 0),
                "range": (0, full),
                "optional": None,
            }[kind]
        if isinstance(x, ast.Mask):
            v, m = self.key_const(x.value, t, fn), self.key_const(x.mask, t, fn)
            if kind == "lpm":
                plen = bin(m).count("1")
                return (v & m, plen)
            return (v & m, m)
        if isinstance(x, ast.Range):
            return (self.key_const(x.lo, t, fn), self.key_const(x.hi, t, fn))
        v = self.key_const(x, t, fn)
        return {
            "exact": v,
            "lpm": (v, k.width),
            "ternary": (v, full),
            "range": (v, v),
            "optional": v,
        }[kind]

    def key_const(self, x: ast.Expr, t: TBit, fn: Fn) -> int:
        """The number a constant in an entry's key stands for: an error's p4c number, a
        serializable enum member's value, or a constant of the key's width."""
        named = self.expr(x, fn) if isinstance(x, (ast.Member, ast.ErrorMember)) else None
        if named is not None and named.is_const and isinstance(named.type, TError):
            return self.genv.errors.index(named.const) + 1  # p4c's error number
        if named is not None and named.is_const and isinstance(named.type, TEnum):
            if named.type.underlying is None:
                raise P4Error(x.loc, f"enum {named.type.name} has no bit<W> values to match")
            return int(named.const)  # a serializable enum's member: its value
        ev = self.value(x, fn, t) if not isinstance(x, ast.BoolLit) else lit(int(x.value), t)
        if not ev.is_const:
            raise P4Error(x.loc, "entry key values must be constants")
        return int(ev.const)

    def table_function(
        self,
        info: TableInfo,
        tfn: str,
        kcodes: list[str],
        dispatch: dict[str, str],
        dcounter: Any,
        dmeter: Any,
    ) -> None:
        tvar = info.pyname
        dvar = f"ACTS_{tvar}"
        lines = [f"def {tfn}(F):"]
        key = "(" + "".join(c + ", " for c in kcodes) + ")"
        tr = self.trace
        if tr:
            lines.append(f"    LOG({'Applying table ' + repr(info.name)!r})")
        if not kcodes:
            lines.append("    e = None")
        else:
            lines.append(f"    e = {tvar}.lookup({key})")
        lines.append("    if e is None:")
        lines.append(f"        a = {tvar}.default_action")
        if dmeter is not None:
            lines.append("        CTX.color = 0")  # misses are not metered: GREEN
        if tr:
            lines.append(f"        LOG('Table ' + {repr(repr(info.name))} + ': miss')")
            lines.append(
                "        LOG('Action entry is ' + a + ' - ' + ','.join("
                f"'%x' % v for v in {tvar}.default_args))"
            )
        lines.append(f"        {dvar}[a](F, *{tvar}.default_args)")
        lines.append("        return False, a")
        if dcounter is not None:
            lines.append("    c = e.counter; c[0] += 1; c[1] += CTX.sm.packet_length")
        if dmeter is not None:
            lines.append(
                f"    CTX.color = {dmeter.pyname}.execute(e, CTX.sm.packet_length, CTX.now)"
            )
        lines.append("    a = e.action")
        if tr:
            lines.append(
                f"    LOG('Table ' + {repr(repr(info.name))} + ': hit with handle ' "
                "+ str(e.handle) + ', match ' + repr(e.matches))"
            )
            lines.append(
                "    LOG('Action entry is ' + a + ' - ' + ','.join('%x' % v for v in e.args))"
            )
        lines.append(f"    {dvar}[a](F, *e.args)")
        lines.append("    return True, a")
        table = "{" + ", ".join(f"{k!r}: {v}" for k, v in dispatch.items()) + "}"
        self.src.append(f"{dvar} = {table}\n" + "\n".join(lines) + "\n")


def data_args(adecl: Any, ar: ast.ActionRef) -> list[ast.Argument]:
    """The arguments of ``ar`` that are action data. ``default_action = a(hdr.x, 5)`` (or an
    entry's action) may repeat the arguments bound in the action list: with one argument
    per parameter, those for directional parameters are dropped (the wrapper binds them)."""
    if len(ar.args) == len(adecl.params) and any(p.direction for p in adecl.params):
        return [a for p, a in zip(adecl.params, ar.args, strict=False) if not p.direction]
    return list(ar.args)
