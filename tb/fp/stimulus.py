"""Stimulus for the floating-point units and its expected results from the golden models.

Exhaustive where the input space is at most 2^16; otherwise the rounding boundaries of every output
value, directed special cases and 10^5 random vectors shaped so that alignment, cancellation, subnormal
results and overflow are all common (uniformly random bits would mostly exercise "larger operand wins").
"""
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from rtl.registry import BLOCKS

from ..models import fp as golden
from ..payload import Packer

RANDOM_VECTORS = 100_000
FP32_SPECIALS = np.array([
    0x00000000, 0x80000000,              # ±0
    0x00000001, 0x80000001,              # ±smallest subnormal
    0x007FFFFF, 0x807FFFFF,              # ±largest subnormal
    0x00800000, 0x80800000,              # ±smallest normal
    0x3F800000, 0xBF800000, 0x3FFFFFFF,  # ±1, just under 2
    0x7F7FFFFF, 0xFF7FFFFF,              # ±largest finite
    0x7F800000, 0xFF800000,              # ±inf
    0x7FC00000, 0xFFC00000, 0x7F800001,  # quiet NaNs (both signs) and a signalling NaN
], dtype=np.uint64)
FP16_SPECIALS = np.array([
    0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x3BFF,
    0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01,
], dtype=np.uint64)


@dataclass(frozen=True)
class Case:
    """Inputs as packed payload words, the expected outputs, and the output format (for NaN matching)."""

    inputs: np.ndarray
    expected: np.ndarray
    output_format: str


def case(block: str, params: dict, rng: np.random.Generator) -> Case:
    if block == "fp_to_fp32":
        inputs = np.arange(1 << golden.width(params["source"]), dtype=np.uint64)
        return Case(inputs, golden.to_fp32(inputs, params["source"]), "fp32")
    if block == "fp32_narrow":
        inputs = np.concatenate([rounding_boundaries(params["target"]),
                                 random_fp32(rng, RANDOM_VECTORS, _exponent_window(params["target"]))])
        return Case(inputs, golden.narrow(inputs, params["target"], params["rounding"]), params["target"])
    if block in ("fp32_add", "fp32_mul"):
        a, b = _cross(FP32_SPECIALS)
        da, db = DIRECTED_ADD if block == "fp32_add" else DIRECTED_MUL
        ra, rb = random_fp32_pairs(rng, RANDOM_VECTORS, product=block == "fp32_mul")
        a, b = (np.concatenate([a, np.array(da, dtype=np.uint64), ra]),
                np.concatenate([b, np.array(db, dtype=np.uint64), rb]))
        model = golden.fp32_add if block == "fp32_add" else golden.fp32_mul
        return Case(_operands(block, a, b), model(a, b), "fp32")
    if block == "fp16_mul_fp32":
        a, b = _cross(FP16_SPECIALS)
        a = np.concatenate([a, rng.integers(0, 1 << 16, RANDOM_VECTORS, dtype=np.uint64)])
        b = np.concatenate([b, rng.integers(0, 1 << 16, RANDOM_VECTORS, dtype=np.uint64)])
        return Case(_operands(block, a, b), golden.fp16_mul_fp32(a, b), "fp32")
    raise KeyError(f"no stimulus for block {block!r}")


def _operands(block: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Operand pairs packed as the binary unit's input payload lays them out."""
    return np.array(Packer.of_port(BLOCKS[block].build(), "i").pack_many(a=a, b=b), dtype=np.uint64)


def rounding_boundaries(target: str) -> np.ndarray:
    """For every pair of neighbouring finite target values (and the largest one and the overflow
    threshold), the exact FP32 midpoint and the FP32 values one ulp either side of it, both signs."""
    bits = np.arange(golden.to_bits(np.array(np.inf, dtype=golden.DTYPES[target])), dtype=np.uint64)
    low = golden.from_bits(bits, target).astype(np.float64)
    high = golden.from_bits(bits + 1, target).astype(np.float64)
    # Past the largest finite value the next binade would start at 2^maxexp: overflow begins halfway there.
    high[-1] = 2.0 ** ml_dtypes.finfo(golden.DTYPES[target]).maxexp
    middle = ((low + high) / 2).astype(np.float32)
    assert np.all(middle.astype(np.float64) == (low + high) / 2), "a midpoint is not exact in FP32"
    around = [np.nextafter(middle, np.float32(-np.inf)), middle, np.nextafter(middle, np.float32(np.inf))]
    magnitudes = golden.to_bits(np.concatenate(around)).astype(np.uint64)
    return np.unique(np.concatenate([magnitudes, magnitudes | (1 << 31)]))


def random_fp32(rng: np.random.Generator, count: int, exponents: tuple[int, int]) -> np.ndarray:
    """Half uniformly random bit patterns, half with biased exponents drawn from `exponents`."""
    uniform = rng.integers(0, 1 << 32, count // 2, dtype=np.uint64)
    shaped = _fp32(rng, rng.integers(*exponents, count - count // 2, endpoint=True))
    return np.concatenate([uniform, shaped])


def random_fp32_pairs(rng: np.random.Generator, count: int, product: bool) -> tuple[np.ndarray, np.ndarray]:
    """Pairs whose second exponent is drawn relative to the first: for sums within ±30 of it (alignment,
    carries, cancellation), for products so that the product lands near 1, near the subnormal range,
    or near overflow. A quarter of the pairs are uniformly random bits."""
    a = rng.integers(0, 1 << 32, count, dtype=np.uint64)
    ea = ((a >> 23) & 0xFF).astype(np.int64)
    if product:
        target = rng.choice([127, 1, 254], count) + rng.integers(-30, 31, count)
        eb = target - ea + 127
    else:
        eb = ea + rng.integers(-30, 31, count)
    b = _fp32(rng, np.clip(eb, 0, 254))
    uniform = rng.random(count) < 0.25
    b[uniform] = rng.integers(0, 1 << 32, int(uniform.sum()), dtype=np.uint64)
    return a, b


def _fp32(rng: np.random.Generator, exponents: np.ndarray) -> np.ndarray:
    count = len(exponents)
    signs = rng.integers(0, 2, count, dtype=np.uint64) << 31
    mantissas = rng.integers(0, 1 << 23, count, dtype=np.uint64)
    return signs | (exponents.astype(np.uint64) << 23) | mantissas


def _exponent_window(target: str) -> tuple[int, int]:
    """FP32 biased exponents from below the target's subnormal range to past its overflow."""
    return (100, 145) if target == "fp16" else (0, 254)


def _cross(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.meshgrid(values, values)
    return a.ravel(), b.ravel()


# (a, b) pairs that random vectors rarely hit: exact ties, carries between the subnormal and normal
# ranges, overflow by rounding, and exact cancellation.
DIRECTED_ADD = tuple(zip(*[
    (0x3F800000, 0x33800000),  # 1 + 2^-24: a tie, rounds to even (1.0)
    (0x3F800001, 0x33800000),  # (1 + 2^-23) + 2^-24: a tie, rounds up to even
    (0x3F800000, 0x33800001),  # just above the tie: rounds up
    (0x3F800000, 0xB3800000),  # 1 − 2^-24: exact in the binade below
    (0x3F800000, 0xB3000000),  # 1 − 2^-25: a tie below the binade
    (0x007FFFFF, 0x00000001),  # largest subnormal + smallest: the smallest normal
    (0x00800000, 0x80000001),  # smallest normal − smallest subnormal: the largest subnormal
    (0x00800001, 0x80800000),  # normal − normal → subnormal
    (0x7F7FFFFF, 0x73000000),  # largest finite + half an ulp: a tie that rounds up to inf
    (0x7F7FFFFF, 0x72FFFFFF),  # largest finite + just under half an ulp: stays finite
    (0x7F7FFFFF, 0x7F7FFFFF),  # overflow
    (0x3F800000, 0xBF800000),  # x − x = +0
    (0x80000000, 0x80000000),  # −0 + −0 = −0
    (0x4B800000, 0xBF800000),  # 2^24 − 1: massive alignment and a borrow
]))
DIRECTED_MUL = tuple(zip(*[
    (0x3F800800, 0x3F800800),  # (1 + 2^-12)^2: an exact tie, rounds to even
    (0x3F800801, 0x3F800800),  # just above the tie
    (0x00800001, 0x3F000000),  # (smallest normal + ulp) × 0.5: a subnormal tie
    (0x00800003, 0x3F000000),  # another subnormal tie, rounds up to even
    (0x00FFFFFF, 0x3F000000),  # rounds up from subnormal into the normal range
    (0x00000001, 0x4B000000),  # smallest subnormal × 2^23: normal
    (0x00000001, 0x3F000000),  # smallest subnormal × 0.5: a tie to zero
    (0x00000001, 0x3F000001),  # just above it: rounds up to the smallest subnormal
    (0x7F000000, 0x40000000),  # 2^127 × 2: overflow
    (0x7F7FFFFF, 0x3F800001),  # largest finite × (1 + ulp): overflow by rounding
    (0x7F800000, 0x00000000),  # inf × 0: NaN
    (0x80000000, 0x7F7FFFFF),  # −0 × finite: −0
]))
