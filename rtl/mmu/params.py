"""Parameters of the DuoPD MMU arbiter (§4.2, §4.3 Fig. 8, §5.3) and the register map of its config port."""
from dataclasses import dataclass

from amaranth.utils import ceil_log2

from ..params import Params, require_at_least, require_choice, require_port_bits, require_positive, require_power_of_two

POLICIES = ("prefill_first", "decode_first", "mixed")
"""Arbitration policies of Fig. 9, in the encoding of the POLICY register: GPU priority, PNM priority,
weighted round robin."""

WEIGHT_WIDTH = 8

# Config-port register numbers; a write to any other number, or of an invalid value, is ignored.
REG_POLICY = 0          # 0 prefill_first, 1 decode_first, 2 mixed (3 is ignored)
REG_WEIGHT_GPU = 1      # WRR grants in a row for the GPU, 1..255 (0 is ignored)
REG_WEIGHT_PNM = 2      # WRR grants in a row for the PNM, 1..255 (0 is ignored)
REG_MEMORY_SIZE = 3     # bytes of configured memory, at most 2**address_bits; PNM accesses must end at or below it
REG_REGION_BASE = 4     # + 2*i: base byte address of protected (model-parameter) region i
REG_REGION_LIMIT = 5    # + 2*i: end byte address (exclusive) of region i; limit <= base disables it


@dataclass(frozen=True)
class MMUParams(Params):
    address_bits: int = 36
    """Byte-address width: a 64 GiB HBM4 stack."""
    data_bits: int = 256
    """Bits per memory request: the 32-byte requests of §4.3."""
    id_bits: int = 8
    """Width of GPU request ids and of PNM instruction ids (our choice; DuoPD states none)."""
    queue_depth: int = 16
    """Entries of the GPU request queue and of the PNM request queue, each (our choice: DuoPD names the queues,
    §4.3 Fig. 8, but gives no depth)."""
    gpu_outstanding: int = 32
    """GPU requests issued to the memory controller and not yet answered (our choice; DuoPD states no number).
    Little's law: behind an HBM4 pseudo channel a prefill's sequential reads held each slot 23.3 cycles (17.6 in
    the DRAM), so 16 slots gave the GPU 0.69 of the 1.0 requests per cycle its data bus carries; 24 cover the
    bus, 32 leave room for the queueing a fuller bus adds (docs/dram.md, "The MMU behind HBM4")."""
    pending_entries: int = 8
    """PNM pending-table entries, one per tensor in flight (our choice: §4.3 describes the table, not its size)."""
    max_sub_requests: int = 32
    """Bitmap width: the largest tensor is this many 32-byte requests (the PNM buffer's 32 entries per
    pseudo channel, §4.2)."""
    protected_regions: int = 2
    """Protected (model-parameter) regions the config port can set (our choice; §5.3 protects the parameters
    without saying how many ranges hold them)."""
    buffer_address_bits: int = 15
    """PNM buffer row address (one row = one request): 1 MiB of 32-byte rows (§4.2)."""
    out_of_order: bool = False
    """Memory responses may return in any order and carry the request's tag; otherwise they return in
    request order and the memory-controller ports carry no tag (the paper's deterministic MC)."""
    policy: str = "prefill_first"
    """Policy after reset; the paper's best end-to-end choice (§4.3)."""
    wrr_weight_gpu: int = 1
    wrr_weight_pnm: int = 1
    design_clock_hz: float = 1e9
    """The clock the MMU and its memory-controller port run at; it changes no logic and is recorded with the
    verified figures, where the system model converts cycles with it. DuoPD states no MC clock; the MMU sits
    on the logic die beside the PNM, whose units all run at 1 GHz (§6.1), so we take 1 GHz (an assumption)."""

    def validate(self) -> None:
        require_choice(self, "policy", POLICIES)
        require_positive(self, "design_clock_hz")
        # The widest port: a GPU request (address, write flag, byte mask, data, id).
        require_port_bits("gpu_req", self.address_bits + 1 + self.data_bits // 8 + self.data_bits + self.id_bits,
                          ("data_bits",), self)
        require_power_of_two(self, "data_bits", 8)
        for name in ("id_bits", "queue_depth", "gpu_outstanding", "pending_entries", "max_sub_requests",
                     "buffer_address_bits"):
            require_at_least(self, name, 1)
        if not 0 <= self.protected_regions <= 64:
            raise ValueError(f"protected_regions={self.protected_regions} must be 0..64")
        if not self.max_tensor_bytes.bit_length() < self.address_bits <= 64:
            raise ValueError(f"address_bits={self.address_bits} must be {self.max_tensor_bytes.bit_length() + 1}..64 "
                             f"(the largest tensor must fit in the address space)")
        for name in ("wrr_weight_gpu", "wrr_weight_pnm"):
            if not 1 <= getattr(self, name) < 2 ** WEIGHT_WIDTH:
                raise ValueError(f"{name}={getattr(self, name)} must be 1..{2 ** WEIGHT_WIDTH - 1}")

    @property
    def request_bytes(self) -> int:
        return self.data_bits // 8

    @property
    def offset_bits(self) -> int:
        """Low byte-address bits inside one request."""
        return ceil_log2(self.request_bytes)

    @property
    def block_address_bits(self) -> int:
        """Width of a request (block) address: memory-controller and GPU addresses count requests."""
        return self.address_bits - self.offset_bits

    @property
    def max_tensor_bytes(self) -> int:
        return self.max_sub_requests * self.request_bytes

    @property
    def config_registers(self) -> int:
        return REG_REGION_BASE + 2 * self.protected_regions
