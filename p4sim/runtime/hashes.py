"""v1model hash algorithms and checksums, bit-exact with BMv2 ``simple_switch``.

    >>> compute("crc32", b"123456789") == 0xCBF43926
    True
    >>> serialize_fields([(0b101, 3), (0b11111, 5)]).hex()
    'bf'
    >>> v1model_hash("identity", 100, [(0x1234, 16)], 7, 16)   # 100 + 0x1234 % 7
    105

What BMv2 does, and so what this module does:

* Input serialisation (``bm::BufBuilder::Deparse`` in ``src/bm_sim/calculations.cpp``): the
  fields are packed MSB-first, back to back, with no per-field alignment. When the total bit
  count is not a multiple of 8 the buffer is zero-extended at the *end*: the padding bits are
  the low-order bits of the last byte. Fields of invalid headers are skipped entirely (pass
  ``None`` as the value to get that). ``*_with_payload`` checksums append the payload bytes
  after the (padded) field bytes.
* Every algorithm's raw output is a ``uint64``; the widths are given by ``OUTPUT_WIDTH``.
* ``v1model_hash``: ``simple_switch``'s ``modify_field_with_hash_based_offset`` computes
  ``(h % max) + base`` in ``uint64`` arithmetic, treats ``max == 0`` as ``max == 1`` (so the
  result is ``base``) and the destination field truncates the result to its width.
* ``random``: p4c emits the name, but BMv2 registers no hash called "random", so
  ``simple_switch`` rejects such a JSON ("Unknown hash algorithm"). p4sim returns a uniformly
  random 64-bit value instead (seedable per ``HashCalculator``).
"""

from __future__ import annotations

import random as _random
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from operator import xor

__all__ = [
    "ALGORITHMS",
    "CRC16_PARAMS",
    "CRC32_PARAMS",
    "OUTPUT_WIDTH",
    "CrcParams",
    "HashCalculator",
    "checksum",
    "compute",
    "compute_fields",
    "make_crc",
    "serialize_fields",
    "v1model_hash",
    "verify_checksum",
]

ALGORITHMS: frozenset[str] = frozenset(
    {"crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16", "xor16"}
)

#: Width in bits of each algorithm's raw output. ``identity`` yields the first (up to) 8 input
#: bytes as an integer; ``random`` yields a uniformly random 64-bit value.
OUTPUT_WIDTH: dict[str, int] = {
    "crc32": 32,
    "crc32_custom": 32,
    "crc16": 16,
    "crc16_custom": 16,
    "random": 64,
    "identity": 64,
    "csum16": 16,
    "xor16": 16,
}

_M64 = (1 << 64) - 1

Field = tuple[int | None, int]
HashFn = Callable[[bytes], int]


def _check_algo(algo: str) -> None:
    if algo not in ALGORITHMS:
        known = ", ".join(sorted(ALGORITHMS))
        raise ValueError(f"unknown hash algorithm {algo!r}; v1model HashAlgorithm has: {known}")


# --------------------------------------------------------------------------- serialisation


def serialize_fields(fields: Sequence[Field]) -> bytes:
    """Pack (value, width) fields MSB-first into bytes, zero-padding the tail as BMv2 does.

        >>> serialize_fields([(0xA, 4), (0xB, 4), (0xCD, 8)]).hex()
        'abcd'
        >>> serialize_fields([(0xFFF, 12)]).hex()      # 4 padding bits at the end
        'fff0'

    A value of ``None`` marks a field of an invalid header: BMv2 leaves it out. Values are
    masked to their width (so two's-complement patterns of ``int<W>`` work too).
    """
    acc = 0
    nbits = 0
    for value, width in fields:
        if width < 0:
            raise ValueError(f"field width must be >= 0, got {width}")
        if value is None or width == 0:
            continue
        acc = (acc << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = -nbits % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big")


# --------------------------------------------------------------------------- CRC


@dataclass(frozen=True)
class CrcParams:
    """A CRC parameter set, as BMv2's ``crc_config_t`` (Rocksoft model).

        >>> CrcParams(16, 0x1021, 0xFFFF, 0x0000, False, False)   # CRC-16/CCITT-FALSE
        CrcParams(width=16, poly=4129, init=65535, xor_out=0, reflect_in=False, reflect_out=False)

    ``init`` is the unreflected register start value, as BMv2 uses it
    (``initial_remainder``); ``reflect_in`` is BMv2's ``data_reflected`` and ``reflect_out``
    its ``remainder_reflected``. The poly is given without its top bit (0x04C11DB7 for CRC-32).
    """

    width: int
    poly: int
    init: int
    xor_out: int
    reflect_in: bool
    reflect_out: bool

    def __post_init__(self) -> None:
        if self.width not in (8, 16, 32, 64):
            raise ValueError(f"CRC width must be 8, 16, 32 or 64 (as BMv2), got {self.width}")
        top = 1 << self.width
        for name in ("poly", "init", "xor_out"):
            value = getattr(self, name)
            if not 0 <= value < top:
                raise ValueError(f"CRC {name} 0x{value:x} does not fit in {self.width} bits")


#: BMv2 "crc16" (``struct crc16``: table for poly 0x8005, reflected, init 0, xor 0):
#: CRC-16/ARC, check value 0xBB3D. Also the default of "crc16_custom".
CRC16_PARAMS = CrcParams(16, 0x8005, 0x0000, 0x0000, True, True)
#: BMv2 "crc32" (``struct crc32``): CRC-32/ISO-HDLC, check value 0xCBF43926.
#: Also the default of "crc32_custom".
CRC32_PARAMS = CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)


def _reflect(value: int, nbits: int) -> int:
    """Mirror the low ``nbits`` bits of ``value`` (bit 0 <-> bit nbits-1)."""
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


_REFLECT8 = bytes(_reflect(b, 8) for b in range(256))


@lru_cache(maxsize=64)
def _msb_table(width: int, poly: int) -> tuple[int, ...]:
    """256-entry table for the MSB-first (non-reflected) algorithm, as BMv2 builds it."""
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    table = []
    for byte in range(256):
        rem = byte << (width - 8)
        for _ in range(8):
            rem = ((rem << 1) ^ poly) if rem & top else (rem << 1)
        table.append(rem & mask)
    return tuple(table)


@lru_cache(maxsize=64)
def _lsb_table(width: int, poly: int) -> tuple[int, ...]:
    """256-entry table for the reflected (LSB-first) algorithm."""
    rpoly = _reflect(poly, width)
    table = []
    for byte in range(256):
        rem = byte
        for _ in range(8):
            rem = (rem >> 1) ^ rpoly if rem & 1 else rem >> 1
        table.append(rem)
    return tuple(table)


def _reflected_crc(p: CrcParams) -> HashFn:
    # Equivalent to BMv2's reflect-each-byte + MSB-first + reflect-remainder loop when both
    # reflections are on, but with one table lookup and no per-byte reflection.
    table = _lsb_table(p.width, p.poly)
    start = _reflect(p.init, p.width)
    xor_out = p.xor_out

    def crc(data: bytes) -> int:
        reg = start
        for b in data:
            reg = table[(reg ^ b) & 0xFF] ^ (reg >> 8)
        return reg ^ xor_out

    return crc


def _msb_crc(p: CrcParams) -> HashFn:
    table = _msb_table(p.width, p.poly)
    shift = p.width - 8
    mask = (1 << p.width) - 1
    start, xor_out, width = p.init, p.xor_out, p.width
    reflect_in, reflect_out = p.reflect_in, p.reflect_out

    def crc(data: bytes) -> int:
        if reflect_in:
            data = data.translate(_REFLECT8)
        reg = start
        for b in data:
            reg = table[(reg >> shift) ^ b] ^ ((reg << 8) & mask)
        if reflect_out:
            reg = _reflect(reg, width)
        return reg ^ xor_out

    return crc


def _zlib_crc32(data: bytes) -> int:
    return zlib.crc32(data)


def make_crc(params: CrcParams, *, allow_zlib: bool = True) -> HashFn:
    """A table-driven CRC function for ``params`` (tables cached per parameter set).

        >>> hex(make_crc(CRC16_PARAMS)(b"123456789"))
        '0xbb3d'

    With ``allow_zlib`` the standard CRC-32 set uses ``zlib.crc32`` (same maths, C speed).
    """
    if allow_zlib and params == CRC32_PARAMS:
        return _zlib_crc32
    if params.reflect_in and params.reflect_out:
        return _reflected_crc(params)
    return _msb_crc(params)


# --------------------------------------------------------------------------- other algorithms


def _csum16(data: bytes) -> int:
    """Internet checksum (RFC 1071), as BMv2 ``csum16``/``cksum16``.

    BMv2 sums little-endian words and byte-swaps the folded result (``ntohs(~t3)``); an odd
    trailing byte lands in the high half of a big-endian word, i.e. zero padding at the end.
    """
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _xor16(data: bytes) -> int:
    """XOR of big-endian 16-bit words; a trailing odd byte is the high byte of its word."""
    if len(data) % 2:
        data += b"\x00"
    return reduce(xor, struct.unpack(f">{len(data) // 2}H", data), 0)


def _identity(data: bytes) -> int:
    """The first min(8, len) bytes as a big-endian integer (not left-aligned)."""
    return int.from_bytes(data[:8], "big")


# --------------------------------------------------------------------------- calculator


class HashCalculator:
    """One hash/checksum calculation instance (one BMv2 ``NamedCalculation``).

        >>> calc = HashCalculator("crc16_custom")
        >>> calc.set_crc_params(CrcParams(16, 0x1021, 0xFFFF, 0, False, False))
        >>> hex(calc.compute(b"123456789"))
        '0x29b1'

    Bind one per P4 call site at load time; ``calc.fn(data)`` (or ``compute_fields``) is the
    per-packet path. Custom CRC parameters are per instance, like BMv2's
    ``set_crc16_parameters`` / ``set_crc32_parameters`` on a named calculation.
    """

    __slots__ = ("algo", "output_width", "fn", "_crc_params", "_rng")

    def __init__(
        self,
        algo: str,
        *,
        crc_params: CrcParams | None = None,
        rng: _random.Random | None = None,
    ) -> None:
        _check_algo(algo)
        self.algo = algo
        self.output_width = OUTPUT_WIDTH[algo]
        self._rng = rng if rng is not None else _random.Random()
        self._crc_params: CrcParams | None = None
        self.fn: HashFn = self._build_fn()
        if crc_params is not None:
            self.set_crc_params(crc_params)

    def _build_fn(self) -> HashFn:
        if self.algo in ("crc16", "crc16_custom"):
            self._crc_params = CRC16_PARAMS
            return make_crc(CRC16_PARAMS)
        if self.algo in ("crc32", "crc32_custom"):
            self._crc_params = CRC32_PARAMS
            return make_crc(CRC32_PARAMS)
        if self.algo == "csum16":
            return _csum16
        if self.algo == "xor16":
            return _xor16
        if self.algo == "identity":
            return _identity
        rng = self._rng
        return lambda _data: rng.getrandbits(64)

    @property
    def crc_params(self) -> CrcParams | None:
        """The CRC parameters in use (None for non-CRC algorithms)."""
        return self._crc_params

    def set_crc_params(self, params: CrcParams) -> None:
        """Reconfigure a ``crc16_custom``/``crc32_custom`` instance (control-plane call)."""
        if not self.algo.endswith("_custom"):
            raise ValueError(
                f"CRC parameters can only be set on crc16_custom/crc32_custom, not {self.algo}"
            )
        if params.width != self.output_width:
            raise ValueError(
                f"{self.algo} needs {self.output_width}-bit CRC parameters, got {params.width}"
            )
        self._crc_params = params
        self.fn = make_crc(params)

    def compute(self, data: bytes) -> int:
        """Raw algorithm output over ``data``."""
        return self.fn(data)

    def compute_fields(self, fields: Sequence[Field]) -> int:
        """Raw algorithm output over serialised ``fields``."""
        return self.fn(serialize_fields(fields))

    def v1model_hash(self, base: int, fields: Sequence[Field], max_: int, out_width: int) -> int:
        """``hash(result, algo, base, data, max)`` as simple_switch computes it."""
        return _hash_offset(self.fn(serialize_fields(fields)), base, max_, out_width)

    def checksum(self, fields: Sequence[Field], payload: bytes = b"") -> int:
        """Value ``update_checksum[_with_payload]`` computes (caller truncates to the field)."""
        return self.fn(serialize_fields(fields) + payload)

    def verify(self, fields: Sequence[Field], expected: int, payload: bytes = b"") -> bool:
        """``verify_checksum[_with_payload]``: BMv2 compares the full computed value."""
        return self.fn(serialize_fields(fields) + payload) == expected


def _hash_offset(h: int, base: int, max_: int, out_width: int) -> int:
    if out_width < 0:
        raise ValueError(f"output width must be >= 0, got {out_width}")
    size = max_ & _M64
    if size == 0:
        size = 1  # simple_switch: "hash max given as 0, but treating it as 1"
    value = ((h % size) + (base & _M64)) & _M64
    return value & ((1 << out_width) - 1)


# --------------------------------------------------------------------------- module-level API

_DEFAULT: dict[str, HashCalculator] = {}


def _default(algo: str) -> HashCalculator:
    calc = _DEFAULT.get(algo)
    if calc is None:
        calc = _DEFAULT[algo] = HashCalculator(algo)
    return calc


def compute(algo: str, data: bytes) -> int:
    """Raw output of ``algo`` over ``data`` (custom CRCs use their BMv2 defaults)."""
    return _default(algo).fn(data)


def compute_fields(algo: str, fields: Sequence[Field]) -> int:
    """Raw output of ``algo`` over (value, width) fields serialised as BMv2 does."""
    return _default(algo).fn(serialize_fields(fields))


def v1model_hash(algo: str, base: int, fields: Sequence[Field], max_: int, out_width: int) -> int:
    """v1model ``hash()``: ``base + (h % max)`` in uint64, max 0 read as 1, cut to out_width."""
    return _hash_offset(compute_fields(algo, fields), base, max_, out_width)


def checksum(algo: str, fields: Sequence[Field], payload: bytes = b"") -> int:
    """Checksum over the fields, then ``payload`` (the ``_with_payload`` forms)."""
    return _default(algo).fn(serialize_fields(fields) + payload)


def verify_checksum(
    algo: str, fields: Sequence[Field], expected: int, payload: bytes = b""
) -> bool:
    """True when the computed checksum equals ``expected`` exactly, as BMv2 checks it."""
    return checksum(algo, fields, payload) == expected
