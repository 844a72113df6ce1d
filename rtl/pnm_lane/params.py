"""Parameters of the DuoPD PNM SIMD lane and compute array (paper §4.2, §6.1)."""
from dataclasses import dataclass

from ..params import Params, require_at_least, require_port_bits, require_positive, require_power_of_two

FP16_BITS = 16
CONTROL_BITS = 3  # mode, clear, emit


@dataclass(frozen=True)
class LaneParams(Params):
    """One SIMD lane: `width` FP16 multipliers feeding a pairwise FP32 adder tree; in attention mode the lane
    splits into `width // sublane_width` sublanes, each a full dot product per cycle.

    Defaults are the paper's lane: 1,024 elements, eight 128-wide sublanes, 1 GHz (DuoPD §4.2, §6.1). The
    paper's "8-way adder trees" are not a parameter: nodes of any power-of-two fan-in built from balanced
    binary trees compose to the same pairwise tree, so the fan-in changes neither results nor latency here.
    `design_clock_hz` is the clock the block is designed for (§6.1: all PNM units at 1 GHz); it changes no
    logic and is recorded with the verified figures, where the system model reads it.
    """

    width: int = 1024
    sublane_width: int = 128
    design_clock_hz: float = 1e9

    def validate(self) -> None:
        require_power_of_two(self, "width", 2)
        require_power_of_two(self, "sublane_width")
        if self.sublane_width > self.width:
            raise ValueError(f"sublane_width={self.sublane_width} must divide width={self.width}")
        require_positive(self, "design_clock_hz")
        self._require_ports()

    def _require_ports(self) -> None:
        require_port_bits("i (a, b)", 2 * self.width * FP16_BITS + CONTROL_BITS, ("width",), self)

    @property
    def sublanes(self) -> int:
        return self.width // self.sublane_width


@dataclass(frozen=True)
class ArrayParams(LaneParams):
    """The compute array: `lanes` lanes sharing one memory operand (paper: 16 lanes, 32 TFLOPS at 1 GHz).

    The default is 2 lanes, not the paper's 16: the array takes every lane's buffer operand through its input
    port, and 16 × 1,024 FP16 elements (262,144 bits) is beyond Amaranth's 65,536-bit limit on one value.
    """

    lanes: int = 2

    def validate(self) -> None:
        super().validate()
        require_at_least(self, "lanes", 1)

    def _require_ports(self) -> None:
        require_port_bits("i (memory, buffer)", (1 + self.lanes) * self.width * FP16_BITS + CONTROL_BITS,
                          ("width", "lanes"), self)
