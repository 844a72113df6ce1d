"""Quantized GEMMs' bookkeeping (issue 19's mutation testing found it unchecked): the kernel family's own switch
between its fused and split kernels (at `split_from`, for a block of M as for one M), the bandwidth each path is
given, the FP16 GEMM's bound and MMA padding, the DQB path's memory-side and bypass terms and its fields, CUDA-core
time by hand, the models a GPU without CUDA-core figures can build, and every refusal's exact message."""
import dataclasses

import numpy as np
import pytest

from basedie import verified
from basedie.verified import VerifiedBlocks
from sysmodel.errors import ConfigError
from sysmodel.hardware import A100_PCIE_40GB, PAPER_GPU
from sysmodel.memory import MemoryTier
from sysmodel.quantized import (AWQ_V1_INT4, DQBFigures, GemmCost, GemmModel, Quantization, base_die_sz_rows,
                               dqb_figure, larger, overtakes_from, sz_fraction)

K, N = 4096, 1024
BANDWIDTH = A100_PCIE_40GB.memory.bandwidth


@pytest.fixture(scope="module")
def table() -> VerifiedBlocks:
    return verified.load()


def gptq(table, dequant: str) -> GemmModel:
    return GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, dequant, "gptq"), table)


def test_the_family_switches_to_its_split_kernel_at_split_from_for_one_m_and_for_a_block(table) -> None:
    # GPTQ splits from M = 64 (the paper's §6.4 setting); at half the HBM bandwidth.
    switch, fused, split = gptq(table, "gpu"), gptq(table, "gpu-fused"), gptq(table, "gpu-split")
    bandwidth = BANDWIDTH / 2
    for m, chosen in [(63, fused), (64, split)]:
        assert switch.cost(m, K, N, bandwidth) == chosen.cost(m, K, N, bandwidth)
    ms = np.array([1, 63, 64, 200])
    block = switch.cost(ms, K, N, bandwidth)
    assert block.bound == "mixed"
    for i, m in enumerate(ms):
        one = (fused if m < 64 else split).cost(int(m), K, N, bandwidth)
        for field in range(5):
            assert block[field][i] == pytest.approx(one[field], rel=1e-12, abs=0), (m, field)


@pytest.mark.parametrize("dequant", ["gpu", "gpu-fused", "gpu-split", "dqb"])
def test_every_path_streams_its_weights_at_the_bandwidth_it_is_given(table, dequant: str) -> None:
    # One row: the weights' bytes dominate; at half the bandwidth their time doubles.
    kernel = None if dequant == "dqb" else "gptq"
    gemm = GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, dequant, kernel, link_expanded=False), table)
    full, half = gemm.cost(1, K, N, BANDWIDTH), gemm.cost(1, K, N, BANDWIDTH / 2)
    if dequant == "dqb":         # the DRAM side: DQB and link bounds do not follow the bandwidth given
        assert gemm.dqb_bounds(1, K, N, BANDWIDTH / 2)["dram"] == pytest.approx(
            2 * gemm.dqb_bounds(1, K, N, BANDWIDTH)["dram"], rel=1e-12, abs=0)
    else:
        assert half.memory_s == pytest.approx(2 * full.memory_s, rel=1e-12, abs=0)


def test_an_fp16_gemm_is_bound_by_the_longer_of_its_bytes_and_its_tensor_time_memory_on_a_tie() -> None:
    fp16 = GemmModel(A100_PCIE_40GB, Quantization())
    # M = 1: 2·K·N + 2·(K + N) bytes at 1,555 GB/s against one 16-row MMA tile, 2·16·K·N / 312 TFLOP/s.
    one = fp16.cost(1, K, N)
    assert one.memory_s == pytest.approx((2 * K * N + 2 * (K + N)) / BANDWIDTH, rel=1e-12, abs=0)
    assert one.tensor_s == pytest.approx(2 * 16 * K * N / 312e12, rel=1e-12, abs=0)
    assert (one.bound, one.cuda_s, one.seconds) == ("memory", 0.0, one.memory_s)
    big = fp16.cost(4096, K, N)
    assert (big.bound, big.seconds) == ("tensor", big.tensor_s)
    assert fp16.cost(np.array([1, 4096]), K, N).bound == "mixed"
    # A GEMM of 16 rows × 1 × 1: 2 + 2·16·2 = 66 bytes and 2·16 = 32 FLOPs, on a GPU of 66 B/s and 32 FLOP/s:
    # one second each.
    tie_gpu = dataclasses.replace(A100_PCIE_40GB, flops=32.0, stacks=1, stack=MemoryTier("s", 1e9, 66.0, 0.0, 0.0))
    tie = GemmModel(tie_gpu, Quantization()).cost(16, 1, 1)
    assert (tie.memory_s, tie.tensor_s, tie.bound) == (1.0, 1.0, "memory")


def test_a_gpu_without_cuda_core_figures_runs_fp16_and_dqb_gemms_with_unpadded_rows(table) -> None:
    # The paper's GPU has no CUDA-core figures: its FP16 GEMM needs none, and no MMA tile pads its rows.
    fp16 = GemmModel.build(PAPER_GPU, Quantization(), table)
    assert (fp16.gpu, fp16.power_w()) == (PAPER_GPU, 1400.0)
    assert fp16.cost(3, K, N).tensor_s == pytest.approx(2 * 3 * K * N / 2.5e15, rel=1e-12, abs=0)
    # Nor does the DQB path (the DQBs dequantize, the GPU runs an FP16 GEMM).
    no_cores = dataclasses.replace(A100_PCIE_40GB, cores=None)
    assert GemmModel.build(no_cores, Quantization("w4a16", 128, "dqb"), table).cost(1, K, N).seconds > 0
    with pytest.raises(ConfigError) as error:
        GemmModel.build(no_cores, Quantization("w4a16", 128, "gpu-fused", "gptq"), table)
    assert str(error.value) == ("A100 PCIe 40 GB: GPU-side dequantization needs its CUDA-core figures (known for "
                                "the a100-pcie-40gb hardware)")


def test_the_dqb_path_needs_its_figures_and_a_pseudo_channel_count(table) -> None:
    dqb = Quantization("w4a16", 128, "dqb")
    with pytest.raises(ConfigError) as error:
        GemmModel(A100_PCIE_40GB, dqb)
    assert str(error.value) == "the DQB path needs the verified DQB figures"
    figures = DQBFigures.from_verified(table, dqb.dqb_mode)
    one_channel = dataclasses.replace(A100_PCIE_40GB, pseudo_channels_per_stack=1)
    assert GemmModel(one_channel, dqb, 0.0, figures).dqbs == 5
    with pytest.raises(ConfigError) as error:
        GemmModel(dataclasses.replace(A100_PCIE_40GB, pseudo_channels_per_stack=0), dqb, 0.0, figures)
    assert str(error.value) == ("A100 PCIe 40 GB: the DQB needs the stack's pseudo-channel count (one DQB per "
                                "pseudo-channel)")


def test_the_dqb_bound_is_the_busier_side_plus_the_bypassed_bytes() -> None:
    # 80 DQBs (5 stacks × 16 pseudo-channels) of 64-byte beats at 328 MHz: beats = 80 · 64 · 328e6 B/s. A 128 × 128
    # INT4 GEMM of one row: packed 8,192 B, S/Z 2,048 B (a fifth of the 10,240 read), 32,768 B out, 256 B of
    # activations. The memory side at 0.1 beat/cycle (81,920 / beats) is busier than the output side at 1
    # (32,768 / beats); the 2,304 bypassed bytes at 2 beats/cycle add 1,152 / beats.
    figures = DQBFigures(latency_cycles=0, output_beats_per_cycle=1.0, memory_beats_per_cycle=0.1,
                         bypass_beats_per_cycle=2.0, beat_bytes=64)
    gemm = GemmModel(A100_PCIE_40GB, Quantization("w4a16", 128, "dqb"), 0.2, figures)
    beats = 80 * 64 * 328e6
    assert gemm.dqb_bounds(1, 128, 128)["dqb"] == pytest.approx((81920 + 1152) / beats, rel=1e-12, abs=0)
    cost = gemm.cost(1, 128, 128)
    assert cost.tensor_s == pytest.approx(2 * 16 * 128 * 128 / 312e12, rel=1e-12, abs=0) and cost.cuda_s == 0.0
    assert gemm.cost(np.array([1, 2]), 128, 128).bound == "mixed"


def test_cuda_core_time_by_hand() -> None:
    # AWQ-v1's INT4 mix per weight: 17/8 issued, 5/8 INT32, 12/8 FP16x2. 1,024 weights on an A100 (per SM and
    # clock: 128 issue, 64 INT32, 128 FP16x2): issue 17 clocks, INT32 10, FP16x2 12; the busiest, 17, over 108 SMs
    # at 1.41 GHz.
    gemm = GemmModel(A100_PCIE_40GB, Quantization())
    assert gemm.cuda_s(1024, AWQ_V1_INT4) * (108 * 1.41e9) == pytest.approx(17, rel=1e-12, abs=0)      # in SM clocks


@pytest.mark.parametrize(("args", "message"), [
    (("int3",), "unknown weights 'int3'; choose one of fp16, w4a16, w8a16, fp8"),
    (("w4a16", 128, "dqb", None, "fp32"), "unknown activations 'fp32'; choose one of fp16, bf16"),
    (("fp16", 128), "fp16 weights need no dequantization: drop --dequant, --kernel, --kernel-model and --group-size"),
    (("w4a16", 128), "w4a16 weights need --dequant, one of dqb, gpu, gpu-fused, gpu-split"),
    (("w4a16", 0, "dqb"), "group size must be >= 1, got 0"),
    (("w4a16", 128, "dqb", "gptq"), "--kernel names a GPU-side dequantization kernel; the DQB needs none"),
    (("w4a16", 128, "gpu"), "--dequant gpu needs --kernel, one of gptq, awq-v1, awq-v2, torchao"),
])
def test_a_quantization_no_kernel_runs_is_refused_by_name(args: tuple, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        Quantization(*args)
    assert str(error.value) == message


def test_a_group_of_one_is_a_group() -> None:
    assert Quantization("w4a16", 1, "dqb").group_size == 1


def test_a_table_without_the_dqb_or_its_figures_names_what_is_missing(table) -> None:
    with pytest.raises(ConfigError) as error:
        dqb_figure(VerifiedBlocks([e for e in table.entries if e.block != "dqb"]), "sz_read_fraction")
    assert str(error.value) == ("no verified figures for dqb with {'interface_bits': 512, 'rounding': "
                                "'nearest_even'}; run `basedie verify dqb`")
    with pytest.raises(ConfigError) as error:
        dqb_figure(table, "nonesuch")
    assert str(error.value) == ("the verified dqb entry ({'interface_bits': 512, 'rounding': 'nearest_even'}) has no "
                                "figure 'nonesuch': run `basedie verify dqb`")
    measured = sorted({row["group_size"] for row in [*dqb_figure(table, "sz_read_fraction"), *base_die_sz_rows(table)]
                       if row["weight_bits"] == 4})
    with pytest.raises(ConfigError) as error:
        sz_fraction(table, 4, 3)
    assert str(error.value) == (f"no measured S/Z fraction for group size 3 (4-bit); measured: "
                                f"{', '.join(map(str, measured))}")
    assert len(measured) >= 2


def test_a_dqb_gemm_whose_stream_and_tensor_times_tie_is_tensor_bound() -> None:
    # 16 rows × 128 × 128 INT4 without S/Z: 8,192 packed bytes + 2·16·256 = 8,192 of activations in and out over
    # 16,384 B/s of DRAM, and 2·16·128·128 = 524,288 FLOPs at 524,288 FLOP/s: one second each; DQBs and link are
    # not binding.
    gpu = dataclasses.replace(A100_PCIE_40GB, flops=524288.0, stacks=1, stack=MemoryTier("s", 1e9, 16384.0, 0.0, 0.0))
    figures = DQBFigures(latency_cycles=0, output_beats_per_cycle=1e9, memory_beats_per_cycle=1e9,
                         bypass_beats_per_cycle=1e9, beat_bytes=64)
    cost = GemmModel(gpu, Quantization("w4a16", 128, "dqb", link_expanded=False), 0.0, figures).cost(16, 128, 128)
    assert (cost.memory_s, cost.tensor_s, cost.bound) == (1.0, 1.0, "tensor")


def test_gpu_dequantization_needs_only_the_sz_fraction_of_the_dqb_entry(table) -> None:
    """The DQB's rates and latency price the DQB path only: a table whose dqb entry holds nothing but the S/Z
    fraction still builds GPU dequantization (no DQB figures), and refuses the DQB path naming the missing one."""
    only_sz = VerifiedBlocks([dataclasses.replace(e, figures={"sz_read_fraction": e.figures["sz_read_fraction"]})
                              if e.block == "dqb" else e for e in table.entries])
    assert gptq(only_sz, "gpu-fused").dqb is None
    with pytest.raises(ConfigError, match="has no figure 'read_latency_cycles'"):
        GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, "dqb"), only_sz)


def test_larger_is_elementwise_when_either_side_is_an_array() -> None:
    np.testing.assert_array_equal(larger(np.array([1.0, 3.0]), 2.0), [2.0, 3.0])
    np.testing.assert_array_equal(larger(2.0, np.array([1.0, 3.0])), [2.0, 3.0])
    assert larger(1.0, 2.0) == 2.0


class Timed:
    """A stand-in GEMM whose time is `seconds(m)`: what `overtakes_from` compares."""

    def __init__(self, seconds) -> None:
        self.seconds = seconds

    def cost(self, m, k, n, bandwidth=None) -> GemmCost:
        return GemmCost(self.seconds(m), 0.0, 0.0, 0.0, 0.0, "memory")


def test_overtakes_from_is_where_a_gemm_stays_ahead_of_every_rival() -> None:
    """m + 10 against 2m: at least as fast from m = 10 on (20 <= 20). A rival slow at m = 3 alone puts the GEMM ahead
    there too, but not for good: the answer stays 10. A rival at 30 s leaves it behind from m = 21, so over 1-30
    it never stays ahead; over the ascending subset (1, 4, 16) the first M ahead for good is 16."""
    gemm, doubling = Timed(lambda m: m + 10.0), Timed(lambda m: 2.0 * m)
    slow_at_3 = Timed(lambda m: 100.0 if m == 3 else 2.0 * m)
    assert overtakes_from(gemm, [doubling], 0, 0, range(1, 21)) == 10
    assert overtakes_from(gemm, [slow_at_3], 0, 0, range(1, 21)) == 10
    assert overtakes_from(gemm, [doubling, Timed(lambda m: 30.0)], 0, 0, range(1, 31)) is None
    assert overtakes_from(gemm, [doubling], 0, 0, (1, 4, 16)) == 16
