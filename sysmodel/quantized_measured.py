"""Weight-only quantized GEMM kernels as they were measured (`--kernel-model measured`), beside the instruction-count
roofline of `sysmodel.quantized`.

- FP16 GEMM: this GPU's roofline divided by the efficiency the nearest profiled GPU reached on the nearest profiled
  shape (Vidur's profiles, `sysmodel.perf`, the `roofline-efficiency` model).
- Fused W4A16 kernel: that FP16 time divided by the kernel's measured speed-up over FP16 at the same M (Marlin's
  benchmark, `data/profiles/marlin_a10_w4a16_speedup.csv`), interpolated in log M and held beyond the measured
  1 … 128. The speed-up was measured on an A10, whose FP16 FLOP-to-byte ratio (125 TFLOP/s over 600 GB/s = 208)
  is that of the A100 PCIe 40 GB (312 TFLOP/s over 1,555 GB/s = 201): at one M both are in the same regime, which
  is why the ratio, not an absolute time, is carried. It was measured on a large matrix (73,728 × 18,432) where
  every kernel reaches its best; on smaller shapes it is an optimistic figure for the quantized kernel.
- Split kernel: a dequantization pass at the best bandwidth efficiency any profiled GEMM reached (never below the
  shortest measured kernel), then the FP16 GEMM above.

Only the kernels measured are priced: INT4 GPTQ (vLLM runs exllamav2's kernel) and AWQ-v1 (llm-awq's first kernel,
vLLM's AWQ). Nothing is fitted to StreamDQ's results.
"""
import csv
from functools import cache

import numpy as np

from .hardware import GPU
from .llm import BYTES_PER_VALUE
from .perf import PROFILES, Curve, Profile, load_profile

KERNEL_MODELS = ("roofline", "measured")
# Our kernel family → the series of the measured table that runs the same kernel.
MEASURED_SERIES = {"gptq": "exllamav2", "awq-v1": "awq"}
MEASURED_BITS = 4


def speedup(kernel: str) -> Curve:
    """The measured speed-up of `kernel`'s fused W4A16 GEMM over FP16 against M."""
    return series(MEASURED_SERIES[kernel])


@cache
def series(name: str) -> Curve:
    """One series of the measured table (`awq`, `exllamav2`, `marlin`): speed-up over FP16 against M."""
    with open(PROFILES / "marlin_a10_w4a16_speedup.csv", newline="") as stream:
        rows = [r for r in csv.DictReader(stream) if r["kernel"] == name]
    return Curve([int(r["batch"]) for r in rows], [float(r["speedup_over_fp16"]) for r in rows])


def profile_for(gpu: GPU) -> Profile:
    """The profiled GPU nearest `gpu` (Vidur measured an A100 and an H100)."""
    return load_profile("a100" if "A100" in gpu.name else "h100")


def fp16_seconds(gpu: GPU, m, k: int, n: int, bandwidth: float, weight_bytes: float | None = None):
    """An FP16 GEMM (or one reading `weight_bytes` of weights) at the measured efficiency of its shape."""
    weights = BYTES_PER_VALUE * k * n if weight_bytes is None else weight_bytes
    roofline = np.maximum(2 * m * k * n / gpu.flops, (weights + BYTES_PER_VALUE * m * (k + n)) / bandwidth)
    return roofline / profile_for(gpu).gemm(k, n, m)


def fused_seconds(gpu: GPU, kernel: str, m, k: int, n: int, bandwidth: float):
    return fp16_seconds(gpu, m, k, n, bandwidth) / speedup(kernel)(m)


def stream_seconds(gpu: GPU, nbytes: float, bandwidth: float) -> float:
    """An elementwise pass over `nbytes` (a dequantization kernel) at the best achieved bandwidth."""
    profile = profile_for(gpu)
    return max(nbytes / (bandwidth * profile.best_byte_efficiency), profile.floor_s)
