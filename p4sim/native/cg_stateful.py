"""Meters, random numbers and digests in the C generator.

* ``meter(size, MeterType.packets|bytes)``: ``execute_meter(i, dst)`` runs
  ``p4n_meter`` (runtime.h), the Python back end's ``MeterState.execute`` (RFC 2698,
  colour-blind) over the meter's state in shared memory: 9 doubles per index
  (``backend.METER_FIELDS``) that the Python objects read and write through
  ``NativeMeterState``, and the array's time origin. An index out of range leaves
  ``dst`` unchanged.
* ``direct_meter`` of a table: a hit runs ``p4n_meter`` over the entry's row of the
  table's layout (``p4n_table.meters``; the Python side puts each entry's MeterState
  there, unset ones unconfigured: GREEN), a miss is GREEN, as on Python; ``read(dst)``
  gives the colour of the table's last run (``p4n_color``).
* ``random(dst, lo, hi)``: a value in ``[lo, hi]`` (``lo`` when ``lo > hi``, as on
  Python) from a xorshift64* generator of the switch's own.
* ``digest<T>(receiver, data)`` with a struct ``T``: the values are taken at the call
  (the last call of an ingress pass wins) and queued at the end of ingress; the Python
  side turns them into ``Switch.digests`` entries ``(T's name, values)`` after each
  packet. A program with digests keeps the Python packet loop (each packet still runs
  in C) so that the P4Runtime server sees every digest with its packet.

Example: ``m.execute_meter((bit<32>)0, hdr.res.color);`` →
``{ u64 mi_ = 0ULL; if (mi_ < 4) hdr.f_color = p4n_meter(M0 + 9 * mi_, 1, ...); }``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.compiler.typecheck import TBit, TBool, TComposite
from p4sim.frontend import ast
from p4sim.native.cvalues import Unsupported, V

if TYPE_CHECKING:
    from p4sim.compiler.typecheck import GlobalEnv

#: values a digest may carry (its fields, flattened)
MAX_DIGEST_FIELDS = 64


class StatefulMixin:
    """The C generator's meters and digests (see the module docstring)."""

    if TYPE_CHECKING:  # the C generator's own (p4sim/native/cgen.py)
        genv: GlobalEnv
        decls: list[str]
        compiled: Any

        def expr(self, e: ast.Expr, expect: Any = None) -> V: ...
        def value(self, e: ast.Expr, t: Any) -> V: ...
        def index(self, e: ast.Expr) -> str: ...
        def ctype(self, t: Any) -> str: ...

    meters: list[tuple[str, int]]  # (fq, size), index = C meter number
    digest_names: list[str]  # index = C digest id

    def meter_instance(self, fq: str, info: Any) -> V:
        n = len(self.meters)
        self.meters.append((fq, info.size))
        self.decls.append(f"static double *M{n}; static int64_t *MO{n};")
        return V(f"M{n}", None, obj=("meter", n, info.size, info.unit))

    def execute_meter(self, sym: V, args: list[ast.Expr]) -> str:
        _, n, size, unit = sym.obj
        if len(args) != 2:
            raise Unsupported("execute_meter with other than 2 arguments")
        i = self.index(args[0])
        dst = self.expr(args[1])
        if not isinstance(dst.type, TBit):
            raise Unsupported(f"meter colour into {dst.type.show()}")
        units = "1.0" if unit == "packets" else "(double)p4n_sm->f_packet_length"
        mask = (1 << dst.type.width) - 1
        return (
            f"{{ u64 mi_ = {i}; if (mi_ < {size}) {dst.code} = p4n_meter(M{n} + 9 * mi_, "
            f"{units}, (double)((int64_t)p4n_now - MO{n}[0])) & {mask}ULL; }}"
        )

    def direct_meter_hit(self, info: Any) -> str:
        """C statement on a hit of a table with a direct meter: the entry's colour."""
        dm = self.compiled_extern(info.direct_meter)
        units = "1.0" if dm.unit == "packets" else "(double)p4n_sm->f_packet_length"
        return (
            f"p4n_color = p4n_meter(T->meters + 9 * e, {units}, "
            "(double)((int64_t)p4n_now - T->morigin));"
        )

    def direct_meter_read(self, args: list[ast.Expr]) -> str:
        if len(args) != 1:
            raise Unsupported("direct_meter.read with other than 1 argument")
        dst = self.expr(args[0])
        if not isinstance(dst.type, TBit):
            raise Unsupported(f"meter colour into {dst.type.show()}")
        return f"{dst.code} = p4n_color & {(1 << dst.type.width) - 1}ULL"

    def random_call(self, args: list[ast.Expr]) -> list[str]:
        if len(args) != 3:
            raise Unsupported("random with other than 3 arguments")
        dst = self.expr(args[0])
        if not isinstance(dst.type, TBit) or dst.type.signed:
            raise Unsupported(f"random into {dst.type.show()}")
        lo, hi = self.value(args[1], dst.type), self.value(args[2], dst.type)
        return [f"{dst.code} = p4n_random({lo.code}, {hi.code});"]

    def compiled_extern(self, name: str) -> Any:
        return next(e for e in self.compiled.externs if e.name == name)

    def digest_call(self, call: ast.Call) -> list[str]:
        args = [a.value for a in call.args]
        t = self.genv.resolve(call.type_args[0]) if len(call.type_args) == 1 else None
        if not (isinstance(t, TComposite) and t.kind == "struct") or len(args) != 2:
            raise Unsupported("digest of other than a struct type named at the call")
        if t.name not in self.compiled.digests:
            raise Unsupported(f"digest {t.name}")
        v = self.value(args[1], t)
        leaves = _leaves(v.code, t)
        if len(leaves) > MAX_DIGEST_FIELDS:
            raise Unsupported(f"digest {t.name} of more than {MAX_DIGEST_FIELDS} fields")
        if t.name not in self.digest_names:
            self.digest_names.append(t.name)
        k = self.digest_names.index(t.name)
        sets = " ".join(f"p4n_dg_v[{j}] = {c};" for j, c in enumerate(_leaves("dg_", t)))
        return [
            f"{{ {self.ctype(t)} dg_ = {v.code}; {sets} "
            f"p4n_dg_req = 1; p4n_dg_id = {k}; p4n_dg_n = {len(leaves)}; }}"
        ]


def _leaves(code: str, t: TComposite) -> list[str]:
    """C codes of the scalar fields of a struct value, nested structs flattened in order
    (as the Python back end's flat_fields)."""
    out: list[str] = []
    for n, ft in t.fields:
        c = f"{code}.f_{n}"
        if isinstance(ft, TComposite) and ft.kind == "struct":
            out += _leaves(c, ft)
        elif isinstance(ft, (TBit, TBool)) or getattr(ft, "underlying", None) is not None:
            out.append(c)
        else:
            raise Unsupported(f"digest field {n} of type {ft.show()}")
    return out


#: In every generated program: the clock of the pass, the meter marker and the digest
#: queue the Python side reads after each packet (NativePipeline.process).
RUNTIME = """
static u64 p4n_now;  /* the switch clock of this packet (microseconds) */
static u64 p4n_color;  /* the colour of the last table run with a direct meter */
static u64 p4n_rng = 0x9E3779B97F4A7C15ULL;
static u64 p4n_random(u64 lo, u64 hi) {
    if (lo > hi) return lo;
    p4n_rng ^= p4n_rng >> 12; p4n_rng ^= p4n_rng << 25; p4n_rng ^= p4n_rng >> 27;
    u64 r = p4n_rng * 0x2545F4914F6CDD1DULL, span = hi - lo + 1;
    return span ? lo + r % span : r;
}
/* p4sim.runtime.externs.MeterState.execute over m: configured, cir, cburst, ctok, clast,
 * pir, pburst, ptok, plast (tokens and times are whole numbers held in doubles). */
static u64 p4n_meter(double *m, double units, double micros) {
    if (m[0] == 0) return 0;
    double total = (double)(int64_t)(micros * m[5]);
    double add = total - m[8] > 0 ? total - m[8] : 0;
    m[7] = m[7] + add < m[6] ? m[7] + add : m[6];
    if (total > m[8]) m[8] = total;
    if (m[7] < units) return 2;
    m[7] -= units;
    total = (double)(int64_t)(micros * m[1]);
    add = total - m[4] > 0 ? total - m[4] : 0;
    m[3] = m[3] + add < m[2] ? m[3] + add : m[2];
    if (total > m[4]) m[4] = total;
    if (m[3] < units) return 1;
    m[3] -= units;
    return 0;
}
static int p4n_dg_req;
static int64_t p4n_dg_id, p4n_dg_n;
static u64 p4n_dg_v[64];
#define P4N_DGQ 1024
/* digests queued: id, count, values; read and emptied by the Python side */
int64_t p4n_dgq_n;
int64_t p4n_dgq_id[P4N_DGQ], p4n_dgq_len[P4N_DGQ];
u64 p4n_dgq_v[P4N_DGQ * 64];
static void p4n_digest_flush(void) {
    if (!p4n_dg_req || p4n_dgq_n >= P4N_DGQ) return;
    int64_t k = p4n_dgq_n++;
    p4n_dgq_id[k] = p4n_dg_id; p4n_dgq_len[k] = p4n_dg_n;
    memcpy(&p4n_dgq_v[k * 64], p4n_dg_v, sizeof(u64) * (size_t)p4n_dg_n);
}
"""
