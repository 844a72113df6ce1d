"""The measured quantized-kernel model (`--kernel-model measured`) against the public data it is built from."""
import csv

import pytest

from basedie import verified
from sysmodel.errors import ConfigError
from sysmodel.hardware import A100_PCIE_40GB
from sysmodel.perf import PROFILES, load_profile
from sysmodel.presets import GPU_PRESETS
from sysmodel.quantized import GemmModel, Quantization
from sysmodel.quantized_measured import fp16_seconds, profile_for, stream_seconds

SXM = GPU_PRESETS["a100-sxm4-80gb"]


def _rows(name):
    with open(PROFILES / name, newline="") as stream:
        return list(csv.DictReader(stream))


def test_fp16_on_the_profiled_gpu_and_shape_is_the_measured_kernel():
    # Llama-2-7B's output projection (4096 x 4096) at 64 tokens, as Vidur timed it on the A100-SXM4-80GB.
    row = next(r for r in _rows("vidur_a100_mlp.csv")
               if r["model"] == "Llama-2-7b-hf" and r["tp"] == "1" and r["num_tokens"] == "64")
    seconds = fp16_seconds(SXM, 64, 4096, 4096, SXM.memory.bandwidth)
    assert seconds == pytest.approx(float(row["attn_post_proj_ms"]) * 1e-3, rel=1e-9)


@pytest.mark.parametrize("kernel, series", [("gptq", "exllamav2"), ("awq-v1", "awq")])
def test_fused_kernel_is_fp16_over_the_measured_speedup(kernel, series):
    table = verified.load(verified.TABLE_PATH)
    gemm = GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, "gpu-fused", kernel, kernel_model="measured"),
                           table)
    for row in _rows("marlin_a10_w4a16_speedup.csv"):
        if row["kernel"] == series:
            m = int(row["batch"])
            fp16 = fp16_seconds(A100_PCIE_40GB, m, 4096, 4096, A100_PCIE_40GB.memory.bandwidth)
            assert gemm.cost(m, 4096, 4096).seconds == pytest.approx(fp16 / float(row["speedup_over_fp16"]))


def test_measured_kernels_lose_their_advantage_with_batch():
    """What the roofline misses (issue 36): the fused kernels fall below FP16 long before they are compute bound."""
    table = verified.load(verified.TABLE_PATH)
    quant = Quantization("w4a16", 128, "gpu-fused", "awq-v1", kernel_model="measured")
    gemm = GemmModel.build(A100_PCIE_40GB, quant, table)
    fp16 = [fp16_seconds(A100_PCIE_40GB, m, 4096, 4096, A100_PCIE_40GB.memory.bandwidth) for m in (1, 64)]
    assert gemm.cost(1, 4096, 4096).seconds < fp16[0] < fp16[1] < gemm.cost(64, 4096, 4096).seconds


@pytest.mark.parametrize("quant", [dict(weights="w8a16", dequant="gpu-fused", kernel="gptq"),
                                   dict(weights="w4a16", dequant="gpu-fused", kernel="awq-v2"),
                                   dict(weights="w8a16", dequant="gpu", kernel="gptq")])
def test_kernels_nobody_measured_are_refused(quant):
    with pytest.raises(ConfigError, match="no measured fused kernel"):
        Quantization(group_size=128, kernel_model="measured", **quant)


def test_unknown_kernel_model_is_refused():
    with pytest.raises(ConfigError, match="unknown kernel model"):
        Quantization("w4a16", 128, "dqb", kernel_model="fitted")


@pytest.mark.parametrize("preset, profiled", [("a100-pcie-40gb", "a100"), ("a100-sxm4-80gb", "a100"),
                                              ("h100-sxm5-80gb", "h100"), ("h200", "h100"), ("b200", "h100")])
def test_each_gpu_is_priced_on_the_nearest_profiled_gpu(preset, profiled):
    """Vidur profiled an A100 and an H100: A100s take the A100's profile, every later GPU the H100's."""
    assert profile_for(GPU_PRESETS[preset]) is load_profile(profiled)


def test_an_fp16_gemm_is_its_roofline_over_the_profiled_efficiency():
    """Compute bound (4,096 tokens of Llama-2-7B's MLP up-projection, 4,096 × 11,008) and memory bound (one token,
    reading `weight_bytes` of weights instead of the FP16 matrix) on the H100."""
    gpu = GPU_PRESETS["h100-sxm5-80gb"]
    profile, k, n = load_profile("h100"), 4096, 11008
    compute = 2 * 4096 * k * n / 989.4e12
    assert fp16_seconds(gpu, 4096, k, n, 3.35e12) == pytest.approx(compute / profile.gemm(k, n, 4096), rel=1e-12)
    memory = (k * n // 2 + 2 * (k + n)) / 3.35e12           # 4-bit weights: half a byte each, FP16 activations
    assert fp16_seconds(gpu, 1, k, n, 3.35e12, weight_bytes=k * n // 2) == pytest.approx(
        memory / profile.gemm(k, n, 1), rel=1e-12)


def test_a_dequantization_pass_streams_at_the_best_efficiency_measured_and_never_below_the_shortest_kernel():
    gpu, profile = GPU_PRESETS["a100-sxm4-80gb"], load_profile("a100")
    assert 0 < profile.best_byte_efficiency <= 1
    assert stream_seconds(gpu, 1e9, 2.039e12) == pytest.approx(1e9 / (2.039e12 * profile.best_byte_efficiency),
                                                               rel=1e-12)
    assert stream_seconds(gpu, 1.0, 2.039e12) == profile.floor_s
