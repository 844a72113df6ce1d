"""The golden models against hand-worked values (docs/reference/formats.md), independent of the RTL."""
import numpy as np
import pytest

from tb.models import fp


def f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("x,expected", [(0x3F808000, 0x3F80), (0x3F818000, 0x3F82), (0x7F7FFFFF, 0x7F80)])
def test_bf16_nearest_even(x: int, expected: int) -> None:
    assert fp.narrow(np.array([x], np.uint32), "bf16", "nearest_even")[0] == expected


def test_fp16_nearest_even_overflow_and_subnormals() -> None:
    got = fp.narrow(f32(65519.99, 65520, 2.0**-25, 3 * 2.0**-26), "fp16", "nearest_even")
    assert list(got) == [0x7BFF, 0x7C00, 0x0000, 0x0001]


def test_fp16_toward_zero_flush_to_zero() -> None:
    got = fp.narrow(f32(1 + 2.0**-11, -(1 + 2.0**-11), 65520, -1e6, 2.0**-15, -(2.0**-14), np.inf),
                    "fp16", "toward_zero_ftz")
    # truncation, both signs; overflow saturates; a subnormal result flushes to signed zero; inf stays inf
    assert list(got) == [0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x0000, 0x8400, 0x7C00]


def test_bf16_toward_zero_flushes_fp32_subnormals() -> None:
    assert list(fp.narrow(np.array([0x00400000, 0x80000001], np.uint32), "bf16", "toward_zero_ftz")) == [0, 0x8000]


def test_int_to_fp32() -> None:
    assert list(fp.to_fp32(np.array([0x7, 0x8, 0xF]), "int4")) == list(f32(7, -8, -1))
    assert list(fp.to_fp32(np.array([0x80, 0x7F]), "int8")) == list(f32(-128, 127))


def test_e4m3_to_fp32() -> None:
    got = fp.to_fp32(np.array([0x01, 0x7E, 0xFE, 0x7F]), "fp8_e4m3")
    assert list(got[:3]) == list(f32(2.0**-9, 448, -448))
    assert np.isnan(got[3:].view(np.float32)).all()


def test_products_and_sums() -> None:
    assert fp.fp16_mul_fp32(np.array([0x7BFF]), np.array([0x7BFF]))[0] == f32(65504.0 * 65504.0)[0]
    assert fp.fp16_mul_fp32(np.array([0x0001]), np.array([0x0001]))[0] == f32(2.0**-48)[0]
    assert fp.fp32_add(f32(1.0), f32(2.0**-24))[0] == f32(1.0)[0]  # a tie to even
    assert fp.fp32_add(f32(-0.0), f32(-0.0))[0] == 0x80000000
    assert np.isnan(fp.fp32_mul(f32(np.inf), f32(0.0)).view(np.float32)[0])


def test_mismatches_accepts_any_nan_only_where_nan_expected() -> None:
    expected = np.array([0x7FC00000, 0x3F800000], np.uint32)
    assert len(fp.mismatches(np.array([0xFF800001, 0x3F800000]), expected, "fp32")) == 0
    assert list(fp.mismatches(np.array([0x7FC00000, 0x7FC00000]), expected, "fp32")) == [1]
    assert list(fp.mismatches(np.array([0x3F800000, 0x3F800000]), expected, "fp32")) == [0]
