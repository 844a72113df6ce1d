"""Quantized GEMMs by their structure: the DQB path's bounds grow with the GEMM's rows by the activations alone
(each extra row of M reads K + N 16-bit values from DRAM and over the link, and passes its K activations through
the DQBs at the bypass rate); the split kernel is a dequantization kernel followed by the FP16 GEMM; the fused
kernel re-dequantizes per tile of rows."""
import dataclasses

import numpy as np
import pytest

from basedie import verified
from sysmodel.hardware import A100_PCIE_40GB
from sysmodel.quantized import KERNELS, GemmModel, Quantization

K, N = 4096, 1024


@pytest.mark.parametrize("link_expanded", [True, False])
def test_each_extra_row_costs_its_activations_in_dram_the_dqbs_and_the_link(link_expanded) -> None:
    gemm = GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, "dqb", link_expanded=link_expanded),
                           verified.load())
    one, three = gemm.dqb_bounds(1, K, N), gemm.dqb_bounds(3, K, N)
    assert list(one) == ["dram", "dqb", "link"] if link_expanded else ["dram", "dqb"]
    bandwidth = A100_PCIE_40GB.memory.bandwidth
    beats = gemm.dqbs * gemm.dqb.beat_bytes * gemm.dqb.clock_hz       # bytes/s at one beat per cycle everywhere
    assert three["dram"] - one["dram"] == pytest.approx(2 * 2 * (K + N) / bandwidth, rel=1e-9)
    assert three["dqb"] - one["dqb"] == pytest.approx(2 * 2 * K / (beats * gemm.dqb.bypass_beats_per_cycle),
                                                      rel=1e-9)
    if link_expanded:
        assert three["link"] - one["link"] == pytest.approx(2 * 2 * (K + N) / bandwidth, rel=1e-9)


def gpu_model(dequant: str, kernel: str = "awq-v1", weights: str = "w4a16") -> GemmModel:
    return GemmModel.build(A100_PCIE_40GB, Quantization(weights, 128, dequant, kernel), verified.load())


@pytest.mark.parametrize("bandwidth", [None, 0.5e12, 1e15])   # 1e15: the dequantization's CUDA cores bind
def test_the_split_kernel_is_a_dequantization_kernel_then_the_fp16_gemm(bandwidth) -> None:
    split, fp16 = gpu_model("gpu-split"), GemmModel(A100_PCIE_40GB, Quantization())
    m, used = 5, bandwidth or A100_PCIE_40GB.memory.bandwidth
    cost, gemm = split.cost(m, K, N, bandwidth), fp16.cost(m, K, N, bandwidth)
    # Reads the packed weights and S/Z, writes the 16-bit copy (2 bytes per weight), then the FP16 GEMM's bytes.
    dequant_bytes = split.weight_bytes(K, N) + 2 * K * N
    assert cost.hbm_bytes == pytest.approx(dequant_bytes + gemm.hbm_bytes)
    assert cost.memory_s == pytest.approx(cost.hbm_bytes / used)
    assert cost.tensor_s == pytest.approx(gemm.tensor_s)
    # The dequantization kernel takes the longer of its bytes and its CUDA-core work (every weight once).
    mix = KERNELS["awq-v1"].mixes[4]
    assert cost.cuda_s == pytest.approx(max(dequant_bytes / used, split.cuda_s(K * N, mix)))
    assert cost.seconds == pytest.approx(cost.cuda_s + gemm.seconds)
    assert cost.bound == "split"


def test_the_fused_kernel_reads_each_activation_row_once() -> None:
    fused = gpu_model("gpu-fused")
    assert fused.cost(3, K, N).hbm_bytes - fused.cost(1, K, N).hbm_bytes == pytest.approx(2 * 2 * (K + N))


def test_awq_v2_dequantizes_once_per_16_32_or_64_rows_by_m_and_blocks_of_m_are_priced_alike() -> None:
    family = KERNELS["awq-v2"]
    # Up to and including 64 rows: 16 per dequantization; up to 128: 32; beyond: 64 (llm-awq's WARP_M).
    assert [family.rows_per_dequant(m) for m in (1, 64, 65, 128, 129)] == [16, 16, 32, 32, 64]
    assert list(family.rows_per_dequant(np.array([1, 64, 65, 128, 129]))) == [16, 16, 32, 32, 64]
    fused = gpu_model("gpu-fused", "awq-v2")
    rows = np.array([1, 65, 200])
    block = fused.cost(rows, K, N)
    assert block.seconds == pytest.approx([fused.cost(int(m), K, N).seconds for m in rows])


def test_hfma2_dot_products_go_through_the_fp16x2_pipe() -> None:
    # A GPU whose FP16x2 pipe does half as many HFMA2s per clock as it issues: 1e9 HFMA2s (no dequantization)
    # take 1e9 / 64 clocks per SM, over 108 SMs at 1.41 GHz.
    slow = dataclasses.replace(A100_PCIE_40GB, cores=dataclasses.replace(A100_PCIE_40GB.cores, fp16x2_per_clock=64))
    model = GemmModel(slow, Quantization("w4a16", 128, "gpu-fused", "gptq"))
    assert model.cuda_s(0, KERNELS["gptq"].mixes[4], hfma2=1e9) == pytest.approx(1e9 / 64 / (108 * 1.41e9))


def test_the_fused_kernel_names_what_bounds_it() -> None:
    awq, gptq = gpu_model("gpu-fused"), gpu_model("gpu-fused", "gptq")
    light = awq.cost(1, K, N)                       # one row: the weight stream
    assert light.bound == "memory" and light.seconds == light.memory_s
    heavy = awq.cost(256, K, N)                     # 256 rows: re-dequantization and tensor cores, one after other
    assert heavy.bound == "tensor+cuda" and heavy.seconds == pytest.approx(heavy.tensor_s + heavy.cuda_s)
    dots = gptq.cost(32, K, N)                      # GPTQ: dot products on CUDA cores, no tensor cores
    assert dots.bound == "cuda" and dots.tensor_s == 0.0 and dots.seconds == pytest.approx(dots.cuda_s)


def test_only_the_dqb_path_adds_the_dqbs_power() -> None:
    assert gpu_model("gpu-fused").power_w() == A100_PCIE_40GB.power_w
    dqb = GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, "dqb"), verified.load(), 0.2)
    assert dqb.power_w() == pytest.approx(A100_PCIE_40GB.power_w + 5 * 16 * 0.2)   # a DQB per pseudo-channel


def test_the_fp16_gemm_by_hand() -> None:
    # M = 20 rows pad to 2 MMA tiles of 16 = 32 rows of tensor-core work; bytes: 16-bit weights plus the
    # activations in and out (2 bytes each of M × (K + N)); at a given bandwidth of 1e12 bytes/s.
    fp16 = GemmModel(A100_PCIE_40GB, Quantization())
    nbytes = 2 * K * N + 2 * 20 * (K + N)
    cost = fp16.cost(20, K, N, 1e12)
    assert cost.hbm_bytes == nbytes and cost.memory_s == pytest.approx(nbytes / 1e12)
    assert cost.tensor_s == pytest.approx(2 * 32 * K * N / A100_PCIE_40GB.flops)
    assert fp16.fp16_gemm(20, K, N, weight_bytes=1e6)[2] == 1e6 + 2 * 20 * (K + N)   # weights of another size


def test_the_dqb_path_streams_at_the_bandwidth_it_is_given() -> None:
    # At 1e9 bytes/s DRAM binds: the weights and S/Z plus one row of activations in and out.
    gemm = GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, "dqb"), verified.load())
    cost = gemm.cost(1, K, N, 1e9)
    assert cost.bound == "dram"
    assert cost.memory_s == pytest.approx((gemm.weight_bytes(K, N) + 2 * (K + N)) / 1e9)
    # HBM bytes: the weights and S/Z once, plus 2 bytes per activation in and out per row.
    assert gemm.cost(3, K, N).hbm_bytes == pytest.approx(gemm.weight_bytes(K, N) + 2 * 3 * (K + N))
    # At the GPU's own bandwidth the stream is the slowest of the bounds, whichever it is.
    for link_expanded in (True, False):
        gemm = GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, "dqb", link_expanded=link_expanded),
                               verified.load())
        bounds, cost = gemm.dqb_bounds(1, K, N), gemm.cost(1, K, N)
        assert cost.memory_s == max(bounds.values()) and cost.bound == max(bounds, key=bounds.get)
