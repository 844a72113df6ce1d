"""Hardware presets: GPUs, the NVLink fabric, the PNM, and the GPU's bandwidth-vs-SMs relation.

Every number cites its public source. The PNM's hardware numbers are not here: `PNMArray.lane_width`, `lanes` and
`clock_hz` only name the verified entries (`sysmodel.execution.PNMFigures`) whose latency, MACs per cycle,
lane count and design clock the model uses; the MMU's figures and clock come from its verified entry.
"""
import math
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import cached_property

import numpy as np

from .errors import ConfigError, require
from .memory import GB, HBM4_STACK, MemoryTier


@dataclass(frozen=True)
class SMBandwidthCurve:
    """Fraction of peak memory bandwidth reachable with a fraction of the SMs (paper §3.2, Fig. 4).

    Piecewise linear through measured points; the B200 preset is the paper's one stated point
    (72 of 148 SMs reach 80 % of the all-SM bandwidth) with the ends (0 → 0, all → 1)."""
    sm_fractions: tuple[float, ...]
    bandwidth_fractions: tuple[float, ...]

    def __call__(self, sm_fraction: float) -> float:
        return float(np.interp(sm_fraction, self.sm_fractions, self.bandwidth_fractions))


B200_SM_BANDWIDTH = SMBandwidthCurve((0.0, 72 / 148, 1.0), (0.0, 0.8, 1.0))


@dataclass(frozen=True)
class CUDACores:
    """What GPU-side dequantization runs on (`sysmodel.quantized`): per SM and clock, the thread-instructions the
    warp schedulers issue and what each pipe completes, and the tensor-core MMA's row count (M is padded to it)."""
    clock_hz: float
    issue_per_clock: int         # thread-instructions issued per SM per clock (schedulers × 32 threads)
    int32_per_clock: int         # INT32 pipe (LOP3, shifts, IADD) results per SM per clock
    fp16x2_per_clock: int        # HFMA2 / HADD2 / HMUL2 per SM per clock
    convert_per_clock: int       # integer → FP16 conversions (I2F) per SM per clock
    mma_m: int                   # rows of one tensor-core MMA


@dataclass(frozen=True)
class GPU:
    name: str
    flops: float                 # dense FP16 FLOP/s
    power_w: float               # board power while executing
    sms: int
    stacks: int                  # HBM stacks attached
    stack: MemoryTier = HBM4_STACK
    sm_bandwidth: SMBandwidthCurve = B200_SM_BANDWIDTH
    cores: CUDACores | None = None       # needed only by GPU-side dequantization
    pseudo_channels_per_stack: int = 0   # one DQB per pseudo-channel (StreamDQ §3.7); 0: unknown

    @cached_property
    def memory(self) -> MemoryTier:
        return self.stack.scaled(self.stacks, f"{self.stacks}x {self.stack.name}")


@dataclass(frozen=True)
class Link:
    """A GPU's share of a fabric: the scale-up NVLink within a server, or the network between servers."""
    name: str
    bandwidth: float             # bytes/s per GPU, one direction
    energy_per_bit: float        # J/bit
    # The latency of one ring step of an all-reduce (`--allreduce alpha-beta`): NCCL's own tuning model
    # (src/graph/tuning.cc, NCCL 2.19–2.23, hwLat, Ring/LL): 0.6 µs over NVLink, 1.0 µs over PCIe.
    hop_latency_s: float = 0.6e-6
    nvls: bool = False           # NVLink SHARP: the NVSwitch reduces in the switch (third-generation NVSwitch on)


@dataclass(frozen=True)
class PNMArray:
    """One PNM per HBM stack (paper §4.2, §6.1). `lanes`, `lane_width` and `clock_hz` select the verified
    `pnm_array` and `pnm_lane` entries with those parameters (`lanes`, `width`, `design_clock_hz`): the model
    takes its numbers from them, or refuses to run naming the `basedie verify` command that creates them.
    `vector_width` is the vector unit's FP32 lanes; its figures are the verified `pnm_vector` entry's, scaled
    from the entry's width (`sysmodel.execution.VectorFigures`)."""
    lanes: int                   # selects a verified pnm_array entry with this many lanes
    lane_width: int              # selects the verified pnm_lane entry of this width
    clock_hz: float              # selects entries with this design clock
    vector_width: int            # the vector unit's lanes, a power of two
    power_w: float               # per stack, the paper's (--power-source paper; the default synthesizes it)
    all_reduce_s: float          # one inter-PNM all-reduce over the GPU NoC
    # The PNM's read bandwidth over its stack's (1: DuoPD's shared TSVs, §4.3); Duplex adds TSVs for 4× (DuoPD §3.3,
    # §6.4, [Yun et al., 2024]). The GPU keeps the stack's bandwidth; `PNMExecution` reads at this multiple.
    bandwidth_multiple: float = 1.0
    # Extra TSV I/O power per stack for a PNM reading at a multiple of the stack's bandwidth (Duplex, `PNMScale`),
    # added to the PNM's power from either source (`sysmodel.power`).
    tsv_power_w: float = 0.0


@dataclass(frozen=True)
class PNMScale:
    """A what-if PNM of DuoPD §6.4: `bandwidth` × its read bandwidth (extra TSVs, which draw `tsv_power_w` more per
    stack) and `compute` × its lanes, which selects the verified array of that many lanes (`PNMFigures`), never a
    multiplier on the figures of one lane."""
    bandwidth: float = 1.0
    compute: int = 1
    tsv_power_w: float = 0.0

    def __post_init__(self) -> None:
        require(self.bandwidth > 0 and self.compute >= 1 and self.tsv_power_w >= 0,
                "PNM scale: bandwidth must be > 0, compute >= 1 and TSV power >= 0")

    def apply(self, hardware: "Hardware") -> "Hardware":
        pnm = hardware.pnm
        return replace(hardware, pnm=replace(pnm, bandwidth_multiple=pnm.bandwidth_multiple * self.bandwidth,
                                             lanes=pnm.lanes * self.compute,
                                             tsv_power_w=pnm.tsv_power_w + self.tsv_power_w))


# Duplex's PNM against the paper's (DuoPD §3.3, §6.4, [Yun et al., 2024]): 4× the internal bandwidth through extra
# TSVs, whose I/O raises a stack's power from 41.6 W to 100.48 W under HBM4 [Adhinarayanan et al., 2025]: 58.88 W
# more per stack. Its compute is the paper's PNM's: §3.3 limits Duplex to 4 Op/B on HBM4, i.e. 4 × (4 × 2 TB/s) =
# 32 TFLOPS per stack, the 16-lane array of §6.1. "4× compute" (§6.4) is 4 × the lanes: the verified 64-lane array.
DUPLEX_BANDWIDTH = PNMScale(bandwidth=4.0, tsv_power_w=100.48 - 41.6)
DUPLEX_BANDWIDTH_COMPUTE = replace(DUPLEX_BANDWIDTH, compute=4)


@dataclass(frozen=True)
class BankPIM:
    """Bank-level processing-in-memory on every HBM stack (DuoPD §6.4: [Heo et al., 2024; Park et al., 2024]): a
    processing unit per bank reads its bank's rows, so the stack's internal bandwidth is `bandwidth_multiple` × its
    external one, and the units compute `flops_per_byte` FLOPs per byte they read. The units take DRAM area, so the
    stack holds `capacity_fraction` of its capacity."""
    bandwidth_multiple: float
    flops_per_byte: float
    capacity_fraction: float


# AttAcc's own simulator (github.com/scale-snu/attacc_simulator, src/config.py, Park et al., 2024): bank-level PIM
# (`PIMType.BA`, its default `--pim bank`, no power limit) has an internal bandwidth of rank × bank group × bank
# / tCCD = 2 × 4 × 4 / 2 = 16 × the stack's, and `FLOPS_PER_HBM = MEM_BW_PER_HBM × opb` with opb = 1 FLOP per byte
# (make_pim_config's default): per bank, one FP16 MAC every 2 bytes it reads. No HBM4 PIM is published; we keep
# AttAcc's ratios on the HBM4 stack. Capacity: 50 % (DuoPD §6.4, from HBM-PIM's 25 % area overhead [Lee et al.,
# 2021]).
ATTACC_BANK_PIM = BankPIM(bandwidth_multiple=16.0, flops_per_byte=1.0, capacity_fraction=0.5)


@dataclass(frozen=True)
class MemoryController:
    """A stack's memory controller as the MMU sees it (paper §4.3): `ports` arbiters, each issuing up to one
    `request_bytes` request per cycle of the MMU's design clock (`design_clock_hz` of its verified entry). The
    MMU's verified figures count requests per cycle of one port; this is what turns them into a fraction of the
    stack's bandwidth."""
    request_bytes: int
    ports: int

    def requests_per_cycle(self, bytes_per_s: float, clock_hz: float) -> float:
        """Requests per cycle of `clock_hz` on each port that move `bytes_per_s` through the stack."""
        return bytes_per_s / (self.request_bytes * clock_hz * self.ports)


# 32-B requests: the PNM LSU splits tensor loads into 32-B MC requests (§4.3). One arbitration port per
# pseudo-channel, 64 per HBM4 stack (§4.2: the buffer holds 32 entries of 32 B per pseudo channel across 64
# channels; the paper does not say how many arbiters there are: one per pseudo-channel is our reading).
# At the MMU's 1 GHz design clock: 64 ports × 32 B × 1 GHz = 2.048 TB/s, just above the stack's 2 TB/s.
HBM4_MC = MemoryController(request_bytes=32, ports=64)


@dataclass(frozen=True)
class Hardware:
    """The machine every system is built from: `gpus` GPUs, each with its stacks and (for DuoPD) PNMs."""
    gpu: GPU
    gpus: int
    link: Link
    pnm: PNMArray
    mc: MemoryController = HBM4_MC
    # Between servers of `gpus_per_server` GPUs (KV transfers of PD instances on different servers); None: the
    # `link` spans every GPU (one NVLink domain).
    network: Link | None = None
    gpus_per_server: int = 8
    # Fraction of HBM energy saved when decode data flows TSV → PNM instead of through the interposer
    # (paper §6.7, conservatively 7 % [Adhinarayanan et al., 2025]).
    pnm_hbm_energy_saving: float = 0.07
    pim: BankPIM = ATTACC_BANK_PIM       # read by the bank-level PIM system (`pd-1:1-pim`) only

    def __post_init__(self) -> None:
        require(self.gpus >= 1, "hardware: gpus must be >= 1")
        require(self.gpu.flops > 0, "hardware: GPU flops must be > 0")
        require(self.gpu.stacks >= 1, "hardware: GPU stacks must be >= 1")
        require(self.link.bandwidth > 0, "hardware: link bandwidth must be > 0 bytes/s")
        require(self.network is None or self.network.bandwidth > 0, "hardware: network bandwidth must be > 0 bytes/s")
        require(self.gpus_per_server >= 1, "hardware: gpus_per_server must be >= 1")
        require(min(self.link.hop_latency_s, self.network.hop_latency_s if self.network else 0) >= 0,
                "hardware: link latencies must be >= 0")
        require(self.pnm.lanes >= 1 and self.pnm.clock_hz > 0, "hardware: PNM lanes and clock must be > 0")
        require(self.gpu.sms >= 1, "hardware: GPU sms must be >= 1")
        require(min(self.mc.request_bytes, self.mc.ports) > 0,
                "hardware: memory controller request size and ports must be > 0")
        require(min(self.gpu.power_w, self.pnm.power_w, self.pnm.tsv_power_w, self.pnm.all_reduce_s,
                    self.link.energy_per_bit) >= 0,
                "hardware: powers, energies and latencies must be >= 0")
        require(0 <= self.pnm_hbm_energy_saving < 1, "hardware: pnm_hbm_energy_saving must be in [0, 1)")
        require(self.pnm.bandwidth_multiple > 0, "hardware: pnm.bandwidth_multiple must be > 0")
        require(min(self.pim.bandwidth_multiple, self.pim.flops_per_byte) > 0,
                "hardware: pim.bandwidth_multiple and pim.flops_per_byte must be > 0")
        require(0 < self.pim.capacity_fraction <= 1, "hardware: pim.capacity_fraction must be in (0, 1]")


# The paper's GPU (§6.1): GB300-class, 2.5 PFLOPS dense FP16 [NVIDIA, 2025a: GB300 NVL72 datasheet,
# 360 PFLOPS FP16/BF16 dense per 72 GPUs = 5 PFLOPS sparse / 2.5 dense], 1,400 W [same datasheet, §6.7];
# 8 HBM4 stacks (§6.1). SMs: 148, as the B200 whose bandwidth-vs-SM curve §3.2 measures. Pseudo-channels (one
# DQB each): JEDEC JESD270-4 HBM4 (2025) has 32 independent channels per stack, each of 2 pseudo-channels = 64.
PAPER_GPU = GPU(name="GB300-class, 8x HBM4", flops=2.5e15, power_w=1400.0, sms=148, stacks=8,
                pseudo_channels_per_stack=64)

# NVLink 5: 1.8 TB/s bidirectional per GPU = 900 GB/s each way [NVIDIA, 2025b], §6.1; 8 pJ/bit (§6.7,
# [Hong et al., 2024a; Dally, 2020]). Fourth-generation NVSwitch with NVLink SHARP [NVIDIA GB300 NVL72 and
# HGX B200 datasheets: "NVLink Switch ... SHARP in-network reductions"].
NVLINK5 = Link(name="NVLink 5", bandwidth=900e9, energy_per_bit=8e-12, nvls=True)
# GB300 NVL72: one NVLink 5 domain of 72 GPUs [NVIDIA GB300 NVL72 datasheet: 130 TB/s NVLink bandwidth
# = 72 × 1.8 TB/s], so two 8-GPU groups of the paper's machine talk over the same NVLink Switch.
NVL72_NETWORK = Link(name="NVLink 5 Switch (NVL72 rack)", bandwidth=900e9, energy_per_bit=8e-12, nvls=True)

# The PNM of §6.1: 16 lanes × 1,024 FP16 multipliers at 1 GHz (32 TFLOPS); 6.45 W per stack (§6.7: the
# figure of --power-source paper; the default, --power-source synthesized, takes the synthesized PNM's,
# sysmodel.power); inter-PNM
# all-reduce over the GPU NoC 400–500 ns (§5.2, [Jin et al., 2024]); we take the conservative 500 ns. The vector
# unit's width is OUR ASSUMPTION: the paper gives its role (§4.2) and area (1.56 mm², §6.7), not its width. 128
# FP32 lanes = the sublane width (§4.2: eight 128-wide sublanes per lane);
# docs/design/effects.md ("The PNM's vector unit") shows what other widths change.
PAPER_PNM = PNMArray(lanes=16, lane_width=1024, clock_hz=1e9, vector_width=128, power_w=6.45,
                     all_reduce_s=500e-9)

PAPER_HARDWARE = Hardware(gpu=PAPER_GPU, gpus=8, link=NVLINK5, pnm=PAPER_PNM, network=NVL72_NETWORK)

# StreamDQ's GPU (paper 002 §5.1): NVIDIA A100 PCIe 40 GB, five HBM2 stacks. NVIDIA A100 datasheet (2021):
# 312 TFLOPS dense FP16 tensor, 19.5 TFLOPS FP32, 1,555 GB/s, 40 GB, 250 W max TDP (PCIe 40 GB); 108 SMs at a
# 1,410 MHz boost clock (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020: 108 × 64 FP32 lanes × 2 ×
# 1.41 GHz = 19.5 TFLOPS). Per SM (whitepaper): 4 partitions, each one warp scheduler issuing one warp
# instruction per clock (4 × 32 = 128 thread-instructions), 16 INT32 lanes (64 per SM); FP16 on CUDA cores
# is 78 TFLOPS = 108 SMs × 1.41 GHz × 512 FLOPs, i.e. 256 FP16 FMAs = 128 HFMA2 per SM per clock. Conversions from
# 32-bit integer to 16-bit float ("all other type conversions") complete 16 per SM per clock on compute
# capability 8.0 (CUDA C++ Programming Guide, arithmetic instruction throughput table). MMA tile m16n8k16
# (PTX ISA, mma.sync for .f16). The 40 MB L2 is not modelled: every kernel reads its operands from HBM once.
A100_CORES = CUDACores(clock_hz=1.41e9, issue_per_clock=128, int32_per_clock=64, fp16x2_per_clock=128,
                       convert_per_clock=16, mma_m=16)
# HBM2 stack of the A100 40 GB: 8 GB; 1,555 GB/s over 5 stacks = 311 GB/s each (5 × 1,024 bits × 2.43 Gb/s).
# JESD235 HBM2: 8 channels per stack, each split into 2 pseudo-channels in pseudo-channel mode = 16.
# Energy: ≈3.9 pJ/bit for HBM2 (O'Connor et al., "Fine-Grained DRAM", MICRO 2017, Fig. 1). Latency as HBM4's
# (DRAMSim3's HBM2 configuration, see sysmodel.memory).
HBM2_STACK_A100 = MemoryTier(name="HBM2 stack (A100 40 GB)", capacity_bytes=8 * GB, bandwidth=1555e9 / 5,
                             latency_s=HBM4_STACK.latency_s, energy_per_byte=3.9e-12 * 8)
A100_PCIE_40GB = GPU(name="A100 PCIe 40 GB", flops=312e12, power_w=250.0, sms=108, stacks=5, stack=HBM2_STACK_A100,
                     cores=A100_CORES, pseudo_channels_per_stack=16)


def with_overrides(hardware: Hardware, assignments: dict[str, str]) -> Hardware:
    """`hardware` with dotted fields replaced, e.g. {"gpu.stack.bandwidth": "4e12", "pnm.lanes": "32"}:
    what-if studies from the command line. Values are parsed as the field's current type; every level is
    rebuilt, so each dataclass validates its new values."""
    for path, text in assignments.items():
        hardware = _replace_path(hardware, path.split("."), text, path)
    return hardware


def _replace_path(obj, names: list[str], text: str, path: str):
    name = names[0]
    if not is_dataclass(obj) or name not in {f.name for f in fields(obj)}:
        choices = ", ".join(f.name for f in fields(obj)) if is_dataclass(obj) else "none"
        raise ConfigError(f"hardware has no field {path!r} ({name!r} is not one of: {choices})")
    current = getattr(obj, name)
    if len(names) > 1:
        return replace(obj, **{name: _replace_path(current, names[1:], text, path)})
    if is_dataclass(current) or isinstance(current, tuple):
        raise ConfigError(f"hardware field {path!r} is a group; name one of its fields")
    try:
        number = float(text) if isinstance(current, (int, float)) else None
    except ValueError:
        number = None
    if isinstance(current, (int, float)) and (number is None or (isinstance(current, int) and not number.is_integer())):
        raise ConfigError(f"hardware field {path!r} needs a {type(current).__name__}, got {text!r}")
    if number is not None and not math.isfinite(number):
        raise ConfigError(f"hardware field {path!r} must be finite, got {text!r}")
    value = type(current)(number) if number is not None else text
    return replace(obj, **{name: value})
