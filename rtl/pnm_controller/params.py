"""Parameters of the PNM controller."""
from dataclasses import dataclass

from amaranth.utils import ceil_log2

from ..mmu.params import MMUParams
from ..params import Params, require_at_least, require_positive, require_power_of_two
from .isa import ADDRESS_BITS, ROW_FIELD_BITS


@dataclass(frozen=True)
class ControllerParams(Params):
    """The instruction buffer's depth, how many commands each unit may have in flight, and the MMU-side widths
    of the MMU the controller drives (defaults equal `MMUParams`'; the top builds both from one set).

    DuoPD (§4.2) names the instruction buffer but gives no size; 1,024 words (16 KiB) is this design's choice.
    The outstanding limits are too: the MMU's default pending table holds 8 tensors, and the array and the
    vector unit each take a second command while finishing one.
    """

    depth: int = 1024
    """Instruction words (128 bits each), a power of two."""
    mmu_outstanding: int = 8
    array_outstanding: int = 2
    vector_outstanding: int = 2
    buffer_address_bits: int = 15
    """PNM buffer rows of one MMU request (32 B): 1 MiB (§4.2)."""
    address_bits: int = 36
    data_bits: int = 256
    id_bits: int = 8
    max_sub_requests: int = 32
    design_clock_hz: float = 1e9
    """All PNM units run at 1 GHz (§6.1); recorded with the figures, changes no logic."""

    def validate(self) -> None:
        require_power_of_two(self, "depth", 2)
        for name in ("mmu_outstanding", "array_outstanding", "vector_outstanding"):
            require_at_least(self, name, 1)
        require_positive(self, "design_clock_hz")
        if self.buffer_address_bits > ROW_FIELD_BITS:
            raise ValueError(f"buffer_address_bits={self.buffer_address_bits} must be at most {ROW_FIELD_BITS} "
                             f"(the instructions' row fields)")
        if self.address_bits > ADDRESS_BITS:
            raise ValueError(f"address_bits={self.address_bits} must be at most {ADDRESS_BITS} "
                             f"(the instructions' address field)")
        mmu = self.mmu_params()  # validates the MMU-side fields
        if mmu.max_tensor_bytes >= 1 << 16:
            raise ValueError(f"max_sub_requests={self.max_sub_requests}: a {mmu.max_tensor_bytes}-byte tensor "
                             f"does not fit the instructions' 16-bit size field")

    def mmu_params(self) -> MMUParams:
        """The MMU these commands are for (its other parameters do not shape the PNM instruction port)."""
        return MMUParams(address_bits=self.address_bits, data_bits=self.data_bits, id_bits=self.id_bits,
                         max_sub_requests=self.max_sub_requests, buffer_address_bits=self.buffer_address_bits)

    @property
    def pc_bits(self) -> int:
        """Instruction addresses 0 … depth − 1."""
        return ceil_log2(self.depth)

    @property
    def row_bytes(self) -> int:
        return self.data_bits // 8
