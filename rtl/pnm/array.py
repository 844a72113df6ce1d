"""The DuoPD PNM compute array (paper §4.2, §6.1): `lanes` lanes sharing one memory operand per beat."""
from amaranth.hdl import Mux

from .params import ArrayParams
from .ports import Mode, array_input
from .simd import SIMDPipeline, elements


class PNMArray(SIMDPipeline):
    """The lanes in lockstep under one set of controls. The single memory operand is the HBM bandwidth
    (one full-width vector per cycle); lanes that share it are the reuse the paper's batching (MLP) and
    GQA KV-head sharing (attention) provide."""

    def __init__(self, params: ArrayParams = ArrayParams()) -> None:
        super().__init__(params, array_input(params), lanes=params.lanes)

    def operands(self, payload):
        width, sublane_width = self.params.width, self.params.sublane_width
        attention = payload.mode == Mode.ATTENTION
        memory = elements(payload, "memory")
        lanes = []
        for lane in range(self.params.lanes):
            own = elements(payload, "buffer", lane)
            lanes.append(([Mux(attention, own[k % sublane_width], own[k]) for k in range(width)], memory))
        return lanes
