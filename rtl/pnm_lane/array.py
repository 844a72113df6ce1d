"""The DuoPD PNM compute array (paper §4.2, §6.1): `lanes` lanes sharing one memory operand per beat."""
from amaranth.hdl import Cat, Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .params import ArrayParams
from .ports import Mode, array_input, lane_operands
from .simd import SIMDPipeline, elements


class ArrayOperands(wiring.Component):
    """Every lane's `b` is the one memory operand; its `a` is its own buffer operand, whose query (the first
    `sublane_width` elements) is broadcast across the lane's sublanes in attention mode. Ports are flat bits,
    as in `LaneOperands`."""

    def __init__(self, params: ArrayParams) -> None:
        self.params = params
        operands = lane_operands(params, params.lanes).size
        super().__init__({"beat": In(array_input(params).size), "a": Out(operands), "b": Out(operands)})

    def elaborate(self, platform) -> Module:
        m = Module()
        width, sublane_width = self.params.width, self.params.sublane_width
        beat = data.View(array_input(self.params), self.beat)
        attention = beat.mode == Mode.ATTENTION
        own = [elements(beat, "buffer", lane) for lane in range(self.params.lanes)]
        m.d.comb += [
            self.a.eq(Cat(Mux(attention, mine[k % sublane_width], mine[k]) for mine in own for k in range(width))),
            self.b.eq(Cat(beat.memory.as_value() for _ in range(self.params.lanes))),
        ]
        return m


class PNMArray(SIMDPipeline):
    """The lanes in lockstep under one set of controls. The single memory operand is the HBM bandwidth
    (one full-width vector per cycle); lanes that share it are the reuse the paper's batching (MLP) and
    GQA KV-head sharing (attention) provide."""

    def __init__(self, params: ArrayParams = ArrayParams()) -> None:
        super().__init__(params, array_input(params), lanes=params.lanes, operands=ArrayOperands)
