"""Operand streams for the PNM benches: FP16 bit patterns shaped so that the FP32 sums round, cancel, carry,
meet subnormal inputs and propagate inf/NaN, and the blocks' payloads
(packed from their port layouts)."""
from dataclasses import dataclass

import numpy as np

from rtl.pnm_lane.params import ArrayParams, LaneParams
from rtl.registry import BLOCKS

from ..models import pnm_lane
from ..payload import Packer

FP16_INF, FP16_NAN, FP16_MAX, FP16_SIGN = 0x7C00, 0x7E00, 0x7BFF, 0x8000


def fp16(rng: np.random.Generator, shape) -> np.ndarray:
    """Random FP16 values: mostly normal numbers of moderate exponent (sums that round at every step),
    some subnormals, zeros of both signs and the extremes; no inf/NaN (those are directed)."""
    sign = rng.integers(0, 2, shape) << 15
    exponent = rng.integers(9, 22, shape)  # 2^-6 … 2^6: products span 2^24, so alignment drops bits
    mantissa = rng.integers(0, 1 << 10, shape)
    bits = sign | (exponent << 10) | mantissa
    kind = rng.random(shape)
    bits = np.where(kind < 0.03, sign | mantissa, bits)  # subnormal (or zero)
    bits = np.where((kind >= 0.03) & (kind < 0.05), sign, bits)  # ±0
    bits = np.where((kind >= 0.05) & (kind < 0.06), sign | FP16_MAX, bits)
    return bits.astype(np.uint16)


def with_cancellation(rng: np.random.Generator, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`a`, `b` where, in a fifth of the beats, each odd element's product exactly cancels its even neighbour's."""
    a, b = a.copy(), b.copy()
    beats = rng.random(a.shape[:-1])[..., None] < 0.2
    a[..., 1::2] = np.where(beats, a[..., 0::2], a[..., 1::2])
    b[..., 1::2] = np.where(beats, b[..., 0::2] ^ FP16_SIGN, b[..., 1::2])
    return a, b


@dataclass
class Beats:
    """A stream of input beats: `x`, `y` are the payload operands as the block takes them (lane: `a`, `b` of
    shape (beats, width); array: `memory` (beats, width) and `buffer` (beats, lanes, width))."""

    x: np.ndarray
    y: np.ndarray
    mode: np.ndarray
    clear: np.ndarray
    emit: np.ndarray

    def __len__(self) -> int:
        return len(self.mode)

    def __add__(self, other: "Beats") -> "Beats":
        return Beats(*(np.concatenate([getattr(self, f), getattr(other, f)])
                       for f in ("x", "y", "mode", "clear", "emit")))


class Layout:
    """The block's payload layout and golden model, seen from the bench."""

    def __init__(self, block: str, params: LaneParams) -> None:
        self.array = block == "pnm_array"
        self.params = params
        self.lanes = params.lanes if isinstance(params, ArrayParams) else 1
        self.width, self.sublanes = params.width, params.sublanes
        component = BLOCKS[block].build(params)
        self.inputs, self.outputs = Packer.of_port(component, "i"), Packer.of_port(component, "o")
        self.operand_fields = ("memory", "buffer") if self.array else ("a", "b")

    def operand_shapes(self, beats: int) -> tuple[tuple, tuple]:
        if self.array:
            return (beats, self.width), (beats, self.lanes, self.width)
        return (beats, self.width), (beats, self.width)

    def pack(self, beats: Beats) -> list[int]:
        x, y = self.operand_fields
        return self.inputs.pack_many(**{x: beats.x, y: beats.y}, mode=beats.mode, clear=beats.clear, emit=beats.emit)

    def unpack_input(self, payloads: list[int]) -> Beats:
        """Input payloads (as `pack` made them) back into beats."""
        fields = self.inputs.unpack_many(payloads)
        x, y = (fields[name].astype(np.uint16) for name in self.operand_fields)
        return Beats(x, y, *(fields[name].astype(np.uint8) for name in ("mode", "clear", "emit")))

    def unpack(self, payload: int) -> tuple[int, np.ndarray, np.ndarray]:
        """An output payload as (mode, accumulators (lanes,), sublane sums (lanes, sublanes))."""
        fields = self.outputs.unpack(payload)
        return (int(fields["mode"]), np.asarray(fields["accumulator"], np.uint32).reshape(self.lanes),
                np.asarray(fields["sublane_sums"], np.uint32).reshape(self.lanes, self.sublanes))

    def operands(self, beats: Beats) -> tuple[np.ndarray, np.ndarray]:
        """What each lane multiplies, (beats, lanes, width) each, as the golden model takes it."""
        if self.array:
            # The array's `buffer` is `a` (activations / queries), `memory` is `b` (weights / keys).
            return pnm_lane.array_operands(beats.x, beats.y, beats.mode, self.params.sublane_width)
        return beats.x[:, None, :], beats.y[:, None, :]

    def expected(self, beats: Beats) -> list[pnm_lane.Output]:
        return pnm_lane.run(*self.operands(beats), beats.mode, beats.clear, beats.emit, self.params.sublane_width)

    def macs(self, beats: Beats) -> np.ndarray:
        """Multiply-accumulates the golden model performs for each beat."""
        return pnm_lane.products(*self.operands(beats))

    def random(self, rng: np.random.Generator, count: int, attention_share: float = 0.3,
               mean_run: int = 8) -> Beats:
        """Random beats: MLP accumulations of random length (clear on the first, emit on the last) with
        attention beats interleaved inside them, i.e. mode switches on the fly."""
        x_shape, y_shape = self.operand_shapes(count)
        x, y = fp16(rng, x_shape), fp16(rng, y_shape)
        if not self.array:  # the array's lanes share `memory`, so pairs cannot cancel in every lane at once
            x, y = with_cancellation(rng, x, y)
        mode = (rng.random(count) < attention_share).astype(np.uint8)
        boundary = rng.random(count) < 1 / mean_run
        clear, emit = np.zeros(count, np.uint8), np.zeros(count, np.uint8)
        mlp = np.flatnonzero(mode == pnm_lane.MLP)
        starts = boundary[mlp]
        clear[mlp] = np.r_[True, starts[1:]] if len(mlp) else clear[mlp]
        emit[mlp] = np.r_[starts[1:], True] if len(mlp) else emit[mlp]
        return Beats(x, y, mode, clear, emit)


def directed(layout: Layout, rng: np.random.Generator) -> Beats:
    """Single-beat MLP sums (clear and emit) and attention beats planted with specials: inf, inf − inf, NaN,
    0 × inf, all −0 (then −0 accumulated onto −0), FP16 subnormals only, FP16 maximum only."""
    one = 0x3C00
    plants = [
        lambda x, y: (x.__setitem__((..., 0), FP16_INF), y.__setitem__((..., 0), one)),
        lambda x, y: (x.__setitem__((..., slice(0, 2)), [FP16_INF, FP16_INF | FP16_SIGN]),
                      y.__setitem__((..., slice(0, 2)), one)),
        lambda x, y: x.__setitem__((..., 1), FP16_NAN | FP16_SIGN),
        lambda x, y: (x.__setitem__((..., 0), FP16_INF), y.__setitem__((..., 0), 0)),
        lambda x, y: (x.__setitem__(..., FP16_SIGN), y.__setitem__(..., one)),
        lambda x, y: (x.__setitem__(..., FP16_SIGN), y.__setitem__(..., one)),  # accumulated: −0 + −0
        lambda x, y: (x.__setitem__(..., x & 0x83FF), y.__setitem__(..., y & 0x83FF)),
        lambda x, y: (x.__setitem__(..., FP16_MAX), y.__setitem__(..., FP16_MAX)),
    ]
    count = 2 * len(plants)
    x_shape, y_shape = layout.operand_shapes(count)
    x, y = fp16(rng, x_shape), fp16(rng, y_shape)
    for k, plant in enumerate(plants):
        for beat in (k, len(plants) + k):  # once in MLP mode, once in attention mode
            plant(x[beat], y[beat])
    mode = np.r_[np.zeros(len(plants)), np.ones(len(plants))].astype(np.uint8)
    clear = (mode == pnm_lane.MLP).astype(np.uint8)
    clear[5] = 0  # the second all −0 beat accumulates onto the first
    return Beats(x, y, mode, clear, (mode == pnm_lane.MLP).astype(np.uint8))
