"""Performance models: `measured` reproduces Vidur's profiled kernel times; `roofline-efficiency` carries the
profiled efficiency to other GPUs; `roofline` is unchanged. Expected values are read off the shipped CSVs."""
from dataclasses import replace

import numpy as np
import pytest

from sysmodel.errors import ConfigError
from sysmodel.execution import GPUExecution
from sysmodel.llm import LLAMA2_70B
from sysmodel.operators import Op, Shard, decode_work, prefill_work, ring_all_reduce_s
from sysmodel.perf import ROOFLINE, perf_model
from sysmodel.presets import PRESETS
from sysmodel.config import resolve_hardware
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.workload import FixedBatch

H100 = PRESETS["h100-sxm5-80gb"]
SHARD = Shard(LLAMA2_70B, 8)
# vidur_h100_mlp.csv, Llama-2-70b-hf, tp 8, num_tokens 64 (ms): input_layernorm 0.006, attn_pre_proj 0.013,
# attn_rope 0.002, attn_post_proj 0.01, mlp_up_proj 0.045, mlp_act 0.003, mlp_down_proj 0.025, add 0.002.
ROW_64 = {"norm": 0.006e-3, "qkv": 0.013e-3, "o_proj": 0.01e-3, "mlp": (0.045 + 0.003 + 0.025) * 1e-3}


def op_times(model_name: str, hardware, tokens: int) -> dict[str, float]:
    perf = perf_model(model_name, hardware.gpu)
    ops = SHARD.layer_ops(decode_work(tokens, tokens * 100))
    rate, bandwidth = hardware.gpu.flops, hardware.gpu.memory.bandwidth
    return {op.name: perf.op_seconds(op, tokens, SHARD, rate, bandwidth) for op in ops}


def test_measured_reproduces_the_profiled_kernels_on_the_profiled_gpu() -> None:
    times = op_times("measured", H100, 64)
    for name, seconds in ROW_64.items():
        assert times[name] == pytest.approx(seconds, rel=1e-9), name
    extra = perf_model("measured", H100.gpu).layer_extra_seconds(64, SHARD, H100.gpu.memory.bandwidth)
    assert extra == pytest.approx((0.002 + 2 * 0.002) * 1e-3, rel=1e-9)      # rope + two residual adds


def test_roofline_efficiency_scales_the_measured_time_by_the_roofline() -> None:
    # A GPU with twice the H100's FLOP/s and bandwidth, which nobody profiled: the same efficiency, half the time.
    gpu = replace(H100.gpu, name="hypothetical", flops=2 * H100.gpu.flops,
                  stack=replace(H100.gpu.stack, bandwidth=2 * H100.gpu.stack.bandwidth))
    times = op_times("roofline-efficiency", replace(H100, gpu=gpu), 64)
    for name, seconds in ROW_64.items():
        assert times[name] == pytest.approx(seconds / 2, rel=1e-9), name


def test_all_reduce_measured_and_latency_plus_bandwidth() -> None:
    # vidur_h100_dgx_all_reduce.csv, 8 GPUs: 1,048,576 B 0.034 ms, 1,572,864 B 0.036 ms, 2,048 B 0.037 ms.
    measured = perf_model("measured", H100.gpu)
    assert measured.all_reduce_seconds(1310720, 2, 8, H100.link.bandwidth) == pytest.approx(2 * 0.035e-3)
    assert measured.all_reduce_seconds(1310720, 2, 1, H100.link.bandwidth) == 0.0
    efficiency = perf_model("roofline-efficiency", PRESETS["b200"].gpu)
    link = PRESETS["b200"].link.bandwidth
    assert efficiency.all_reduce_seconds(1e6, 2, 8, link) == pytest.approx(
        2 * (0.037e-3 + 2 * 7 / 8 * 1e6 / link))


def test_roofline_model_is_the_previous_cost() -> None:
    # One prefill iteration by hand: per layer the longer of FLOPs/peak and bytes/bandwidth per operator, plus
    # the ring all-reduce of the layer's two reductions; then the head.
    work = prefill_work(512)
    gpu, link = H100.gpu, H100.link.bandwidth
    by_hand = 0.0
    for op in SHARD.layer_ops(work):
        by_hand += max(op.flops / gpu.flops, op.bytes / gpu.memory.bandwidth)
    by_hand += ring_all_reduce_s(2 * 512 * 8192 * 2, 8, link)
    by_hand *= LLAMA2_70B.layers
    by_hand += sum(max(op.flops / gpu.flops, op.bytes / gpu.memory.bandwidth) for op in SHARD.head_ops(work))
    assert GPUExecution(H100, SHARD, perf=ROOFLINE).cost(work).seconds == pytest.approx(by_hand, rel=1e-12)


def test_measured_needs_a_profiled_gpu() -> None:
    with pytest.raises(ConfigError, match="no measured profile for GB300-class.*roofline-efficiency"):
        perf_model("measured", resolve_hardware("paper").gpu)
    with pytest.raises(ConfigError, match="unknown performance model 'exact'"):
        perf_model("exact", H100.gpu)


@pytest.mark.parametrize("system", ["pd-1:1", "chunked", "sm-7:3"])
def test_profiled_models_are_slower_than_the_roofline_bound(system: str) -> None:
    runs = {name: simulate(SimulationConfig(system=system, model="llama2-70b", workload=FixedBatch(4, 1024, 16),
                                            hardware="h100-sxm5-80gb",
                                            perf_model=name))
            for name in ("roofline", "measured", "roofline-efficiency")}
    bound = runs["roofline"].summary
    for name in ("measured", "roofline-efficiency"):
        assert runs[name].summary["ttft_s"]["p50"] > bound["ttft_s"]["p50"]
        assert runs[name].summary["tpot_s"]["p50"] > bound["tpot_s"]["p50"]


def test_pnm_decoding_pays_the_all_reduce_latency_of_the_performance_model() -> None:
    # DuoPD's PNM decoding issues two tensor-parallel all-reduces per layer between its 8 GPUs; under
    # roofline-efficiency each also pays the DGX-H100 NCCL latency measured for 8 GPUs (0.037 ms at 2,048 B);
    # the lane cycles and the ring bytes are the same under both models.
    from basedie import verified
    from sysmodel.arbitration import MMUArbitration
    from sysmodel.execution import PNMExecution, PNMFigures

    table, hw = verified.load(), resolve_hardware("paper")
    lane = PNMFigures.from_verified(table, hw.pnm)
    mmu = MMUArbitration.from_verified(table, "prefill-first", hw)
    work = decode_work(16, 16 * 4096)
    costs = [PNMExecution(hw, SHARD, lane, mmu, perf_model(name, hw.gpu)).cost(work).seconds
             for name in ("roofline", "roofline-efficiency")]
    assert costs[1] - costs[0] == pytest.approx(LLAMA2_70B.layers * 2 * 0.037e-3, rel=1e-9)


def test_a_memory_bound_kernel_follows_the_bandwidth_share_and_the_memo_does_not_grow_with_it() -> None:
    """DuoPD's GPU runs at a share of the bandwidth that changes every iteration: the memo must hold one entry
    per operator shape, not one per share. At 64 decode tokens the QKV GEMM is memory bound (on an H100,
    2·64·K·N FLOPs at 989 TFLOP/s take a fifth of its 2·K·N weight bytes at 3.35 TB/s), so 1/s of the
    bandwidth takes s times the profiled 0.013 ms."""
    perf = perf_model("measured", H100.gpu)
    [qkv] = [op for op in SHARD.layer_ops(decode_work(64, 6400)) if op.name == "qkv"]
    rate, bandwidth = H100.gpu.flops, H100.gpu.memory.bandwidth
    assert perf.op_seconds(qkv, 64, SHARD, rate, bandwidth) == pytest.approx(0.013e-3, rel=1e-9)
    entries = sum(len(memo) for _, memo in perf._memo.values())
    for share in range(2, 50):
        assert perf.op_seconds(qkv, 64, SHARD, rate, bandwidth / share) == pytest.approx(share * 0.013e-3, rel=1e-9)
    assert sum(len(memo) for _, memo in perf._memo.values()) == entries


def test_an_attention_kernel_takes_at_least_the_shortest_kernel_measured() -> None:
    # One decode token attending to one cached token: a few kilobytes, about a nanosecond at the roofline; but
    # no kernel in vidur_h100_mlp.csv ran shorter than 0.001 ms (the smallest value of its kernel columns).
    perf = perf_model("measured", H100.gpu)
    [attention] = [op for op in SHARD.layer_ops(decode_work(1, 1)) if op.kind == "attention"]
    rate, bandwidth = H100.gpu.flops, H100.gpu.memory.bandwidth
    assert max(attention.flops / rate, attention.bytes / bandwidth) < 1e-8
    assert perf.op_seconds(attention, 1, SHARD, rate, bandwidth) == pytest.approx(0.001e-3, rel=1e-12)


def test_the_efficiency_beyond_the_profiled_tokens_is_that_of_the_largest_count_profiled() -> None:
    # vidur_h100_mlp.csv: the QKV GEMM of 8 heads and 2 KV heads of 128 (K 8,192, N 1,280; CodeLlama-34b and
    # Llama-2-70b at tp 8) is profiled up to 4,096 tokens, whose first row (CodeLlama-34b) has attn_pre_proj
    # 0.15 ms. It is compute bound at 4,096 and 8,192 tokens on an H100, so at the same efficiency twice the
    # tokens take twice the time.
    perf = perf_model("measured", H100.gpu)
    [qkv] = [op for op in SHARD.layer_ops(prefill_work(8192)) if op.name == "qkv"]
    rate, bandwidth = H100.gpu.flops, H100.gpu.memory.bandwidth
    assert qkv.flops / rate > qkv.bytes / bandwidth
    assert perf.op_seconds(qkv, 8192, SHARD, rate, bandwidth) == pytest.approx(2 * 0.15e-3, rel=1e-9)


@pytest.mark.parametrize("parties, latency_ms", [(2, 0.007), (3, 0.007), (4, 0.038), (5, 0.038), (16, 0.037)])
def test_the_all_reduce_latency_is_that_of_the_nearest_gpu_count_profiled(parties: int, latency_ms: float) -> None:
    # vidur_h100_dgx_all_reduce.csv at 2,048 B: 2 GPUs 0.007 ms, 4 GPUs 0.038 ms, 8 GPUs 0.037 ms (3 lies as near
    # 2 as 4, and takes the smaller count).
    perf = perf_model("roofline-efficiency", PRESETS["b200"].gpu)
    link = PRESETS["b200"].link.bandwidth
    assert perf.all_reduce_seconds(1e6, 1, parties, link) == pytest.approx(
        latency_ms * 1e-3 + ring_all_reduce_s(1e6, parties, link), rel=1e-12)


def test_a_measured_all_reduce_is_interpolated_and_extrapolated_along_the_last_segment() -> None:
    # vidur_h100_dgx_all_reduce.csv, 8 GPUs: 2,048 B 0.037 ms, 1,048,576 B 0.034 ms, 1,572,864 B 0.036 ms, ...,
    # 50,331,648 B 0.271 ms, 67,108,864 B 0.322 ms. Below the smallest size: its time; 80 MiB lies 16 MiB beyond
    # the last, along the last segment's 0.051 ms per 16 MiB: 0.373 ms. Arrays (the repricing path) alike.
    measured = perf_model("measured", H100.gpu)
    sizes = np.array([1024.0, 1310720.0, 83886080.0])
    expected_ms = [0.037, 0.035, 0.373]
    for size, ms in zip(sizes, expected_ms):
        seconds = measured.all_reduce_seconds(float(size), 1, 8, H100.link.bandwidth)
        assert isinstance(seconds, float) and seconds == pytest.approx(ms * 1e-3, rel=1e-9)
    assert measured.all_reduce_seconds(sizes, 3, 8, H100.link.bandwidth) == pytest.approx(
        [3 * ms * 1e-3 for ms in expected_ms], rel=1e-9)


def test_nvls_chooses_per_size_for_an_array_of_sizes() -> None:
    # The repricing path passes every iteration's bytes at once: 1 MB takes the ring (15 µs + 2 × 7/8 of it over
    # 450 GB/s), 1 GB NVLS (25 µs + all of it once), as each does alone (test_sysmodel_effects.py).
    perf = perf_model("roofline", H100.gpu, "nvls", H100.link)
    seconds = perf.all_reduce_seconds(np.array([1e6, 1e9]), 2, 8, 450e9)
    assert isinstance(seconds, np.ndarray)
    assert seconds == pytest.approx([2 * (15.0e-6 + 2 * 7 / 8 * 1e6 / 450e9), 2 * (25e-6 + 1e9 / 450e9)], rel=1e-12)


def test_alpha_beta_prices_two_gpus_and_keeps_the_ring_however_large_the_buffer() -> None:
    # NCCL tuning.cc: ring/LL base 6.6 µs + 2 (2 − 1) steps × 0.6 µs = 7.8 µs for 2 GPUs, plus 2 × 1/2 of 1 MB
    # over 450 GB/s. Without NVLS (`alpha-beta`) a 1 GB buffer takes the ring, 15 µs + 2 × 7/8 of it, though
    # NVLS would take 25 µs + 1 GB / 450 GB/s.
    perf = perf_model("roofline", H100.gpu, "alpha-beta", H100.link)
    assert perf.all_reduce_seconds(1e6, 1, 2, 450e9) == pytest.approx(7.8e-6 + 1e6 / 450e9, rel=1e-12)
    assert perf.all_reduce_seconds(1e9, 1, 8, 450e9) == pytest.approx(15.0e-6 + 2 * 7 / 8 * 1e9 / 450e9, rel=1e-12)


def test_a_norm_takes_the_profiled_time_of_its_own_hidden_size() -> None:
    # vidur_h100_mlp.csv: the first row 4,096 wide at 64 tokens (Llama-2-7b-hf, tp 1) has input_layernorm
    # 0.004 ms; Llama-2-7B's norm reads and writes its 4,096 values per token, as that kernel did (internlm-20b's
    # 5,120-wide norm, the next profiled width, took 0.004 ms for 25 % more bytes).
    from sysmodel.llm import LLAMA2_7B
    shard = Shard(LLAMA2_7B, 1)
    norm = next(op for op in shard.layer_ops(decode_work(64, 6400)) if op.name == "norm")
    assert norm.bytes == 64 * 2 * 4096 * 2
    perf = perf_model("measured", H100.gpu)
    assert perf.op_seconds(norm, 64, shard, H100.gpu.flops, H100.gpu.memory.bandwidth) == pytest.approx(
        0.004e-3, rel=1e-9)


@pytest.mark.parametrize("work", [decode_work(64, 64 * 4096), prefill_work(8192)], ids=["decode", "prefill"])
def test_attention_above_the_floor_runs_below_the_roofline(work) -> None:
    # Decode attention is memory bound, a long prefill's is compute bound: either way the measured model runs it
    # at the best efficiency a profiled GEMM reached, below one, so slower than the roofline, and well above the
    # 0.001 ms floor.
    [attention] = [op for op in SHARD.layer_ops(work) if op.kind == "attention"]
    rate, bandwidth = H100.gpu.flops, H100.gpu.memory.bandwidth
    roofline = max(attention.flops / rate, attention.bytes / bandwidth)
    assert roofline > 10 * 0.001e-3
    assert (attention.flops / rate > attention.bytes / bandwidth) == (work.tokens == 8192)
    assert perf_model("measured", H100.gpu).op_seconds(attention, work.tokens, SHARD, rate, bandwidth) > roofline


def test_an_array_of_operators_takes_the_times_of_each_alone() -> None:
    # The repricing path passes the operators of several iterations as arrays: the QKV GEMM at 64 and 4,096
    # tokens takes the profiled 0.013 ms and 0.15 ms (vidur_h100_mlp.csv, the first rows of its shape).
    [small] = [op for op in SHARD.layer_ops(decode_work(64, 6400)) if op.name == "qkv"]
    [large] = [op for op in SHARD.layer_ops(prefill_work(4096)) if op.name == "qkv"]
    both = small._replace(flops=np.array([small.flops, large.flops], float),     # the same weights, other tokens
                          kv_bytes=np.array([small.kv_bytes, large.kv_bytes], float),
                          act_bytes=np.array([small.act_bytes, large.act_bytes], float))
    perf = perf_model("measured", H100.gpu)
    seconds = perf.op_seconds(both, 64, SHARD, H100.gpu.flops, H100.gpu.memory.bandwidth)
    assert seconds == pytest.approx([0.013e-3, 0.15e-3], rel=1e-9)


def test_a_compute_bound_mlp_takes_its_profiled_kernels() -> None:
    # vidur_h100_mlp.csv, Llama-2-70b-hf, tp 8, 4,096 tokens (the first rows of these shapes): mlp_up_proj
    # 0.643 ms, mlp_act 0.052 ms, mlp_down_proj 0.296 ms. Both GEMMs are compute bound there, so their FLOPs
    # set the time.
    [mlp] = [op for op in SHARD.layer_ops(prefill_work(4096)) if op.name == "mlp"]
    perf = perf_model("measured", H100.gpu)
    seconds = perf.op_seconds(mlp, 4096, SHARD, H100.gpu.flops, H100.gpu.memory.bandwidth)
    assert seconds == pytest.approx((0.643 + 0.052 + 0.296) * 1e-3, rel=1e-9)


def test_an_operator_without_weights_takes_its_roofline_time() -> None:
    # No profiled kernel multiplies activations by activations outside attention: its roofline time, at full
    # efficiency.
    op = Op("activations", "matrix", 2e12, 0, 0, 1e9)
    perf = perf_model("measured", H100.gpu)
    assert perf.op_seconds(op, 64, SHARD, 1e15, 1e12) == pytest.approx(max(2e12 / 1e15, 1e9 / 1e12), rel=1e-12)


def test_an_operator_priced_again_is_served_from_the_memo(monkeypatch) -> None:
    perf = perf_model("roofline-efficiency", PRESETS["b200"].gpu)
    [qkv] = [op for op in SHARD.layer_ops(decode_work(48, 4800)) if op.name == "qkv"]
    first = perf.op_seconds(qkv, 48, SHARD, 1e15, 1e12)

    def unexpected(*args):
        raise AssertionError("the kernels of an operator priced before were computed again")

    monkeypatch.setattr(type(perf), "_kernels", unexpected)
    assert perf.op_seconds(qkv, 48, SHARD, 1e15, 1e12) == first
    assert perf.op_seconds(qkv, 48, SHARD, 2e15, 1e12) <= first      # other rates, the same kernels


def test_measured_names_the_profiled_gpus_and_the_models_keep_their_names_and_overlap() -> None:
    with pytest.raises(ConfigError, match=r"\(measured: A100-SXM4-80GB, H100-SXM5-80GB\); "):
        perf_model("measured", PRESETS["b200"].gpu)
    assert perf_model("measured", H100.gpu, overlap=True).overlap is True
    assert perf_model("roofline-efficiency", H100.gpu, overlap=True).overlap is True
    assert [perf_model(name, H100.gpu).name for name in ("measured", "roofline-efficiency")] == [
        "measured", "roofline-efficiency"]


def test_an_a100_nobody_profiled_takes_the_a100_profile() -> None:
    # vidur_a100_dgx_all_reduce.csv, 2 GPUs at 2,048 B: 0.01 ms (the H100's is 0.007 ms); an empty buffer adds
    # no ring bytes.
    hw = PRESETS["a100-pcie-40gb"]
    perf = perf_model("roofline-efficiency", hw.gpu)
    assert perf.all_reduce_seconds(0.0, 1, 2, hw.link.bandwidth) == pytest.approx(0.01e-3, rel=1e-12)


def test_an_efficiency_curve_is_interpolated_in_log_tokens_and_held_at_its_ends() -> None:
    # Points at 1, 4 and 16 tokens: 2 and 8 tokens lie halfway in log between two points; below one token, one.
    from sysmodel.perf import Curve
    curve = Curve([16, 1, 4], [0.8, 0.2, 0.4])
    assert [curve(t) for t in (0.5, 1, 2, 4, 8, 16, 64)] == pytest.approx([0.2, 0.2, 0.3, 0.4, 0.6, 0.8, 0.8])
    assert curve(np.array([0.5, 2, 8, 64])) == pytest.approx([0.2, 0.3, 0.6, 0.8])


def test_the_roofline_keeps_its_overlap_under_each_all_reduce_model_and_names_the_models() -> None:
    for all_reduce in ("bandwidth", "alpha-beta", "nvls"):
        for overlap in (False, True):
            assert perf_model("roofline", H100.gpu, all_reduce, H100.link, overlap=overlap).overlap is overlap
    with pytest.raises(ConfigError, match=r"^unknown all-reduce model 'tree'; choose one of bandwidth, alpha-beta, "
                                          r"nvls$"):
        perf_model("roofline", H100.gpu, "tree", H100.link)
