"""Golden model of the DuoPD PNM lane and array: numpy and exact Python arithmetic, the RTL's operation order,
not its logic.

Operands are FP16 bit patterns (uint16), results FP32 bit patterns (uint32). Products are exact in FP32
(`fp.fp16_mul_fp32`); every addition in the tree is one FP32 round-to-nearest-even `fp.fp32_add`. The reduction
is the documented one: a balanced binary tree of adjacent pairs; each sublane is reduced on its own, then the lane
sums its sublane sums the same way. The MLP accumulator is the exact sum of the beats' dot products since the
beat marked `clear` (or since reset, onto +0), rounded once to FP32 (`exact_sum`) whenever it is emitted.
"""
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import fp

MLP, ATTENTION = 0, 1
FP32_SIGN, FP32_INF, FP32_NAN = 0x80000000, 0x7F800000, 0x7FC00000


def tree_sum(values: np.ndarray) -> np.ndarray:
    """Reduce the last axis (a power of two) with a balanced binary tree of adjacent pairs."""
    while values.shape[-1] > 1:
        values = fp.fp32_add(values[..., 0::2], values[..., 1::2])
    return values[..., 0]


def sublane_sums(a: np.ndarray, b: np.ndarray, sublane_width: int) -> np.ndarray:
    """Dot products of each sublane: `a`, `b` of shape (..., width) → (..., width // sublane_width)."""
    products = fp.fp16_mul_fp32(a, b)
    return tree_sum(products.reshape(*products.shape[:-1], -1, sublane_width))


def lane_sums(a: np.ndarray, b: np.ndarray, sublane_width: int) -> np.ndarray:
    return tree_sum(sublane_sums(a, b, sublane_width))


def exact_sum(values: np.ndarray) -> np.ndarray:
    """FP32 bit patterns (..., n) → their exact sum over the last axis, rounded once to FP32 (nearest even).
    IEEE's specials: a NaN term, or +inf with −inf, gives NaN; otherwise an infinity gives itself; an exact zero
    is −0 only when every term is −0."""
    return np.vectorize(_exact_sum, signature="(n)->()", otypes=[np.uint32])(values)


def _exact_sum(bits: np.ndarray) -> int:
    floats = bits.astype(np.uint32).view(np.float32).astype(np.float64)
    infinities = set(floats[np.isinf(floats)])
    if np.isnan(floats).any() or len(infinities) == 2:
        return FP32_NAN
    if infinities:
        return FP32_INF | (FP32_SIGN if -np.inf in infinities else 0)
    total = sum(map(Fraction, floats), Fraction(0))
    if total == 0:
        return FP32_SIGN if (bits == FP32_SIGN).all() else 0
    return (FP32_SIGN if total < 0 else 0) | _round_magnitude(abs(total))


def _round_magnitude(value: Fraction) -> int:
    """The FP32 bits of a positive `value` that is a multiple of 2^-149 (a sum of FP32 values), nearest even."""
    units = int(value * 2**149)  # FP32 values are multiples of 2^-149, the smallest subnormal
    drop = max(units.bit_length() - 24, 0)  # keep 24 significant bits
    kept, rest = divmod(units, 1 << drop)
    half = (1 << drop) // 2
    if drop and (rest > half or (rest == half and kept % 2)):
        kept += 1
    rounded = kept * Fraction(2) ** (drop - 149)
    if rounded >= 2**128:
        return FP32_INF
    return int(np.float32(float(rounded)).view(np.uint32))  # exact: at most 24 significant bits


@dataclass(frozen=True)
class Output:
    """One output beat: the accumulators (MLP) or the sublane sums (attention); the other is zero."""

    mode: int
    accumulator: np.ndarray  # (lanes,) uint32
    sublane_sums: np.ndarray  # (lanes, sublanes) uint32


def products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """FP16 products `run` forms per beat (one per element pair of `a` and `b`, every lane): its work."""
    a, b = np.broadcast_arrays(a, b)
    return np.full(a.shape[0], int(np.prod(a.shape[1:])))


def run(a: np.ndarray, b: np.ndarray, mode: np.ndarray, clear: np.ndarray, emit: np.ndarray,
        sublane_width: int) -> list[Output]:
    """The output beats of a stream of input beats. `a`, `b`: (beats, lanes, width) FP16 bits, the operands
    each lane multiplies; `mode`, `clear`, `emit`: (beats,) controls shared by the lanes."""
    beats, lanes = a.shape[:2]
    sums = sublane_sums(a, b, sublane_width)  # (beats, lanes, sublanes)
    dots = tree_sum(sums)  # (beats, lanes)
    terms = [np.zeros(lanes, np.uint32)]  # after reset the sum starts from +0
    outputs = []
    for beat in range(beats):
        if mode[beat] == ATTENTION:
            outputs.append(Output(ATTENTION, np.zeros(lanes, np.uint32), sums[beat]))
            continue
        terms = [dots[beat]] if clear[beat] else terms + [dots[beat]]
        if emit[beat]:
            outputs.append(Output(MLP, exact_sum(np.stack(terms, axis=-1)), np.zeros_like(sums[beat])))
    return outputs


def array_operands(memory: np.ndarray, buffer: np.ndarray, mode: np.ndarray,
                   sublane_width: int) -> tuple[np.ndarray, np.ndarray]:
    """What each lane of the array multiplies: `memory` (beats, width) is broadcast to every lane; in
    attention mode each lane's query (the first `sublane_width` elements of its `buffer` row) is broadcast
    across its sublanes. Returns `a`, `b` of shape (beats, lanes, width)."""
    width = buffer.shape[-1]
    query = np.tile(buffer[..., :sublane_width], width // sublane_width)
    a = np.where((mode == ATTENTION)[:, None, None], query, buffer)
    b = np.broadcast_to(memory[:, None, :], a.shape)
    return a, b
