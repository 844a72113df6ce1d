"""Parameters of the DuoPD PNM SIMD lane and compute array (paper §4.2, §6.1)."""
from dataclasses import dataclass

from ..params import Params


def _require_power_of_two(params: Params, field: str, minimum: int = 1) -> None:
    value = getattr(params, field)
    if value < minimum or value & (value - 1):
        raise ValueError(f"{field}={value} must be a power of two ≥ {minimum}")


@dataclass(frozen=True)
class LaneParams(Params):
    """One SIMD lane: `width` FP16 multipliers feeding adder trees of `tree_fan_in`-input nodes; in attention
    mode the lane splits into `width // sublane_width` sublanes, each a full dot product per cycle.

    Defaults are the paper's lane: 1,024 elements, 8-way adder trees, eight 128-wide sublanes.
    """

    width: int = 1024
    tree_fan_in: int = 8
    sublane_width: int = 128

    def validate(self) -> None:
        _require_power_of_two(self, "width", 2)
        _require_power_of_two(self, "tree_fan_in", 2)
        _require_power_of_two(self, "sublane_width")
        if self.sublane_width > self.width:
            raise ValueError(f"sublane_width={self.sublane_width} must divide width={self.width}")

    @property
    def sublanes(self) -> int:
        return self.width // self.sublane_width


@dataclass(frozen=True)
class ArrayParams(LaneParams):
    """The compute array: `lanes` lanes sharing one memory operand (paper: 16 lanes, 32 TFLOPS at 1 GHz)."""

    lanes: int = 16

    def validate(self) -> None:
        super().validate()
        if self.lanes < 1:
            raise ValueError(f"lanes={self.lanes} must be at least 1")
