"""Parameters of the PNM vector unit."""
from dataclasses import dataclass

from ..params import Params, require_port_bits
from .ports import LANE_IN_BITS


@dataclass(frozen=True)
class VectorParams(Params):
    """`width`: FP32 elements per beat (lanes), a power of two. DuoPD (§4.2) gives the vector unit's role and
    area (1.56 mm², §6.7) but not its width. The default of 4 is this design's choice, kept small because
    elaboration costs about 22 s per lane (16 lanes: 351 s, which `basedie generate all` would pay)."""

    width: int = 4

    def validate(self) -> None:
        if self.width < 1 or self.width & (self.width - 1):
            raise ValueError(f"width={self.width} must be a power of two ≥ 1")
        require_port_bits("i (lanes)", self.width * LANE_IN_BITS, ("width",), self)
