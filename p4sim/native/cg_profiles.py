"""Tables with an ``action_profile`` or ``action_selector`` in the C generator, as BMv2
(and the Python back end, p4sim/runtime/action_profiles.py) run them.

An entry names a member (the Python side lays out the member's action and data in its
place) or a group (action -2, its group number as data; the group's members follow the
table in ``p4n_table.grp/mact/margs``, in member-handle order). On a hit on a group, the
selector hashes its ``selector`` keys (serialised as BMv2 does, with the selector's
algorithm) and takes member ``hash % size``; an empty group is a miss.

Example (the lookup of a table with selector keys ``a, b`` and crc16)::

    if (e >= 0 && T->action[e] == -2) {
        const int64_t *g_ = T->grp + 2 * T->args[e * T->nargs];
        if (g_[1] == 0) e = -1;
        else { u64 fv_[2] = {a, b}; int fw_[2] = {32, 16};
               int64_t k_ = g_[0] + p4n_select(1, fv_, fw_, 2) % g_[1];
               a = T->mact[k_]; A = T->margs + k_ * T->nargs; }
    } ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.compiler.typecheck import TBit, TBool, TEnum
from p4sim.frontend import ast
from p4sim.native.cvalues import Unsupported, V

if TYPE_CHECKING:
    pass

#: In every generated program: the selector's hash of its keys.
RUNTIME = """
static u64 p4n_select(int algo, const u64 *v, const int *w, int n) {
    uint8_t buf[256];
    u64 len = p4n_serialize(buf, v, w, n);
    return p4n_algo(algo, buf, len);
}
"""

#: action_selector algorithms → p4n_algo's codes (cgen.ALGOS)
SELECTOR_ALGOS = {"crc32": 0, "crc16": 1, "csum16": 2, "identity": 3, "xor16": 4}
SELECTOR_ALGOS.update(crc32_custom=0, crc16_custom=1)


class ProfilesMixin:
    """The C generator's indirect tables (see the module docstring)."""

    if TYPE_CHECKING:  # the C generator's own (p4sim/native/cgen.py)
        extern_names: dict[str, Any]

        def expr(self, e: ast.Expr, expect: Any = None) -> V: ...

    def indirect_lookup(self, d: ast.TableDecl, info: Any) -> list[str]:
        """C lines after ``p4n_lookup`` set ``e``: ``a``/``A`` of the member a hit selects,
        or ``e = -1`` for an empty group; ordinary hits as in a direct table."""
        lines = []
        if any(k.match_kind == "selector" for k in d.keys):
            prof = self.extern_names.get(info.implementation)
            algo = SELECTOR_ALGOS.get(getattr(prof, "unit", None) or "")
            if prof is None or algo is None:
                raise Unsupported(f"action selector {info.implementation}")
            vals, widths = [], []
            for k in d.keys:
                if k.match_kind != "selector":
                    continue
                v = self.expr(k.expr)
                t = v.type.underlying if isinstance(v.type, TEnum) else v.type
                if isinstance(t, TBool):
                    vals.append(v.code)
                    widths.append(1)
                elif isinstance(t, TBit) and t.width <= 64:
                    vals.append(v.code)
                    widths.append(t.width)
                else:
                    raise Unsupported(f"selector key of type {v.type.show()}")
            if sum(widths) > 2048:
                raise Unsupported("selector keys of more than 2048 bits")
            n = len(vals)
            pick = (
                f"u64 fv_[{n}] = {{{', '.join(vals)}}}; int fw_[{n}] = "
                f"{{{', '.join(map(str, widths))}}}; "
                f"int64_t k_ = g_[0] + (int64_t)(p4n_select({algo}, fv_, fw_, {n}) % "
                "(u64)g_[1]);"
            )
        else:  # a profile without a selector: a group has one member
            pick = "int64_t k_ = g_[0];"
        lines += [
            "    if (e >= 0 && T->action[e] == -2) {",
            "        const int64_t *g_ = T->grp + 2 * (int64_t)T->args[e * T->nargs];",
            "        if (g_[1] == 0) e = -1;",
            f"        else {{ {pick} a = T->mact[k_]; A = T->margs + k_ * T->nargs; }}",
            "    } else if (e >= 0) { a = T->action[e]; A = T->args + e * T->nargs; }",
            "    if (e < 0) { a = T->def_action; A = T->def_args; }",
        ]
        return lines
