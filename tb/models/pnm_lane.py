"""Golden model of the DuoPD PNM lane and array: numpy only, the RTL's operation order, not its logic.

Operands are FP16 bit patterns (uint16), results FP32 bit patterns (uint32). Products are exact in FP32
(`fp.fp16_mul_fp32`); every addition is one FP32 round-to-nearest-even `fp.fp32_add`. The reduction is the
documented one: a balanced binary tree of adjacent pairs; each sublane is reduced on its own, then the lane sums its sublane sums the same way. The MLP accumulator adds each beat's
lane sum in beat order, starting from the beat marked `clear` (taken as is) or from +0 after reset.
"""
from dataclasses import dataclass

import numpy as np

from . import fp

MLP, ATTENTION = 0, 1


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
    accumulator = np.zeros(lanes, np.uint32)
    outputs = []
    for beat in range(beats):
        if mode[beat] == ATTENTION:
            outputs.append(Output(ATTENTION, np.zeros(lanes, np.uint32), sums[beat]))
            continue
        accumulator = dots[beat] if clear[beat] else fp.fp32_add(accumulator, dots[beat])
        if emit[beat]:
            outputs.append(Output(MLP, accumulator.copy(), np.zeros_like(sums[beat])))
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
