"""``varbit<N>`` in the C generator, of any maximum width (IPv4 and TCP options).

A varbit value is a C struct ``vb_K { u64 n; uint8_t b[K]; }``: its current width in
bits (``n``; the parser's two-argument extract only takes whole bytes, as on the Python
back end) and its bytes, big-endian, ``K`` = N/8 rounded up. Only the first ``n / 8``
bytes are meaningful, so that assignment copies the struct and equality compares the
widths and those bytes (Python's ``(value, width)`` tuples compare the same way).

* ``pk.extract(h, n)``: the bytes are taken from the packet at any bit offset;
* ``pk.emit(h)``: written back at the output offset;
* a field list (``hash``, checksums): the varbit's bytes, as many as its width says.

Example: ``varbit<320> options`` in header ``ipv4_t`` →
``typedef struct vb_40 { u64 n; uint8_t b[40]; } vb_40;`` and ``vb_40 f_options;``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from p4sim.compiler.typecheck import TVarbit

if TYPE_CHECKING:
    from p4sim.native.cvalues import V

#: In every generated program: bytes in and out of the packet at a bit offset.
RUNTIME = """
static void p4n_get_bytes(uint8_t *dst, const uint8_t *d, u64 off, u64 n) {
    if ((off & 7) == 0) { memcpy(dst, d + (off >> 3), n); return; }
    for (u64 i = 0; i < n; i++) dst[i] = (uint8_t)p4n_get_bits(d, off + 8 * i, 8);
}
static void p4n_put_bytes(uint8_t *d, u64 off, const uint8_t *src, u64 n) {
    if ((off & 7) == 0) { memcpy(d + (off >> 3), src, n); return; }
    for (u64 i = 0; i < n; i++) p4n_put_bits(d, off + 8 * i, src[i], 8);
}
"""


class VarbitMixin:
    """The C generator's varbit values (see the module docstring)."""

    if TYPE_CHECKING:  # the C generator's own (p4sim/native/cgen.py)
        type_src: list[str]

    _varbits: dict[int, str]

    def varbit_struct(self, t: TVarbit) -> str:
        """The C struct of ``varbit<N>`` values (one per byte count)."""
        k = max(1, (t.max_width + 7) // 8)
        if not hasattr(self, "_varbits"):
            self._varbits = {}
        got = self._varbits.get(k)
        if got is None:
            got = self._varbits[k] = f"vb_{k}"
            self.type_src.append(f"typedef struct {got} {{ u64 n; uint8_t b[{k}]; }} {got};")
        return got

    @staticmethod
    def varbit_extract(code: str, nbits: str, off: str) -> str:
        """C statements: ``nbits`` (whole bytes, checked by the caller) from bit ``off`` of
        the input packet into the varbit ``code``."""
        return f"{code}.n = {nbits}; p4n_get_bytes({code}.b, p4n_in, {off}, {nbits} >> 3);"

    @staticmethod
    def varbit_emit(code: str, off: str) -> str:
        """C statement: the varbit ``code``'s bytes at bit ``off`` of the output packet."""
        return f"p4n_put_bytes(p4n_out, {off}, {code}.b, {code}.n >> 3);"

    @staticmethod
    def varbit_equal(a: str, b: str) -> str:
        return f"({a}.n == {b}.n && !memcmp({a}.b, {b}.b, {a}.n >> 3))"

    @staticmethod
    def varbit_fields(v: V, owner: str | None) -> tuple[str, int]:
        """(C statement, most entries) adding a varbit's bytes to a field list's
        ``fv_``/``fw_`` (left out with its header when ``owner``, its validity, is 0)."""
        k = max(1, (v.type.max_width + 7) // 8)
        put = (
            f"for (u64 i_ = 0; i_ < ({v.code}.n >> 3); i_++) "
            f"{{ fv_[fn_] = {v.code}.b[i_]; fw_[fn_] = 8; fn_++; }}"
        )
        return (f"if ({owner}) {{ {put} }}" if owner else put), k
