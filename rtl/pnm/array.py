"""The DuoPD PNM compute array (paper §4.2, §6.1): `lanes` lanes sharing one memory operand per beat."""
from amaranth.hdl import Mux
from amaranth.lib import data

from ..fp.formats import FP16
from .params import ArrayParams
from .simd import Mode, SIMDPipeline, control_fields, elements


def array_input(params: ArrayParams) -> data.StructLayout:
    """`memory`: the `width` elements read from HBM this cycle, broadcast to every lane (MLP: a weight tile;
    attention: `sublanes` keys of one KV head, key s in sublane s). `buffer`: each lane's own operand from the
    PNM buffer (MLP: that request's activations; attention: the lane's query in its first `sublane_width`
    elements, broadcast by the array across the lane's sublanes; the rest is ignored)."""
    operands = data.ArrayLayout(FP16.width, params.width)
    return data.StructLayout({"memory": operands, "buffer": data.ArrayLayout(operands, params.lanes),
                              **control_fields()})


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
