"""The PNM's reads of quantized weights through its stack's DQBs (issue 31: one base die holding both).

DuoPD's PNM multiplies FP16; StreamDQ's DQB sits on the read path of every pseudo-channel and returns FP16
for tagged reads. On one base die the PNM's decode reads the stored (packed + S/Z) bytes from the stack and
the DQBs deliver FP16 to the lanes. This prices the join from the verified `dqb` entry (its beats per cycle by
mode, its read latency, the S/Z share of the bytes read) beside the verified `pnm` figures `PNMExecution` already
uses, at the DQB's design clock. The RTL block `base_die` (rtl/base_die/) joins the two; its decode layer's bytes
give the S/Z share at its bench's group size (`sz_fraction`, docs/design/base-die.md)."""
from dataclasses import dataclass

from .errors import require
from .hardware import GPU
from .quantized import DQBFigures, Quantization, larger, sz_fraction
from basedie.verified import VerifiedBlocks

# The decoder-block linear layers a GPTQ/AWQ checkpoint quantizes (the LM head, embeddings and MoE routers stay
# FP16).
QUANTIZED_OPS = ("qkv", "o_proj", "mlp", "experts")


@dataclass(frozen=True)
class StackDequant:
    """One stack's DQBs (one per pseudo-channel) as the PNM's read path: bytes read per FP16 weight byte, and
    the rates at which they deliver FP16 (`output_rate`), consume packed weights (`memory_rate`) and pass
    untagged bytes, S/Z and the KV cache (`bypass_rate`), all in bytes per second."""
    stored_per_fp16: float
    packed_per_fp16: float
    output_rate: float
    memory_rate: float
    bypass_rate: float
    latency_s: float
    power_w: float

    @classmethod
    def from_verified(cls, table: VerifiedBlocks, quant: Quantization, gpu: GPU, dqb_power_w: float) -> "StackDequant":
        """`dqb_power_w`: one DQB's power (`sysmodel.power`)."""
        require(gpu.pseudo_channels_per_stack >= 1,
                f"{gpu.name}: the PNM's DQBs need the stack's pseudo-channel count (one DQB per pseudo-channel; "
                f"--hw gpu.pseudo_channels_per_stack=N)")
        dqb = DQBFigures.from_verified(table, quant.dqb_mode)
        beats = gpu.pseudo_channels_per_stack * dqb.beat_bytes * dqb.clock_hz
        packed = quant.bits / 16
        return cls(packed / (1 - sz_fraction(table, quant.bits, quant.group_size)), packed,
                   beats * dqb.output_beats_per_cycle, beats * dqb.memory_beats_per_cycle,
                   beats * dqb.bypass_beats_per_cycle, dqb.latency_cycles / dqb.clock_hz,
                   gpu.pseudo_channels_per_stack * dqb_power_w)

    def read_bytes(self, weight_bytes, other_bytes):
        """Bytes read from the stack for `weight_bytes` of FP16 weights (stored quantized) and `other_bytes`
        read as they are."""
        return weight_bytes * self.stored_per_fp16 + other_bytes

    def seconds(self, weight_bytes, other_bytes):
        """The DQBs' time for them: the busier of the FP16 output and the packed input for the weights, then
        the S/Z and the untagged bytes at the bypass rate (as `GemmModel.dqb_bounds` prices the GPU's reads)."""
        sz = weight_bytes * (self.stored_per_fp16 - self.packed_per_fp16)
        return (larger(weight_bytes / self.output_rate, weight_bytes * self.packed_per_fp16 / self.memory_rate)
                + (sz + other_bytes) / self.bypass_rate)
