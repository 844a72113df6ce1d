"""Bit-exact references for the `rtl.fp` units, on numpy and ml_dtypes only.

Every function takes and returns bit patterns as unsigned integer arrays, so NaN payloads and signed
zeros survive the round trip. All FP32 arithmetic is numpy float32 (never float64: double rounding).
"""
import ml_dtypes
import numpy as np

DTYPES = {
    "fp32": np.float32,
    "fp16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "fp8_e4m3": ml_dtypes.float8_e4m3fn,
}
INT_BITS = {"int4": 4, "int8": 8}
BITS_DTYPE = {8: np.uint8, 16: np.uint16, 32: np.uint32}


def width(fmt: str) -> int:
    return INT_BITS.get(fmt) or np.dtype(DTYPES[fmt]).itemsize * 8


def from_bits(bits: np.ndarray, fmt: str) -> np.ndarray:
    """Reinterpret bit patterns as values of a float format."""
    return np.asarray(bits).astype(BITS_DTYPE[width(fmt)]).view(DTYPES[fmt])


def to_bits(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    return values.view(BITS_DTYPE[values.dtype.itemsize * 8])


def to_fp32(bits: np.ndarray, source: str) -> np.ndarray:
    """Exact conversion of INT4/INT8 (two's complement) or a float format to FP32 bits."""
    bits = np.asarray(bits, dtype=np.int64)
    if source in INT_BITS:
        n = INT_BITS[source]
        integers = ((bits & ((1 << n) - 1)) ^ (1 << (n - 1))) - (1 << (n - 1))
        return to_bits(integers.astype(np.float32))
    return to_bits(from_bits(bits, source).astype(np.float32))


def narrow(bits: np.ndarray, target: str, rounding: str) -> np.ndarray:
    """FP32 bits → FP16/BF16 bits, round-to-nearest-even or round-toward-zero with flush-to-zero."""
    x = from_bits(bits, "fp32")
    dtype = DTYPES[target]
    with np.errstate(all="ignore"):
        nearest = x.astype(dtype)
        if rounding == "nearest_even":
            return to_bits(nearest)
        if rounding != "toward_zero_ftz":
            raise ValueError(f"rounding={rounding!r}")
        # IEEE roundTowardZero: where nearest-even went away from zero (overflow to inf included), step back.
        overshot = np.isfinite(x) & (np.abs(nearest.astype(np.float32)) > np.abs(x))
        toward_zero = np.where(overshot, np.nextafter(nearest, np.zeros_like(nearest)), nearest)
        tiny = np.abs(toward_zero.astype(np.float32)) < np.float32(ml_dtypes.finfo(dtype).smallest_normal)
        flushed = np.where(tiny, np.copysign(np.zeros_like(toward_zero), toward_zero), toward_zero)
    return to_bits(flushed.astype(dtype))


def fp32_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return to_bits(from_bits(a, "fp32") + from_bits(b, "fp32"))


def fp32_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return to_bits(from_bits(a, "fp32") * from_bits(b, "fp32"))


def fp16_mul_fp32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """FP16 × FP16 in FP32: exact, since 11 × 11 significand bits fit in 24."""
    with np.errstate(all="ignore"):
        return to_bits(from_bits(a, "fp16").astype(np.float32) * from_bits(b, "fp16").astype(np.float32))


def is_nan(bits: np.ndarray, fmt: str) -> np.ndarray:
    return np.isnan(from_bits(bits, fmt).astype(np.float32))


def mismatches(got: np.ndarray, expected: np.ndarray, fmt: str) -> np.ndarray:
    """Indices where `got` differs from `expected`: bit-exact, except any NaN matches a NaN reference."""
    got = np.asarray(got, dtype=np.uint64)
    expected = np.asarray(expected, dtype=np.uint64)
    nan_expected = is_nan(expected, fmt)
    ok = np.where(nan_expected, is_nan(got, fmt), got == expected)
    return np.flatnonzero(~ok)
