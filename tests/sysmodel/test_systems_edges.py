"""The serving systems' wiring checked against numbers worked out by hand (issue 19's mutation testing found these
unchecked): PD's layer-wise KV transfer when the transfer outlasts the prefill and queues on the link, the
decode instance a request goes to, a decode pool's servers on other hardware, the KV pool left beside a shared
prefix and an HBF layout, the refusals' exact messages, the performance model every system's executors get, and
an SM partition's prefill and decode sharing one memory."""
from dataclasses import replace

import numpy as np
import pytest

from basedie import verified
from sysmodel.arbitration import MMUArbitration
from sysmodel.engine import EventLoop, Request
from sysmodel.errors import ConfigError
from sysmodel.execution import GPUExecution, PNMExecution, PNMFigures, VectorFigures
from sysmodel.hardware import NVLINK5, PAPER_HARDWARE, Link
from sysmodel.hbf.layout import PRESETS as LAYOUTS, Layout
from sysmodel.hbf.service import PortPower
from sysmodel.llm import LLAMA2_70B, LLM, QWEN3_235B_A22B
from sysmodel.operators import Shard, decode_work, prefill_work
from sysmodel.perf import perf_model
from sysmodel.presets import PRESETS
from sysmodel.quantized import Quantization
from sysmodel.quantized_execution import QuantizedGPUExecution, quantized_weight_bytes
from sysmodel.config import SimulationConfig, resolve
from sysmodel.systems import Disaggregated, Setting, _placement, build, gpu_execution, kv_pool
from sysmodel.workload import FixedBatch
from tests.sysmodel.settings import make_setting

KV_PER_TOKEN = 2 * 80 * 8 * 128 * 2        # LLaMA2-70B: 2 (K, V) × 80 layers × 8 KV heads × 128 × 2 B
GB = 1e9


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


def run(system: str, setting: Setting, arrivals: list[tuple[float, int, int]], spec=None):
    """Requests (arrival, prompt tokens, output tokens) through `system`; the built system and the requests."""
    loop = EventLoop()
    built = build(system, setting, loop, spec)
    requests = [Request(i, at, prompt, output) for i, (at, prompt, output) in enumerate(arrivals)]
    for request in requests:
        loop.at(request.arrival, lambda request=request: built.submit(request))
    loop.run()
    return built, requests


def with_memory(capacity_bytes: float):
    """The paper's machine with `capacity_bytes` of memory per GPU (over its 8 stacks)."""
    gpu = PAPER_HARDWARE.gpu
    return replace(PAPER_HARDWARE, gpu=replace(gpu, stack=replace(gpu.stack, capacity_bytes=capacity_bytes / 8)))


# --- PD: the KV transfer, the decode instance, the servers ---

def test_a_kv_transfer_longer_than_the_prefill_starts_after_the_first_layer_and_queues_on_the_link(table) -> None:
    # Two servers of 4 GPUs joined by a 1 GB/s network per GPU: TP4 prefill on server 0, TP4 decode on server 1,
    # the KV over 4 pairs of adapters, T = 1,024 × 327,680 B / 4 GB/s = 83.9 ms, longer than the prompt's prefill
    # P. Layer-wise: a request's KV starts moving once its first of 80 layers is prefilled (P / 80 after its
    # prefill starts) and arrives T later, unless the link is still busy with the previous request's.
    slow = Link("1 GB/s network", 1e9, 8e-12)
    hardware = replace(PAPER_HARDWARE, gpus_per_server=4, network=slow)
    spec = Disaggregated(1, 4, 1, 4)
    built, (r0, r1, r2) = run("pd", make_setting(hardware, LLAMA2_70B, table), [(0.0, 1024, 2), (1.0, 1024, 2),
                                                                          (1.0, 1024, 2)], spec)
    prefill_s = GPUExecution(hardware, Shard(LLAMA2_70B, 4)).cost(prefill_work(1024)).seconds
    transfer_s = 1024 * KV_PER_TOKEN / (4 * 1e9)
    assert prefill_s < transfer_s
    assert r0.decode_ready == pytest.approx(prefill_s / 80 + transfer_s, rel=1e-12, abs=0)
    assert r1.decode_ready == pytest.approx(1.0 + prefill_s / 80 + transfer_s, rel=1e-12, abs=0)
    # r2's prefill follows r1's (1 + P → 1 + 2P); its first layer is done at 1 + P + P/80, but the link is busy
    # with r1's KV until 1 + P/80 + T.
    assert r2.prefill_start == pytest.approx(1.0 + prefill_s, rel=1e-12, abs=0)
    assert r2.decode_ready == pytest.approx(1.0 + prefill_s / 80 + 2 * transfer_s, rel=1e-12, abs=0)
    link = next(a for a in built.accounts if a.device == "link")
    assert link.busy_s == pytest.approx(3 * transfer_s, rel=1e-12, abs=0)
    assert link.link_bytes == 3 * 1024 * KV_PER_TOKEN


def test_a_request_goes_to_the_decode_instance_with_the_fewest_requests(table) -> None:
    # One TP2 prefill instance, two TP2 decode instances of one sequence each; four requests at once, each
    # decoding far longer than the four prefills take. r0 → instance 0, r1 → instance 1 (0 < 1), r2 → instance 0
    # (1 each: the first), where it waits for r0; r3 → instance 1 (2 > 1), where it waits for r1.
    setting = make_setting(PAPER_HARDWARE, LLAMA2_70B, table, max_batch=1)
    _, (r0, r1, r2, r3) = run("pd", setting, [(0.0, 64, 64)] * 4, Disaggregated(1, 2, 2, 2))
    assert r0.decode_start == r0.decode_ready and r1.decode_start == r1.decode_ready
    assert r3.decode_ready < r0.finish
    assert r2.decode_start == r0.finish and r3.decode_start == r1.finish


def test_a_decode_pool_on_other_hardware_is_on_servers_after_the_prefill_pools() -> None:
    other = replace(PAPER_HARDWARE, gpus=16)
    assert _placement(Disaggregated(1, 8, 2, 8), PAPER_HARDWARE, other) == ([0], [1, 2])
    assert _placement(Disaggregated(2, 4, 1, 8), PAPER_HARDWARE, other) == ([0, 0], [1])


def test_pd_instances_that_need_more_gpus_than_the_hardware_has_are_refused(table) -> None:
    with pytest.raises(ConfigError) as error:
        build("mine", make_setting(PAPER_HARDWARE, LLAMA2_70B, table), EventLoop(), Disaggregated(2, 4, 1, 2))
    assert str(error.value) == "mine needs 10 GPUs, the hardware has 8"


def test_a_prefill_instance_too_small_for_the_weights_is_named(table) -> None:
    # 50 GB per GPU holds LLaMA2-70B's weights at TP4 (34.5 GB) but not at TP2 (69.0 GB).
    setting = make_setting(with_memory(50 * GB), LLAMA2_70B, table)
    weights = Shard(LLAMA2_70B, 2).weight_bytes
    with pytest.raises(ConfigError) as error:
        build("pd", setting, EventLoop(), Disaggregated(1, 2, 1, 4))
    assert str(error.value) == (f"LLaMA2-70B does not fit on prefill instance 0: {weights / GB:.1f} GB of weights per "
                                f"GPU at TP=2 > 50.0 GB of memory")


def test_pd_instances_each_get_their_own_hbf_service(table) -> None:
    layout = LAYOUTS["B"]
    setting = make_setting(layout.hardware(PAPER_HARDWARE), LLAMA2_70B, table, layout=layout)
    built = build("pd-1:1", setting, EventLoop())
    assert len(built.hbf) == 2


@pytest.mark.parametrize("system, powers", [
    # Per GPU of layout B (3 HBM4 stacks, 41.6 W at 2 TB/s = 20.8 pJ/B, §6.7): the GPU's 1,400 W heats its own die;
    # DuoPD's PNMs, 6.45 W on each stack's base die (§6.7, the paper's power source), heat the HBM dies and read 7 %
    # less energy per byte.
    ("duopd", {"gpu": ((1400.0, 0.0, 0.0), 20.8e-12), "pnm": ((0.0, 3 * 6.45, 0.0), 20.8e-12 * 0.93)}),
    # An SM partition draws the board's power in proportion to its SMs.
    ("sm-7:3", {"prefill": ((0.7 * 1400.0, 0.0, 0.0), 20.8e-12), "decode": ((0.3 * 1400.0, 0.0, 0.0), 20.8e-12)}),
])
def test_each_server_on_a_shared_hbf_package_heats_its_own_dies(table, system: str, powers: dict) -> None:
    layout = LAYOUTS["B"]
    setting = make_setting(layout.hardware(PAPER_HARDWARE), LLAMA2_70B, table, layout=layout, power_source="paper")
    built = build(system, setting, EventLoop())
    (tier,) = built.hbf
    got = {port.role: port.power for port in tier.ports}
    assert set(got) == set(powers)
    for role, (watts, energy) in powers.items():
        assert got[role].compute_w == pytest.approx(watts, rel=1e-12, abs=0)
        assert got[role].hbm_energy_per_byte == pytest.approx(energy, rel=1e-12, abs=0)


# --- The KV pool beside the weights, a shared prefix and an HBF layout ---

def test_the_kv_pool_is_the_memory_left_beside_the_weights_and_the_shared_prefix(table) -> None:
    # Per GPU at TP8: 384 GB, the weights, 500 prefix tokens of 327,680 / 8 B; the rest in tokens.
    shard, per_token = Shard(LLAMA2_70B, 8), KV_PER_TOKEN // 8
    setting = make_setting(PAPER_HARDWARE, LLAMA2_70B, table, shared_prefix_tokens=500)
    assert kv_pool(setting, shard, "pool").capacity == (384e9 - shard.weight_bytes - 500 * per_token) // per_token


def test_weights_that_fill_the_memory_exactly_leave_no_kv_cache(table) -> None:
    shard = Shard(LLAMA2_70B, 8)
    with pytest.raises(ConfigError, match="LLaMA2-70B does not fit on 8 GPUs"):
        kv_pool(make_setting(with_memory(shard.weight_bytes), LLAMA2_70B, table), shard, "8 GPUs")
    # With a prefix: the weights alone fit, the weights and the prefix do not.
    setting = make_setting(with_memory(shard.weight_bytes + 100 * KV_PER_TOKEN // 8), LLAMA2_70B, table,
                      shared_prefix_tokens=100)
    with pytest.raises(ConfigError, match="LLaMA2-70B does not fit on 8 GPUs"):
        kv_pool(setting, shard, "8 GPUs")


@pytest.mark.parametrize(("kv", "prefix"), [("hbm", "hbm"), ("hbm", "hbf"), ("hbf", "hbm"), ("hbf", "hbf")])
def test_the_kv_pool_of_an_hbf_layout_is_the_tier_the_kv_lives_in_less_what_else_is_there(table, kv: str,
                                                                                         prefix: str) -> None:
    # One GPU, LLaMA2-70B's layer weights in HBF, an 8 GiB frame cache; 1,000 prefix tokens.
    layout = Layout("mine", hbm_stacks=3, hbf_stacks=1, weights="hbf", kv=kv, prefix=prefix, frame_cache_gib=8.0)
    hardware = replace(layout.hardware(PAPER_HARDWARE), gpus=1)
    shard = Shard(LLAMA2_70B, 1)
    setting = make_setting(hardware, LLAMA2_70B, table, layout=layout, shared_prefix_tokens=1000)
    prefix_bytes = 1000 * KV_PER_TOKEN
    in_hbm = prefix_bytes if prefix == "hbm" else 0.0
    if kv == "hbm":
        free = 3 * 36 * 2**30 - layout.hbm_resident_bytes(shard) - in_hbm
    else:
        free = 512 * 2**30 - layout.hbf_weight_bytes(shard) - (prefix_bytes - in_hbm)
    pool = kv_pool(setting, shard, "pool")
    assert (pool.capacity, pool.name) == (free // KV_PER_TOKEN, "pool")


def test_an_hbf_kv_region_filled_by_the_weights_is_refused_and_one_byte_left_is_an_empty_pool(table) -> None:
    shard = Shard(LLAMA2_70B, 1)
    weights = Layout("probe", hbm_stacks=3, hbf_stacks=1, weights="hbf").hbf_weight_bytes(shard)

    def pool(hbf_bytes: float):
        layout = Layout("full", hbm_stacks=3, hbf_stacks=1, hbf_stack_gib=hbf_bytes / 2**30, weights="hbf", kv="hbf")
        setting = make_setting(replace(layout.hardware(PAPER_HARDWARE), gpus=1), LLAMA2_70B, table, layout=layout)
        return kv_pool(setting, shard, "pool")
    with pytest.raises(ConfigError) as error:
        pool(weights)
    assert str(error.value) == "LLaMA2-70B: layout full leaves no HBF for the KV cache"
    assert pool(weights + 1).capacity == 0


# --- Quantized weights ---

W4 = Quantization("w4a16", 128, "gpu-fused", "gptq")
A100 = PRESETS["a100-pcie-40gb"]          # 8 GPUs of 40 GB


def test_quantized_weights_leave_their_saving_to_the_kv_cache(table) -> None:
    setting = make_setting(A100, LLAMA2_70B, table, quantization=W4)
    shard = Shard(LLAMA2_70B, 8)
    weights = quantized_weight_bytes(shard, setting.gemm)
    assert weights < 0.3 * shard.weight_bytes          # 4-bit linear layers: about a quarter of FP16's bytes
    assert setting.weight_bytes(shard) == weights
    assert make_setting(A100, LLAMA2_70B, table).weight_bytes(shard) == shard.weight_bytes
    moe = Shard(QWEN3_235B_A22B, 8)              # FP16 experts: every one of them, not one MLP's worth
    assert make_setting(PAPER_HARDWARE, QWEN3_235B_A22B, table).weight_bytes(moe) == moe.weight_bytes
    per_token = KV_PER_TOKEN // 8
    assert kv_pool(setting, shard, "pool").capacity == (40e9 - weights) // per_token
    executor = gpu_execution(setting, shard)
    assert isinstance(executor, QuantizedGPUExecution) and executor.hardware is A100
    assert executor.cost(decode_work(1, 100)).seconds > 0


@pytest.mark.parametrize(("change", "message"), [
    ({"perf_model": "measured"}, "not --perf-model measured, --allreduce or --allreduce-overlap"),
    ({"all_reduce": "alpha-beta"}, "not --perf-model roofline, --allreduce or --allreduce-overlap"),
    ({"overlap": True}, "not --perf-model roofline, --allreduce or --allreduce-overlap"),
])
def test_quantized_weights_refuse_another_gpu_performance_model(table, change: dict, message: str) -> None:
    setting = make_setting(A100, LLAMA2_70B, table, quantization=W4, **change)
    with pytest.raises(ConfigError) as error:
        gpu_execution(setting, Shard(LLAMA2_70B, 8))
    assert str(error.value) == ("quantized weights are priced by their own kernel model (sysmodel.quantized), "
                                f"{message}; use --perf-model roofline alone")


# --- The performance model every executor gets ---

def test_every_executor_prices_with_the_settings_performance_model(table) -> None:
    # α–β all-reduces (NCCL's ring latency per step) instead of bandwidth alone: the GPUs' prefill and the
    # PNMs' decode both pay it, in DuoPD, in PD and in the SM partitions.
    setting = make_setting(PAPER_HARDWARE, LLAMA2_70B, table, all_reduce="alpha-beta")
    perf = perf_model("roofline", PAPER_HARDWARE.gpu, "alpha-beta", PAPER_HARDWARE.link)
    shard = Shard(LLAMA2_70B, 8)
    _, (request,) = run("duopd", setting, [(0.0, 1024, 2)])
    assert request.first_token == pytest.approx(
        GPUExecution(PAPER_HARDWARE, shard, perf=perf).cost(prefill_work(1024)).seconds, rel=1e-12, abs=0)
    pnm = PNMExecution(PAPER_HARDWARE, shard, PNMFigures.from_verified(table, PAPER_HARDWARE.pnm),
                       MMUArbitration.from_verified(table, "prefill-first", PAPER_HARDWARE), perf,
                       VectorFigures.from_verified(table, PAPER_HARDWARE.pnm))
    assert request.token_times[1] - request.first_token == pytest.approx(
        pnm.cost(decode_work(1, 1025)).seconds, rel=1e-12, abs=0)
    assert pnm.cost(decode_work(1, 1025)).seconds > PNMExecution(
        PAPER_HARDWARE, shard, pnm.figures, pnm.mmu, vector=pnm.vector).cost(decode_work(1, 1025)).seconds
    _, (request,) = run("sm-7:3", setting, [(0.0, 1024, 2)])
    assert request.first_token == pytest.approx(
        GPUExecution(PAPER_HARDWARE, shard, 0.7, perf).cost(prefill_work(1024)).seconds, rel=1e-12, abs=0)


# --- SM partitions share their GPUs' memory ---

def test_an_sm_partitions_prefill_and_decode_share_the_memory_when_both_are_memory_bound(table) -> None:
    # sm-5:5: r0 decodes (memory-bound, ~80 % of the bandwidth on half the SMs) while r1's 16-token prompt, also
    # memory-bound (every weight read for 16 tokens), prefills: together they ask for more than the memory has,
    # so max-min fair sharing gives each half of it and both run slower than alone.
    setting = make_setting(PAPER_HARDWARE, LLAMA2_70B, table)
    _, (r0, r1) = run("sm-5:5", setting, [(0.0, 1024, 40), (0.05, 16, 2)])
    shard = Shard(LLAMA2_70B, 8)
    alone = GPUExecution(PAPER_HARDWARE, shard, 0.5).cost(prefill_work(16))
    assert alone.offered > 0.5
    assert r1.first_token - r1.prefill_start > 1.3 * alone.seconds
    gaps = np.diff(r0.token_times)
    assert r0.token_times[1] < r1.prefill_start and gaps.max() > 1.3 * np.median(gaps)


# --- Accounts ---

def test_one_gpu_is_accounted_as_the_gpu_and_two_as_chunked_prefill(table) -> None:
    small = LLM("small", layers=2, hidden=64, heads=8, kv_heads=8, head_dim=8, ffn=128, vocab=100, gated_mlp=True)
    built = build("gpu", make_setting(PAPER_HARDWARE, small, table), EventLoop())
    assert [(a.name, a.peak_flops, a.bandwidth) for a in built.accounts] == [("GPU", 2.5e15, 16e12)]
    built = build("chunked", make_setting(replace(PAPER_HARDWARE, gpus=2), small, table), EventLoop())
    assert [(a.name, a.peak_flops, a.bandwidth) for a in built.accounts] == [("chunked prefill", 5e15, 32e12)]


# --- Refusals ---

def test_a_configuration_refuses_no_batch_and_no_chunk(table) -> None:
    make_setting(PAPER_HARDWARE, LLAMA2_70B, table, max_batch=1, chunk_tokens=1)      # the smallest of each
    for change, message in [({"max_batch": 0}, "max batch must be >= 1, got 0"),
                            ({"chunk_tokens": 0}, "chunk size must be >= 1 token")]:
        with pytest.raises(ConfigError) as error:
            resolve(SimulationConfig(system="chunked", model=LLAMA2_70B, workload=FixedBatch(1, 1, 1), **change),
                    table)
        assert str(error.value) == message


def test_an_unknown_system_is_refused_with_the_known_ones(table) -> None:
    with pytest.raises(ConfigError) as error:
        build("nonesuch", make_setting(PAPER_HARDWARE, LLAMA2_70B, table), EventLoop())
    assert str(error.value) == ("unknown system 'nonesuch'; choose one of duopd, duopd-4x-bw, duopd-4x-bw-4x-compute, "
                                "pd-1:1, pd-3:1, chunked, sm-9:1, sm-7:3, sm-5:5, gpu, pd-1:1-pim, pd-1:1-duplex, "
                                "pd-1:1-duplex-4x-compute")


def test_a_kv_cache_in_hbf_is_one_region_per_package(table) -> None:
    """The servers on one package (duopd's GPU and PNMs, the SM partitions) read and write one set of KV frames;
    PD's instances each have their own package, and so their own."""
    def built(system: str, layout: Layout):
        setting = make_setting(layout.hardware(PAPER_HARDWARE), LLAMA2_70B, table, layout=layout)
        return build(system, setting, EventLoop())
    kv = Layout("kv", hbm_stacks=3, hbf_stacks=1, kv="hbf")
    for system in ("duopd", "sm-7:3"):
        (tier,) = built(system, kv).hbf
        assert len(tier.ports) == 2 and tier.kv is not None
    tiers = built("pd-1:1", kv).hbf
    assert len(tiers) == 2 and tiers[0].kv is not tiers[1].kv
    assert built("duopd", LAYOUTS["B"]).hbf[0].kv is None         # weights alone in HBF: no KV frames
