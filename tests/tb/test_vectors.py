"""The FP stimulus reaches every rounding boundary, exhaustively."""
import numpy as np

from tb.fp.stimulus import rounding_boundaries
from tb.models import fp


def test_fp16_boundaries_include_the_overflow_threshold_and_its_neighbours() -> None:
    vectors = set(rounding_boundaries("fp16").tolist())
    assert {0x477FEFFF, 0x477FF000, 0x477FF001} <= vectors  # 65520 (first value to round to inf) ± 1 ulp
    assert {0x33000000, 0xB3000000} <= vectors  # ±2^-25, the midpoint between 0 and the smallest subnormal


def test_every_fp16_neighbour_pair_has_its_midpoint() -> None:
    vectors = rounding_boundaries("fp16")
    finite = np.arange(0x7C00, dtype=np.uint64)
    values = fp.from_bits(finite, "fp16").astype(np.float64)
    midpoints = ((values[:-1] + values[1:]) / 2).astype(np.float32).view(np.uint32)
    assert np.isin(midpoints, vectors).all()
    assert np.isin(midpoints | np.uint32(1 << 31), vectors).all()


def test_bf16_boundaries_round_both_ways() -> None:
    vectors = rounding_boundaries("bf16")
    nearest = fp.narrow(vectors, "bf16", "nearest_even")
    toward_zero = fp.narrow(vectors, "bf16", "toward_zero_ftz")
    assert 0.3 < np.mean(nearest != toward_zero) < 0.9  # the two roundings disagree on a large share
