"""Real-system hardware presets (`--hardware NAME`): data-centre GPUs with their HBM and NVLink generation.

The registry `PRESETS` (name → `Hardware`, any case), the paper's machine first, read by `config.resolve_hardware`
and the CLI's help; `--hw FIELD=VALUE` overrides any field on top. Every machine is one 8-GPU server
(HGX/DGX baseboard) unless `gpus` is overridden. Numbers come from NVIDIA's datasheets named per line;
dense FP16/BF16 tensor FLOP/s is half the "with sparsity" figure the datasheets headline.

Not per SKU (no public per-product figure): the HBM access latency and energy per byte, and the link energy,
are the paper's (HBM4 stack: 42 ns, 20.8 pJ/B; NVLink 8 pJ/bit, `memory.HBM4_STACK`, `hardware.NVLINK5`).
They enter start-up latencies and energy only, so energies on these presets are indicative. The PNM is
the paper's (`hardware.PAPER_PNM`): on these machines DuoPD is a what-if.
"""
from dataclasses import replace

from .hardware import (A100_CORES, A100_PCIE_40GB, GPU, NVLINK5, PAPER_HARDWARE, PAPER_PNM, Hardware, Link,
                       SMBandwidthCurve)
from .memory import GB, HBM4_STACK, MemoryTier
from .registry import Registry

# No public bandwidth-vs-SM measurement for these GPUs: bandwidth is taken as reachable by any SM share
# (only the SM-partition systems read this curve).
FLAT_SM_BANDWIDTH = SMBandwidthCurve((0.0, 1.0), (1.0, 1.0))


def _stack(name: str, stacks: int, capacity_bytes: float, bandwidth: float) -> MemoryTier:
    """One of `stacks` equal stacks of a GPU whose datasheet gives the totals."""
    return MemoryTier(name, capacity_bytes / stacks, bandwidth / stacks, HBM4_STACK.latency_s,
                      HBM4_STACK.energy_per_byte)


def _nvlink(name: str, bidirectional_bytes_per_s: float, nvls: bool, hop_latency_s: float = 0.6e-6) -> Link:
    return Link(name, bidirectional_bytes_per_s / 2, NVLINK5.energy_per_bit, hop_latency_s, nvls)


# NVLink per GPU, bidirectional totals [NVIDIA A100 / H100 / H200 / B200 datasheets]: NVLink 3 600 GB/s,
# NVLink 4 900 GB/s, NVLink 5 1.8 TB/s. A100 PCIe: PCIe Gen4 x16, 64 GB/s bidirectional [A100 PCIe datasheet].
# NVLink SHARP (NVLS) arrived with the third-generation NVSwitch of HGX H100 [NVIDIA H100 Tensor Core GPU
# Architecture whitepaper, "NVLink Switch System ... SHARP"]; the A100's second-generation NVSwitch has none.
# Ring-step latency over PCIe: NCCL's tuning model (src/graph/tuning.cc, hwLat PCI Ring/LL) 1.0 µs.
NVLINK3 = _nvlink("NVLink 3 (NVSwitch, DGX A100)", 600e9, nvls=False)
NVLINK4 = _nvlink("NVLink 4 (NVSwitch, HGX H100/H200)", 900e9, nvls=True)
NVLINK5_HGX = _nvlink("NVLink 5 (NVSwitch, HGX B200)", 1.8e12, nvls=True)
PCIE4 = _nvlink("PCIe Gen4 x16", 64e9, nvls=False, hop_latency_s=1.0e-6)


def _infiniband(name: str, gbit_per_s: float) -> Link:
    """One InfiniBand adapter per GPU (the DGX reference designs), `gbit_per_s` each way. No public per-bit
    energy: the NVLink's (energies are indicative). Ring-step latency over the network: NCCL's tuning model
    (src/graph/tuning.cc, hwLat NET Ring/LL) 2.7 µs."""
    return Link(name, gbit_per_s * 1e9 / 8, NVLINK5.energy_per_bit, 2.7e-6)


# NVIDIA DGX A100 datasheet: 8× single-port ConnectX-6 VPI, 200 Gb/s HDR InfiniBand (one per GPU, compute
# fabric). DGX H100, DGX H200 and DGX B200 datasheets: 8× single-port ConnectX-7 VPI, 400 Gb/s NDR InfiniBand.
# A100 PCIe servers have no reference design: the DGX A100's HDR adapter per GPU is assumed.
HDR = _infiniband("InfiniBand HDR, 200 Gb/s per GPU (ConnectX-6)", 200)
NDR = _infiniband("InfiniBand NDR, 400 Gb/s per GPU (ConnectX-7)", 400)

GPU_PRESETS = {
    # NVIDIA A100 Tensor Core GPU datasheet (2021): 312 TFLOPS FP16 dense, 80 GB HBM2e at 2,039 GB/s (SXM),
    # 400 W; 108 SMs (A100 whitepaper); 5 active HBM2e stacks.
    # CUDA cores and 16 pseudo-channels per stack as the PCIe board's (`hardware.A100_CORES`).
    "a100-sxm4-80gb": GPU("A100-SXM4-80GB", flops=312e12, power_w=400.0, sms=108, stacks=5,
                          stack=_stack("HBM2e stack", 5, 80 * GB, 2039e9), sm_bandwidth=FLAT_SM_BANDWIDTH,
                          cores=A100_CORES, pseudo_channels_per_stack=16),
    # Same datasheet, PCIe 40 GB (StreamDQ's GPU, with its CUDA cores and HBM2 energy: `hardware.A100_PCIE_40GB`).
    "a100-pcie-40gb": replace(A100_PCIE_40GB, name="A100-PCIe-40GB", sm_bandwidth=FLAT_SM_BANDWIDTH),
    # NVIDIA H100 Tensor Core GPU datasheet, SXM5: 1,979 TFLOPS FP16 with sparsity (989.4 dense), 80 GB HBM3 at
    # 3.35 TB/s, up to 700 W; 132 SMs (H100 whitepaper); 5 active HBM3 stacks.
    "h100-sxm5-80gb": GPU("H100-SXM5-80GB", flops=989.4e12, power_w=700.0, sms=132, stacks=5,
                          stack=_stack("HBM3 stack", 5, 80 * GB, 3.35e12), sm_bandwidth=FLAT_SM_BANDWIDTH),
    # NVIDIA H200 datasheet, SXM: the H100's compute (989.4 TFLOPS dense), 141 GB HBM3e at 4.8 TB/s, 700 W;
    # 6 HBM3e stacks.
    "h200": GPU("H200-SXM-141GB", flops=989.4e12, power_w=700.0, sms=132, stacks=6,
                stack=_stack("HBM3e stack", 6, 141 * GB, 4.8e12), sm_bandwidth=FLAT_SM_BANDWIDTH),
    # NVIDIA HGX B200 datasheet: 4.5 PFLOPS FP16 with sparsity per GPU (2.25 dense), 180 GB HBM3e at 7.7 TB/s
    # [HGX B200 spec table: 1.44 TB and 62 TB/s for 8 GPUs], 1,000 W; 148 SMs and the paper's measured
    # bandwidth-vs-SM curve (DuoPD §3.2 measures a B200); 8 HBM3e stacks.
    "b200": GPU("B200-180GB", flops=2.25e15, power_w=1000.0, sms=148, stacks=8,
                stack=_stack("HBM3e stack", 8, 180 * GB, 7.7e12)),
}

PRESETS: Registry[Hardware] = Registry("hardware", key=str.lower)
PRESETS.register("paper", PAPER_HARDWARE, "the DuoPD paper's machine (§6.1)")
PRESETS.register("a100-sxm4-80gb", Hardware(GPU_PRESETS["a100-sxm4-80gb"], 8, NVLINK3, PAPER_PNM, network=HDR))
PRESETS.register("a100-pcie-40gb", Hardware(GPU_PRESETS["a100-pcie-40gb"], 8, PCIE4, PAPER_PNM, network=HDR))
PRESETS.register("h100-sxm5-80gb", Hardware(GPU_PRESETS["h100-sxm5-80gb"], 8, NVLINK4, PAPER_PNM, network=NDR))
PRESETS.register("h200", Hardware(GPU_PRESETS["h200"], 8, NVLINK4, PAPER_PNM, network=NDR))
PRESETS.register("b200", Hardware(GPU_PRESETS["b200"], 8, NVLINK5_HGX, PAPER_PNM, network=NDR))
PRESETS.register("gb300", PAPER_HARDWARE, "the DuoPD paper's GB300-class machine with HBM4 (§6.1)")
