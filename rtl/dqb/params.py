"""The DQB's parameters: StreamDQ Table 5 by default."""
from dataclasses import dataclass

from ..fp.convert import ROUNDINGS
from ..params import Params, require_choice, require_port_bits, require_positive, require_power_of_two


@dataclass(frozen=True)
class DQBParams(Params):
    """One DQB on the read path of one HBM pseudo-channel (StreamDQ §3.2, Table 5).

    `internal_bits` is the FP32 datapath width: one 32-bit lane per 16-bit output, so it is always twice
    `interface_bits`. The request table holds `request_table_bytes / request_table_entry_bytes` layer entries;
    the S/Z buffer holds `sz_buffer_bytes` as interface-beat lines, half for scales and half for zero points.
    `outstanding_reads` is the depth of the tag history buffer (memory requests awaiting their answer: reads, S/Z
    fills and stores, whose answers are their acknowledgements); StreamDQ gives none, so 64 is our choice.
    `design_clock_hz` is the clock the block is designed for (Table 5 and §6.1: 328 MHz); it changes no logic
    and is recorded with the verified figures.
    """

    interface_bits: int = 512
    internal_bits: int = 1024
    tag_bits: int = 3
    address_bits: int = 32
    request_table_bytes: int = 8192
    request_table_entry_bytes: int = 32
    sz_buffer_bytes: int = 4096
    outstanding_reads: int = 64
    rounding: str = "nearest_even"
    design_clock_hz: float = 328e6

    def validate(self) -> None:
        require_power_of_two(self, "interface_bits", 32)
        if self.internal_bits != 2 * self.interface_bits:
            raise ValueError(f"internal_bits={self.internal_bits} must be 2 × interface_bits "
                             f"(one FP32 lane per 16-bit output): {2 * self.interface_bits}")
        if self.tag_bits != 3:
            raise ValueError(f"tag_bits={self.tag_bits}: Table 5's encoding has 3 bits")
        if not 16 <= self.address_bits <= 64 or (1 << self.address_bits) < 4 * self.beat_bytes:
            raise ValueError(f"address_bits={self.address_bits} must be in 16..64")
        if self.request_table_entry_bytes * 8 < self.entry_bits:
            raise ValueError(f"request_table_entry_bytes={self.request_table_entry_bytes} cannot hold an entry "
                             f"of {self.entry_bits} bits")
        if (self.request_table_bytes % self.request_table_entry_bytes
                or self.table_entries < 1 or self.table_entries & (self.table_entries - 1)):
            raise ValueError(f"request_table_bytes={self.request_table_bytes} must hold a power-of-two number "
                             f"of {self.request_table_entry_bytes}-byte entries")
        if self.sz_buffer_bytes % (2 * self.beat_bytes) or self.sz_buffer_bytes < 4 * self.beat_bytes:
            raise ValueError(f"sz_buffer_bytes={self.sz_buffer_bytes} must be a multiple of 2 beats "
                             f"({2 * self.beat_bytes} bytes) and at least 4 beats")
        require_power_of_two(self, "outstanding_reads", 4)
        require_choice(self, "rounding", ROUNDINGS)
        require_positive(self, "design_clock_hz")
        # The widest values: a GPU request (address, tag, store flag, data) and the FP32 datapath.
        require_port_bits("gpu_req", self.address_bits + self.tag_bits + 1 + self.interface_bits,
                          ("interface_bits", "address_bits"), self)
        require_port_bits("the FP32 datapath", self.internal_bits, ("internal_bits",), self)

    @property
    def beat_bytes(self) -> int:
        return self.interface_bits // 8

    @property
    def lanes(self) -> int:
        """FP32 lanes of the datapath = 16-bit elements of one output beat."""
        return self.internal_bits // 32

    @property
    def table_entries(self) -> int:
        return self.request_table_bytes // self.request_table_entry_bytes

    @property
    def sz_lines(self) -> int:
        """Lines of one half (scales or zero points) of the S/Z buffer."""
        return self.sz_buffer_bytes // (2 * self.beat_bytes)

    @property
    def entry_bits(self) -> int:
        """weight base, size, scale base, zero base, log2 group width, enable."""
        return 4 * self.address_bits + 7 + 1
