"""One DuoPD PNM SIMD lane (paper §4.2, Fig. 6): `width` FP16 MACs per cycle, MLP or attention mode per beat."""

from .params import LaneParams
from .ports import lane_input
from .simd import SIMDPipeline, elements


class PNMLane(SIMDPipeline):
    """A lane with its own operands. MLP mode: the dot product of `a` and `b` folds into the accumulator
    (clear/emit per beat). Attention mode: every sublane emits the dot product of its slices of `a` and `b`;
    a query broadcast across sublanes is the caller's `a` holding the same query in every sublane.
    """

    def __init__(self, params: LaneParams = LaneParams()) -> None:
        super().__init__(params, lane_input(params), lanes=None)

    def operands(self, payload):
        return [(elements(payload, "a"), elements(payload, "b"))]
