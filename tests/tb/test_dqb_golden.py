"""The golden DQB against hand-worked beats: every Table 5 mode, both roundings, groups within and across
beats, FP8 subnormals and NaN, the contract's error responses, byte-masked stores and which table version a
request sees."""
import numpy as np
import pytest

from tb.dqb.stimulus import random_operations, random_scenario
from tb.models import dqb

SCALE_BASE, ZERO_BASE = 1024, 1536
ENTRY = dqb.LayerEntry(weight_base=0, weight_size=512, scale_base=SCALE_BASE, zero_base=ZERO_BASE,
                       log2_group_width=9)  # one group over the whole 512-byte layer


def memory(weights: list[int], scales: list[int], zeros: list[int]) -> np.ndarray:
    image = np.zeros(2048, np.uint8)
    image[:len(weights)] = weights
    image[SCALE_BASE:SCALE_BASE + 2 * len(scales)] = np.array(scales, "<u2").view(np.uint8)
    image[ZERO_BASE:ZERO_BASE + len(zeros)] = zeros
    return image


def halfword(response: dqb.Response, element: int) -> int:
    """Output element `element` of a response: beat element // 32, bits [16k+15:16k] with k = element % 32."""
    return response.beats[element // 32] >> 16 * (element % 32) & 0xFFFF


def test_tags_follow_table_5() -> None:
    assert dqb.MODES == {1: dqb.Mode("int4", "bf16"), 2: dqb.Mode("int8", "bf16"), 3: dqb.Mode("fp8_e4m3", "bf16"),
                         4: dqb.Mode("int4", "fp16"), 5: dqb.Mode("int8", "fp16"), 6: dqb.Mode("fp8_e4m3", "fp16")}
    assert (dqb.BYPASS_TAG, dqb.RESERVED_TAG) == (0b000, 0b111)
    assert [dqb.Mode(w, "fp16").expansion for w in ("int4", "int8", "fp8_e4m3")] == [4, 2, 2]


@pytest.mark.parametrize("output,scale,expected", [
    # byte 0 = 0x9F: element 0 = 0xF = -1, element 1 = 0x9 = -7; z = 3; s = 0.5; other elements 0
    ("fp16", 0x3800, {0: 0xC000, 1: 0xC500, 2: 0xBE00, 127: 0xBE00}),  # -2, -5, -1.5
    ("bf16", 0x3F00, {0: 0xC000, 1: 0xC0A0, 2: 0xBFC0, 127: 0xBFC0}),
])
def test_int4(output: str, scale: int, expected: dict[int, int]) -> None:
    response = dqb.dequantize_read(memory([0x9F], [scale], [0x03]), [ENTRY], 0, dqb.tag_of("int4", output))
    assert not response.error and len(response.beats) == 4
    assert {element: halfword(response, element) for element in expected} == expected


def test_int8_to_fp16_extremes() -> None:
    # x = 0x80 = -128, z = 0x7F = 127, s = 1: -255 = -1.9921875 * 2^7 -> 0xDBF8; x = 0x7F: 0
    response = dqb.dequantize_read(memory([0x80, 0x7F], [0x3C00], [0x7F]), [ENTRY], 0, dqb.tag_of("int8", "fp16"))
    assert len(response.beats) == 2
    assert [halfword(response, 0), halfword(response, 1)] == [0xDBF8, 0x0000]


@pytest.mark.parametrize("rounding,expected", [("nearest_even", 0x4042), ("toward_zero_ftz", 0x4041)])
def test_int8_to_bf16_roundings(rounding: str, expected: int) -> None:
    # 3 * 1.0078125 = 3.0234375 = 2 * (1 + 65.5/128): a tie, to even 66 or truncated to 65
    response = dqb.dequantize_read(memory([3], [0x3F81], [0]), [ENTRY], 0, dqb.tag_of("int8", "bf16"), rounding)
    assert halfword(response, 0) == expected


@pytest.mark.parametrize("output,scale,rounding,expected", [
    ("fp16", 0x0001, "nearest_even", 0x0001),  # 1 * 2^-24: an FP16 subnormal, kept
    ("fp16", 0x0001, "toward_zero_ftz", 0x0000),  # ... flushed
    ("bf16", 0x0001, "nearest_even", 0x0001),  # 1 * 2^-133: a BF16 subnormal (FP32 subnormal in between)
    ("bf16", 0x8001, "toward_zero_ftz", 0x8000),  # flushed to a zero of the same sign
])
def test_subnormal_results(output: str, scale: int, rounding: str, expected: int) -> None:
    response = dqb.dequantize_read(memory([1], [scale], [0]), [ENTRY], 0, dqb.tag_of("int8", output), rounding)
    assert halfword(response, 0) == expected


@pytest.mark.parametrize("output,scale,expected", [
    # E4M3 0x01 = 2^-9 (subnormal), 0x07 = 7 * 2^-9, 0x08 = 2^-6 (smallest normal), 0xFE = -448, NaN 0x7F, 0xFF
    ("fp16", 0x3C00, [0x1800, 0x2300, 0x2400, 0xDF00, 0x7E00, 0x7E00]),
    ("bf16", 0x3F80, [0x3B00, 0x3C60, 0x3C80, 0xC3E0, 0x7FC0, 0x7FC0]),
])
def test_fp8_subnormals_and_nan(output: str, scale: int, expected: list[int]) -> None:
    weights = [0x01, 0x07, 0x08, 0xFE, 0x7F, 0xFF]
    for rounding in dqb.ROUNDINGS:  # all exact and normal in the output: both roundings agree
        response = dqb.dequantize_read(memory(weights, [scale], [0]), [ENTRY], 0, dqb.tag_of("fp8_e4m3", output),
                                       rounding)
        assert [halfword(response, e) for e in range(6)] == expected
        assert halfword(response, 6) == 0 and len(response.beats) == 2


@pytest.mark.parametrize("rounding,expected", [("nearest_even", 0x61C8), ("toward_zero_ftz", 0x61C7)])
def test_fp8_product_rounds_in_fp32_first(rounding: str, expected: int) -> None:
    # x = 0x7D = 416, z = 0x09 = 9 * 2^-9: x - z = 212983 * 2^-9 exactly; s = 0x3F1D = 1821 * 2^-10.
    # The exact product 387842043 * 2^-19 (29 bits, 739.74999...) lies just below the FP16 midpoint 739.75,
    # but FP32 keeps 24 bits and rounds it up to 387842048 * 2^-19 = 739.75 exactly; that tie goes to even,
    # 740 (0x61C8), where rounding the exact product once would give 739.5 (0x61C7). Toward zero: 739.5.
    response = dqb.dequantize_read(memory([0x7D], [0x3F1D], [0x09]), [ENTRY], 0, dqb.tag_of("fp8_e4m3", "fp16"),
                                   rounding)
    assert halfword(response, 0) == expected


def test_several_groups_in_one_beat() -> None:
    # INT4, 16-byte groups (32 elements): the beat at 64 holds groups 4..7; all weights 1, z = 0, s_g = g + 1
    entry = dqb.LayerEntry(0, 512, SCALE_BASE, ZERO_BASE, log2_group_width=4)
    scales = [int(np.float16(g + 1).view(np.uint16)) for g in range(32)]
    zeros = [0x00, 0x00, 0x10, 0x00]  # group 5 (high nibble of byte 2) has z = 1
    response = dqb.dequantize_read(memory([0x11] * 512, scales, zeros), [entry], 64, dqb.tag_of("int4", "fp16"))
    got = [halfword(response, element) for element in (0, 31, 32, 63, 64, 127)]
    assert got == [0x4500, 0x4500, 0x0000, 0x0000, 0x4700, 0x4800]  # 5, 5, 0 (1 - 1), 0, 7, 8


def test_a_group_spanning_beats_and_a_layer_not_at_zero() -> None:
    # INT8 layer at 256 with 128-byte groups: beats 256 and 320 share group 0, beat 384 is group 1
    entry = dqb.LayerEntry(256, 256, SCALE_BASE, ZERO_BASE, log2_group_width=7)
    image = memory([0] * 256 + [2] * 256, [0x3C00, 0x4000], [0, 1])  # s = 1, 2; z = 0, 1
    tag = dqb.tag_of("int8", "fp16")
    got = [halfword(dqb.dequantize_read(image, [entry], address, tag), 63) for address in (256, 320, 384)]
    assert got == [0x4000, 0x4000, 0x4000]  # (2 - 0) * 1, (2 - 0) * 1, (2 - 1) * 2


def test_bypass_returns_the_data() -> None:
    image = memory(list(range(64)), [0x3C00], [0])
    response = dqb.dequantize_read(image, [ENTRY], 0, dqb.BYPASS_TAG)
    assert response == dqb.Response((int.from_bytes(bytes(range(64)), "little"),), False)


def test_reserved_tag_passes_the_data_with_error() -> None:
    image = memory(list(range(64)), [0x3C00], [0])
    response = dqb.dequantize_read(image, [ENTRY], 0, dqb.RESERVED_TAG)
    assert response == dqb.Response((int.from_bytes(bytes(range(64)), "little"),), True)


@pytest.mark.parametrize("weight,beats", [("int4", 4), ("int8", 2), ("fp8_e4m3", 2)])
def test_table_miss_returns_zeros_with_error(weight: str, beats: int) -> None:
    image = memory([0x55] * 512, [0x3C00], [0])
    empty = dqb.LayerEntry(512, 0, SCALE_BASE, ZERO_BASE, 9)  # a zero-sized entry never matches
    response = dqb.dequantize_read(image, [ENTRY, empty], 512, dqb.tag_of(weight, "bf16"))
    assert response == dqb.Response((0,) * beats, True)


def test_overlapping_entries_lowest_index_wins() -> None:
    image = memory([1] * 256, [0x3C00, 0x4000], [0])
    first = dqb.LayerEntry(0, 128, SCALE_BASE, ZERO_BASE, 9)       # s = 1
    second = dqb.LayerEntry(64, 128, SCALE_BASE + 2, ZERO_BASE, 9)  # s = 2
    tag = dqb.tag_of("int8", "fp16")
    assert halfword(dqb.dequantize_read(image, [first, second], 64, tag), 0) == 0x3C00
    assert halfword(dqb.dequantize_read(image, [second, first], 64, tag), 0) == 0x4000
    assert halfword(dqb.dequantize_read(image, [first, second], 128, tag), 0) == 0x4000


def test_many_reads_at_once_match_one_at_a_time() -> None:
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, 2048).astype(np.uint8)
    entries = [dqb.LayerEntry(0, 256, 1024, 1536, 5), dqb.LayerEntry(256, 256, 1280, 1600, 7)]
    addresses = rng.integers(0, 10, 200) * 64
    tags = rng.integers(0, 8, 200)
    together = dqb.dequantize_reads(image, entries, addresses, tags, "toward_zero_ftz")
    assert together == [dqb.dequantize_read(image, entries, a, t, "toward_zero_ftz") for a, t in zip(addresses, tags)]


def test_beats_and_halfwords_helpers() -> None:
    beat = dqb.int_to_beat(0x1234 | 0xABCD << 16 * 31)
    assert beat[0] == 0x34 and beat[63] == 0xAB and dqb.beat_to_int(beat) == 0x1234 | 0xABCD << 16 * 31
    assert list(dqb.beats_to_halfwords([0x1234 | 0xABCD << 16 * 31])[[0, 31]]) == [0x1234, 0xABCD]


def test_bench_errors_are_refused() -> None:
    image = memory([0], [0x3C00], [0])
    with pytest.raises(ValueError, match="aligned"):
        dqb.dequantize_read(image, [ENTRY], 32, 4)
    with pytest.raises(ValueError, match="3-bit"):
        dqb.dequantize_read(image, [ENTRY], 0, 8)
    with pytest.raises(ValueError, match="rounding="):
        dqb.dequantize_read(image, [ENTRY], 0, 4, "stochastic")
    with pytest.raises(ValueError, match="weight_size=-64"):
        dqb.LayerEntry(0, -64, SCALE_BASE, ZERO_BASE, 9)
    far = dqb.LayerEntry(0, 512, scale_base=4096, zero_base=ZERO_BASE, log2_group_width=9)
    with pytest.raises(ValueError, match="scale"):
        dqb.dequantize_read(image, [far], 0, 4)


def test_a_store_writes_only_the_bytes_its_mask_selects() -> None:
    """A 4-byte beat at 4..7 holding 11 22 33 44; a store to address 6 (inside the beat) of 0xDDCCBBAA with mask
    0b0101 writes bytes 0 and 2 of the beat: 0xAA at 4, 0xCC at 6. Its answer is one acknowledgement beat."""
    image = np.array([0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x55], dtype=np.uint8)
    assert dqb.store(image, 6, 0xDDCCBBAA, 0b0101, interface_bits=32) == dqb.Response((0,), False, True)
    assert image.tolist() == [0, 0, 0, 0, 0xAA, 0x22, 0xCC, 0x44, 0x55]
    dqb.store(image, 4, 0xFFFFFFFF, 0, interface_bits=32)                  # no byte selected: nothing written
    assert image.tolist() == [0, 0, 0, 0, 0xAA, 0x22, 0xCC, 0x44, 0x55]


def test_each_request_sees_the_table_of_the_updates_finished_before_its_cycle() -> None:
    """Updates whose last beats were taken at cycles 10 and 15: a request taken at 5 or at 10 (the same cycle: it
    looked the table up before the write) sees version 0, at 11 version 1, at 15 still 1, at 16 and 20 version 2."""
    assert dqb.table_versions([5, 10, 11, 15, 16, 20], [15, 10]) == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("beat_bytes", [4, 64])   # the pytest sets' 32-bit interface and Table 5's 512-bit one
def test_random_stores_carry_masks_of_every_shape_within_their_beat(beat_bytes: int) -> None:
    """The stimulus of the random-traffic tests at both interface widths (64 bytes is beyond numpy's 63-bit
    integers): whole-beat masks, partial ones with the top byte on and off, each within the beat."""
    rng = np.random.default_rng(0)
    ops = random_operations(rng, random_scenario(rng, beat_bytes), beat_bytes, 400, store_probability=0.5)
    masks = [op.byte_mask(beat_bytes) for op in ops if op.store is not None]
    full = (1 << beat_bytes) - 1
    assert all(0 <= mask <= full for mask in masks)
    assert full in masks and any(mask != full and mask >> (beat_bytes - 1) for mask in masks) \
        and any(not mask >> (beat_bytes - 1) for mask in masks)
