"""Parameters of the base die: the PNM's (`PNMParams`, whose MMU and units it derives) plus the DQB's own and the
view table's, with the DQB's interface at the MMU's request width."""
from dataclasses import dataclass

from ..dqb.params import DQBParams
from ..params import require_at_least, require_power_of_two
from ..pnm.params import PNMParams


@dataclass(frozen=True)
class BaseDieParams(PNMParams):
    """DuoPD's PNM and MMU (§4.2–4.3) with StreamDQ's DQB (§3.2) on the read path between the MMU's memory
    side and the pseudo channel. The DQB's interface is one MMU request (`data_bits`), so every memory answer
    the MMU waits for is one DQB beat; its internal datapath is twice that (one FP32 lane per 16-bit output).
    `request_table_bytes`, `sz_buffer_bytes`, `outstanding_reads` and `rounding` are the DQB's (Table 5
    defaults); `views` is the number of view-table entries (a quantized tensor's FP16 view each: our choice),
    `outstanding` the depth of the view port's two queues (MMU requests awaiting their answer, DQB reads
    awaiting their beats: our choice, above the DQB's outstanding reads plus its 11-cycle datapath)."""

    request_table_bytes: int = 8192
    sz_buffer_bytes: int = 4096
    outstanding_reads: int = 64
    rounding: str = "nearest_even"
    views: int = 16
    outstanding: int = 128

    def validate(self) -> None:
        super().validate()
        if self.out_of_order:
            raise ValueError("out_of_order=True: the DQB answers in request order and carries no tag, so the "
                             "MMU behind it must expect in-order answers")
        require_power_of_two(self, "views")
        require_at_least(self, "outstanding", 4)
        self.dqb_params()   # names the DQB's field when the DQB cannot be built at these sizes

    def pnm_params(self) -> PNMParams:
        return PNMParams(**{name: getattr(self, name) for name in PNMParams.__dataclass_fields__})

    def dqb_params(self) -> DQBParams:
        return DQBParams(interface_bits=self.data_bits, internal_bits=2 * self.data_bits,
                         address_bits=self.address_bits, request_table_bytes=self.request_table_bytes,
                         sz_buffer_bytes=self.sz_buffer_bytes, outstanding_reads=self.outstanding_reads,
                         rounding=self.rounding, design_clock_hz=self.design_clock_hz)
