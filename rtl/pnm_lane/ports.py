"""Payload layouts of the PNM lane's and compute array's stream ports."""
from amaranth.lib import data, enum

from ..fp.formats import FP16, FP32
from .params import ArrayParams, LaneParams


class Mode(enum.Enum, shape=1):
    """MLP: dot products of the whole lane, accumulated across beats. ATTENTION: one dot product per sublane."""

    MLP = 0
    ATTENTION = 1


def control_fields() -> dict:
    """Per-beat controls. `clear`: this MLP beat starts a new sum (the accumulator takes the beat's dot product
    as is, with no addition to the old value). `emit`: after this MLP beat, send the accumulator. Attention
    beats ignore both, always emit, and leave the accumulators untouched."""
    return {"mode": Mode, "clear": 1, "emit": 1}


def lane_input(params: LaneParams) -> data.StructLayout:
    """Operands `a` (activations / query) and `b` (weights / keys), element k of sublane s at s·sublane_width+k."""
    operands = data.ArrayLayout(FP16.width, params.width)
    return data.StructLayout({"a": operands, "b": operands, **control_fields()})


def array_input(params: ArrayParams) -> data.StructLayout:
    """`memory`: the `width` elements read from HBM this cycle, broadcast to every lane (MLP: a weight tile;
    attention: `sublanes` keys of one KV head, key s in sublane s). `buffer`: each lane's own operand from the
    PNM buffer (MLP: that request's activations; attention: the lane's query in its first `sublane_width`
    elements, broadcast by the array across the lane's sublanes; the rest is ignored)."""
    operands = data.ArrayLayout(FP16.width, params.width)
    return data.StructLayout({"memory": operands, "buffer": data.ArrayLayout(operands, params.lanes),
                              **control_fields()})


def lane_operands(params: LaneParams, lanes: int) -> data.ArrayLayout:
    """One operand (`a` or `b`) of every lane: `width` FP16 elements each, sublane s at s·sublane_width."""
    return data.ArrayLayout(data.ArrayLayout(FP16.width, params.width), lanes)


def output_layout(params: LaneParams, lanes: int | None) -> data.StructLayout:
    """`accumulator` is meaningful in MLP mode and `sublane_sums` in attention mode; the other is zero."""
    accumulator = FP32.width if lanes is None else data.ArrayLayout(FP32.width, lanes)
    sums = data.ArrayLayout(FP32.width, params.sublanes)
    return data.StructLayout({
        "mode": Mode,
        "accumulator": accumulator,
        "sublane_sums": sums if lanes is None else data.ArrayLayout(sums, lanes),
    })
