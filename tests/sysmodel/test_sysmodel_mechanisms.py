"""The four mechanisms a reviewer broke without any test noticing (issue 19), each checked against numbers
worked out by hand from the paper's description: the PNM's lane count (extra passes when more rows than lanes
share a memory beat), the GPU's bandwidth-vs-SM curve, the 7 % HBM energy saving of PNM decoding, and the
NVLink KV transfer of PD disaggregation."""
from dataclasses import replace

import numpy as np
import pytest

from basedie import verified
from sysmodel.arbitration import MMUArbitration
from sysmodel.engine import EventLoop
from sysmodel.execution import GPUExecution, PNMExecution, PNMFigures
from sysmodel.hardware import B200_SM_BANDWIDTH, PAPER_HARDWARE, Hardware
from sysmodel.llm import LLM, LLAMA2_70B
from sysmodel.memory import MemoryTier
from sysmodel.operators import Shard, decode_work, prefill_work
from sysmodel import systems
from sysmodel.power import BaseDiePower
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.systems import build
from tests.sysmodel.settings import make_setting
from sysmodel.workload import FixedBatch

CLOCK_HZ = 1e9
# One layer, one head of 8, MLP 8 → 16 → 8 (GELU: 2 matrices), a 4-token vocabulary (64 rows of LM head once
# padded as vLLM pads it, to a multiple of 64): every operator's elements and FLOPs are small enough to count by hand.
SMALL = LLM("small", layers=1, hidden=8, heads=1, kv_heads=1, head_dim=8, ffn=16, vocab=4, gated_mlp=False)


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


def planted_mmu(pnm_wait: np.ndarray = np.zeros((3, 3))) -> MMUArbitration:
    """An MMU that serves everyone in full, with no latency, whose PNM waits `pnm_wait` cycles at requested
    loads (0, 0.5, 1) requests per cycle of the GPU × the PNM; 100 % of the bandwidth is 1 request per cycle."""
    return MMUArbitration("prefill-first", 1.0, (0.5, 1.0), {"gpu": np.ones((2, 3)), "pnm": np.ones((3, 2))},
                          {"gpu": np.zeros((3, 3)), "pnm": pnm_wait}, {"gpu": 0, "pnm": 0}, CLOCK_HZ)


def one_stack_hardware(lanes: int, stack_bandwidth: float) -> Hardware:
    """One GPU with one HBM stack (hence one PNM) of no latency, no all-reduce cost."""
    stack = MemoryTier("stack", 1e12, stack_bandwidth, 0.0, 0.0)
    gpu = replace(PAPER_HARDWARE.gpu, stacks=1, stack=stack)
    pnm = replace(PAPER_HARDWARE.pnm, lanes=lanes, clock_hz=CLOCK_HZ, all_reduce_s=0.0)
    return replace(PAPER_HARDWARE, gpu=gpu, gpus=1, pnm=pnm)


def one_mac_lanes(lanes: int) -> PNMFigures:
    """`lanes` lanes of one MAC per cycle each, no pipeline latency, at `CLOCK_HZ`."""
    return PNMFigures(lanes=lanes, clock_hz=CLOCK_HZ, latency_cycles=0, macs_per_cycle=1.0)


def pnm_decode_seconds(lanes: int, batch: int, context: int, stack_bandwidth: float = 1e18,
                       mmu: MMUArbitration = planted_mmu(), gpu_load: float = 0.0) -> float:
    """One decode iteration of SMALL on one PNM whose lanes do one MAC per cycle each."""
    hardware = one_stack_hardware(lanes, stack_bandwidth)
    pnm = PNMExecution(hardware, Shard(SMALL, 1), one_mac_lanes(lanes), mmu)
    return pnm.cost(decode_work(batch, context), loads={"gpu": gpu_load}).seconds


def test_rows_beyond_the_lanes_take_another_pass_over_the_memory_operand() -> None:
    # Batch 8, 100 tokens of context, 4 lanes, compute-bound (bandwidth unlimited). Per operator, elements
    # streamed from memory and the token rows each element serves (FLOPs / 2 / elements):
    #   qkv:       8×24 weights + 2×8×8 K,V written = 320 elements, 2·8·8·24 / 2 / 320 = 4.8 rows → 2 passes
    #   attention: 2×100×8 K,V read = 1,600 elements, one query head per KV head → 1 pass
    #   o_proj:    8×8 = 64 weights, 8 rows → 2 passes;  mlp: 2×8×16 = 256 weights, 8 rows → 2 passes
    #   lm_head:   8×64 = 512 weights (64 padded rows), 8 rows → 2 passes
    cycles = 2 * 320 + 1600 + 2 * 64 + 2 * 256 + 2 * 512
    assert pnm_decode_seconds(lanes=4, batch=8, context=100) == pytest.approx(cycles / CLOCK_HZ, rel=1e-12)
    # With 8 lanes every operator is one pass: 320 + 1600 + 64 + 256 + 512 cycles.
    assert pnm_decode_seconds(lanes=8, batch=8, context=100) == pytest.approx(2752 / CLOCK_HZ, rel=1e-12)
    # With 1 lane: qkv ⌈4.8⌉ = 5 passes, the others 8.
    assert pnm_decode_seconds(lanes=1, batch=8, context=100) == pytest.approx(
        (5 * 320 + 1600 + 8 * 64 + 8 * 256 + 8 * 512) / CLOCK_HZ, rel=1e-12)


def test_memory_bound_pnm_moves_each_element_once_whatever_the_passes() -> None:
    # At 1 kB/s the memory side dominates: (320 + 1,600 + 64 + 256 + 512) elements × 2 B = 5,504 B → 5.504 s.
    assert pnm_decode_seconds(lanes=4, batch=8, context=100, stack_bandwidth=1e3) == pytest.approx(5.504, rel=1e-12)


def test_each_operator_waits_at_the_load_it_offers() -> None:
    # The PNM's wait: 1,000 cycles × its requested load + 100 cycles × the GPU's (bilinear, so exact between
    # the grid points). At 4 GB/s a compute-bound operator of E elements streams 2E bytes in 2E / 4e9 s while
    # its lanes take passes × E ns: it offers 0.5 / passes of the bandwidth. With 4 lanes (passes as in the
    # test above) qkv, o_proj, mlp and lm_head take 2 passes (offer 0.25: 250-cycle wait), attention 1 (0.5:
    # 500 cycles); the GPU's 0.5 adds 50 cycles to each of the 5 operators.
    axis = np.array([0.0, 0.5, 1.0])
    mmu = planted_mmu(1000 * axis[None, :] + 100 * axis[:, None])
    waits = 4 * 250 + 500 + 5 * 50
    assert pnm_decode_seconds(4, 8, 100, 4e9, mmu, gpu_load=0.5) == pytest.approx((3904 + waits) / CLOCK_HZ,
                                                                                   rel=1e-12)
    # Memory-bound (1 kB/s): every operator offers all of the bandwidth, 1,000 cycles, the GPU none.
    assert pnm_decode_seconds(4, 8, 100, 1e3, mmu) == pytest.approx(5.504 + 5 * 1000 / CLOCK_HZ, rel=1e-12)


def test_the_memory_controller_turns_requests_per_cycle_into_bandwidth() -> None:
    # 64 ports × 32 B × 1 GHz = 2.048 TB/s: 100 % of a 2 TB/s stack is 2 / 2.048 requests per cycle per port.
    assert PAPER_HARDWARE.mc.requests_per_cycle(2e12, 1e9) == pytest.approx(2 / 2.048, rel=1e-12)
    table = verified.load()
    mmu = MMUArbitration.from_verified(table, "prefill-first", PAPER_HARDWARE)
    assert mmu.full_rate == pytest.approx(2 / 2.048, rel=1e-12)
    # The PNM alone at half the bandwidth waits what the grid says at 0.5 × 0.977 requests per cycle.
    assert mmu.access_latency_s("pnm", {"pnm": 0.5}) == pytest.approx(
        (3 + float(mmu.wait_cycles("pnm", 0.0, 0.5 * 2 / 2.048))) / 1e9, rel=1e-12)


def test_the_sm_bandwidth_curve_is_the_papers_point_and_its_ends() -> None:
    # §3.2: 72 of 148 SMs reach 80 % of the bandwidth; linear from 0 and up to all SMs.
    assert B200_SM_BANDWIDTH(72 / 148) == pytest.approx(0.8)
    assert B200_SM_BANDWIDTH(0.3) == pytest.approx(0.3 / (72 / 148) * 0.8)
    assert B200_SM_BANDWIDTH(0.5) == pytest.approx(0.8 + (0.5 - 72 / 148) / (1 - 72 / 148) * 0.2)
    assert B200_SM_BANDWIDTH(1.0) == 1.0


def test_a_memory_bound_sm_partition_reads_at_its_curve_share() -> None:
    # A decode iteration on one GPU with unlimited FLOP/s: only the memory side counts, so 30 % of the SMs
    # take 1 / curve(0.3) times as long as all of them, exactly.
    one = one_stack_hardware(1, 2e12)
    hardware = replace(one, gpu=replace(one.gpu, flops=1e30))
    work = decode_work(4, 1000)
    full = GPUExecution(hardware, Shard(SMALL, 1), 1.0).cost(work).seconds
    part = GPUExecution(hardware, Shard(SMALL, 1), 0.3).cost(work).seconds
    assert part / full == pytest.approx(1 / (0.3 / (72 / 148) * 0.8), rel=1e-12)


def test_sm_split_decode_speed_follows_the_curve(table) -> None:
    # One request: its decode runs alone on the decode partition (30 % or 50 % of the SMs), memory-bound
    # (LLaMA2-70B at batch 1 needs ~2 ms of memory and ~20 µs of compute per iteration on 8 GPUs); the
    # un-scaled all-reduces are < 0.5 % of it.
    def tpot(system: str) -> float:
        result = simulate(SimulationConfig(system=system, model="llama2-70b", workload=FixedBatch(1, 4096, 17)), table)
        return result.summary["tpot_s"]["mean"]

    curve_03 = 0.3 / (72 / 148) * 0.8
    curve_05 = 0.8 + (0.5 - 72 / 148) / (1 - 72 / 148) * 0.2
    assert tpot("sm-7:3") / tpot("sm-5:5") == pytest.approx(curve_05 / curve_03, rel=5e-3)


def test_pnm_decoding_pays_93_percent_of_the_hbm_energy_per_byte(table) -> None:
    # §6.7: 41.6 W per stack at 2 TB/s = 20.8 pJ/B; data flowing TSV → PNM saves 7 % of it.
    built = build("duopd", make_setting(PAPER_HARDWARE, LLAMA2_70B, table, power_source="paper"), EventLoop())
    by_device = {a.device: a for a in built.accounts}
    assert by_device["pnm"].hbm_energy_per_byte == pytest.approx(20.8e-12 * 0.93, rel=1e-12)
    assert by_device["gpu"].hbm_energy_per_byte == pytest.approx(20.8e-12, rel=1e-12)
    assert by_device["pnm"].power_w == pytest.approx(64 * 6.45)     # 8 GPUs × 8 stacks, 6.45 W each (§6.7)


def test_the_pnms_draw_the_power_of_the_runs_power_source(table, monkeypatch) -> None:
    asked = []
    monkeypatch.setattr(systems, "pnm_power", lambda source, pnm: asked.append(source) or BaseDiePower(5.0, source, ()))
    setting = make_setting(PAPER_HARDWARE, LLAMA2_70B, table, power_source="synthesized")
    by_device = {a.device: a for a in build("duopd", setting, EventLoop()).accounts}
    assert asked == ["synthesized"] and by_device["pnm"].power_w == pytest.approx(64 * 5.0, rel=1e-12)


@pytest.mark.parametrize(("system", "account", "watts"), [
    # Duplex's TSVs raise a stack from 41.6 W to 100.48 W (§6.4, [Adhinarayanan et al., 2025]) on top of the PNM's
    # 6.45 W (§6.7): DuoPD's 64 stacks reading at 4x, and PD 1:1's TP4 decode instance (4 GPUs, 32 stacks).
    ("duopd-4x-bw", "decode (PNM)", 64 * (6.45 + 100.48 - 41.6)),
    ("pd-1:1-duplex", "decode instance 0 (TP4)", 4 * 1400.0 + 32 * (6.45 + 100.48 - 41.6)),
])
def test_duplexs_pnms_draw_their_tsv_power_beside_the_pnms(table, system: str, account: str, watts: float) -> None:
    setting = make_setting(PAPER_HARDWARE, LLAMA2_70B, table, system=system, power_source="paper")
    by_name = {a.name: a for a in build(system, setting, EventLoop()).accounts}
    assert by_name[account].power_w == pytest.approx(watts, rel=1e-12)


# LLaMA2-70B KV per token: 2 (K, V) × 80 layers × 8 KV heads × 128 × 2 B = 327,680 B.
KV_PER_TOKEN = 2 * 80 * 8 * 128 * 2


def test_pd_kv_transfer_costs_link_energy_per_byte(table) -> None:
    result = simulate(SimulationConfig(system="pd-1:1", model="llama2-70b", workload=FixedBatch(4, 2048, 2)), table)
    moved = 4 * 2048 * KV_PER_TOKEN
    # NVLink 5 at 8 pJ/bit (§6.7).
    assert result.summary["energy_j"]["by_server"]["KV transfer (NVLink)"] == pytest.approx(moved * 8 * 8e-12,
                                                                                            rel=1e-12)


def test_pd_decode_waits_for_the_last_layer_of_the_kv_transfer(table) -> None:
    # Layer-wise transfer over the 4 NVLinks between the TP4 instances (4 × 900 GB/s): the KV of layers 0…78
    # moves while later layers are prefilled; the last layer's 1/80 of 8,192 × 327,680 B leaves when the
    # prefill ends, and decoding starts when it arrives.
    config = SimulationConfig(system="pd-1:1", model="llama2-70b", workload=FixedBatch(1, 8192, 2))
    request = simulate(config, table).requests[0]
    last_layer_s = 8192 * KV_PER_TOKEN / (4 * 900e9) / 80
    decode_s = GPUExecution(PAPER_HARDWARE, Shard(LLAMA2_70B, 4)).cost(decode_work(1, 8193)).seconds
    assert request.token_times[1] == pytest.approx(request.first_token + last_layer_s + decode_s, rel=1e-12)


E_HBM = 41.6 / 2e12          # J/B, §6.7
GPU_FLOPS, GPU_W, GPU_BW = 2.5e15, 1400.0, 8 * 2e12    # per GPU: §6.1, §6.7; 8 stacks of 2 TB/s


@pytest.mark.parametrize(("system", "accounts"), [
    ("duopd", [("prefill (GPU)", "gpu", 8 * GPU_FLOPS, 8 * GPU_BW, 8 * GPU_W, E_HBM),
               # 64 PNMs of 16 lanes × 1,024 MACs × 2 FLOPs at 1 GHz; 6.45 W each (the paper's power source); 7 %
               # less HBM energy.
               ("decode (PNM)", "pnm", 64 * 16 * 1024 * 2 * 1e9, 8 * GPU_BW, 64 * 6.45, E_HBM * 0.93)]),
    ("chunked", [("chunked prefill", "gpu", 8 * GPU_FLOPS, 8 * GPU_BW, 8 * GPU_W, E_HBM)]),
    ("sm-7:3", [("prefill SMs", "gpu", 0.7 * 8 * GPU_FLOPS, 8 * GPU_BW, 0.7 * 8 * GPU_W, E_HBM),
                ("decode SMs", "gpu", 0.3 * 8 * GPU_FLOPS, 8 * GPU_BW, 0.3 * 8 * GPU_W, E_HBM)]),
    ("pd-3:1", [("decode instance 0 (TP2)", "gpu", 2 * GPU_FLOPS, 2 * GPU_BW, 2 * GPU_W, E_HBM),
                ("KV transfer (NVLink)", "link", 0.0, 0.0, 0.0, 0.0)]
               + [(f"prefill instance {i} (TP2)", "gpu", 2 * GPU_FLOPS, 2 * GPU_BW, 2 * GPU_W, E_HBM)
                  for i in range(3)]),
])
def test_every_server_is_accounted_at_its_devices_peak_and_power(table, system: str, accounts: list) -> None:
    built = build(system, make_setting(PAPER_HARDWARE, LLAMA2_70B, table, power_source="paper"), EventLoop())
    got = [(a.name, a.device, a.peak_flops, a.bandwidth, a.power_w, a.hbm_energy_per_byte) for a in built.accounts]
    assert len(got) == len(accounts)
    for have, want in zip(got, accounts):
        assert have[:2] == want[:2] and have[2:] == pytest.approx(want[2:], rel=1e-12), want[0]


def test_an_sm_split_prefills_on_its_prefill_share(table) -> None:
    # One request alone: its prompt runs on the prefill partition, 70 % of the SMs of sm-7:3 (decode's 30 % idle).
    request = simulate(SimulationConfig(system="sm-7:3", model="llama2-70b",
                                        workload=FixedBatch(1, 8192, 2)), table).requests[0]
    alone = GPUExecution(PAPER_HARDWARE, Shard(LLAMA2_70B, 8), 0.7).cost(prefill_work(8192)).seconds
    assert request.first_token == pytest.approx(alone, rel=1e-12)


def test_a_pnm_iteration_counts_its_flops_bytes_and_access_latency() -> None:
    # SMALL at batch 8, context 100 (the operators of the first test). FLOPs per layer: qkv 2·8·8·24 = 3,072,
    # attention 4·8·100 = 3,200, o_proj 2·8·8·8 = 1,024, MLP 2·8·2·8·16 = 4,096, two norms 2 × 4·8·8 = 512;
    # head:
    # norm 4·8·8 = 256, LM head 2·8·8·64 = 8,192. HBM: the 2,752 streamed elements × 2 B.
    hardware = one_stack_hardware(8, 1e18)
    hardware = replace(hardware, gpu=replace(hardware.gpu, stack=replace(hardware.gpu.stack, latency_s=42e-9)))
    pnm = PNMExecution(hardware, Shard(SMALL, 1), one_mac_lanes(8), planted_mmu())
    cost = pnm.cost(decode_work(8, 100))
    assert cost.flops == 3072 + 3200 + 1024 + 4096 + 512 + 256 + 8192
    assert cost.hbm_bytes == 2 * 2752 and cost.link_bytes == 0
    # 2,752 cycles of lanes at 1 GHz, and each of the 5 streaming operators waits one 42 ns DRAM access.
    assert cost.seconds == pytest.approx(2752e-9 + 5 * 42e-9, rel=1e-12)
