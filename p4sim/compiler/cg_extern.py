"""Externs: packet_in/packet_out, registers, counters, meters, v1model's extern functions
(hash, checksums, digest, clone, resubmit, recirculate ...) and extern instances and
value sets. Mixed into ``codegen.Compiler`` beside ``cg_call.CallMixin``, which
dispatches a method call on an extern object to ``extern_method``.

Example::

    compiler.extern_method(reg, t_register, "read", call, fn, stmt=True)
    # register.read(x, i) -> the assignment of the cell to x when i is in range, else
    # Register.read, which logs and keeps x as BMv2 does
"""

from __future__ import annotations

from typing import Any

from p4sim.compiler.cg_base import CompilerBase, CtlInst, Fn, fq_name
from p4sim.compiler.cg_call import DROP_PORT, expr_text
from p4sim.compiler.cg_expr import EV, mask, pyname
from p4sim.compiler.cg_types import byte_codes, header_pad
from p4sim.compiler.program import ExternInfo, ValueSetInfo
from p4sim.compiler.typecheck import (
    BOOL,
    VOID,
    Sym,
    TBit,
    TBool,
    TComposite,
    TEnum,
    TError,
    TExtern,
    TInfInt,
    TList,
    TStack,
    TVarbit,
    type_width,
)
from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error


class ExternMixin(CompilerBase):
    """Extern compilation; mixed into ``codegen.Compiler``."""

    ids: Any
    externs: list
    value_sets: list
    digests: dict
    field_lists: dict

    # -- packet_in / packet_out and stateful externs ---------------------------------

    def extern_method(self, base: EV, t: TExtern, name: str, e: ast.Call, fn: Fn, stmt: bool) -> EV:
        h = getattr(self, f"_m_{t.name}_{name}", None)
        if h is None:
            if not any(m.name == name for m in t.decl.methods):
                raise P4Error(e.loc, f"extern {t.name} has no method '{name}'")
            raise P4Error(e.loc, f"p4sim does not implement {t.name}.{name}()")
        return h(base, t, e, fn)

    def _m_packet_in_extract(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1, 2)
        target = e.args[0].value
        if isinstance(target, ast.DontCare) and len(e.type_args) == 1:
            # extract<H>(_): the bits are read and checked as for an H, then dropped
            dropped = self.genv.resolve(e.type_args[0])
            hv = EV(self.default(dropped), dropped)
        else:
            hv = self.expr(target, fn)
        ht = hv.type
        if not (isinstance(ht, TComposite) and ht.kind == "header"):
            raise P4Error(target.loc, f"extract needs a header, got {ht.show()}")
        has_var = any(isinstance(ft, TVarbit) for _, ft in ht.fields)
        pk = base.code
        h = fn.new("h")
        stack = None
        if hv.code.startswith("_stack_next("):
            # `stack.next` or, in a stack of header unions, `stack.next.member`
            stack = _call_argument(hv.code, len("_stack_next"))
        fn.emit(f"{h} = {hv.code}")
        o, end = fn.new("o"), fn.new("e")
        fn.emit(f"{o} = {pk}.off")
        if has_var:
            if len(e.args) != 2:
                raise P4Error(e.loc, "extracting a header with a varbit field needs its size")
            maxw = next(ft.max_width for _, ft in ht.fields if isinstance(ft, TVarbit))
            n = fn.new("n")
            fn.emit(f"{n} = {self.value(e.args[1].value, fn, TBit(32)).code}")
            # BMv2 handles whole bytes only; more than the declared maximum is too long
            fn.emit(f"if {n} & 7: raise ParserErr('ParserInvalidArgument')")
            fn.emit(f"if {n} > {maxw}: raise ParserErr('HeaderTooShort')")
            width = f"({ht.width} + {n})"
        else:
            if len(e.args) == 2:
                raise P4Error(e.loc, "the two-argument extract needs a header with a varbit")
            width = str(ht.width + header_pad(ht))
        fn.emit(f"{end} = {o} + {width}")
        fn.emit(f"if {end} > {pk}.nbits: raise ParserErr('PacketTooShort')")
        raw = f"int.from_bytes({pk}.data[{o} >> 3:({end} + 7) >> 3], 'big') >> (-{end} & 7)"
        if byte_codes(ht) is not None:  # whole-byte fields: one struct call when aligned
            fn.emit(f"if {o} & 7: {h}._ext({raw})")
            fn.emit(f"else: {h}._extb({pk}.data, {o} >> 3)")
        else:
            fn.emit(f"{h}._ext({raw}{', ' + n if has_var else ''})")
        fn.emit(f"{pk}.off = {end}")
        for sib in self.union_siblings(target, fn):
            fn.emit(f"{sib}._v = False")
        if stack is not None:
            fn.emit(f"{stack}.nextIndex += 1")
        if self.trace:
            fn.emit(f"LOG({'Extracting header ' + repr(expr_text(target))!r})")
        return EV("", VOID)

    def _m_packet_in_lookahead(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 0)
        if len(e.type_args) != 1:
            raise P4Error(e.loc, "lookahead needs a type argument: lookahead<T>()")
        lt = self.genv.resolve(e.type_args[0])
        w = type_width(lt)
        pk = base.code
        v = fn.new("la")
        fn.emit(f"if {pk}.off + {w} > {pk}.nbits: raise ParserErr('PacketTooShort')")
        fn.emit(
            f"{v} = (int.from_bytes({pk}.data[{pk}.off >> 3:({pk}.off + {w} + 7) >> 3], "
            f"'big') >> (-({pk}.off + {w}) & 7)) & {mask(w)}"
        )
        if isinstance(lt, TBit):
            return EV(v, lt)
        if isinstance(lt, TBool):
            return EV(f"({v} == 1)", lt)
        if isinstance(lt, TComposite) and lt.kind == "header":
            hh = fn.new("lh")
            fn.emit(f"{hh} = {self.class_of(lt)}()")  # type: ignore[attr-defined]
            fn.emit(f"{hh}._ext({v} << {header_pad(lt)})")
            return EV(hh, lt)
        if isinstance(lt, TComposite) and lt.kind == "struct":
            return EV(self.unpack_struct(v, lt, e, fn), lt)
        raise P4Error(e.loc, f"lookahead<{lt.show()}> is not supported")

    def unpack_struct(self, v: str, st: TComposite, e: ast.Call, fn: Fn) -> str:
        """Emit code that builds a struct of type ``st`` from the bits in ``v`` (first
        field in the high bits, as the packet lays them out); returns its variable.

        Example: ``struct { bit<8> x; bool y; }`` from ``v`` → ``x = (v >> 1) & 255``,
        ``y = bool(v & 1)``.
        """
        sv = fn.new("ls")
        fn.emit(f"{sv} = {self.class_of(st)}()")  # type: ignore[attr-defined]
        shift = type_width(st)
        for name, ft in st.fields:
            w = type_width(ft)
            shift -= w
            bits = f"(({v} >> {shift}) & {mask(w)})"
            dst = f"{sv}.{pyname(name)}"
            if isinstance(ft, TBool):
                fn.emit(f"{dst} = bool{bits}")
            elif isinstance(ft, TBit) or (isinstance(ft, TEnum) and ft.underlying is not None):
                fn.emit(f"{dst} = {bits}")
            elif isinstance(ft, TComposite) and ft.kind == "header":
                fn.emit(f"{dst}._ext({bits} << {header_pad(ft)})")
            elif isinstance(ft, TComposite) and ft.kind == "struct":
                fn.emit(f"{dst} = {self.unpack_struct(bits, ft, e, fn)}")
            else:
                raise P4Error(e.loc, f"lookahead of a struct with a {ft.show()} field")
        return sv

    def _m_packet_in_advance(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1)
        n = self.value(e.args[0].value, fn, TBit(32))
        pk = base.code
        fn.emit(f"if {pk}.off + {n.code} > {pk}.nbits: raise ParserErr('PacketTooShort')")
        return EV(f"{pk}.off += {n.code}", VOID)

    def _m_packet_in_length(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 0)
        return EV(f"len({base.code}.data)", TBit(32))

    def _m_packet_out_emit(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1)
        v = self.expr(e.args[0].value, fn)
        if isinstance(v.type, TComposite):
            return EV(f"{v.code}._emit({base.code})", VOID)
        if isinstance(v.type, TStack):
            return EV(f"for _e in {v.code}.h: _e._emit({base.code})", VOID)
        raise P4Error(e.loc, f"emit needs a header, stack, struct or union, got {v.type.show()}")

    def index(self, a: ast.Expr, fn: Fn) -> EV:
        """An extern index: any bit<W> (v1model's newer externs take a generic index
        type), unsized literals become bit<32>."""
        ev = self.expr(a, fn)
        if isinstance(ev.type, TInfInt):
            return self.convert(ev, TBit(32), a)  # type: ignore[attr-defined]
        if not isinstance(ev.type, TBit):
            raise P4Error(a.loc, f"an index must be a bit<W> value, got {ev.type.show()}")
        return ev

    def _m_register_read(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 2)
        vt = t.args[0] if t.args else TBit(32)
        lv = self.expr(e.args[0].value, fn, vt)
        if not lv.lval:
            raise P4Error(e.args[0].loc, "register read needs an assignable destination")
        self.coerce(lv, vt, e.args[0].value)
        idx = self.index(e.args[1].value, fn)
        # in range (the packet path's common case): the list cell, no method call; out of
        # range: Register.read logs and keeps the destination, as BMv2 does
        i = fn.new("ri")
        cells, size = self.register_cells(base)
        code = (
            f"({cells}[{i}] if 0 <= ({i} := {idx.code}) < {size} "
            f"else {base.code}.read({i}, {lv.code}))"
        )
        return EV(self.assign_code(lv, code, e.args[0].value, fn), VOID)

    def register_cells(self, base: EV) -> tuple[str, str]:
        """(list of cells, size) of a register for the packet path: the instance binds the
        ``Register.values`` list as ``<register>_v`` (it is never replaced) and the size is
        known here; an unknown register (a future kind of reference) goes through
        attributes."""
        info = next((x for x in self.externs if x.pyname == base.code), None)
        if info is None or info.kind != "register":
            return f"{base.code}.values", f"{base.code}.size"
        return f"{base.code}_v", str(int(info.size))

    def _m_register_write(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 2)
        vt = t.args[0] if t.args else TBit(32)
        idx = self.index(e.args[0].value, fn)
        v = self.value(e.args[1].value, fn, vt)
        val = f"(1 if {v.code} else 0)" if isinstance(vt, TBool) else v.code
        # the value already fits the register's width (it has the register's type)
        i = fn.new("ri")
        cells, size = self.register_cells(base)
        fn.emit(f"if 0 <= ({i} := {idx.code}) < {size}: {cells}[{i}] = {val}")
        fn.emit(f"else: {base.code}.write({i}, {val})")
        return EV("", VOID)

    def _m_counter_count(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1)
        idx = self.index(e.args[0].value, fn)
        return EV(f"{base.code}.count({idx.code}, CTX.sm.packet_length)", VOID)

    def _m_direct_counter_count(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 0)
        return EV("", VOID)  # counted by the table on a hit, as BMv2 does

    def _m_meter_execute_meter(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 2)
        idx = self.index(e.args[0].value, fn)
        lv = self.expr(e.args[1].value, fn)
        if not lv.lval:
            raise P4Error(e.args[1].loc, "execute_meter needs an assignable destination")
        code = f"{base.code}.execute({idx.code}, CTX.sm.packet_length, CTX.now, {lv.code})"
        return EV(self.assign_code(lv, code, e.args[1].value, fn), VOID)

    def _m_direct_meter_read(self, base: EV, t: TExtern, e: ast.Call, fn: Fn) -> EV:
        self.nargs(e, 1)
        lv = self.expr(e.args[0].value, fn)
        if not lv.lval:
            raise P4Error(e.args[0].loc, "direct_meter.read needs an assignable destination")
        return EV(self.assign_code(lv, "CTX.color", e.args[0].value, fn), VOID)

    # -- extern functions -----------------------------------------------------------

    def extern_function(
        self, name: str, decls: list[ast.FunctionDecl], e: ast.Call, fn: Fn, stmt: bool
    ) -> EV:
        if not any(len(d.params) == len(e.args) for d in decls):
            counts = sorted({len(d.params) for d in decls})
            raise P4Error(
                e.loc,
                f"{name} takes {' or '.join(map(str, counts))} argument(s), got {len(e.args)}",
            )
        h = getattr(self, f"_f_{name}", None)
        if h is None:
            raise P4Error(e.loc, f"p4sim does not implement the extern function '{name}'")
        decl = next(d for d in decls if len(d.params) == len(e.args))
        self.check_extern_args(decl, e, fn)
        return h(e, fn)

    def check_extern_args(self, d: ast.FunctionDecl, e: ast.Call, fn: Fn) -> None:
        """Type-check arguments against the non-generic parameters of an extern."""

        scratch = Fn(fn.scope, fn.kind, fn.path, ctl=fn.ctl)  # its lines are dropped
        scratch.known = dict(fn.known)
        for p, a in zip(d.params, e.args, strict=False):
            if _mentions(p.type, set(d.type_params)):
                continue
            t = self.genv.resolve(p.type)
            if p.direction in ("out", "inout"):
                ev = self.expr(a.value, scratch, t)
                if not ev.lval:
                    raise P4Error(
                        a.loc, f"argument for {p.direction} parameter '{p.name}' must be assignable"
                    )
                self.coerce(ev, t, a.value)
            else:
                self.value(a.value, scratch, t)

    def _arg(self, e: ast.Call, i: int) -> ast.Expr:
        return e.args[i].value

    def sm_code(self, fn: Fn) -> str:
        return "CTX.sm"

    def _f_mark_to_drop(self, e: ast.Call, fn: Fn) -> EV:
        sm = self.expr(self._arg(e, 0), fn).code if e.args else "CTX.sm"
        return EV(f"{sm}.egress_spec = {DROP_PORT}; {sm}.mcast_grp = 0", VOID)

    def _f_verify(self, e: ast.Call, fn: Fn) -> EV:
        if fn.kind != "parser":
            raise P4Error(e.loc, "verify() can only be called in a parser")
        c = self.value(self._arg(e, 0), fn, BOOL)
        err = self.value(self._arg(e, 1), fn, TError())
        return EV(f"if not {c.code}: raise ParserErr({err.code})", VOID)

    def fields_code(self, data: ast.Expr, fn: Fn) -> str:
        """``[(value, width), ...]`` for hash/checksum inputs; fields of invalid headers
        are ``None`` (skipped, as BMv2 does)."""
        ev = self.expr(data, fn)
        flat = self.flat_fields(ev, data)  # type: ignore[attr-defined]
        valids = {v for _, _, v in flat}
        if len(valids) == 1 and None not in valids:
            (vc,) = valids
            ok = "[" + ", ".join(f"({c}, {w})" for c, w, _ in flat) + "]"
            bad = "[" + ", ".join(f"(None, {w})" for _, w, _ in flat) + "]"
            return f"({ok} if {vc} else {bad})"
        items = [f"({c}, {w})" if v is None else f"({c} if {v} else None, {w})" for c, w, v in flat]
        return "[" + ", ".join(items) + "]"

    def algo(self, a: ast.Expr, fn: Fn) -> str:
        ev = self.expr(a, fn)
        if not (isinstance(ev.type, TEnum) and ev.is_const):
            raise P4Error(a.loc, "expected a HashAlgorithm member")
        return repr(ev.const)

    def _f_hash(self, e: ast.Call, fn: Fn) -> EV:
        lv = self.expr(self._arg(e, 0), fn)
        if not lv.lval or not isinstance(lv.type, TBit):
            raise P4Error(e.args[0].loc, "hash needs an assignable bit<W> destination")
        algo = self.algo(self._arg(e, 1), fn)
        base = self.expr(self._arg(e, 2), fn)
        mx = self.expr(self._arg(e, 4), fn)
        fields = self.fields_code(self._arg(e, 3), fn)
        code = f"v1model_hash({algo}, {base.code}, {fields}, {mx.code}, {lv.type.width})"
        return EV(self.assign_code(lv, code, self._arg(e, 0), fn), VOID)

    def _f_random(self, e: ast.Call, fn: Fn) -> EV:
        lv = self.expr(self._arg(e, 0), fn)
        if not lv.lval or not isinstance(lv.type, TBit):
            raise P4Error(e.args[0].loc, "random needs an assignable bit<W> destination")
        lo = self.value(self._arg(e, 1), fn, lv.type)
        hi = self.value(self._arg(e, 2), fn, lv.type)
        code = f"_randint({lo.code}, {hi.code})"
        return EV(self.assign_code(lv, code, self._arg(e, 0), fn), VOID)

    def _checksum(self, e: ast.Call, fn: Fn, verify: bool, payload: bool) -> EV:
        c = self.value(self._arg(e, 0), fn, BOOL)
        algo = self.algo(self._arg(e, 3), fn)
        fast = None if payload else self.csum16_code(self._arg(e, 1), algo, fn)
        fields = self.fields_code(self._arg(e, 1), fn) if fast is None else ""
        cs = self.expr(self._arg(e, 2), fn)
        if not isinstance(cs.type, TBit):
            raise P4Error(e.args[2].loc, "the checksum field must be a bit<W>")
        pl = ", CTX.payload" if payload else ""
        if verify:
            calc = f"verify_checksum({algo}, {fields}, {cs.code}{pl})"
            if fast is not None:
                calc = f"{fast} == {cs.code}"
            return EV(f"if {c.code} and not {calc}: CTX.sm.checksum_error = 1", VOID)
        if not cs.lval:
            raise P4Error(e.args[2].loc, "update_checksum needs an assignable field")
        val = fast if fast is not None else f"checksum({algo}, {fields}{pl})"
        val = f"{val} & {mask(cs.type.width)}"
        return EV(f"if {c.code}: " + self.assign_code(cs, val, self._arg(e, 2), fn), VOID)

    def csum16_code(self, data: ast.Expr, algo: str, fn: Fn) -> str | None:
        """The internet checksum of a field list whose fields belong to one header (or to
        none), computed on one integer instead of a serialised list (``rt.csum16_int``);
        None when another algorithm or mixed validity needs the general path."""
        if algo != repr("csum16"):
            return None
        flat = self.flat_fields(self.expr(data, fn), data)  # type: ignore[attr-defined]
        valids = {v for _, _, v in flat}
        if len(valids) > 1 or not flat or not all(w.isdigit() for _, w, _ in flat):
            return None  # mixed validity, nothing, or a varbit (run-time width)
        total = sum(int(w) for _, w, _ in flat)
        shift = total + (-total % 16)  # BMv2 zero-pads to bytes, csum16 to 16-bit words
        parts = []
        for code, w, _ in flat:
            shift -= int(w)
            parts.append(f"({code} << {shift})" if shift else code)
        (valid,) = valids
        value = " | ".join(parts)
        if valid is None:
            return f"csum16_int({value})"
        return f"(csum16_int({value}) if {valid} else 0xFFFF)"

    def _f_verify_checksum(self, e: ast.Call, fn: Fn) -> EV:
        return self._checksum(e, fn, True, False)

    def _f_verify_checksum_with_payload(self, e: ast.Call, fn: Fn) -> EV:
        return self._checksum(e, fn, True, True)

    def _f_update_checksum(self, e: ast.Call, fn: Fn) -> EV:
        return self._checksum(e, fn, False, False)

    def _f_update_checksum_with_payload(self, e: ast.Call, fn: Fn) -> EV:
        return self._checksum(e, fn, False, True)

    def _f_digest(self, e: ast.Call, fn: Fn) -> EV:
        data = self._arg(e, 1)
        if e.type_args:
            ev = self.value(data, fn, self.genv.resolve(e.type_args[0]))
        else:
            ev = self.expr(data, fn)
        flat = self.flat_fields(ev, data)  # type: ignore[attr-defined]
        if isinstance(ev.type, TComposite):
            name = ev.type.name
            fnames = [n for n, _ in ev.type.fields]
        else:
            name = f"digest_{len(self.digests)}"
            elems = data.elems if isinstance(data, ast.ListExpr) else [data]
            fnames = [expr_text(x) for x in elems]
        if len(fnames) != len(flat):
            fnames = [f"f{i}" for i in range(len(flat))]
        fields = [(n, int(w)) for n, (_, w, _) in zip(fnames, flat, strict=False)]
        self.digests.setdefault(name, fields)
        vals = "".join(f"{c}, " for c, _, _ in flat)
        # BMv2 keeps one learn request per packet (the last call) and sends it at the end
        # of ingress; the values are taken here, when digest() is called.
        return EV(f"CTX.digest = ({name!r}, ({vals}))", VOID)

    def data_field_list(self, data: ast.Expr, fn: Fn) -> int:
        """A field list id for the deprecated ``resubmit(data)`` forms: the metadata
        fields named in ``data`` (fields outside the user metadata are not kept)."""
        meta = fn.ctl.meta_code if fn.ctl is not None else None
        ev = self.expr(data, fn)
        paths: list[str] = []
        elems = ev.sym if isinstance(ev.type, TList) else [ev]
        for sub in elems or []:
            if meta and sub.code == meta and isinstance(sub.type, TComposite):
                paths += [f".{pyname(n)}" for n, _ in sub.type.fields]
            elif meta and sub.code.startswith(meta + "."):
                paths.append(sub.code[len(meta) :])
        idx = -(len([k for k in self.field_lists if k < 0]) + 1)
        self.field_lists[idx] = paths
        return idx

    def _f_clone(self, e: ast.Call, fn: Fn) -> EV:
        s = self.value(self._arg(e, 1), fn, TBit(32))
        return EV(f"CTX.clone = ({s.code}, 0)", VOID)

    def _f_clone3(self, e: ast.Call, fn: Fn) -> EV:
        s = self.value(self._arg(e, 1), fn, TBit(32))
        fl = self.data_field_list(self._arg(e, 2), fn)
        return EV(f"CTX.clone = ({s.code}, {fl})", VOID)

    def _f_clone_preserving_field_list(self, e: ast.Call, fn: Fn) -> EV:
        s = self.value(self._arg(e, 1), fn, TBit(32))
        fl = self.genv.const_int(self._arg(e, 2))
        return EV(f"CTX.clone = ({s.code}, {fl})", VOID)

    def _f_resubmit(self, e: ast.Call, fn: Fn) -> EV:
        return EV(f"CTX.resubmit = {self.data_field_list(self._arg(e, 0), fn)}", VOID)

    def _f_resubmit_preserving_field_list(self, e: ast.Call, fn: Fn) -> EV:
        return EV(f"CTX.resubmit = {self.genv.const_int(self._arg(e, 0))}", VOID)

    def _f_recirculate(self, e: ast.Call, fn: Fn) -> EV:
        return EV(f"CTX.recirc = {self.data_field_list(self._arg(e, 0), fn)}", VOID)

    def _f_recirculate_preserving_field_list(self, e: ast.Call, fn: Fn) -> EV:
        return EV(f"CTX.recirc = {self.genv.const_int(self._arg(e, 0))}", VOID)

    def _f_truncate(self, e: ast.Call, fn: Fn) -> EV:
        n = self.value(self._arg(e, 0), fn, TBit(32))
        return EV(f"CTX.truncate = {n.code}", VOID)

    def _f_assert(self, e: ast.Call, fn: Fn) -> EV:
        c = self.value(self._arg(e, 0), fn, BOOL)
        msg = f"{e.loc}: assertion failed"
        return EV(f"if not {c.code}: raise P4AssertionError({msg!r})", VOID)

    _f_assume = _f_assert

    def _f_log_msg(self, e: ast.Call, fn: Fn) -> EV:
        msg = self.expr(self._arg(e, 0), fn)
        if not msg.is_const:
            raise P4Error(e.args[0].loc, "log_msg needs a string literal")
        if not self.trace:
            return EV("", VOID)
        vals = "()"
        if len(e.args) == 2:
            ev = self.expr(self._arg(e, 1), fn)
            flat = self.flat_fields(ev, self._arg(e, 1))  # type: ignore[attr-defined]
            vals = "(" + "".join(f"{c}, " for c, _, _ in flat) + ")"
        return EV(f"LOG(format_log({msg.const!r}, {vals}))", VOID)

    # -- instances of externs -----------------------------------------------------------

    def extern_instance(
        self, d: ast.Instantiation, t: TExtern, path: str, inst: CtlInst | None
    ) -> Sym:

        fq = fq_name(path, d.name, d.annotations)
        py = f"X_{next(self.ids)}_{pyname(d.name)}"
        scope = inst.scope if inst is not None else self.genv.scope
        dummy = Fn(scope, "function", path)
        args = [self.expr(a.value, dummy) for a in d.args]
        for a, ev in zip(d.args, args, strict=False):
            if not ev.is_const:
                raise P4Error(a.loc, "extern constructor arguments must be constants")
        kind = t.name
        if kind == "register":
            if not args or not t.args or not isinstance(t.args[0], (TBit, TBool)):
                raise P4Error(d.loc, "register<T>(size): T must be bit<W>/int<W>")
            width = type_width(t.args[0])
            self.externs.append(
                ExternInfo(
                    "register", fq, py, args[0].const, width, annotations=list(d.annotations)
                )
            )
        elif kind in ("counter", "meter"):
            self.externs.append(
                ExternInfo(
                    kind, fq, py, args[0].const, 0, args[1].const, annotations=list(d.annotations)
                )
            )
        elif kind in ("direct_counter", "direct_meter"):
            self.externs.append(
                ExternInfo(kind, fq, py, 0, 0, args[0].const, annotations=list(d.annotations))
            )
        elif kind in ("action_profile", "action_selector"):
            self.externs.append(profile_info(kind, fq, py, args, list(d.annotations)))
        elif kind == "Checksum16":
            pass  # accepted; using it reports an error
        else:
            raise P4Error(d.loc, f"p4sim does not implement extern '{kind}'")
        return Sym("extern", t, py, decl=d, extra={"fq": fq})

    def gen_value_set(self, d: ast.ValueSetDecl, inst: CtlInst) -> None:

        t = self.genv.resolve(d.elem_type)
        if isinstance(t, TComposite):
            widths = [type_width(ft) for _, ft in t.fields]
            names = [n for n, _ in t.fields]
        else:
            widths = [type_width(t)]
            names = [""]
        fq = fq_name(inst.path, d.name, d.annotations)
        py = f"VS_{next(self.ids)}_{pyname(d.name)}"
        self.value_sets.append(
            ValueSetInfo(fq, py, widths, self.genv.const_int(d.size), names, list(d.annotations))
        )
        inst.scope.declare(d.name, Sym("value_set", t, py, decl=d), d.loc)


def profile_info(kind: str, fq: str, py: str, args: list, annos: list) -> ExternInfo:
    """ExternInfo of an ``action_profile(size)`` or ``action_selector(algo, size, width)``:
    ``unit`` holds the selector's hash algorithm, ``width`` its output width."""
    if kind == "action_profile":
        return ExternInfo(kind, fq, py, int(args[0].const), annotations=annos)
    algo = str(args[0].const)
    return ExternInfo(kind, fq, py, int(args[1].const), int(args[2].const), algo, None, annos)


def _mentions(t: ast.Type, names: set[str]) -> bool:
    """True when the type refers to one of the type parameters ``names``."""
    if isinstance(t, ast.NamedType):
        return t.name in names or any(_mentions(x, names) for x in t.type_args)
    if isinstance(t, ast.HeaderStackType):
        return _mentions(t.elem, names)
    if isinstance(t, ast.TupleType):
        return any(_mentions(x, names) for x in t.elems)
    return False


def _call_argument(code: str, at: int) -> str:
    """The text between the parenthesis at ``code[at]`` and the one that closes it."""
    depth = 0
    for i in range(at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return code[at + 1 : i]
    raise ValueError(f"unbalanced generated code: {code}")
