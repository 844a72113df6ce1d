"""The executors' prices checked against numbers worked out by hand (issue 19's mutation testing found these
unchecked): the PNM's tensor-parallel exchanges (two inter-PNM all-reduces and two NVLink all-reduces per layer)
and their link bytes, FLOPs and HBM bytes over GPUs and stacks for the PNM and the GPU, offered loads and
bandwidth scales, an SM partition's compute, per-operator shares over a block, the measured model's extra
kernels, and the verified pnm_array entry the PNM's figures come from."""
from dataclasses import replace

import numpy as np
import pytest

from basedie.verified import VerifiedBlocks, VerifiedEntry
from sysmodel.arbitration import MMUArbitration
from sysmodel.errors import ConfigError
from sysmodel.execution import GPUExecution, PNMExecution, PNMFigures, _fraction, pnm_entries
from sysmodel.hardware import PAPER_HARDWARE, Link
from sysmodel.llm import LLAMA2_70B, LLM
from sysmodel.memory import MemoryTier
from sysmodel.operators import Shard, decode_work
from sysmodel.perf import perf_model
from sysmodel.presets import PRESETS

# One layer of two heads of 4 (two KV heads), MLP 8 → 16 → 8 (2 matrices), a 4-token vocabulary (an LM head of 64
# rows once padded as vLLM pads it, to a multiple of 64): every operator's elements and FLOPs are small enough to
# count by hand, at TP1 and at TP2 (one head per GPU).
PAIR = LLM("pair", layers=1, hidden=8, heads=2, kv_heads=2, head_dim=4, ffn=16, vocab=4, gated_mlp=False)
FREE_MMU = MMUArbitration("prefill-first", 1.0, (0.5, 1.0), {"gpu": np.ones((2, 3)), "pnm": np.ones((3, 2))},
                          {"gpu": np.zeros((3, 3)), "pnm": np.zeros((3, 3))}, {"gpu": 0, "pnm": 0}, 1e9)


def pnm(tp: int, stacks: int = 1, stack_bandwidth: float = 1e18, macs: float = 1.0, all_reduce_s: float = 0.0,
        link_bandwidth: float = 1e30) -> PNMExecution:
    """PAIR on `tp` GPUs of `stacks` stacks (one PNM each) of no latency: 8 lanes of `macs` MACs per cycle at
    1 GHz, an MMU that serves everything at once."""
    stack = MemoryTier("stack", 1e12, stack_bandwidth, 0.0, 0.0)
    gpu = replace(PAPER_HARDWARE.gpu, stacks=stacks, stack=stack)
    hardware = replace(PAPER_HARDWARE, gpu=gpu, gpus=tp, link=Link("link", link_bandwidth, 0.0),
                       pnm=replace(PAPER_HARDWARE.pnm, lanes=8, clock_hz=1e9, all_reduce_s=all_reduce_s))
    return PNMExecution(hardware, Shard(PAIR, tp), PNMFigures(8, 1e9, 0, macs), FREE_MMU)


# Decode of 4 sequences holding 10 KV tokens in all. Elements streamed at TP1: qkv weights 8 × (8 + 2·8) = 192,
# the new tokens' K and V 2 × 4 × 8 = 64, cached K and V 2 × 10 × 8 = 160, o_proj 8 × 8 = 64, MLP 2 × 8 × 16 = 256,
# LM head 8 × 64 = 512: 1,248 values, 2,496 bytes. At TP2 each GPU streams half of each (624 values).
WORK = decode_work(4, 10)
BYTES = 2496


@pytest.mark.parametrize(("tp", "stacks"), [(1, 1), (1, 2), (2, 1), (2, 2)])
def test_a_pnm_iteration_moves_every_value_once_over_its_gpus_and_stacks(tp: int, stacks: int) -> None:
    cost = pnm(tp, stacks).cost(WORK)
    assert cost.hbm_bytes == BYTES
    # FLOPs: qkv 2·4·8·24 = 1,536, attention 4·2·4·10 = 320, o_proj 2·4·8·8 = 512, MLP 2·4·256 = 2,048, LM head
    # 2·4·8·64 = 4,096; the norms (2 × 4·4·8 per layer, 4·4·8 final = 384) run on every GPU, once per GPU.
    assert cost.flops == 1536 + 320 + 512 + 2048 + 4096 + tp * 384


def test_a_memory_bound_pnm_asks_for_the_whole_stack_and_a_halved_share_doubles_its_time() -> None:
    # 1e6 MACs per lane-cycle: the lanes never wait; 1 GB/s: 2,496 bytes take 2.496 µs.
    fast_lanes = pnm(1, stack_bandwidth=1e9, macs=1e6)
    cost = fast_lanes.cost(WORK)
    assert cost.seconds == pytest.approx(BYTES / 1e9, rel=1e-9, abs=0)
    assert cost.offered == pytest.approx(1.0, rel=1e-9, abs=0)
    assert fast_lanes.cost(WORK, bandwidth_scale=0.5).seconds == pytest.approx(2 * BYTES / 1e9, rel=1e-9, abs=0)


def test_tensor_parallel_pnms_pay_two_inter_pnm_and_two_link_all_reduces_per_layer() -> None:
    # TP2: each layer all-reduces the 4 tokens' 8 activations (64 B) after attention and after the MLP, between
    # the GPU's PNMs (0.5 µs each) and over NVLink (a ring of 2 sends 2 · ½ · 64 B per GPU: 64 ns at 1 GB/s).
    base = pnm(2).cost(WORK)
    assert pnm(2, all_reduce_s=0.5e-6).cost(WORK).seconds - base.seconds == pytest.approx(2 * 0.5e-6, rel=1e-9, abs=0)
    assert pnm(2, link_bandwidth=1e9).cost(WORK).seconds - base.seconds == pytest.approx(2 * 64e-9, rel=1e-9, abs=0)
    # Link bytes: 2 all-reduces × 64 B per GPU, 2 GPUs; none at TP1.
    assert base.link_bytes == 2 * 64 * 2 and pnm(1).cost(WORK).link_bytes == 0


PROVENANCE = {"sources_digest": "-", "bench": "tb.pnm_lane.bench", "rtl_module": "rtl.pnm_lane.lane"}


def lane(width: int) -> VerifiedEntry:
    return VerifiedEntry("pnm_lane", {"width": width, "sublane_width": min(width, 128), "design_clock_hz": 1e9},
                         {"latency_cycles": 10, "operand_pairs_per_cycle": 1.0, "macs_per_cycle": float(width)},
                         PROVENANCE)


def array(width: int) -> VerifiedEntry:
    return VerifiedEntry("pnm_array", {"width": width, "sublane_width": 4, "lanes": 16, "design_clock_hz": 1e9},
                         {"latency_cycles": 15, "operand_pairs_per_cycle": 1.0, "macs_per_cycle": 16.0 * width},
                         PROVENANCE)


@pytest.mark.parametrize(("lane_width", "chosen"), [(64, 64), (1024, 1024), (2048, 1024)])
def test_the_array_entry_is_the_lanes_width_else_the_widest(lane_width: int, chosen: int) -> None:
    # Arrays of 16 lanes verified at widths 16, 1,024 and 64: the lane's own width when there is one, else the
    # widest (the closest to a full-width array).
    table = VerifiedBlocks([lane(lane_width), array(16), array(1024), array(64)])
    hardware_pnm = replace(PAPER_HARDWARE.pnm, lane_width=lane_width)
    found_lane, found_array = pnm_entries(table, hardware_pnm)
    assert found_lane.params["width"] == lane_width and found_array.params["width"] == chosen


def one_gpu_kind(flops: float, bandwidth: float, tp: int, link_bandwidth: float = 1e30):
    stack = MemoryTier("stack", 1e12, bandwidth, 0.0, 0.0)
    gpu = replace(PAPER_HARDWARE.gpu, flops=flops, stacks=1, stack=stack)
    return replace(PAPER_HARDWARE, gpu=gpu, gpus=tp, link=Link("link", link_bandwidth, 0.0))


# The GPU's bytes for WORK, operator by operator (weights + KV + activations, 2 B each). TP1: norms 2 × 2·4·8·2 =
# 256; qkv 384 + 128 + 4·16·2 = 640; attention 320 + 2·4·8·2 = 448; o_proj 128 + 4·16·2 = 256; MLP 512 +
# 4·(16 + 16)·2 = 768; final norm 128, LM head 1,024 + 4·(8 + 64)·2 = 1,600: 4,096 bytes. TP2, per GPU: norms 256;
# qkv 192 + 64 + 4·12·2 = 352; attention 160 + 2·4·4·2 = 224; o_proj 64 + 4·12·2 = 160; MLP 256 + 4·(16 + 8)·2 =
# 448; final norm 128, LM head 512 + 4·(8 + 32)·2 = 832: 2,400, 4,800 on both.
GPU_BYTES = {1: 4096, 2: 2 * 2400}


@pytest.mark.parametrize("tp", [1, 2])
def test_a_gpu_iteration_counts_its_flops_bytes_and_all_reduce_link_bytes(tp: int) -> None:
    cost = GPUExecution(one_gpu_kind(1e30, 1e30, tp), Shard(PAIR, tp)).cost(WORK)
    assert cost.flops == 1536 + 320 + 512 + 2048 + 4096 + tp * 384         # as the PNM's: the norms on every GPU
    assert cost.hbm_bytes == GPU_BYTES[tp]
    assert cost.link_bytes == (0 if tp == 1 else 2 * 64 * 2)


def test_a_gpu_partition_computes_at_its_sm_share_and_a_halved_bandwidth_share_doubles_memory_time() -> None:
    # Compute-bound (1 kFLOP/s, endless bandwidth): half the SMs take twice as long, 8,896 FLOPs / 500 FLOP/s.
    compute_bound = one_gpu_kind(1e3, 1e30, 1)
    half_the_sms = GPUExecution(compute_bound, Shard(PAIR, 1), 0.5)
    assert half_the_sms.cost(WORK).seconds == pytest.approx(8896 / 500, rel=1e-12, abs=0)
    # Memory-bound (endless FLOP/s, 1 GB/s): the whole stack asked for; at half the bandwidth, twice the time.
    memory_bound = GPUExecution(one_gpu_kind(1e30, 1e9, 1), Shard(PAIR, 1))
    cost = memory_bound.cost(WORK)
    assert cost.seconds == pytest.approx(4096 / 1e9, rel=1e-12, abs=0)
    assert cost.offered == pytest.approx(1.0, rel=1e-12, abs=0)
    assert memory_bound.cost(WORK, bandwidth_scale=0.5).seconds == pytest.approx(2 * 4096 / 1e9, rel=1e-12, abs=0)


@pytest.mark.parametrize(("fraction", "refused"), [(0.0, True), (1e-3, False), (1.0, False), (1.5, True)])
def test_an_sm_fraction_is_in_0_to_1(fraction: float, refused: bool) -> None:
    if refused:
        with pytest.raises(ConfigError) as error:
            GPUExecution(PAPER_HARDWARE, Shard(PAIR, 1), fraction)
        assert str(error.value) == f"SM fraction must be in (0, 1], got {fraction}"
    else:
        GPUExecution(PAPER_HARDWARE, Shard(PAIR, 1), fraction)


def test_a_block_with_per_operator_shares_is_priced_as_each_iteration_alone() -> None:
    # A planted arbiter halves the share of an operator that asks for more than 90 % of the bandwidth: on a
    # memory-bound GPU every streaming operator does, and a block of two iterations gets per iteration what
    # each iteration gets alone.
    def half_when_busy(load):
        return np.where(np.asarray(load) > 0.9, 0.5, 1.0) if isinstance(load, np.ndarray) else (
            0.5 if load > 0.9 else 1.0)

    gpu = GPUExecution(one_gpu_kind(1e30, 1e9, 1), Shard(PAIR, 1))
    block = gpu.cost(decode_work(4, np.array([10, 20])), share=half_when_busy)
    alone = [gpu.cost(decode_work(4, context), share=half_when_busy) for context in (10, 20)]
    np.testing.assert_allclose(block.seconds, [a.seconds for a in alone], rtol=1e-12)
    assert alone[0].seconds == pytest.approx(2 * 4096 / 1e9, rel=1e-12, abs=0)    # every operator at half bandwidth


def test_an_operator_that_takes_no_time_asks_for_none_of_the_bandwidth() -> None:
    # Bytes' time at peak over the operator's time: 1 µs of 4 µs is a quarter; no time at all asks for 0, scalar or
    # per iteration of a block (where the division is skipped the result must be 0, not what memory held).
    assert _fraction(1e-6, 4e-6) == 0.25
    assert _fraction(0.0, 0.0) == 0.0
    peaks = np.full(4096, 7.0)
    times = np.tile([28.0, 0.0], 2048)
    np.testing.assert_array_equal(_fraction(peaks, times), np.tile([0.25, 0.0], 2048))
    np.testing.assert_array_equal(_fraction(3.0, np.array([0.0, 12.0])), [0.0, 0.25])
    np.testing.assert_array_equal(_fraction(np.array([1.0, 2.0]), 4.0), [0.25, 0.5])


def test_the_measured_model_adds_each_layers_rope_and_residual_adds() -> None:
    # Vidur's H100 profile, LLaMA2-70B at TP8, 64 tokens: rope 0.002 ms and two adds of 0.002 ms per layer.
    h100 = PRESETS["h100-sxm5-80gb"]
    measured = perf_model("measured", h100.gpu)

    class WithoutExtraKernels:
        def __getattr__(self, name):
            return getattr(measured, name)

        def layer_extra_seconds(self, tokens, shard, byte_rate):
            return 0.0

    work, shard = decode_work(64, 6400), Shard(LLAMA2_70B, 8)
    with_extra = GPUExecution(h100, shard, perf=measured).cost(work).seconds
    without = GPUExecution(h100, shard, perf=WithoutExtraKernels()).cost(work).seconds
    assert with_extra - without == pytest.approx(80 * 0.006e-3, rel=1e-9, abs=0)


def test_the_array_entry_has_the_lanes_clock() -> None:
    # Two arrays of 16 lanes, at 1 GHz and at 2 GHz: a 2 GHz PNM takes the 2 GHz one, not the wider.
    fast = VerifiedEntry("pnm_array", {"width": 16, "sublane_width": 4, "lanes": 16, "design_clock_hz": 2e9},
                         {"latency_cycles": 15, "operand_pairs_per_cycle": 1.0, "macs_per_cycle": 256.0}, PROVENANCE)
    slow_lane = replace(lane(1024), params={**lane(1024).params, "design_clock_hz": 2e9})
    table = VerifiedBlocks([slow_lane, array(1024), fast])
    found_lane, found_array = pnm_entries(table, replace(PAPER_HARDWARE.pnm, clock_hz=2e9))
    assert found_array.params["design_clock_hz"] == 2e9 and found_array.params["width"] == 16
