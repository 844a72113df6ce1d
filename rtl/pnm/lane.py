"""One DuoPD PNM SIMD lane (paper §4.2, Fig. 6): `width` FP16 MACs per cycle, MLP or attention mode per beat."""
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .params import LaneParams
from .ports import lane_input, lane_operands
from .simd import SIMDPipeline


class LaneOperands(wiring.Component):
    """A lone lane's operands are the beat's own `a` and `b`."""

    def __init__(self, params: LaneParams) -> None:
        super().__init__({"beat": In(lane_input(params)), "a": Out(lane_operands(params, 1)),
                          "b": Out(lane_operands(params, 1))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += [self.a.as_value().eq(self.beat.a.as_value()), self.b.as_value().eq(self.beat.b.as_value())]
        return m


class PNMLane(SIMDPipeline):
    """A lane with its own operands. MLP mode: the dot product of `a` and `b` folds into the accumulator
    (clear/emit per beat). Attention mode: every sublane emits the dot product of its slices of `a` and `b`;
    a query broadcast across sublanes is the caller's `a` holding the same query in every sublane.
    """

    def __init__(self, params: LaneParams = LaneParams()) -> None:
        super().__init__(params, lane_input(params), lanes=None, operands=LaneOperands)
