"""Parameters of the PNM buffer, and the ports they give it."""
from dataclasses import dataclass

from amaranth.utils import ceil_log2

from ..params import Params, require_at_least, require_port_bits, require_positive, require_power_of_two


@dataclass(frozen=True)
class Port:
    """One client port: `name` (its streams are `<name>_rd` → `<name>_rdata`, or `<name>_wr`), whether it
    writes, and the bytes one request moves (its rows are that many bytes, aligned)."""

    name: str
    write: bool
    bytes: int

    @property
    def request(self) -> str:
        return f"{self.name}_{'wr' if self.write else 'rd'}"

    @property
    def response(self) -> str | None:
        return None if self.write else f"{self.name}_rdata"


@dataclass(frozen=True)
class BufferParams(Params):
    """Banked SRAM: `banks` single-ported banks, each `bank_bytes` wide, word-interleaved (byte address a is in
    bank (a // bank_bytes) % banks). Defaults: DuoPD's 1 MB (§4.2, §6.1) in 64 banks of 32 B (one MMU request,
    the paper's 32-B TSV sub-request), so a 2 KB line spans every bank once; bank count and width are this
    design's choice (the paper gives the capacity and its 1.25 mm² area, §6.7, not the organisation).

    Ports, in round-robin order: the MMU's TSV forwarding (`buf_wr` loads, `buf_rd` store data, `mmu_bytes`
    each: the MMU's `data_bits / 8`), `array_ports` operand-row reads of `array_bytes` (default one lane's
    1,024 FP16 operands), and the vector unit's `vu_wr`/`vu_rd` of `vector_bytes`. `design_clock_hz` (§6.1:
    every PNM unit at 1 GHz) changes no logic; the system model converts bytes per cycle with it."""

    total_bytes: int = 1 << 20
    banks: int = 64
    bank_bytes: int = 32
    mmu_bytes: int = 32
    array_ports: int = 1
    array_bytes: int = 2048
    vector_bytes: int = 32
    design_clock_hz: float = 1e9

    def validate(self) -> None:
        require_power_of_two(self, "banks")
        require_power_of_two(self, "bank_bytes")
        require_power_of_two(self, "total_bytes")
        require_at_least(self, "array_ports", 1)
        require_positive(self, "design_clock_hz")
        if self.total_bytes < self.line_bytes:
            raise ValueError(f"total_bytes={self.total_bytes} must be at least banks·bank_bytes={self.line_bytes}")
        for name in ("mmu_bytes", "array_bytes", "vector_bytes"):
            value = getattr(self, name)
            if value < self.bank_bytes or value > self.line_bytes or value & (value - 1):
                raise ValueError(f"{name}={value} must be a power of two from bank_bytes={self.bank_bytes} "
                                 f"to banks·bank_bytes={self.line_bytes}")
            require_port_bits(name, 8 * value + value + self.row_bits(value), (name,), self)

    @property
    def line_bytes(self) -> int:
        """One word of every bank: the most one request may move."""
        return self.banks * self.bank_bytes

    @property
    def depth(self) -> int:
        """Words per bank."""
        return self.total_bytes // self.line_bytes

    def row_bits(self, port_bytes: int) -> int:
        """Width of a row address of a port moving `port_bytes` per request."""
        return max(1, ceil_log2(self.total_bytes // port_bytes))

    @property
    def ports(self) -> tuple[Port, ...]:
        return (Port("buf", True, self.mmu_bytes), Port("buf", False, self.mmu_bytes),
                *(Port(f"array{k}", False, self.array_bytes) for k in range(self.array_ports)),
                Port("vu", True, self.vector_bytes), Port("vu", False, self.vector_bytes))
