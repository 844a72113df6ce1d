"""Operand beats for the vector unit: each op's working range, the edges of its approximation, special values;
and the packing of beats into the unit's payload integers, derived from its port layouts."""
import functools

import numpy as np

from rtl.pnm_vector.ports import (
    FP32_BITS,
    OPERANDS,
    RESULTS,
    Op,
    Reduce,
    input_layout,
    lane_in,
    lane_out,
    output_layout,
)

from ..models import pnm_vector as model

# ±0, ±inf, NaN, smallest and largest subnormal, smallest normal, largest finite, ±1.
SPECIALS = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x00000001,
                     0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000], np.uint32)


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def _uniform(rng, low, high, shape) -> np.ndarray:
    return _bits(rng.uniform(low, high, shape))


def _log_uniform(rng, low_exp, high_exp, shape, negative=0.5) -> np.ndarray:
    magnitude = 2.0 ** rng.uniform(low_exp, high_exp, shape)
    sign = np.where(rng.random(shape) < negative, -1.0, 1.0)
    with np.errstate(over="ignore", under="ignore"):
        return _bits(sign * magnitude)


def operands(rng: np.random.Generator, op: Op, shape) -> np.ndarray:
    """(4, *shape) operands a, b, c, d for `op`: mostly its working range, a tenth special values, a tenth
    arbitrary bit patterns."""
    a, b, c, d = (rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32) for _ in range(4))
    if op in (Op.MAX, Op.ADD, Op.MUL):
        a, b = _log_uniform(rng, -20, 20, shape), _log_uniform(rng, -20, 20, shape)
    elif op == Op.EXP:
        a = _uniform(rng, -110, 100, shape)
        b = np.where(rng.random(shape) < 0.5, 0, _uniform(rng, -10, 10, shape)).astype(np.uint32)
    elif op in (Op.RECIP, Op.RSQRT):
        a = _log_uniform(rng, -130, 130, shape, negative=0.5 if op == Op.RECIP else 0.05)
    elif op in (Op.SILU, Op.GELU):
        a = np.where(rng.random(shape) < 0.5, _uniform(rng, -6, 6, shape), _uniform(rng, -100, 100, shape))
    else:  # SOFTMAX, MERGE: maxima of scores and sums of exponentials
        a, c = _uniform(rng, -30, 30, shape), _uniform(rng, -30, 30, shape)
        c = np.where(rng.random(shape) < 0.1, a, c)  # equal maxima
        b, d = _uniform(rng, 0, 50, shape), _uniform(rng, 0, 50, shape)
    out = np.stack([a, b, c, d]).astype(np.uint32)
    kind = rng.random(out.shape)
    out = np.where(kind < 0.1, rng.choice(SPECIALS, out.shape), out)
    out = np.where(kind > 0.9, rng.integers(0, 1 << 32, out.shape, dtype=np.uint64), out)
    return out.astype(np.uint32)


def elementwise_beats(rng, op: Op, beats: int, width: int) -> list[model.Beat]:
    values = operands(rng, op, (beats, width))
    return [model.Beat(op.value, Reduce.NONE.value, 0, values[:, k]) for k in range(beats)]


def reduction_beats(rng, op: Op, reduce: Reduce, lengths: list[int], width: int) -> list[model.Beat]:
    """Vectors of the given lengths in beats, reduced with `reduce` over r0 of `op`."""
    out = []
    for length in lengths:
        values = operands(rng, op, (length, width))
        out += [model.Beat(op.value, reduce.value, int(k == length - 1), values[:, k]) for k in range(length)]
    return out


@functools.cache
def _offsets(width: int) -> tuple[dict[str, int], int]:
    """The input layout's field offsets and the output layout's `lanes` offset. Both layouts' lanes are arrays
    of structs of 32-bit fields, so lane k's field j sits 32 × (4k + j) bits into `lanes`: a (width, 4) array of
    uint32 in row order is the field's little-endian bytes."""
    lane_fields = [field.offset for _, field in lane_in()] + [field.offset for _, field in lane_out()]
    assert lane_fields == [FP32_BITS * j for j in range(len(OPERANDS))] * 2, "lanes are not packed fp32 words"
    return ({name: field.offset for name, field in input_layout(width)},
            dict(output_layout(width))["lanes"].offset)


def pack(beat: model.Beat, width: int) -> int:
    """A beat as the unit's input payload (the operands' lanes as one little-endian block of uint32)."""
    offsets, _ = _offsets(width)
    lanes = int.from_bytes(np.ascontiguousarray(beat.operands.T, "<u4").tobytes(), "little")
    return (Op(beat.op).value << offsets["op"] | Reduce(beat.reduce).value << offsets["reduce"]
            | int(beat.last) << offsets["last"] | lanes << offsets["lanes"])


def pack_results(results: np.ndarray, width: int) -> int:
    """(4, width) results as the output payload the unit gives for them (`unpack`'s inverse)."""
    _, offset = _offsets(width)
    return int.from_bytes(np.ascontiguousarray(results.T, "<u4").tobytes(), "little") << offset


def unpack(bits: int, width: int) -> np.ndarray:
    """An output beat's results as (4, width) uint32."""
    _, offset = _offsets(width)
    lanes = (bits >> offset).to_bytes(width * len(RESULTS) * FP32_BITS // 8, "little")
    return np.frombuffer(lanes, "<u4").reshape(width, len(RESULTS)).T.astype(np.uint32)
