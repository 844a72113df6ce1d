"""Weight-only quantized GEMMs on a GPU: where dequantization happens and what it costs (StreamDQ, paper 002).

Three places: CUDA cores inside the GEMM kernel (`gpu-fused`), a separate dequantization kernel that writes an
FP16 copy to HBM for an FP16 GEMM to re-read (`gpu-split`), or StreamDQ's DQB on the read path of every HBM
pseudo-channel (`dqb`, §3), which returns FP16/BF16 to an ordinary FP16 GEMM. The GPU kernels are priced from
their instruction sequences in the open-source kernels (constants below, each with its derivation); the DQB
from its verified figures. Nothing here is fitted to the paper's results.

A GEMM is M × K × N: M rows of activations (tokens) times a K × N weight matrix. Every function accepts M as a
number or a numpy array (a block of decode iterations priced at once).
"""
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .errors import ConfigError, require
from .hardware import GPU
from . import quantized_measured as measured
from basedie.verified import VerifiedBlocks

# Weight formats: bits per weight and whether a group scale/zero pair (S/Z) comes with them.
WEIGHT_BITS = {"fp16": 16, "w4a16": 4, "w8a16": 8, "fp8": 8}
DQB_WEIGHT = {"w4a16": "int4", "w8a16": "int8", "fp8": "fp8_e4m3"}   # the DQB's mode names (Table 5)
ACTIVATIONS = ("fp16", "bf16")
DEQUANT_MODES = ("dqb", "gpu", "gpu-fused", "gpu-split")   # gpu: the kernel family's own fused/split switch
# The DQB entry the system model reads: the paper's Table 5 configuration.
DQB_PARAMS = {"interface_bits": 512, "rounding": "nearest_even"}
# DQB design clock, 328 MHz (paper 002 §6.1, Table 5). Until the verified entries carry their design clock,
# this is the one place it is taken from.
DQB_DESIGN_CLOCK_HZ = 328e6


@dataclass(frozen=True)
class InstructionMix:
    """Thread-instructions per dequantized weight, by pipe (`issue` counts every instruction once)."""
    issue: float
    int32: float
    fp16x2: float
    convert: float = 0.0


# INT4 → FP16 by the LOP3 magic-number trick, per 32-bit word of 8 weights (FasterTransformer's
# `dequantize_s4_to_fp16x2`, used by AWQ, llm-awq awq/kernels/csrc/quantization_new/dequantize.cuh): 1 shift,
# 4 LOP3 (mask | 0x6400 exponent), 2 SUB.F16x2 and 2 FMA.F16x2 (remove the magic bias) = 9 instructions.
# AWQ-v1 (vLLM csrc/quantization/awq/gemm_kernels.cu, gemm_forward_4bit_cuda_m16nXk32): then per half2 one
# SUB.F16x2 (zero) and one FMA.F16x2 (scale): 4 + 4 per 8 weights.
AWQ_V1_INT4 = InstructionMix((9 + 8) / 8, 5 / 8, (4 + 8) / 8)
# AWQ-v2 (llm-awq quantization_new/gemm/gemm_cuda.cu, share_to_reg_one_stage_B): one HFMA2 per half2 with the
# zero folded into a pre-scaled offset: 4 per 8 weights.
AWQ_V2_INT4 = InstructionMix((9 + 4) / 8, 5 / 8, (4 + 4) / 8)
# GPTQ 4-bit (vLLM csrc/quantization/gptq/qdq_4.cuh, dequant_4bit_8, from exllamav2): 1 shift, 4 LOP3, 2 HADD2
# and 2 HFMA2 with the zero folded in = 9 per 8 weights; the scale multiplies partial sums, not weights.
GPTQ_INT4 = InstructionMix(9 / 8, 5 / 8, 4 / 8)
# GPTQ 8-bit (qdq_8.cuh dequant_8bit_8 with qdq_util.cuh exb/dq_ns): per weight a shift and an AND (exb), an
# integer subtract of the zero and __int2half_rn (I2F, a conversion), plus one pack per two weights.
GPTQ_INT8 = InstructionMix(4.5, 3.5, 0.0, 1.0)
# TorchAO int8 weight-only to BF16 (split): per weight one conversion and one multiply by the channel scale.
TORCHAO_INT8 = InstructionMix(2.0, 0.0, 1.0, 1.0)


@dataclass(frozen=True)
class KernelFamily:
    """What an open-source kernel family does: the weights it takes, how many activation rows share one
    dequantization of a weight (the fused kernel re-dequantizes for every tile of `m_tiles` rows), whether its
    fused GEMM runs on tensor cores, and from which M its own dispatch switches to the split kernel."""
    name: str
    mixes: dict                            # weight bits → InstructionMix
    activations: tuple[str, ...]
    fused: bool
    split_from: float                      # M at or above which the family splits (inf: never; 0: always)
    m_tiles: tuple[tuple[float, int], ...] = ((math.inf, 16),)   # (largest M, rows per dequantization)
    tensor_cores: bool = True

    def rows_per_dequant(self, m):
        tiles = np.asarray([t for _, t in self.m_tiles])
        index = np.searchsorted(np.asarray([b for b, _ in self.m_tiles]), m, side="left")
        return tiles[index] if isinstance(m, np.ndarray) else float(tiles[int(index)])


KERNELS = {
    # vLLM's GPTQ (csrc/quantization/gptq/q_gemm.cu, from exllamav2): BLOCK_M_SIZE_MAX = 8 rows per block, the
    # dot products by HFMA2 on CUDA cores (dot22_8), no tensor cores; beyond a row count it reconstructs the FP16
    # weights and calls cuBLAS. The switch at M = 64 is the paper's setting (§6.4). Its kernels take `half` only.
    "gptq": KernelFamily("gptq", {4: GPTQ_INT4, 8: GPTQ_INT8}, ("fp16",), True, 64, ((math.inf, 8),), False),
    # vLLM's AWQ (gemm_forward_4bit_cuda_m16nXk32: 16 rows per thread block; awq.py splits from 256 rows).
    "awq-v1": KernelFamily("awq-v1", {4: AWQ_V1_INT4}, ("fp16",), True, 256, ((math.inf, 16),)),
    # llm-awq's gemm_forward_cuda_new: each warp dequantizes its own fragment, WARP_M = 16 up to 64 rows, 32 up
    # to 128, 64 beyond; fused throughout.
    "awq-v2": KernelFamily("awq-v2", {4: AWQ_V2_INT4}, ("fp16",), True, math.inf,
                           ((64, 16), (128, 32), (math.inf, 64))),
    # TorchAO int8 weight-only: no fused kernel for INT8 → BF16 (§6.3).
    "torchao": KernelFamily("torchao", {8: TORCHAO_INT8}, ("bf16",), False, 0),
}


@dataclass(frozen=True)
class Quantization:
    """How the weights are stored and where they are dequantized; a combination no kernel runs is refused with a
    message that names it."""
    weights: str = "fp16"
    group_size: int = 0            # 0 for fp16
    dequant: str | None = None
    kernel: str | None = None
    activations: str = "fp16"
    link_expanded: bool = True     # DQB: the die-to-die link carries the expanded 16-bit stream (else: no bound)
    kernel_model: str = "roofline"  # GPU kernels: instruction-count roofline, or measured (`quantized_measured`)

    def __post_init__(self) -> None:
        require(self.weights in WEIGHT_BITS, f"unknown weights {self.weights!r}; choose one of {', '.join(WEIGHT_BITS)}")
        require(self.activations in ACTIVATIONS,
                f"unknown activations {self.activations!r}; choose one of {', '.join(ACTIVATIONS)}")
        if not self.quantized:
            require(self.dequant is None and self.kernel is None and not self.group_size
                    and self.kernel_model == "roofline",
                    "fp16 weights need no dequantization: drop --dequant, --kernel, --kernel-model and --group-size")
            return
        require(self.dequant in DEQUANT_MODES,
                f"{self.weights} weights need --dequant, one of {', '.join(DEQUANT_MODES)}")
        require(self.group_size >= 1, f"group size must be >= 1, got {self.group_size}")
        require(self.kernel_model in measured.KERNEL_MODELS,
                f"unknown kernel model {self.kernel_model!r}; choose one of {', '.join(measured.KERNEL_MODELS)}")
        if self.dequant == "dqb":
            require(self.kernel is None, "--kernel names a GPU-side dequantization kernel; the DQB needs none")
            return
        require(self.kernel in KERNELS, f"--dequant {self.dequant} needs --kernel, one of {', '.join(KERNELS)}")
        family = KERNELS[self.kernel]
        require(self.weights != "fp8" and self.bits in family.mixes,
                f"{self.kernel} has no kernel for {self.weights} weights")
        require(self.activations in family.activations,
                f"{self.kernel} has no kernel for {self.activations} activations")
        require(self.dequant != "gpu-fused" or family.fused, f"{self.kernel} has no fused kernel")
        fuses = self.dequant == "gpu-fused" or (self.dequant == "gpu" and family.fused and family.split_from > 0)
        require(self.kernel_model != "measured" or not fuses
                or (self.kernel in measured.MEASURED_SERIES and self.bits == measured.MEASURED_BITS),
                f"no measured fused kernel for {self.kernel} {self.weights} (measured: INT4 "
                f"{', '.join(measured.MEASURED_SERIES)}); use --kernel-model roofline")

    @property
    def quantized(self) -> bool:
        return self.weights != "fp16"

    @property
    def bits(self) -> int:
        return WEIGHT_BITS[self.weights]

    @property
    def dqb_mode(self) -> str:
        return f"{DQB_WEIGHT[self.weights]}_{self.activations}"

    def check_divides(self, k: int) -> None:
        require(k % self.group_size == 0, f"group size {self.group_size} does not divide K = {k}")


def dqb_entry(table: VerifiedBlocks):
    try:
        return table.entry("dqb", **DQB_PARAMS)
    except KeyError as error:
        raise ConfigError(str(error).strip('"')) from None


def dqb_figure(table: VerifiedBlocks, name: str):
    figures = dqb_entry(table).figures
    if name not in figures:
        raise ConfigError(f"the verified dqb entry ({DQB_PARAMS}) has no figure {name!r}: run `basedie verify dqb`")
    return figures[name]


def sz_fraction(table: VerifiedBlocks, bits: int, group_size: int) -> float:
    """S/Z share of all weight bytes read (Table 3), as the DQB bench or the base die's bench measured it."""
    return sz_source(table, bits, group_size)[0]


def sz_source(table: VerifiedBlocks, bits: int, group_size: int) -> tuple[float, str]:
    """The S/Z share of the weight bytes read and the block whose bench measured it: the DQB's (Table 3's group
    sizes), else the base die's decode layer (`base_die_sz_rows`)."""
    rows = [(row, "dqb") for row in dqb_figure(table, "sz_read_fraction")] + [
        (row, "base_die") for row in base_die_sz_rows(table)]
    for row, block in rows:
        if (row["weight_bits"], row["group_size"]) == (bits, group_size):
            return float(row["fraction"]), block
    groups = sorted({row["group_size"] for row, _ in rows if row["weight_bits"] == bits})
    raise ConfigError(f"no measured S/Z fraction for group size {group_size} ({bits}-bit); measured: "
                      f"{', '.join(map(str, groups))}")


# The base die bench's decode-layer runs with the GPU idle, by weight width (its AWQ run shares the die with GPU
# reads, which evict S/Z lines: not a property of the format).
BASE_DIE_RUNS = {4: "gptq", 8: "int8"}


def base_die_sz_rows(table: VerifiedBlocks) -> list[dict]:
    """The S/Z share of the weight bytes the base die's PNM read in its decode layer, per verified base_die entry
    and weight width: the layer's FP16 weight bytes W are what the quantized run stopped reading, W (1 - bits/16) =
    FP16 bytes - (quantized bytes - S/Z bytes); its group size follows from the S/Z bytes, one FP16 scale and one
    zero point of the weight's width per group, each read once (the bench checks both)."""
    rows = []
    for entry in (e for e in table.entries if e.block == "base_die"):
        figures = entry.figures
        for bits, run in BASE_DIE_RUNS.items():
            sz, read = figures[f"sz_read_bytes_{run}"], figures[f"memory_read_bytes_{run}"]
            weights = (figures["memory_read_bytes_fp16"] - (read - sz)) / (1 - bits / 16)
            group_size = weights / 2 / (sz / (2 + bits / 8))
            require(group_size == int(group_size), f"the base_die entry's {run} bytes give no whole group size "
                                                   f"({group_size}): run `basedie verify base_die`")
            rows.append({"weight_bits": bits, "group_size": int(group_size),
                         "fraction": sz / (weights * bits / 16 + sz)})
    return rows


@dataclass(frozen=True)
class DQBFigures:
    """The DQB's verified figures for one mode, and the deployment around it (one DQB per pseudo-channel)."""
    latency_cycles: int
    output_beats_per_cycle: float
    memory_beats_per_cycle: float
    bypass_beats_per_cycle: float
    beat_bytes: int
    clock_hz: float = DQB_DESIGN_CLOCK_HZ

    @classmethod
    def from_verified(cls, table: VerifiedBlocks, mode: str) -> "DQBFigures":
        entry = dqb_entry(table)
        return cls(int(dqb_figure(table, "read_latency_cycles")[mode]),
                   float(dqb_figure(table, "beats_per_cycle_by_mode")[mode]),
                   float(dqb_figure(table, "memory_beats_per_cycle_by_mode")[mode]),
                   float(dqb_figure(table, "beats_per_cycle_by_mode")["bypass"]),
                   int(entry.params["interface_bits"]) // 8)


class GemmCost(NamedTuple):
    seconds: float
    hbm_bytes: float
    memory_s: float          # HBM side (for the DQB: the slowest of DRAM, DQB and link)
    tensor_s: float
    cuda_s: float            # CUDA-core dequantization (and, for GPTQ's fused kernel, its HFMA2 dot products)
    bound: str               # what sets the time: memory, tensor, cuda, tensor+cuda, or dram/dqb/link (DQB)


def _ceil(x):
    return np.ceil(x) if isinstance(x, np.ndarray) else math.ceil(x)


def larger(a, b):
    """Elementwise maximum when either is an array, the builtin otherwise."""
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else max(a, b)


@dataclass(frozen=True)
class GemmModel:
    """Prices one quantized GEMM on `gpu` for `quant`; `bandwidth` defaults to the GPU's HBM bandwidth."""
    gpu: GPU
    quant: Quantization
    sz: float = 0.0                       # S/Z fraction of the weight bytes (verified)
    dqb: DQBFigures | None = None
    dqb_power_w: float | None = None      # one DQB's (sysmodel.power): the DQB path's power and energy need it

    def __post_init__(self) -> None:
        if self.quant.quantized and self.quant.dequant != "dqb":
            require(self.gpu.cores is not None, f"{self.gpu.name}: GPU-side dequantization needs its CUDA-core "
                                                f"figures (known for the a100-pcie-40gb hardware)")
        if self.quant.dequant == "dqb":
            require(self.dqb is not None, "the DQB path needs the verified DQB figures")
            require(self.gpu.pseudo_channels_per_stack >= 1,
                    f"{self.gpu.name}: the DQB needs the stack's pseudo-channel count (one DQB per pseudo-channel)")

    @classmethod
    def build(cls, gpu: GPU, quant: Quantization, table: VerifiedBlocks,
              dqb_power_w: float | None = None) -> "GemmModel":
        """`dqb_power_w`: one DQB's power (`sysmodel.power`), required on the DQB path."""
        if not quant.quantized:
            return cls(gpu, quant)
        sz = sz_fraction(table, quant.bits, quant.group_size)
        if quant.dequant != "dqb":
            return cls(gpu, quant, sz)
        return cls(gpu, quant, sz, DQBFigures.from_verified(table, quant.dqb_mode), dqb_power_w)

    @property
    def dqbs(self) -> int:
        return self.gpu.stacks * self.gpu.pseudo_channels_per_stack

    def weight_bytes(self, k: int, n: int) -> float:
        """Packed weights plus their S/Z (the verified fraction of the bytes read)."""
        return k * n * self.quant.bits / 8 / (1 - self.sz)

    def fp16_gemm(self, m, k: int, n: int, bandwidth: float | None = None, weight_bytes: float | None = None):
        """cuBLAS-like FP16 GEMM: its bytes at the HBM bandwidth against tensor-core time with M padded to the
        MMA tile (a row of activations costs a tile)."""
        bandwidth = self.gpu.memory.bandwidth if bandwidth is None else bandwidth
        nbytes = (2 * k * n if weight_bytes is None else weight_bytes) + 2 * m * (k + n)
        tensor = 2 * self._padded(m) * k * n / self.gpu.flops
        return nbytes / bandwidth, tensor, nbytes

    def _padded(self, m):
        tile = self.gpu.cores.mma_m if self.gpu.cores else 1
        return _ceil(m / tile) * tile

    def cuda_s(self, dequantized, mix: InstructionMix, hfma2=0.0):
        """CUDA-core time of `dequantized` weight dequantizations plus `hfma2` dot-product HFMA2s (GPTQ's fused
        kernel): the busiest of the issue slots and the pipes, over every SM."""
        c = self.gpu.cores
        clocks = (dequantized * mix.issue + hfma2) / c.issue_per_clock
        for pipe in (dequantized * mix.int32 / c.int32_per_clock,
                     (dequantized * mix.fp16x2 + hfma2) / c.fp16x2_per_clock,
                     dequantized * mix.convert / c.convert_per_clock):
            clocks = larger(clocks, pipe)
        return clocks / (self.gpu.sms * c.clock_hz)

    def cost(self, m, k: int, n: int, bandwidth: float | None = None) -> GemmCost:
        q = self.quant
        if not q.quantized:
            memory, tensor, nbytes = self.fp16_gemm(m, k, n, bandwidth)
            bound = "mixed" if isinstance(m, np.ndarray) else "memory" if memory >= tensor else "tensor"
            return GemmCost(larger(memory, tensor), nbytes, memory, tensor, 0.0, bound)
        if q.dequant == "dqb":
            return self._dqb(m, k, n, bandwidth)
        family = KERNELS[q.kernel]
        if q.dequant == "gpu-fused":
            return self._fused(m, k, n, family, bandwidth)
        if q.dequant == "gpu-split":
            return self._split(m, k, n, family, bandwidth)
        # The family's own switch.
        if isinstance(m, np.ndarray):
            fused, split = self._fused(m, k, n, family, bandwidth), self._split(m, k, n, family, bandwidth)
            use_split = m >= family.split_from
            return GemmCost(*(np.where(use_split, s, f) for s, f in zip(split[:5], fused[:5])), "mixed")
        return (self._split if m >= family.split_from else self._fused)(m, k, n, family, bandwidth)

    def _fused(self, m, k, n, family: KernelFamily, bandwidth) -> GemmCost:
        """Weights read once; every tile of rows dequantizes them again on CUDA cores, then multiplies on tensor
        cores (or, GPTQ, by HFMA2 on CUDA cores). The dequantized fragment is the MMA's operand in the same
        warp, so CUDA-core and tensor-core time add up; the HBM stream overlaps both (cp.async pipelines)."""
        bandwidth = self.gpu.memory.bandwidth if bandwidth is None else bandwidth
        nbytes = self.weight_bytes(k, n) + 2 * m * (k + n)
        memory = nbytes / bandwidth
        if self.quant.kernel_model == "measured":
            seconds = measured.fused_seconds(self.gpu, family.name, m, k, n, bandwidth)
            return GemmCost(seconds, nbytes, memory, 2 * self._padded(m) * k * n / self.gpu.flops, 0.0, "measured")
        dequantized = k * n * _ceil(m / family.rows_per_dequant(m))
        mix = family.mixes[self.quant.bits]
        if family.tensor_cores:
            tensor, cuda = 2 * self._padded(m) * k * n / self.gpu.flops, self.cuda_s(dequantized, mix)
        else:
            tensor, cuda = 0.0, self.cuda_s(dequantized, mix, hfma2=m * k * n / 2)
        seconds = larger(memory, tensor + cuda)
        bound = ("memory" if not isinstance(seconds, np.ndarray) and seconds == memory
                 else "tensor+cuda" if family.tensor_cores else "cuda")
        return GemmCost(seconds, nbytes, memory, tensor, cuda, bound)

    def _split(self, m, k, n, family: KernelFamily, bandwidth) -> GemmCost:
        """A dequantization kernel (read the packed weights, write an FP16 copy) then an FP16 GEMM that reads
        the copy back; the two kernels run one after the other."""
        bandwidth = self.gpu.memory.bandwidth if bandwidth is None else bandwidth
        copy = 2 * k * n
        dequant_bytes = self.weight_bytes(k, n) + copy
        cuda = self.cuda_s(k * n, family.mixes[self.quant.bits])
        memory, tensor, gemm_bytes = self.fp16_gemm(m, k, n, bandwidth)
        if self.quant.kernel_model == "measured":
            dequant = larger(measured.stream_seconds(self.gpu, dequant_bytes, bandwidth), cuda)
            seconds = dequant + measured.fp16_seconds(self.gpu, m, k, n, bandwidth)
        else:
            dequant = larger(dequant_bytes / bandwidth, cuda)
            seconds = dequant + larger(memory, tensor)
        return GemmCost(seconds, dequant_bytes + gemm_bytes, dequant_bytes / bandwidth + memory, tensor,
                        dequant, "split")

    def dqb_bounds(self, m, k: int, n: int, bandwidth: float | None = None) -> dict:
        """Seconds of the weight stream (and the GEMM's activations) under each resource of the DQB path."""
        bandwidth = self.gpu.memory.bandwidth if bandwidth is None else bandwidth
        d = self.dqb
        packed = k * n * self.quant.bits / 8
        sz = self.weight_bytes(k, n) - packed
        expanded = 2 * k * n                           # 16-bit weights out of the DQBs
        activations = 2 * m * k
        beats = self.dqbs * d.beat_bytes * d.clock_hz  # bytes per second of one beat per cycle in every DQB
        bounds = {
            "dram": (packed + sz + 2 * m * (k + n)) / bandwidth,
            # The busier of the output and memory sides for the weights; S/Z fills and the activations (read
            # untagged) each take the memory port for a beat at the bypass rate, producing no dequantized beat.
            "dqb": larger(expanded / (beats * d.output_beats_per_cycle), packed / (beats * d.memory_beats_per_cycle))
                   + (sz + activations) / (beats * d.bypass_beats_per_cycle),
        }
        if self.quant.link_expanded:
            # The die-to-die link of each stack is as wide and fast as the stack's interface (HBM2: the PHY).
            bounds["link"] = (expanded + 2 * m * (k + n)) / (self.gpu.memory.bandwidth)
        return bounds

    def _dqb(self, m, k, n, bandwidth) -> GemmCost:
        """The GEMM reads tagged weights; the DQBs return them dequantized, so the GPU runs a plain FP16 GEMM
        fed by the slowest of DRAM, the DQBs and the link, plus the DQB's read latency once per kernel."""
        bounds = self.dqb_bounds(m, k, n, bandwidth)
        names = list(bounds)
        stream = bounds[names[0]]
        for name in names[1:]:
            stream = larger(stream, bounds[name])
        tensor = 2 * self._padded(m) * k * n / self.gpu.flops
        latency = self.dqb.latency_cycles / self.dqb.clock_hz
        if self.quant.kernel_model == "measured":    # the FP16 GEMM the DQBs feed, at its measured efficiency
            gemm = larger(stream, 2 * m * k * n / self.gpu.flops) / measured.profile_for(self.gpu).gemm(k, n, m)
        else:
            gemm = larger(stream, tensor)
        seconds = gemm + latency
        nbytes = self.weight_bytes(k, n) + 2 * m * (k + n)
        if isinstance(seconds, np.ndarray):
            bound = "mixed"
        else:
            bound = "tensor" if tensor >= stream else max(names, key=lambda name: bounds[name])
        return GemmCost(seconds, nbytes, stream, tensor, 0.0, bound)

    def power_w(self) -> float:
        """GPU board power, plus every DQB's when they dequantize (§6.1)."""
        if self.quant.dequant != "dqb":
            return self.gpu.power_w
        require(self.dqb_power_w is not None, "the DQB path's power needs one DQB's (sysmodel.power)")
        return self.gpu.power_w + self.dqbs * self.dqb_power_w

    def energy_j(self, cost: GemmCost) -> float:
        return cost.seconds * self.power_w() + cost.hbm_bytes * self.gpu.stack.energy_per_byte


def overtakes_from(gemm: GemmModel, rivals, k: int, n: int, ms) -> int | None:
    """The smallest M of the ascending `ms` from which `gemm` is at least as fast as every one of `rivals` at that
    M and at every later one of `ms` (where it overtakes them for good); None when it is behind at the last."""
    first = None
    for m in reversed(ms):
        seconds = gemm.cost(m, k, n).seconds
        if any(seconds > rival.cost(m, k, n).seconds for rival in rivals):
            break
        first = m
    return first
