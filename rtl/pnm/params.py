"""Parameters of the PNM top, and the parameters of every unit inside it, derived from them in one place."""
from dataclasses import dataclass

from amaranth.utils import exact_log2

from ..mmu.params import MMUParams
from ..params import Params, require_at_least, require_positive, require_power_of_two
from ..pnm_lane.params import LaneParams
from ..pnm_buffer.params import BufferParams
from ..pnm_controller.params import ControllerParams
from ..pnm_vector.params import VectorParams

FP16_BYTES, FP32_BYTES = 2, 4


@dataclass(frozen=True)
class PNMParams(Params):
    """DuoPD's PNM (§4.2, §6.1): `lanes` SIMD lanes of `width` FP16 multipliers, a banked buffer of
    `buffer_bytes`, a vector unit, the controller's instruction buffer of `depth` words and the MMU.

    One **row** is one MMU request, `data_bits / 8` bytes: the unit of the instructions' buffer operands, of TSV
    forwarding and of the vector unit's buffer port. The vector unit takes one row per beat, so its width is
    `data_bits / 32` FP32 lanes (8 at the paper's 32-B requests), not a parameter of its own. The array reads one
    lane operand tile of `width` FP16 (`2 · width` bytes: 2 KB at the paper's 1,024) per buffer request.
    Defaults are the paper's sizes; the instruction-buffer depth, banking and MMU sizes are this design's
    choices (docs/pnm-isa.md, docs/pnm-buffer.md)."""

    lanes: int = 16
    width: int = 1024
    sublane_width: int = 128
    buffer_bytes: int = 1 << 20
    banks: int = 64
    bank_bytes: int = 32
    depth: int = 1024
    address_bits: int = 36
    data_bits: int = 256
    id_bits: int = 8
    max_sub_requests: int = 32
    mmu_outstanding: int = 8
    out_of_order: bool = False
    design_clock_hz: float = 1e9
    """§6.1: every PNM unit at 1 GHz; recorded with the figures, changes no logic."""

    def validate(self) -> None:
        require_at_least(self, "lanes", 1)
        require_power_of_two(self, "data_bits", 32)
        require_power_of_two(self, "buffer_bytes")
        require_power_of_two(self, "banks")
        require_power_of_two(self, "bank_bytes")
        require_positive(self, "design_clock_hz")
        if self.buffer_bytes < self.row_bytes:
            raise ValueError(f"buffer_bytes={self.buffer_bytes} must hold at least one {self.row_bytes}-byte row")
        self.lane_params()  # names `width` or `sublane_width` when the lane cannot be built
        line = self.banks * self.bank_bytes
        if self.tile_bytes > line:
            raise ValueError(f"width={self.width}: a lane's operand tile ({self.tile_bytes} B) must fit one buffer "
                             f"line (banks·bank_bytes = {line} B)")
        # Each unit checks the rest of its own share (and names its field, which is ours by the same name).
        self.vector_params(), self.buffer_params(), self.controller_params(), self.mmu_params()

    @property
    def row_bytes(self) -> int:
        return self.data_bits // 8

    @property
    def buffer_address_bits(self) -> int:
        return exact_log2(self.buffer_bytes // self.row_bytes)

    @property
    def tile_bytes(self) -> int:
        """One lane operand tile: `width` FP16, one request of the array's buffer port."""
        return FP16_BYTES * self.width

    def lane_params(self) -> LaneParams:
        return LaneParams(width=self.width, sublane_width=self.sublane_width, design_clock_hz=self.design_clock_hz)

    def vector_params(self) -> VectorParams:
        return VectorParams(width=self.row_bytes // FP32_BYTES)

    def buffer_params(self) -> BufferParams:
        return BufferParams(total_bytes=self.buffer_bytes, banks=self.banks, bank_bytes=self.bank_bytes,
                            mmu_bytes=self.row_bytes, array_ports=1, array_bytes=self.tile_bytes,
                            vector_bytes=self.row_bytes, design_clock_hz=self.design_clock_hz)

    def controller_params(self) -> ControllerParams:
        return ControllerParams(depth=self.depth, mmu_outstanding=self.mmu_outstanding,
                                buffer_address_bits=self.buffer_address_bits, address_bits=self.address_bits,
                                data_bits=self.data_bits, id_bits=self.id_bits,
                                max_sub_requests=self.max_sub_requests, design_clock_hz=self.design_clock_hz)

    def mmu_params(self) -> MMUParams:
        """The controller's MMU (`ControllerParams.mmu_params`), with the top's memory-side choices."""
        base = self.controller_params().mmu_params()
        return MMUParams(**(base.as_dict() | {"out_of_order": self.out_of_order,
                                               "design_clock_hz": self.design_clock_hz}))
