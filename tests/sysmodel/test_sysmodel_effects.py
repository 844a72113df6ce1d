"""The modelling effects of issue 15, each against numbers worked out by hand: NCCL's α–β all-reduce and NVLink
SHARP, all-reduces overlapped with compute, chunked prefill re-reading the prompt's KV and reloading weights and
experts per chunk, the inter-node network between PD instances on different servers, and a decode pool on other
hardware. Each test fails if its effect is removed."""
from dataclasses import replace

import pytest

from basedie import verified
from sysmodel.errors import ConfigError
from sysmodel.execution import GPUExecution
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.llm import LLM, LLAMA2_70B
from sysmodel.operators import Shard, decode_work, prefill_work
from sysmodel.perf import perf_model
from sysmodel.presets import PRESETS
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.systems import Disaggregated, _placement
from sysmodel.workload import FixedBatch

H100, A100 = PRESETS["h100-sxm5-80gb"], PRESETS["a100-sxm4-80gb"]
KV_PER_TOKEN = 2 * 80 * 8 * 128 * 2        # Llama-2-70B: 2 (K, V) × 80 layers × 8 KV heads × 128 × 2 B


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


# --- All-reduce: NCCL's α–β ring, NVLS, overlap ---

def test_alpha_beta_adds_nccls_ring_latency_to_the_ring_bytes() -> None:
    # NCCL tuning.cc: ring/LL base 6.6 µs + 2 (8 − 1) steps × 0.6 µs over NVLink = 15.0 µs per call.
    perf = perf_model("roofline", H100.gpu, "alpha-beta", H100.link)
    ring_bytes_s = 2 * 7 / 8 * 1e6 / 450e9
    assert perf.all_reduce_seconds(1e6, 2, 8, 450e9) == pytest.approx(2 * (15.0e-6 + ring_bytes_s), rel=1e-12)
    assert perf.all_reduce_seconds(1e6, 2, 1, 450e9) == 0.0
    # Over PCIe a step is 1.0 µs: 6.6 + 2 × 3 × 1.0 = 12.6 µs for 4 GPUs.
    pcie = perf_model("roofline", A100.gpu, "alpha-beta", PRESETS["a100-pcie-40gb"].link)
    assert pcie.all_reduce_seconds(0.0, 1, 4, 32e9) == pytest.approx(12.6e-6, rel=1e-12)


def test_nvls_runs_whichever_of_ring_and_nvls_is_faster() -> None:
    perf = perf_model("roofline", H100.gpu, "nvls", H100.link)
    # 1 MB: ring 15 µs + 3.89 µs beats NVLS 25 µs + 2.22 µs.
    assert perf.all_reduce_seconds(1e6, 1, 8, 450e9) == pytest.approx(15.0e-6 + 2 * 7 / 8 * 1e6 / 450e9, rel=1e-12)
    # 1 GB: NVLS sends the buffer once each way, 25 µs + 1e9 / 450e9, below the ring's 2 × 7/8 of it.
    assert perf.all_reduce_seconds(1e9, 1, 8, 450e9) == pytest.approx(25e-6 + 1e9 / 450e9, rel=1e-12)


@pytest.mark.parametrize(("preset", "nvls"), [("a100-sxm4-80gb", False), ("a100-pcie-40gb", False),
                                              ("h100-sxm5-80gb", True), ("h200", True), ("b200", True),
                                              ("gb300", True)])
def test_nvls_where_the_nvswitch_has_sharp(preset: str, nvls: bool) -> None:
    # A 1 GB all-reduce: NVLS where the NVSwitch has SHARP, else the α–β ring (NCCL has no NVLS to choose).
    hw = PRESETS[preset]
    assert hw.link.nvls is nvls
    ring = perf_model("roofline", hw.gpu, "alpha-beta", hw.link).all_reduce_seconds(1e9, 1, 8, hw.link.bandwidth)
    chosen = perf_model("roofline", hw.gpu, "nvls", hw.link).all_reduce_seconds(1e9, 1, 8, hw.link.bandwidth)
    assert chosen == (pytest.approx(25e-6 + 1e9 / hw.link.bandwidth, rel=1e-12) if nvls else ring)


def test_all_reduce_models_are_for_the_roofline_only() -> None:
    with pytest.raises(ConfigError, match="applies to --perf-model roofline"):
        perf_model("measured", H100.gpu, "alpha-beta", H100.link)
    with pytest.raises(ConfigError, match="unknown all-reduce model"):
        perf_model("roofline", H100.gpu, "tree", H100.link)


def test_alpha_beta_decode_pays_two_latencies_per_layer() -> None:
    # Same ring bytes, same kernels: the difference is 80 layers × 2 all-reduces × 15.0 µs.
    shard, work = Shard(LLAMA2_70B, 8), decode_work(16, 16 * 1024)
    plain = GPUExecution(H100, shard).cost(work).seconds
    latency = GPUExecution(H100, shard, perf=perf_model("roofline", H100.gpu, "alpha-beta", H100.link))
    assert latency.cost(work).seconds - plain == pytest.approx(80 * 2 * 15.0e-6, rel=1e-9)


def test_overlap_makes_a_layer_its_longer_part() -> None:
    # A 1 kB/s link makes the all-reduce dominate; a prompt chunk that is not the last has no LM head. Each of
    # Llama-2-70B's 80 layers then takes its ring traffic alone: 2 × 7/8 × (2 × 1,024 tokens × 8,192 × 2 B) / 1e3.
    hw = replace(H100, link=replace(H100.link, bandwidth=1e3))
    work, shard = prefill_work(1024, last_chunk=False), Shard(LLAMA2_70B, 8)
    overlapped = GPUExecution(hw, shard, perf=perf_model("roofline", hw.gpu, overlap=True)).cost(work).seconds
    assert overlapped == pytest.approx(80 * 2 * 7 / 8 * (2 * 1024 * 8192 * 2) / 1e3, rel=1e-12)
    serial = GPUExecution(hw, shard).cost(work).seconds
    assert serial > overlapped


# --- Chunked prefill: each chunk re-reads the prefix's KV and reloads the weights and experts ---

# One layer, one head, MLP 8 → 16 → 8 (GELU): 192 + 64 + 256 = 512 weight elements per layer.
SMALL = LLM("small", layers=1, hidden=8, heads=1, kv_heads=1, head_dim=8, ffn=16, vocab=4, gated_mlp=False)
# The same with 2 experts of that MLP, both used by every token: a router of 8 × 2 and 2 × 256 expert elements.
SMALL_MOE = replace(SMALL, name="small-moe", experts=2, experts_per_token=2)
MEMORY_BOUND = replace(PAPER_HARDWARE, gpus=1, gpu=replace(PAPER_HARDWARE.gpu, flops=1e30))   # 16 TB/s of HBM


@pytest.mark.parametrize(("model", "weight_elements"), [(SMALL, 192 + 64 + 256), (SMALL_MOE, 192 + 64 + 16 + 512)])
def test_two_chunks_cost_one_chunk_plus_the_reread_bytes(model: LLM, weight_elements: int) -> None:
    # 64 prompt tokens as 32 + 32: the second chunk reads the first chunk's K and V (32 tokens × 2 × 8 values
    # × 2 B = 1,024 B) and every weight (experts included) once more; everything else scales with the tokens.
    gpu = GPUExecution(MEMORY_BOUND, Shard(model, 1))
    whole = gpu.cost(prefill_work(64)).seconds
    chunks = gpu.cost(prefill_work(32, last_chunk=False)).seconds + gpu.cost(prefill_work(32, past=32)).seconds
    reread = 32 * 2 * 8 * 2 + weight_elements * 2
    assert chunks - whole == pytest.approx(reread / 16e12, rel=1e-9)


# --- Inter-node network and placement on servers ---

@pytest.mark.parametrize(("system", "gpus", "servers"), [
    ("pd:1x4+1x4", 8, ([0], [0])),
    ("pd:1x8+1x8", 16, ([0], [1])),
    ("pd:1x6+1x6", 16, ([0], [1])),          # the decode instance does not split over servers 0 and 1
    ("pd:2x4+2x4", 16, ([0, 0], [1, 1])),
    ("pd:3x2+1x2", 8, ([0, 0, 0], [0])),
])
def test_instances_fill_servers_in_order_unsplit(system: str, gpus: int, servers: tuple) -> None:
    hw = replace(H100, gpus=gpus)
    p, t, d, u = (int(x) for x in system[3:].replace("+", "x").split("x"))
    assert _placement(Disaggregated(p, t, d, u), hw, hw) == servers


def test_instances_that_do_not_fit_unsplit_are_refused() -> None:
    twelve, many = replace(H100, gpus=12), replace(H100, gpus=32)
    with pytest.raises(ConfigError, match="need 14 GPUs"):
        _placement(Disaggregated(1, 6, 1, 6), twelve, twelve)
    with pytest.raises(ConfigError, match="TP16 does not fit"):
        _placement(Disaggregated(1, 16, 1, 8), many, many)


def _second_token_gap(table, config: SimulationConfig) -> float:
    request = simulate(config, table).requests[0]
    return request.token_times[1] - request.first_token


@pytest.mark.parametrize(("system", "gpus", "link_bytes_s"), [
    ("pd:1x4+1x4", 8, 4 * 450e9),       # one server: 4 NVLink 4 links of 450 GB/s
    ("pd:1x8+1x8", 16, 8 * 50e9),       # two servers: 8 ConnectX-7 NDR adapters of 400 Gb/s
])
def test_pd_kv_crosses_the_network_between_servers(table, system: str, gpus: int, link_bytes_s: float) -> None:
    # Decoding starts when the last layer's 1/80 of the 8,192-token KV arrives, after the prefill.
    hw = replace(H100, gpus=gpus)
    tp = int(system.split("x")[1][0])
    decode_s = GPUExecution(hw, Shard(LLAMA2_70B, tp)).cost(decode_work(1, 8193)).seconds
    gap = _second_token_gap(table, SimulationConfig(system=system, model="llama2-70b",
                                                    workload=FixedBatch(1, 8192, 2), hardware=hw))
    assert gap == pytest.approx(8192 * KV_PER_TOKEN / link_bytes_s / 80 + decode_s, rel=1e-12)


def test_network_presets_are_the_dgx_adapters() -> None:
    assert PRESETS["a100-sxm4-80gb"].network.bandwidth == 25e9      # HDR 200 Gb/s
    for name in ("h100-sxm5-80gb", "h200", "b200"):
        assert PRESETS[name].network.bandwidth == 50e9               # NDR 400 Gb/s
    assert PRESETS["gb300"].network.bandwidth == 900e9               # NVL72: the NVLink 5 switch


# --- A decode pool on other hardware ---

def test_decode_pool_on_other_hardware(table) -> None:
    # Prefill on an H100 server, decode on an A100 server: TTFT is the H100's prefill, the KV crosses the slower
    # adapter (HDR, 25 GB/s × 8), and the decode step is the A100's.
    config = SimulationConfig(system="pd:1x8+1x8", model="llama2-70b", workload=FixedBatch(1, 8192, 2),
                              hardware="h100-sxm5-80gb",
                              decode_hardware="a100-sxm4-80gb")
    result = simulate(config, table)
    request = result.requests[0]
    shard = Shard(LLAMA2_70B, 8)
    assert request.first_token - request.arrival == pytest.approx(
        GPUExecution(H100, shard).cost(prefill_work(8192)).seconds, rel=1e-12)
    decode_s = GPUExecution(A100, shard).cost(decode_work(1, 8193)).seconds
    assert request.token_times[1] - request.first_token == pytest.approx(
        8192 * KV_PER_TOKEN / (8 * 25e9) / 80 + decode_s, rel=1e-12)
    accounts = result.summary["utilization"]["by_server"]
    assert set(accounts) == {"decode instance 0 (TP8)", "prefill instance 0 (TP8)", "KV transfer (NVLink)"}


def test_decode_hardware_is_for_pd_only(table) -> None:
    with pytest.raises(ConfigError, match="applies to PD deployments"):
        simulate(SimulationConfig(system="duopd", model="llama2-70b", workload=FixedBatch(1, 1024, 2),
                                  decode_hardware="b200"), table)
