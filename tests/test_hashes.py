"""Tests for p4sim.runtime.hashes: BMv2-exact hashes, checksums and field serialisation."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw

from p4sim.runtime.hashes import (
    ALGORITHMS,
    CRC16_PARAMS,
    CRC32_PARAMS,
    OUTPUT_WIDTH,
    CrcParams,
    HashCalculator,
    checksum,
    compute,
    compute_fields,
    make_crc,
    serialize_fields,
    v1model_hash,
    verify_checksum,
)
from p4sim.runtime.hashes import _msb_table as _msb_table  # table layout check only

CHECK_INPUT = b"123456789"


def slow_crc(p: CrcParams, data: bytes) -> int:
    """Bit-at-a-time Rocksoft-model CRC, written independently of the module under test."""
    mask = (1 << p.width) - 1
    reg = p.init
    for byte in data:
        bits = [(byte >> i) & 1 for i in range(8)]  # LSB first
        if not p.reflect_in:
            bits.reverse()  # MSB first
        for bit in bits:
            top = (reg >> (p.width - 1)) & 1
            reg = (reg << 1) & mask
            if top ^ bit:
                reg ^= p.poly
    if p.reflect_out:
        reg = int(format(reg, f"0{p.width}b")[::-1], 2)
    return reg ^ p.xor_out


# ------------------------------------------------------------ CRC check values


def test_crc32_check_value_is_standard_crc32():
    assert compute("crc32", CHECK_INPUT) == 0xCBF43926


def test_crc16_check_value_is_crc16_arc():
    assert compute("crc16", CHECK_INPUT) == 0xBB3D


def test_custom_crcs_default_to_bmv2_crc16_and_crc32():
    assert compute("crc16_custom", CHECK_INPUT) == 0xBB3D
    assert compute("crc32_custom", CHECK_INPUT) == 0xCBF43926
    assert HashCalculator("crc16_custom").crc_params == CRC16_PARAMS
    assert HashCalculator("crc32_custom").crc_params == CRC32_PARAMS


@pytest.mark.parametrize(
    ("params", "check"),
    [
        (CrcParams(16, 0x1021, 0xFFFF, 0x0000, False, False), 0x29B1),  # CCITT-FALSE
        (CrcParams(16, 0x8005, 0xFFFF, 0x0000, True, True), 0x4B37),  # MODBUS
        (CrcParams(16, 0x1021, 0x0000, 0x0000, True, True), 0x2189),  # KERMIT
        (CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, False, False), 0xFC891918),  # BZIP2
        (CrcParams(32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, True, True), 0xE3069283),  # 32C
        (CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0x00000000, False, False), 0x0376E6E7),  # MPEG2
        (CrcParams(8, 0x07, 0x00, 0x00, False, False), 0xF4),  # CRC-8
        (
            CrcParams(64, 0x42F0E1EBA9EA3693, (1 << 64) - 1, (1 << 64) - 1, False, False),
            0x62EC59E3F1A4F00A,
        ),  # CRC-64/WE
    ],
)
def test_table_crc_matches_catalogue_check_values(params, check):
    assert make_crc(params, allow_zlib=False)(CHECK_INPUT) == check
    assert slow_crc(params, CHECK_INPUT) == check


def test_msb_tables_match_entries_of_bmv2_crc_tables_h():
    # Spot values from behavioral-model src/bm_sim/crc_tables.h (table_crc16, table_crc32).
    t16 = _msb_table(16, 0x8005)
    assert (t16[1], t16[2], t16[3], t16[255]) == (0x8005, 0x800F, 0x000A, 0x0202)
    t32 = _msb_table(32, 0x04C11DB7)
    assert (t32[1], t32[2], t32[255]) == (0x04C11DB7, 0x09823B6E, 0xB1F740B4)


def test_crc_of_empty_input_is_zero_for_bmv2_crc16_and_crc32():
    assert compute("crc32", b"") == 0
    assert compute("crc16", b"") == 0


# ------------------------------------------------------------ custom CRC config


def test_set_crc_params_changes_only_that_instance():
    a = HashCalculator("crc16_custom")
    b = HashCalculator("crc16_custom")
    a.set_crc_params(CrcParams(16, 0x1021, 0xFFFF, 0x0000, False, False))
    assert a.compute(CHECK_INPUT) == 0x29B1
    assert b.compute(CHECK_INPUT) == 0xBB3D
    assert compute("crc16_custom", CHECK_INPUT) == 0xBB3D


def test_crc32_custom_accepts_params_at_construction():
    calc = HashCalculator(
        "crc32_custom", crc_params=CrcParams(32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, True, True)
    )
    assert calc.compute(CHECK_INPUT) == 0xE3069283


def test_set_crc_params_rejects_non_custom_algorithm():
    with pytest.raises(ValueError, match="crc16_custom/crc32_custom"):
        HashCalculator("crc16").set_crc_params(CRC16_PARAMS)


def test_set_crc_params_rejects_wrong_width():
    with pytest.raises(ValueError, match="16-bit"):
        HashCalculator("crc16_custom").set_crc_params(CRC32_PARAMS)


def test_crc_params_reject_values_wider_than_width():
    with pytest.raises(ValueError, match="does not fit in 16 bits"):
        CrcParams(16, 0x18005, 0, 0, True, True)
    with pytest.raises(ValueError, match="width"):
        CrcParams(12, 0x80F, 0, 0, False, False)


# ------------------------------------------------------------ property tests

crc_params = st.builds(
    lambda width, poly, init, xo, ri, ro: CrcParams(
        width, poly % (1 << width), init % (1 << width), xo % (1 << width), ri, ro
    ),
    st.sampled_from([8, 16, 32, 64]),
    st.integers(min_value=0, max_value=(1 << 64) - 1),
    st.integers(min_value=0, max_value=(1 << 64) - 1),
    st.integers(min_value=0, max_value=(1 << 64) - 1),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(params=crc_params, data=st.binary(max_size=40))
def test_table_driven_crc_equals_bitwise_reference(params, data):
    assert make_crc(params, allow_zlib=False)(data) == slow_crc(params, data)


@settings(max_examples=50, deadline=None)
@given(data=st.binary(max_size=64))
def test_zlib_fast_path_equals_table_driven_crc32(data):
    assert make_crc(CRC32_PARAMS)(data) == make_crc(CRC32_PARAMS, allow_zlib=False)(data)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=64).filter(lambda d: len(d) % 2 == 0))
def test_csum16_of_data_followed_by_its_checksum_is_zero(data):
    cks = compute("csum16", data)
    assert compute("csum16", data + cks.to_bytes(2, "big")) == 0


@settings(max_examples=100, deadline=None)
@given(
    fields=st.lists(
        st.integers(min_value=1, max_value=40).flatmap(
            lambda w: st.tuples(st.integers(min_value=0, max_value=(1 << w) - 1), st.just(w))
        ),
        max_size=8,
    )
)
def test_serialize_fields_is_msb_first_concatenation_padded_at_the_end(fields):
    out = serialize_fields(fields)
    nbits = sum(w for _, w in fields)
    assert len(out) == (nbits + 7) // 8
    bits = "".join(format(v, f"0{w}b") for v, w in fields).ljust(len(out) * 8, "0")
    assert "".join(format(byte, "08b") for byte in out) == bits


# ------------------------------------------------------------ serialisation


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ([(0b101, 3), (0b11111, 5)], "bf"),
        ([(0xA, 4), (0xB, 4), (0xCD, 8)], "abcd"),
        ([(0xABC, 12), (0xDEF, 12)], "abcdef"),
        ([(1, 1), (0x55, 7), (0b101, 3)], "d5a0"),  # 11 bits: 5 zero pad bits at the end
        ([(0xFFF, 12)], "fff0"),
        ([(1, 1)], "80"),
        ([], ""),
    ],
)
def test_serialize_non_byte_aligned_fields(fields, expected):
    assert serialize_fields(fields).hex() == expected


def test_serialize_masks_values_to_their_width():
    assert serialize_fields([(0x1FF, 8), (-1, 4)]).hex() == "fff0"


def test_serialize_skips_fields_of_invalid_headers_and_zero_width_fields():
    assert serialize_fields([(0xAB, 8), (None, 16), (0, 0), (0xCD, 8)]).hex() == "abcd"


def test_serialize_rejects_negative_width():
    with pytest.raises(ValueError, match="width"):
        serialize_fields([(1, -1)])


def test_compute_fields_hashes_the_padded_buffer():
    # 12+12 bits pack to 3 bytes; 12 bits alone pad to 2 bytes with the pad at the end.
    assert compute_fields("crc32", [(0xABC, 12), (0xDEF, 12)]) == compute("crc32", b"\xab\xcd\xef")
    assert compute_fields("crc16", [(0xFFF, 12)]) == compute("crc16", b"\xff\xf0")


# ------------------------------------------------------------ csum16, xor16, identity


def test_csum16_pads_odd_length_with_zero_at_the_end():
    assert compute("csum16", b"\x01") == 0xFEFF
    assert compute("csum16", b"\x12\x34\x56") == 0x97CB
    assert compute("csum16", b"\x12\x34\x56") == compute("csum16", b"\x12\x34\x56\x00")


def test_csum16_of_empty_or_zero_data_is_all_ones():
    assert compute("csum16", b"") == 0xFFFF
    assert compute("csum16", b"\x00\x00") == 0xFFFF


def _ipv4_fields(hdr: bytes) -> list[tuple[int, int]]:
    """The usual P4 IPv4 checksum field list (everything but hdrChecksum)."""
    ver_ihl, tos = hdr[0], hdr[1]
    total_len, ident, flags_frag = (int.from_bytes(hdr[i : i + 2], "big") for i in (2, 4, 6))
    return [
        (ver_ihl >> 4, 4), (ver_ihl & 0xF, 4), (tos, 8), (total_len, 16), (ident, 16),
        (flags_frag >> 13, 3), (flags_frag & 0x1FFF, 13), (hdr[8], 8), (hdr[9], 8),
        (int.from_bytes(hdr[12:16], "big"), 32), (int.from_bytes(hdr[16:20], "big"), 32),
    ]  # fmt: skip


def _scapy_packet() -> bytes:
    pkt = IP(src="10.0.0.1", dst="192.168.1.20", ttl=64, id=0x1C46, flags="DF", tos=0x10)
    return bytes(pkt / UDP(sport=1234, dport=5678) / Raw(b"hello"))


def test_csum16_ipv4_header_checksum_matches_scapy():
    raw = _scapy_packet()
    expected = IP(raw).chksum
    assert checksum("csum16", _ipv4_fields(raw[:20])) == expected
    assert verify_checksum("csum16", _ipv4_fields(raw[:20]), expected)
    assert not verify_checksum("csum16", _ipv4_fields(raw[:20]), expected ^ 1)


def test_csum16_udp_checksum_with_odd_payload_matches_scapy():
    raw = _scapy_packet()
    udp = IP(raw)[UDP]
    payload = bytes(udp.payload)
    assert len(payload) % 2 == 1
    src, dst = int.from_bytes(raw[12:16], "big"), int.from_bytes(raw[16:20], "big")
    fields = [
        (src, 32), (dst, 32), (0, 8), (17, 8), (udp.len, 16),
        (udp.sport, 16), (udp.dport, 16), (udp.len, 16), (0, 16),
    ]  # fmt: skip
    assert checksum("csum16", fields, payload) == udp.chksum
    assert HashCalculator("csum16").verify(fields, udp.chksum, payload)


def test_xor16_xors_big_endian_words_and_left_aligns_odd_tail():
    assert compute("xor16", b"\x12\x34\x56\x78\x9a") == 0x1234 ^ 0x5678 ^ 0x9A00
    assert compute("xor16", b"") == 0
    assert compute("xor16", b"\xab") == 0xAB00


def test_identity_uses_first_eight_bytes_right_aligned():
    assert compute("identity", b"\x01\x02\x03") == 0x010203
    assert compute("identity", bytes(range(1, 11))) == 0x0102030405060708
    assert compute("identity", b"") == 0
    assert compute_fields("identity", [(0xABC, 12)]) == 0xABC0  # pad bits stay at the end


# ------------------------------------------------------------ v1model hash rule


def test_v1model_hash_adds_base_to_hash_modulo_max():
    h = compute_fields("crc16", [(0x0A000001, 32), (0x0A000002, 32)])
    got = v1model_hash("crc16", 7, [(0x0A000001, 32), (0x0A000002, 32)], 100, 32)
    assert got == 7 + h % 100


def test_v1model_hash_treats_max_zero_as_one():
    assert v1model_hash("crc32", 42, [(0xDEADBEEF, 32)], 0, 16) == 42


def test_v1model_hash_truncates_to_output_width():
    # identity of 16-bit 5 is 5; 5 % 10 + 0xFFFF = 0x10004 -> 4 in 16 bits.
    assert v1model_hash("identity", 0xFFFF, [(5, 16)], 10, 16) == 4
    assert v1model_hash("crc32", 0, [(1, 8)], 1 << 32, 8) == compute("crc32", b"\x01") & 0xFF


def test_v1model_hash_wraps_base_plus_offset_at_64_bits():
    assert v1model_hash("identity", (1 << 64) - 1, [(3, 8)], 10, 128) == 2


def test_hash_calculator_v1model_hash_equals_module_function():
    fields = [(0x1234, 16), (0x5, 3)]
    calc = HashCalculator("xor16")
    assert calc.v1model_hash(3, fields, 1000, 16) == v1model_hash("xor16", 3, fields, 1000, 16)


def test_random_hash_stays_within_base_and_max_and_is_seedable():
    a = HashCalculator("random", rng=random.Random(1))
    b = HashCalculator("random", rng=random.Random(1))
    got = [a.v1model_hash(10, [(1, 8)], 5, 16) for _ in range(50)]
    assert all(10 <= g < 15 for g in got)
    assert got == [b.v1model_hash(10, [(1, 8)], 5, 16) for _ in range(50)]


# ------------------------------------------------------------ API surface


def test_algorithms_are_the_v1model_hash_algorithm_members():
    assert ALGORITHMS == {
        "crc32", "crc32_custom", "crc16", "crc16_custom",
        "random", "identity", "csum16", "xor16",
    }  # fmt: skip
    assert set(OUTPUT_WIDTH) == ALGORITHMS


@pytest.mark.parametrize("algo", sorted(ALGORITHMS - {"random"}))
def test_outputs_fit_declared_width(algo):
    assert 0 <= compute(algo, b"\xff" * 13) < (1 << OUTPUT_WIDTH[algo])


def test_unknown_algorithm_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="unknown hash algorithm 'crc64'"):
        compute("crc64", b"")
    with pytest.raises(ValueError, match="'md5'"):
        HashCalculator("md5")
