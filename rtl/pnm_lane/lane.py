"""One DuoPD PNM SIMD lane (paper §4.2, Fig. 6): `width` FP16 MACs per cycle, MLP or attention mode per beat."""
from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .params import LaneParams
from .ports import lane_input, lane_operands
from .simd import SIMDPipeline


class LaneOperands(wiring.Component):
    """A lone lane's operands are the beat's own `a` and `b`. Ports are flat bits (`lane_input`, `lane_operands`
    laid out): a layout port would add a named alias per element to the Verilog, thousands at full width."""

    def __init__(self, params: LaneParams) -> None:
        self.params = params
        super().__init__({"beat": In(lane_input(params).size), "a": Out(lane_operands(params, 1).size),
                          "b": Out(lane_operands(params, 1).size)})

    def elaborate(self, platform) -> Module:
        m = Module()
        beat = data.View(lane_input(self.params), self.beat)
        m.d.comb += [self.a.eq(beat.a.as_value()), self.b.eq(beat.b.as_value())]
        return m


class PNMLane(SIMDPipeline):
    """A lane with its own operands. MLP mode: the dot product of `a` and `b` folds into the accumulator
    (clear/emit per beat). Attention mode: every sublane emits the dot product of its slices of `a` and `b`;
    a query broadcast across sublanes is the caller's `a` holding the same query in every sublane.
    """

    def __init__(self, params: LaneParams = LaneParams()) -> None:
        super().__init__(params, lane_input(params), lanes=None, operands=LaneOperands)
