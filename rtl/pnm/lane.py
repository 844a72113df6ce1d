"""One DuoPD PNM SIMD lane (paper §4.2, Fig. 6): `width` FP16 MACs per cycle, MLP or attention mode per beat."""
from amaranth.lib import data

from ..fp.formats import FP16
from .params import LaneParams
from .simd import SIMDPipeline, control_fields, elements


def lane_input(params: LaneParams) -> data.StructLayout:
    """Operands `a` (activations / query) and `b` (weights / keys), element k of sublane s at s·sublane_width+k."""
    operands = data.ArrayLayout(FP16.width, params.width)
    return data.StructLayout({"a": operands, "b": operands, **control_fields()})


class PNMLane(SIMDPipeline):
    """A lane with its own operands. MLP mode: the dot product of `a` and `b` folds into the accumulator
    (clear/emit per beat). Attention mode: every sublane emits the dot product of its slices of `a` and `b`;
    a query broadcast across sublanes is the caller's `a` holding the same query in every sublane.
    """

    def __init__(self, params: LaneParams = LaneParams()) -> None:
        super().__init__(params, lane_input(params), lanes=None)

    def operands(self, payload):
        return [(elements(payload, "a"), elements(payload, "b"))]
